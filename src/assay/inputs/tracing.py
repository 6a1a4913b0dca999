"""Timing capture for an application's own code: the judge specification's measured
latencies as a Sample.

Wrap one request of your application in a trace and its LLM, tool and API calls in spans::

    from assay.inputs.tracing import assay_trace

    with assay_trace(query=question) as t:
        with t.llm():
            plan = llm.invoke(prompt)
        with t.tool("search_funds_db", {"name": "HDFC"}) as call:
            rows = search(...)
            if not rows:
                call.fail("no rows")          # mark a failed call without raising
        async with t.api("nav"):             # async context managers too
            nav = await client.get(...)
        for chunk in stream:
            t.first_token()                   # time to first token; only the first call counts
            ...
        t.set_response(text, tokens=usage.completion_tokens)
    sample = t.to_sample(expected=reference)  # duration, ttft, llm/tool/api latency, ...

``t.llm()``, ``t.tool(name)`` and ``t.api()`` also decorate functions (sync or async): each
call of the function is one span. ``traced(kind, name)`` does the same for the trace that is
current when the call happens (a no-op when there is none), so library code can be
instrumented once and record into whichever trace the caller opened.

How the numbers are made (all from ``time.perf_counter``, in seconds in the Sample):

- ``duration``: trace exit minus trace entry. ``first_token_time``: first ``first_token()``
  call minus trace entry.
- ``llm_latency``/``tool_latency``/``api_latency``: per category, the **sum** of the
  durations of that category's spans (judge specification times each call and adds them up), except
  that a span nested inside another span of the *same* category is not added again (a
  ``t.tool("retry")`` wrapping ``t.tool("search")`` counts once). Spans of *different*
  categories are each counted in their own category, so an API call inside a tool counts
  in both ``api_latency`` and ``tool_latency``, and the three can add up to more than
  ``duration`` (judge specification's own example: LLM 1.0-2.2 s, tool 1.5-4.3 s, API 2.0-2.23 s
  overlap). Concurrent spans of one category (``asyncio.gather`` of two tools) also add
  up: the sum is time spent in calls, not wall time; ``Trace.wall_time(kind)`` gives the
  wall-clock time covered by at least one span of the category (union of intervals).
  A category with no finished span gives ``None`` (not measured), not 0.
- ``tool_call_count``: number of tool spans (every call, nested or not; 0 when none).
- ``trace``: one ``ToolCall`` per span in start order, with ``kind``, ``ok`` (False when
  the block raised, or after ``span.fail()``), ``error``, ``latency`` and the extras
  ``start`` (seconds after trace entry) and ``parent`` (index of the enclosing span in
  the list, or None), which the agent metrics use to count top-level steps.

Exceptions raised inside a span or the trace are recorded and propagate unchanged.

Async safety: spans record their parent through a ``contextvars.ContextVar``, so tasks
running concurrently in one event loop (each asyncio task has its own context copy) nest
their spans correctly, and each task can open its own trace independently. Appending to a
trace is guarded by a lock, so threads may share one trace.
"""

from __future__ import annotations

import functools
import inspect
import threading
import time
from collections.abc import Callable, Sequence
from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import Any, TypeVar

from assay.core.sample import FIELD_ALIASES, Sample, ToolCall

__all__ = [
    "KINDS",
    "Span",
    "SpanTimer",
    "Trace",
    "assay_trace",
    "category_latency",
    "current_trace",
    "traced",
]

#: span categories (``ToolCall.kind``)
KINDS = ("llm", "tool", "api")

F = TypeVar("F", bound=Callable[..., Any])

_CURRENT_TRACE: ContextVar[Trace | None] = ContextVar("assay_current_trace", default=None)
# (id(trace), span index) of the spans open in this context, innermost last
_OPEN_SPANS: ContextVar[tuple[tuple[int, int], ...]] = ContextVar("assay_open_spans", default=())


