"""Agent metrics (chatbot hub "Agent Metrics"): task completion, step efficiency, error
recovery and tool usage accuracy, from explicit counts or derived from an agent trace.

All four read their inputs through `agent_counts`, which takes the Sample's explicit
fields (``steps_taken``, ``tools_used``, ...) and fills any that are absent from
``Sample.trace`` (a list of `ToolCall` steps, e.g. made by ``assay.trace``). Values are on
the canonical 0..1 scale (the specification's 0-100 is presentation).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from assay.core.result import MetricResult
from assay.core.sample import Sample, ToolCall
from assay.engine.resources import Resources
from assay.metrics.base import Metric, Source
from assay.metrics.registry import register

__all__ = ["AgentCounts", "agent_counts", "retried_later"]


def retried_later(tool_steps: Sequence[ToolCall], index: int) -> bool:
    """Whether a call of the same tool after step ``index`` succeeded (a failed step so
    followed was retried successfully)."""
    name = tool_steps[index].name
    return any(s.ok and s.name == name for s in tool_steps[index + 1 :])


@dataclass(frozen=True)
class AgentCounts:
    """The counts the agent metrics use, and where each came from.

    ``source`` maps each field to ``"sample"`` (given explicitly) or ``"trace"``
    (derived); a field that is in neither is None and absent from ``source``.
    """

    task_completed: bool | None = None
    steps_taken: int | None = None
    expected_steps: int | None = None
    tools_used: list[str] | None = None
    tools_succeeded: list[str] | None = None
    errors_encountered: int | None = None
    tool_call_count: int | None = None
    tool_calls_ok: int | None = None  # successful tool calls (trace only)
    tool_calls_failed: int | None = None  # failed tool calls (trace only)
    retried_failures: int | None = None  # failed tool calls later retried successfully
    source: dict[str, str] = field(default_factory=dict)


def _is_top_level(step: ToolCall) -> bool:
    return getattr(step, "parent", None) is None


def agent_counts(sample: Sample) -> AgentCounts:
    """Agent counts of a sample: explicit fields first, the rest derived from its trace.

    From ``Sample.trace`` (when present):

    - ``steps_taken`` = number of top-level steps (steps whose ``parent`` is None; a trace
      without parent links counts every step, i.e. ``len(trace)``);
    - ``tools_used`` = names of the ``kind == "tool"`` steps, in order, one per call;
    - ``tools_succeeded`` = names of the tool steps with ``ok`` True;
    - ``errors_encountered`` = steps of any kind with ``ok`` False;
    - ``tool_call_count`` = number of tool steps; ``tool_calls_ok`` and
      ``tool_calls_failed`` split them by ``ok``;
    - ``retried_failures`` = failed tool calls followed later by a successful call of the
      same tool.

    Without a trace, ``tool_call_count`` falls back to ``len(tools_used)``.
    ``task_completed`` and ``expected_steps`` cannot be derived: they must be given.
    """
    source: dict[str, str] = {}
    values: dict[str, object] = {}
    for name in (
        "task_completed",
        "steps_taken",
        "expected_steps",
        "tools_used",
        "tools_succeeded",
        "errors_encountered",
        "tool_call_count",
    ):
        value = getattr(sample, name)
        if value is not None:
            values[name] = value
            source[name] = "sample"
    steps = sample.trace
    if steps:
        tool_steps = [s for s in steps if s.kind == "tool"]
        derived: dict[str, object] = {
            "steps_taken": sum(1 for s in steps if _is_top_level(s)),
            "tools_used": [s.name for s in tool_steps],
            "tools_succeeded": [s.name for s in tool_steps if s.ok],
            "errors_encountered": sum(1 for s in steps if not s.ok),
            "tool_call_count": len(tool_steps),
        }
        for name, value in derived.items():
            if name not in values:
                values[name] = value
                source[name] = "trace"
        ok_calls = sum(1 for s in tool_steps if s.ok)
        values["tool_calls_ok"] = ok_calls
        values["tool_calls_failed"] = len(tool_steps) - ok_calls
        source["tool_calls_ok"] = source["tool_calls_failed"] = "trace"
        values["retried_failures"] = sum(
            1 for i, step in enumerate(tool_steps) if not step.ok and retried_later(tool_steps, i)
        )
        source["retried_failures"] = "trace"
    elif "tool_call_count" not in values and sample.tools_used is not None:
        values["tool_call_count"] = len(sample.tools_used)
        source["tool_call_count"] = "tools_used"
    return AgentCounts(**values, source=source)  # type: ignore[arg-type]


class _AgentMetric(Metric):
    family = "agent"
    suites = ("agent",)
    source = Source.CHATBOT_HUB


@register
class TaskCompletion(_AgentMetric):
    """Whether the agent completed its task: 1 when ``task_completed`` is true, else 0.

    Formula (chatbot hub): ``1.0 if task_completed else 0.0`` (the specification's 100/0). Input:
    ``task_completed`` (bool; it cannot be derived from a trace, the application or a
    checker must say it). Range {0, 1}, higher is better; None when ``task_completed`` is
    absent. Weakness: binary and self-reported; it says nothing about how well the task
    was done.
    """

    name = "task_completion"
    requires = ("task_completed",)
    unit = "bool"
    default_threshold = 1.0

    def compute(self, sample: Sample, res: Resources) -> MetricResult:
        return self.result(1.0 if sample.task_completed else 0.0, method="measurement")


@register
class StepEfficiency(_AgentMetric):
    """Expected steps over steps taken, capped at 1: did the agent take no more steps than needed?

    Formula (chatbot hub): ``min(expected_steps / steps_taken, 1)``, and 0 when
    ``steps_taken`` is 0 (the specification's rule, kept: an agent that took no step did not do the
    task, so it is scored as fully inefficient rather than undefined; the specification's result is
    also 0 when ``expected_steps`` and ``steps_taken`` are both 0). Inputs:
    ``expected_steps`` (must be given) and ``steps_taken`` (given, or the number of
    top-level steps of ``trace``). Range 0..1, higher is better; None when either input is
    missing. Weakness: fewer steps than expected is capped at 1, so a shortcut that skips
    needed work is not distinguished from an efficient run; pair with ``task_completion``.
    """

    name = "step_efficiency"
    requires = ("expected_steps",)

    def compute(self, sample: Sample, res: Resources) -> MetricResult:
        counts = agent_counts(sample)
        if counts.steps_taken is None:
            return self.na("missing input: steps_taken (or a trace)", missing=["steps_taken"])
        expected = counts.expected_steps or 0
        taken = counts.steps_taken
        details = {
            "expected_steps": expected,
            "steps_taken": taken,
            "steps_source": counts.source.get("steps_taken"),
        }
        if taken == 0:
            return self.result(
                0.0,
                method="measurement",
                reason="no steps taken (the chatbot hub's rule: 0)",
                **details,
            )
        return self.result(min(expected / taken, 1.0), method="measurement", **details)


@register
class ErrorRecovery(_AgentMetric):
    """Whether the agent recovered from its errors: 1 when it had none or completed anyway, else 0.

    Formula (chatbot hub, three cases): errors > 0 and task completed -> 1; errors == 0 -> 1;
    errors > 0 and not completed -> 0. Inputs: ``errors_encountered`` (given, or the
    failed steps of ``trace``) and ``task_completed`` (needed only when there were
    errors). Range {0, 1}, higher is better; None when the error count is unknown, or
    when there were errors and completion is unknown. Weakness: a run with no errors scores
    1 even if it failed the task (``details.no_errors`` marks those runs, which had nothing
    to recover from). With a trace, the component ``retry_success_rate`` = failed tool
    calls that were later retried successfully (same tool) / failed tool calls, a finer
    view of recovery.
    """

    name = "error_recovery"
    unit = "bool"
    components = ("retry_success_rate",)

    def compute(self, sample: Sample, res: Resources) -> MetricResult:
        counts = agent_counts(sample)
        errors = counts.errors_encountered
        if errors is None:
            return self.na(
                "missing input: errors_encountered (or a trace)", missing=["errors_encountered"]
            )
        components: dict[str, float | None] = {}
        details: dict[str, object] = {
            "errors_encountered": errors,
            "errors_source": counts.source.get("errors_encountered"),
            "task_completed": counts.task_completed,
            "no_errors": errors == 0,
        }
        if counts.tool_calls_failed is not None:
            failed_tools = counts.tool_calls_failed
            details["failed_tool_calls"] = failed_tools
            details["retried_failures"] = counts.retried_failures
            components["retry_success_rate"] = (
                (counts.retried_failures or 0) / failed_tools if failed_tools else None
            )
        if errors == 0:
            value = 1.0
        elif counts.task_completed is None:
            return self.na(
                "errors were encountered but task_completed is missing",
                missing=["task_completed"],
                **details,
            )
        else:
            value = 1.0 if counts.task_completed else 0.0
        return self.result(value, components=components, method="measurement", **details)


@register
class ToolUsageAccuracy(_AgentMetric):
    """Share of the distinct tools the agent used that succeeded at least once.

    Formula (chatbot hub): ``|set(tools_used) ∩ set(tools_succeeded)| / |set(tools_used)|``.
    Inputs: ``tools_used`` and ``tools_succeeded`` (given, or from the tool steps of
    ``trace`` and their ``ok`` flags). Range 0..1, higher is better. When no tool was used
    the specification returns 0; here the value is None ("no tools used": accuracy of zero calls is
    undefined, and missing is not zero), with ``details.specification_value = 0``. Weakness: set
    based, so a tool that failed four times and then succeeded counts as fully accurate;
    the component ``call_success_rate`` (successful tool calls / tool calls, from a trace)
    counts every call.
    """

    name = "tool_usage_accuracy"
    components = ("call_success_rate",)

    def compute(self, sample: Sample, res: Resources) -> MetricResult:
        counts = agent_counts(sample)
        if counts.tools_used is None:
            return self.na("missing input: tools_used (or a trace)", missing=["tools_used"])
        used = set(counts.tools_used)
        if not used:
            return self.na(
                "no tools used: tool usage accuracy is undefined", specification_value=0.0
            )
        if counts.tools_succeeded is None:
            return self.na(
                "missing input: tools_succeeded (or a trace)", missing=["tools_succeeded"]
            )
        succeeded = used & set(counts.tools_succeeded)
        components: dict[str, float | None] = {}
        ok, failed = counts.tool_calls_ok, counts.tool_calls_failed
        if ok is not None and failed is not None and ok + failed:
            components["call_success_rate"] = ok / (ok + failed)
        return self.result(
            len(succeeded) / len(used),
            components=components,
            method="measurement",
            tools_used=sorted(used),
            tools_succeeded=sorted(succeeded),
            tools_failed=sorted(used - succeeded),
            tools_source=counts.source.get("tools_used"),
        )
