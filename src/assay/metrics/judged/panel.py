"""A judged metric's results with a judge panel: each judge's value, then the panel's.

`panel_results` reduces the metric once per judge, from that judge's answers alone
(`assay.engine.Answers.member`: its replies and its follow-ups, e.g. the claims it
extracted and then verified), and combines each sample's values by the ``panel`` rule
(`assay.judge.panel_rules.combine`). A judge that failed, or gave no value, has no vote;
when every judge failed the sample fails as with one judge (``judge call failed``, each
judge's error named), never NaN.

The result's evidence: ``details["judges"]`` holds each judge's value and reason (and
error), ``details["panel"]`` the rule; the other details are those of the judge whose
value is nearest the panel's (the first such in configured order;
``details["panel_evidence"]`` names it), so a reader sees
the claims or label behind the value. The components are the mean of those of the
judges the value was read from. The method is ``llm`` and the signature names the panel:
``judge=panel(a,b)`` and ``panel=mean``. The panel keeps the judges' values
(`assay.judge.panel.JudgePanel.record`) for the run's agreement report.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from assay.core.result import MetricResult, format_signature, parse_signature
from assay.core.sample import Sample
from assay.engine import Answers, answered
from assay.engine.resources import Resources
from assay.judge.panel_rules import combine

__all__ = ["PanelMetric", "panel_result", "panel_results", "panel_threshold"]


class PanelMetric(Protocol):
    """What a panel needs of a judged metric (`assay.metrics.judged.base.JudgedMetric`)."""

    name: str
    higher_is_better: bool
    value_range: tuple[float, float | None]

    def reduce_batch(
        self, samples: Sequence[Sample], answers: Answers, res: Resources
    ) -> list[MetricResult]: ...

    def failed(
        self,
        error: BaseException | str,
        *,
        reason: str | None = None,
        method: str = "error",
        model: str | None = None,
    ) -> MetricResult: ...


def panel_threshold(metric: PanelMetric, res: Resources) -> float:
    """The threshold a ``majority`` panel votes at: the metric's pass threshold in this
    run (``thresholds``, its setting, its default), else the middle of its range."""
    threshold = res.config.threshold_for(metric)
    if threshold is not None:
        return float(threshold)
    low, high = metric.value_range
    return (low + (1.0 if high is None else high)) / 2


def panel_results(
    metric: PanelMetric, samples: Sequence[Sample], answers: Answers, res: Resources
) -> list[MetricResult]:
    """The panel's result of each sample (see the module): the metric reduced from each
    judge's answers (`JudgedMetric.reduce_batch` on its view), combined."""
    by_judge: dict[str, list[MetricResult]] = {}
    for label in answers.judges:
        view = answers.member(label)
        with answered(view):  # a composite's members reduce this judge's answers too
            by_judge[label] = metric.reduce_batch(samples, view, res)
    rule, threshold = res.config.panel, panel_threshold(metric, res)
    out, kept = [], []
    for i in range(len(samples)):
        each = {label: by_judge[label][i] for label in answers.judges}
        kept.append({label: r.value if r.error is None else None for label, r in each.items()})
        out.append(panel_result(metric, each, answers.model or "panel", rule, threshold))
    record = getattr(res.judge, "record", None)
    if record is not None:
        record(metric.name, kept)
    return out


def panel_result(
    metric: PanelMetric,
    each: Mapping[str, MetricResult],
    panel: str,
    rule: str,
    threshold: float,
) -> MetricResult:
    """One sample's panel result from each judge's result (label -> result); ``panel``
    names the panel in the signature (``panel(a,b)``)."""
    judges = {label: _verdict(r) for label, r in each.items()}
    valued = {label: r.value for label, r in each.items() if r.value is not None}
    about: dict[str, Any] = {"judges": judges, "panel": rule}
    if not valued:
        unscored = next((r for r in each.values() if r.error is None), None)
        if unscored is None:  # every judge failed: the sample's error names each
            errors = "; ".join(f"{label}: {r.error}" for label, r in each.items())
            failed = metric.failed(
                f"every judge of the panel failed ({errors})",
                reason="judge call failed",
                method="llm",
                model=panel,
            )
            return _signed(failed, panel, rule)
        details = {**unscored.details, **about}
        return _signed(dataclasses.replace(unscored, details=details), panel, rule)
    value, chosen = combine(
        valued, rule, threshold=threshold, higher_is_better=metric.higher_is_better
    )
    # the first of the nearest in configured order (to 1e-9: not by rounding noise)
    nearest = min(chosen, key=lambda label: round(abs(valued[label] - value), 9))
    if rule == "majority":
        about["panel_threshold"] = threshold
    about["panel_evidence"] = nearest
    base = each[nearest]
    result = dataclasses.replace(
        base,
        value=value,
        components=_mean_components([each[label] for label in chosen]),
        details={**base.details, **about},
    )
    return _signed(result, panel, rule)


def _verdict(result: MetricResult) -> dict[str, Any]:
    """One judge's verdict as the panel's evidence: value, reason and error (if any)."""
    reason = result.details.get("judge_reason") or result.reason
    verdict: dict[str, Any] = {"value": result.value, "reason": reason}
    if result.error is not None:
        verdict["error"] = result.error
    return verdict


def _mean_components(results: Sequence[MetricResult]) -> dict[str, float | None]:
    """Each component's mean over ``results`` (None where none of them has it)."""
    names = dict.fromkeys(name for r in results for name in r.components)
    out: dict[str, float | None] = {}
    for name in names:
        found = [v for r in results if (v := r.components.get(name)) is not None]
        out[name] = sum(found) / len(found) if found else None
    return out


def _signed(result: MetricResult, panel: str, rule: str) -> MetricResult:
    """``result`` with the panel's signature: its judge part ``panel(a,b)`` (the prompts'
    hashes kept) and a ``panel`` part naming the rule."""
    parts = parse_signature(result.signature)
    parts.update(judge=panel, panel=rule)
    return dataclasses.replace(result, signature=format_signature(parts))