def _error_text(error: BaseException | str) -> str:
    if isinstance(error, BaseException):
        return f"{type(error).__name__}: {error}"
    return str(error)


@dataclass
class Span:
    """One timed call. ``start``/``end`` are seconds after the trace's entry."""

    index: int
    kind: str
    name: str
    start: float
    end: float | None = None
    ok: bool = True
    error: str | None = None
    arguments: dict[str, Any] | None = None
    parent: int | None = None

    @property
    def latency(self) -> float | None:
        """Seconds from start to end; None while the span is open."""
        return None if self.end is None else max(0.0, self.end - self.start)

    def fail(self, error: BaseException | str = "failed") -> None:
        """Mark the call as failed without raising (e.g. a tool that returned an error)."""
        self.ok = False
        self.error = _error_text(error)

    def to_step(self) -> ToolCall:
        return ToolCall(
            name=self.name,
            arguments=self.arguments,
            ok=self.ok,
            error=self.error,
            latency=self.latency,
            kind=self.kind,
            start=self.start,
            parent=self.parent,
        )


class SpanTimer:
    """Times one span: a context manager (``with``/``async with``) and a decorator.

    Made by ``Trace.llm/tool/api/span`` (bound to that trace) or by ``traced`` (bound to
    whichever trace is current on entry; does nothing when none is). As a context manager
    it times one block and yields the ``Span`` (or None when unbound); as a decorator,
    every call of the function is timed as a new span.
    """

    def __init__(
        self,
        trace: Trace | None,
        kind: str,
        name: str,
        arguments: dict[str, Any] | None = None,
    ) -> None:
        if kind not in KINDS:
            raise ValueError(f"span kind must be one of {', '.join(KINDS)}. Got {kind!r}.")
        self._trace = trace
        self._kind = kind
        self._name = name
        self._arguments = arguments
        self._active: tuple[Trace, Span, Token[tuple[tuple[int, int], ...]]] | None = None

    def _fresh(self) -> SpanTimer:
        return SpanTimer(self._trace, self._kind, self._name, self._arguments)

    # ---- context manager ------------------------------------------------------------
    def __enter__(self) -> Span | None:
        if self._active is not None:
            raise RuntimeError(
                "this span is already open; make a new one per block "
                "(call t.tool(...) again) or use it as a decorator"
            )
        trace = self._trace if self._trace is not None else _CURRENT_TRACE.get()
        if trace is None:
            return None
        span = trace._open_span(self._kind, self._name, self._arguments)
        token = _OPEN_SPANS.set((*_OPEN_SPANS.get(), (id(trace), span.index)))
        self._active = (trace, span, token)
        return span

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if self._active is None:
            return
        trace, span, token = self._active
        self._active = None
        trace._close_span(span, exc)
        try:
            _OPEN_SPANS.reset(token)
        except ValueError:  # exited in another context than it was entered in
            _OPEN_SPANS.set(tuple(s for s in _OPEN_SPANS.get() if s != (id(trace), span.index)))

    async def __aenter__(self) -> Span | None:
        return self.__enter__()

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        self.__exit__(exc_type, exc, tb)

    # ---- decorator --------------------------------------------------------------------
    def __call__(self, func: F) -> F:
        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                async with self._fresh():
                    return await func(*args, **kwargs)

            return async_wrapper  # type: ignore[return-value]

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self._fresh():
                return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]


