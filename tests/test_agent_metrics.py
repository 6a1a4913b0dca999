"""Agent metrics (chatbot hub): hand-worked values from explicit counts and from a trace."""

from __future__ import annotations

import pytest

from assay.core.sample import Sample, ToolCall
from assay.metrics.agent import agent_counts
from assay.metrics.registry import get_metric


def score(name: str, resources, **fields):
    return get_metric(name).score(Sample(**fields), resources)


# a run: plan (llm), search fails, search retried ok (with a nested api call), calc fails
TRACE = [
    ToolCall(name="plan", kind="llm", latency=0.4),
    ToolCall(name="search", kind="tool", ok=False, error="timeout", latency=1.0),
    ToolCall(name="search", kind="tool", ok=True, latency=0.5),
    ToolCall(name="nav_api", kind="api", ok=True, latency=0.2, parent=2),
    ToolCall(name="calc", kind="tool", ok=False, error="bad input", latency=0.1),
]


def test_agent_counts_from_a_trace():
    counts = agent_counts(Sample(trace=TRACE))
    assert counts.steps_taken == 4  # 5 steps, the api call is nested in step 2
    assert counts.tools_used == ["search", "search", "calc"]
    assert counts.tools_succeeded == ["search"]
    assert counts.errors_encountered == 2
    assert counts.tool_call_count == 3
    assert (counts.tool_calls_ok, counts.tool_calls_failed) == (1, 2)
    assert counts.retried_failures == 1  # the failed search was retried successfully
    assert counts.source["steps_taken"] == "trace"


def test_explicit_fields_win_over_the_trace():
    counts = agent_counts(Sample(trace=TRACE, steps_taken=7, tools_used=["x"]))
    assert (counts.steps_taken, counts.tools_used) == (7, ["x"])
    assert counts.source["steps_taken"] == "sample"
    assert counts.errors_encountered == 2 and counts.source["errors_encountered"] == "trace"


def test_agent_counts_without_trace():
    counts = agent_counts(Sample(tools_used=["a", "b", "a"]))
    assert counts.tool_call_count == 3  # one per listed call
    assert counts.source["tool_call_count"] == "tools_used"
    assert counts.steps_taken is None


@pytest.mark.parametrize(("completed", "value"), [(True, 1.0), (False, 0.0)])
def test_task_completion(resources, completed, value):
    assert score("task_completion", resources, task_completed=completed).value == value


def test_task_completion_missing_is_none(resources):
    result = score("task_completion", resources, response="done")
    assert result.value is None and "task_completed" in result.reason


@pytest.mark.parametrize(
    ("expected", "taken", "value"),
    [
        (3, 4, 0.75),  # 3 / 4
        (5, 4, 1.0),  # 5 / 4 = 1.25, capped at 1
        (4, 4, 1.0),
        (2, 8, 0.25),  # 2 / 8
        (3, 0, 0.0),  # no steps taken: the hub's rule gives 0
    ],
)
def test_step_efficiency(resources, expected, taken, value):
    result = score("step_efficiency", resources, expected_steps=expected, steps_taken=taken)
    assert result.value == pytest.approx(value)
    assert result.details["steps_taken"] == taken


def test_step_efficiency_from_trace(resources):
    # 4 top-level steps in TRACE, 3 expected -> 3 / 4 = 0.75
    result = score("step_efficiency", resources, expected_steps=3, trace=TRACE)
    assert result.value == pytest.approx(0.75)
    assert result.details["steps_source"] == "trace"


def test_step_efficiency_needs_both_counts(resources):
    assert score("step_efficiency", resources, steps_taken=3).value is None
    result = score("step_efficiency", resources, expected_steps=3)
    assert result.value is None and "steps_taken" in result.reason


@pytest.mark.parametrize(
    ("errors", "completed", "value"),
    [
        (2, True, 1.0),  # recovered from errors
        (0, True, 1.0),  # no errors
        (0, False, 1.0),  # no errors (the hub's rule, whatever the completion)
        (0, None, 1.0),
        (1, False, 0.0),  # errors and did not complete
    ],
)
def test_error_recovery_three_cases(resources, errors, completed, value):
    result = score("error_recovery", resources, errors_encountered=errors, task_completed=completed)
    assert result.value == value
    assert result.details["no_errors"] is (errors == 0)


def test_error_recovery_undefined_cases(resources):
    result = score("error_recovery", resources, errors_encountered=1)
    assert result.value is None and "task_completed" in result.reason
    assert score("error_recovery", resources, task_completed=True).value is None


def test_error_recovery_from_trace(resources):
    result = score("error_recovery", resources, trace=TRACE, task_completed=False)
    assert result.value == 0.0  # 2 errors, not completed
    # 2 failed tool calls; the search failure was retried successfully, calc never was: 1/2
    assert result.components["retry_success_rate"] == pytest.approx(0.5)
    assert result.details["failed_tool_calls"] == 2


def test_tool_usage_accuracy(resources):
    result = score(
        "tool_usage_accuracy",
        resources,
        tools_used=["search", "calc", "search"],
        tools_succeeded=["search"],
    )
    # set(used) = {search, calc}; ∩ {search} = {search} -> 1 / 2
    assert result.value == pytest.approx(0.5)
    assert result.details["tools_failed"] == ["calc"]


def test_tool_usage_accuracy_from_trace(resources):
    result = score("tool_usage_accuracy", resources, trace=TRACE)
    assert result.value == pytest.approx(0.5)  # {search, calc} used, {search} succeeded
    # per call: 1 of 3 tool calls succeeded
    assert result.components["call_success_rate"] == pytest.approx(1 / 3)


def test_tool_usage_accuracy_all_succeeded(resources):
    result = score(
        "tool_usage_accuracy", resources, tools_used=["a", "b"], tools_succeeded=["b", "a", "c"]
    )
    assert result.value == 1.0  # succeeded tools that were not "used" do not count


def test_no_tools_used_is_undefined_not_zero(resources):
    result = score("tool_usage_accuracy", resources, tools_used=[], tools_succeeded=[])
    assert result.value is None
    assert result.details["specification_value"] == 0.0
    missing = score("tool_usage_accuracy", resources, tools_used=["a"])
    assert missing.value is None and "tools_succeeded" in missing.reason
    # an explicit empty success list is a measured zero
    zero = score("tool_usage_accuracy", resources, tools_used=["a"], tools_succeeded=[])
    assert zero.value == 0.0


def test_agent_metric_catalogue():
    for name in ("task_completion", "step_efficiency", "error_recovery", "tool_usage_accuracy"):
        cls = type(get_metric(name))
        assert cls.family == "agent" and "agent" in cls.suites
        assert cls.higher_is_better and cls.value_range == (0.0, 1.0)
