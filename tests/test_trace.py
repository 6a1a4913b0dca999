"""Timing capture (`assay.trace`): real sleeps within tolerance, and exact arithmetic
with a hand-driven clock."""

from __future__ import annotations

import asyncio
import time

import pytest

from assay.core.sample import ToolCall
from assay.inputs.tracing import Trace, assay_trace, category_latency, current_trace, traced

# Real sleeps are checked two ways: (1) exactly, by bracketing: a span is at least the
# requested sleep (sleeps never return early) and at most an independent stopwatch around
# the same block; (2) against the nominal value within TOL. Sleeps overshoot when the
# 2-core machine is busy, so TOL is generous; the bracket is the precise check.
TOL = 0.05
EARLY = 0.001  # clock granularity allowance for the lower bound


def bracket(measured: float | None, requested: float, stopwatch: float) -> bool:
    return measured is not None and requested - EARLY <= measured <= stopwatch


def near(measured: float | None, nominal: float, sleeps: int = 1) -> bool:
    """At least the nominal time, and at most TOL of overshoot per sleep over it."""
    return measured is not None and nominal - EARLY <= measured <= nominal + sleeps * TOL


class FakeClock:
    """A clock the test moves by hand: each read returns ``now``."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


# ---- real sleeps ---------------------------------------------------------------------------


def test_sync_sleeps_are_measured_within_tolerance():
    watch: dict[str, float] = {"llm": 0.0, "tool": 0.0}
    outer = time.perf_counter()
    with assay_trace(query="Compare HDFC and Axis funds") as t:
        start = time.perf_counter()
        with t.llm():
            time.sleep(0.05)
        watch["llm"] += time.perf_counter() - start
        t.first_token()
        for fund in ("HDFC", "Axis"):
            start = time.perf_counter()
            with t.tool("search_funds_db", {"name": fund}):
                time.sleep(0.03)
            watch["tool"] += time.perf_counter() - start
        t.set_response("HDFC has the lower expense ratio.", tokens=8)
    outer = time.perf_counter() - outer
    sample = t.to_sample()
    assert bracket(sample.llm_latency, 0.05, watch["llm"])
    assert bracket(sample.tool_latency, 0.06, watch["tool"])  # 2 x 30 ms, summed
    assert bracket(sample.duration, 0.11, outer)
    assert sample.llm_latency <= sample.first_token_time <= sample.duration
    assert near(sample.llm_latency, 0.05)
    assert near(sample.tool_latency, 0.06, sleeps=2)  # 2 x 30 ms, summed
    assert near(sample.first_token_time, 0.05)
    assert near(sample.duration, 0.11, sleeps=3)
    assert sample.api_latency is None  # no API span: not measured, not 0
    assert sample.tool_call_count == 2
    assert sample.query == "Compare HDFC and Axis funds"
    assert sample.response == "HDFC has the lower expense ratio."
    assert sample.response_tokens == 8
    assert [(s.name, s.kind, s.arguments) for s in sample.trace] == [
        ("llm", "llm", None),
        ("search_funds_db", "tool", {"name": "HDFC"}),
        ("search_funds_db", "tool", {"name": "Axis"}),
    ]


def test_async_sleeps_are_measured_within_tolerance():
    watch: dict[str, float] = {"llm": 0.0, "tool": 0.0, "all": 0.0}

    async def run() -> Trace:
        outer = time.perf_counter()
        async with assay_trace() as t:
            start = time.perf_counter()
            async with t.llm():
                await asyncio.sleep(0.05)
            watch["llm"] += time.perf_counter() - start
            for _ in range(2):
                start = time.perf_counter()
                async with t.tool("lookup"):
                    await asyncio.sleep(0.03)
                watch["tool"] += time.perf_counter() - start
        watch["all"] = time.perf_counter() - outer
        return t

    sample = asyncio.run(run()).to_sample()
    assert bracket(sample.llm_latency, 0.05, watch["llm"])
    assert bracket(sample.tool_latency, 0.06, watch["tool"])
    assert bracket(sample.duration, 0.11, watch["all"])
    assert near(sample.llm_latency, 0.05)
    assert near(sample.tool_latency, 0.06, sleeps=2)
    assert near(sample.duration, 0.11, sleeps=3)
    assert sample.tool_call_count == 2


def test_concurrent_tasks_keep_their_own_traces():
    # three requests run concurrently in one loop; each has its own trace and numbers
    watches: dict[float, float] = {}

    async def request(llm_s: float) -> Trace:
        async with assay_trace() as t:
            assert current_trace() is t
            start = time.perf_counter()
            async with t.llm():
                await asyncio.sleep(llm_s)
            watches[llm_s] = time.perf_counter() - start
            async with t.tool("search"):
                await asyncio.sleep(0.03)
        return t

    async def main() -> list[Trace]:
        return await asyncio.gather(request(0.02), request(0.05), request(0.08))

    traces = asyncio.run(main())
    for trace, llm_s in zip(traces, (0.02, 0.05, 0.08), strict=True):
        sample = trace.to_sample()
        assert bracket(sample.llm_latency, llm_s, watches[llm_s])
        assert near(sample.llm_latency, llm_s)
        assert near(sample.tool_latency, 0.03)
        assert sample.tool_call_count == 1
        assert len(sample.trace) == 2
        assert all(step.parent is None for step in sample.trace)
    assert current_trace() is None


def test_concurrent_tools_in_one_trace_add_up_but_wall_time_does_not():
    async def main() -> Trace:
        async with assay_trace() as t:

            async def call(name: str) -> None:
                async with t.tool(name):
                    await asyncio.sleep(0.04)

            async with t.tool("fan_out"):  # an outer tool span around two parallel tools
                await asyncio.gather(call("a"), call("b"))
        return t

    t = asyncio.run(main())
    steps = t.steps()
    # inner calls are nested in the outer tool span (through the task's context copy) ...
    assert [s.parent for s in steps] == [None, 0, 0]
    # ... so tool latency counts only the outer span (about 40 ms), not 40 + 40 + 40
    outer = steps[0].latency
    assert t.latency("tool") == outer
    assert 0.04 - EARLY <= outer < steps[1].latency + steps[2].latency
    assert t.tool_call_count == 3
    # without the outer span, the two parallel calls add up: at least 80 ms of calls in ~40 ms
    inner_only = [ToolCall(name=s.name, kind=s.kind, latency=s.latency) for s in steps[1:]]
    assert category_latency(inner_only, "tool") >= 0.08 - EARLY
    # the wall time covered by tool spans is the outer interval (the inner ones lie inside)
    assert t.wall_time("tool") == pytest.approx(outer)


def test_decorators_time_each_call_sync_and_async():
    with assay_trace() as t:

        @t.tool("sync_tool")
        def work(x: int) -> int:
            time.sleep(0.02)
            return x * 2

        @t.llm("async_llm")
        async def think() -> str:
            await asyncio.sleep(0.02)
            return "ok"

        assert work(2) == 4
        assert work(3) == 6
        assert asyncio.run(think()) == "ok"
    sample = t.to_sample()
    assert [s.name for s in sample.trace] == ["sync_tool", "sync_tool", "async_llm"]
    assert sample.tool_call_count == 2
    assert 0.04 - EARLY <= sample.tool_latency <= 0.04 + TOL  # 2 calls x 20 ms
    assert 0.02 - EARLY <= sample.llm_latency <= 0.02 + TOL


# ---- exact arithmetic with a hand-driven clock ----------------------------------------------


def test_nested_spans_follow_the_documented_rules():
    # llm 1.0-2.2 s; tool 2.2-4.3 s containing an api call 2.5-2.73 s; trace ends at 4.5 s
    clock = FakeClock()
    with assay_trace(clock=clock) as t:
        clock.now = 1.0
        with t.llm():
            clock.now = 2.2
        with t.tool("get_fund_by_isin"):
            clock.now = 2.5
            with t.api("nav"):
                clock.now = 2.73
            clock.now = 4.3
        clock.now = 4.5
    sample = t.to_sample()
    assert sample.duration == pytest.approx(4.5)
    assert sample.llm_latency == pytest.approx(1.2)  # 2.2 - 1.0
    assert sample.tool_latency == pytest.approx(2.1)  # 4.3 - 2.2, the API time included
    assert sample.api_latency == pytest.approx(0.23)  # 2.73 - 2.5, counted here too
    assert [s.parent for s in sample.trace] == [None, None, 1]
    assert [s.start for s in sample.trace] == pytest.approx([1.0, 2.2, 2.5])


def test_same_kind_nesting_is_not_counted_twice():
    clock = FakeClock()
    with assay_trace(clock=clock) as t:
        with t.tool("retrying_search"):  # 0.0 - 0.5
            clock.now = 0.1
            with t.tool("search"):  # 0.1 - 0.3
                clock.now = 0.3
            clock.now = 0.5
        with t.tool("compare_funds"):  # 0.5 - 0.6
            clock.now = 0.6
    # 0.5 (outer) + 0.1 (compare); the nested 0.2 is inside the outer one already
    assert t.latency("tool") == pytest.approx(0.6)
    assert t.tool_call_count == 3  # every call is counted


def test_first_token_keeps_the_first_mark():
    clock = FakeClock()
    with assay_trace(clock=clock) as t:
        clock.now = 0.4
        assert t.first_token() == pytest.approx(0.4)
        clock.now = 0.9
        assert t.first_token() == pytest.approx(0.4)
        clock.now = 1.5
    assert t.to_sample().first_token_time == pytest.approx(0.4)


def test_failing_tool_is_recorded_and_the_exception_propagates():
    clock = FakeClock()
    with assay_trace(clock=clock) as t:
        with pytest.raises(TimeoutError, match="upstream"), t.tool("search"):
            clock.now = 0.2
            raise TimeoutError("upstream slow")
        with t.tool("search") as call:
            clock.now = 0.3
            call.fail("no rows")
        with t.tool("search"):
            clock.now = 0.35
    steps = t.to_sample().trace
    assert [(s.ok, s.error) for s in steps] == [
        (False, "TimeoutError: upstream slow"),
        (False, "no rows"),
        (True, None),
    ]
    assert [s.latency for s in steps] == pytest.approx([0.2, 0.1, 0.05])


def test_exception_leaving_the_trace_is_recorded():
    t = assay_trace()
    with pytest.raises(ValueError), t:
        raise ValueError("boom")
    assert t.error == "ValueError: boom"
    assert t.duration is not None
    assert current_trace() is None


def test_traced_records_into_the_current_trace_and_is_a_no_op_without_one():
    @traced("tool")
    def fetch() -> str:
        return "rows"

    assert fetch() == "rows"  # no trace open: runs, records nothing
    with assay_trace() as t:
        assert fetch() == "rows"
        with traced("api", "geo") as span:
            assert span is not None
    assert [(s.name, s.kind) for s in t.steps()] == [("fetch", "tool"), ("geo", "api")]
    with traced("api", "nothing") as span:
        assert span is None


def test_explicit_fields_win_over_measured_ones():
    clock = FakeClock()
    with assay_trace(clock=clock, query="q") as t:
        clock.now = 2.0
        t.set_response("measured answer")
    sample = t.to_sample(duration_ms=1500, answer="given answer", expected="ref")
    assert sample.duration == pytest.approx(1.5)  # duration_ms given: 1500 ms -> 1.5 s
    assert sample.response == "given answer"  # alias 'answer' of response wins
    assert sample.query == "q"
    assert sample.expected == "ref"
    assert sample.metadata == {}


def test_a_span_object_cannot_be_entered_twice_at_once():
    with assay_trace() as t:
        timer = t.tool("x")
        with timer, pytest.raises(RuntimeError, match="already open"), timer:
            pass


def test_invalid_kind_is_rejected_with_the_choices():
    with assay_trace() as t, pytest.raises(ValueError, match="llm, tool, api"):
        t.span("db", "query")


def test_category_latency_of_a_plain_trace():
    steps = [
        ToolCall(name="plan", kind="llm", latency=0.4),
        ToolCall(name="search", kind="tool", latency=0.25),
        ToolCall(name="search", kind="tool", latency=None),  # unfinished: skipped
        ToolCall(name="answer", kind="llm", latency=0.6),
    ]
    assert category_latency(steps, "llm") == pytest.approx(1.0)  # 0.4 + 0.6
    assert category_latency(steps, "tool") == pytest.approx(0.25)
    assert category_latency(steps, "api") is None


def test_the_public_name_is_assay_trace():
    import assay

    with assay.trace(query="q") as t, t.tool("search"):
        pass
    sample = t.to_sample(response="done")
    assert sample.tool_call_count == 1 and sample.query == "q" and sample.response == "done"