class Trace:
    """The timings of one request of an application; becomes a `Sample` via ``to_sample``.

    Use ``with assay_trace() as t:`` (or ``async with``). Keyword arguments are Sample
    fields kept for ``to_sample`` (e.g. ``query``). ``clock`` is for tests.
    """

    def __init__(self, clock: Callable[[], float] = time.perf_counter, **fields: Any) -> None:
        self._clock = clock
        self._fields = fields
        self._lock = threading.Lock()
        self._spans: list[Span] = []
        self._t0: float | None = None
        self._t1: float | None = None
        self._first_token: float | None = None
        self._token: Token[Trace | None] | None = None
        self.response: str | None = None
        self.response_tokens: int | None = None
        self.error: str | None = None

    # ---- lifetime ---------------------------------------------------------------------
    def start(self) -> Trace:
        """Start the clock (done by ``with``; spans used before it start it too)."""
        with self._lock:
            if self._t0 is None:
                self._t0 = self._clock()
        return self

    def stop(self) -> None:
        """Stop the clock (done on leaving ``with``); later calls do nothing."""
        with self._lock:
            if self._t0 is not None and self._t1 is None:
                self._t1 = self._clock()

    def __enter__(self) -> Trace:
        self.start()
        self._token = _CURRENT_TRACE.set(self)
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        self.stop()
        if exc is not None:
            self.error = _error_text(exc)
        if self._token is not None:
            try:
                _CURRENT_TRACE.reset(self._token)
            except ValueError:
                _CURRENT_TRACE.set(None)
            self._token = None

    async def __aenter__(self) -> Trace:
        return self.__enter__()

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        self.__exit__(exc_type, exc, tb)

    def _now(self) -> float:
        """Seconds since the trace started (starting it if needed)."""
        self.start()
        assert self._t0 is not None
        return self._clock() - self._t0

    # ---- spans ------------------------------------------------------------------------
    def span(self, kind: str, name: str, arguments: dict[str, Any] | None = None) -> SpanTimer:
        """A span of any kind (``llm``, ``tool``, ``api``)."""
        return SpanTimer(self, kind, name, arguments)

    def llm(self, name: str = "llm", arguments: dict[str, Any] | None = None) -> SpanTimer:
        """Time an LLM call (counted in ``llm_latency``)."""
        return SpanTimer(self, "llm", name, arguments)

    def tool(self, name: str, arguments: dict[str, Any] | None = None) -> SpanTimer:
        """Time a tool call (counted in ``tool_latency`` and ``tool_call_count``)."""
        return SpanTimer(self, "tool", name, arguments)

    def api(self, name: str = "api", arguments: dict[str, Any] | None = None) -> SpanTimer:
        """Time an external API call (counted in ``api_latency``)."""
        return SpanTimer(self, "api", name, arguments)

    def _open_span(self, kind: str, name: str, arguments: dict[str, Any] | None) -> Span:
        start = self._now()
        parent = next(
            (index for tid, index in reversed(_OPEN_SPANS.get()) if tid == id(self)), None
        )
        with self._lock:
            span = Span(len(self._spans), kind, name, start, arguments=arguments, parent=parent)
            self._spans.append(span)
        return span

    def _close_span(self, span: Span, exc: BaseException | None) -> None:
        end = self._now()
        with self._lock:
            span.end = end
            if exc is not None:
                span.ok = False
                span.error = _error_text(exc)

    # ---- marks ------------------------------------------------------------------------
    def first_token(self) -> float:
        """Mark the first streamed token; returns seconds since start (first mark wins)."""
        now = self._now()
        with self._lock:
            if self._first_token is None:
                self._first_token = now
            return self._first_token

    def set_response(self, text: str, tokens: int | None = None) -> None:
        """The application's answer, and its token count when the model reported one."""
        self.response = text
        self.response_tokens = tokens

    # ---- results ----------------------------------------------------------------------
    @property
    def spans(self) -> list[Span]:
        """The spans recorded so far, in start order (a copy of the list)."""
        with self._lock:
            return list(self._spans)

    @property
    def duration(self) -> float | None:
        """Seconds from entry to exit (to now while still running); None before start."""
        if self._t0 is None:
            return None
        end = self._t1 if self._t1 is not None else self._clock()
        return end - self._t0

    def steps(self) -> list[ToolCall]:
        """The spans as agent-trace steps (finished and open; open ones have no latency)."""
        return [span.to_step() for span in self.spans]

    def latency(self, kind: str) -> float | None:
        """Seconds in ``kind`` spans, summed as described in the module docstring."""
        return category_latency(self.steps(), kind)

    def wall_time(self, kind: str) -> float | None:
        """Wall-clock seconds covered by at least one finished ``kind`` span (union)."""
        intervals = sorted(
            (s.start, s.end) for s in self.spans if s.kind == kind and s.end is not None
        )
        if not intervals:
            return None
        total, cur_start, cur_end = 0.0, intervals[0][0], intervals[0][1]
        for start, end in intervals[1:]:
            if start > cur_end:
                total += cur_end - cur_start
                cur_start, cur_end = start, end
            else:
                cur_end = max(cur_end, end)
        return total + (cur_end - cur_start)

    @property
    def tool_call_count(self) -> int:
        return sum(1 for s in self.spans if s.kind == "tool")

    def to_sample(self, **fields: Any) -> Sample:
        """A Sample with the measured timings, the trace and the response.

        Keyword arguments (and those given to ``assay_trace``) are Sample fields; a field
        given explicitly wins over the measured one (``duration_ms=...`` overrides
        ``duration`` too).
        """
        steps = self.steps()
        measured: dict[str, Any] = {
            "duration": self.duration,
            "first_token_time": self._first_token,
            "llm_latency": category_latency(steps, "llm"),
            "tool_latency": category_latency(steps, "tool"),
            "api_latency": category_latency(steps, "api"),
            "tool_call_count": self.tool_call_count,
            "trace": steps,
            "response": self.response,
            "response_tokens": self.response_tokens,
        }
        given = {**self._fields, **fields}
        for key in list(measured):
            names = {key, f"{key}_ms", *FIELD_ALIASES.get(key, ())}
            if key == "duration":
                names.add("total_latency_ms")
            if names & given.keys() or measured[key] is None:
                del measured[key]
        return Sample(**measured, **given)


def assay_trace(clock: Callable[[], float] = time.perf_counter, **fields: Any) -> Trace:
    """A new `Trace`; use as ``with assay_trace() as t:`` (or ``async with``)."""
    return Trace(clock=clock, **fields)


def current_trace() -> Trace | None:
    """The trace opened by the innermost enclosing ``with assay_trace()`` in this context."""
    return _CURRENT_TRACE.get()


def traced(
    kind: str, name: str | None = None, arguments: dict[str, Any] | None = None
) -> Callable[[F], F]:
    """Decorator: time each call of a function as a span of the *current* trace.

    The name defaults to the function's name. When no trace is open the function just
    runs. ``traced`` can also be used as a context manager when ``name`` is given.
    """

    def decorate(func: F) -> F:
        return SpanTimer(None, kind, name or func.__name__, arguments)(func)

    if name is not None:
        return SpanTimer(None, kind, name, arguments)  # type: ignore[return-value]
    return decorate


def category_latency(steps: Sequence[ToolCall], kind: str) -> float | None:
    """Seconds spent in ``kind`` steps: the sum of their latencies, skipping a step whose
    enclosing steps (``parent`` chain) include one of the same kind. None when no step of
    that kind has a latency. Steps without ``parent`` are taken as top-level."""
    total = 0.0
    found = False
    for step in steps:
        if step.kind != kind or step.latency is None:
            continue
        if _has_ancestor_of_kind(steps, step, kind):
            continue
        total += step.latency
        found = True
    return total if found else None


def _has_ancestor_of_kind(steps: Sequence[ToolCall], step: ToolCall, kind: str) -> bool:
    parent = getattr(step, "parent", None)
    seen: set[int] = set()
    while isinstance(parent, int) and 0 <= parent < len(steps) and parent not in seen:
        seen.add(parent)
        if steps[parent].kind == kind:
            return True
        parent = getattr(steps[parent], "parent", None)
    return False
