"""The methods that can score a metric, for `assay.evaluation.agreement`: each offline
estimator it can run (`METHOD_SETTINGS`: the settings that select it) and the judge when
one is configured and the metric asks one (a panel, and each of its judges alone as a
panel of one, so that a team sees whether the panel beats its best member)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from assay.core.config import AssayConfig
from assay.core.judges import JUDGE_OFF
from assay.metrics.registry import metric_class

__all__ = [
    "CONFIGURED",
    "METHOD_SETTINGS",
    "OFFLINE",
    "Method",
    "methods_for",
    "without_judge",
]

#: the method that runs the metric as the configuration says (``methods=False``)
CONFIGURED = "configured"
#: the one offline method of a metric not in `METHOD_SETTINGS`
OFFLINE = "offline"

_SUPPORT = {
    "graded": {"support_estimator": "graded"},
    "entailment": {"support_estimator": "entailment"},
    "graded+entailment": {"support_estimator": "graded+entailment"},
    "head": {"support_estimator": "head"},
    # the option that also reads each sentence against its closest source sentences
    "entailment+sentences": {
        "support_estimator": "entailment",
        "entailment_premises": "windows+sentences",
    },
    "graded+entailment+sentences": {
        "support_estimator": "graded+entailment",
        "entailment_premises": "windows+sentences",
    },
}
_TOXICITY = {
    "profanity-check+head": {"toxicity_method": "profanity-check+head"},
    "head+keywords": {"toxicity_method": "head+keywords"},
    "head": {"toxicity_method": "head"},
    "profanity-check": {"toxicity_method": "profanity-check"},
    "keywords": {"toxicity_method": "keywords"},
}
#: metric -> {method: the settings that make it run that offline estimator}; a metric
#: not here has one offline method, the metric as configured with the judge off
METHOD_SETTINGS: dict[str, dict[str, dict[str, str]]] = {
    **dict.fromkeys(
        (
            "faithfulness",
            "hallucination",
            "ragas_faithfulness",
            "ragas_context_recall",
            "ragas_score",
            "answer_correctness",
        ),
        _SUPPORT,
    ),
    **dict.fromkeys(("toxicity_score", "compliance_score", "ethical_violation"), _TOXICITY),
}


@dataclass(frozen=True)
class Method:
    """One way to score a metric: its label, the settings it overrides, those settings
    as the report shows them (a panel member by its label), and whether it asks the
    judge."""

    label: str
    overrides: dict[str, Any]
    shown: dict[str, str]
    judged: bool


def without_judge(config: AssayConfig) -> AssayConfig:
    """``config`` with no judge configured (the local estimators only)."""
    return config.without_judge()


def methods_for(metric: str, config: AssayConfig, *, every: bool = True) -> list[Method]:
    """The methods that can score ``metric`` under ``config``: with ``every``, each
    offline estimator (`METHOD_SETTINGS`, else the metric with the judge off) and, when a
    judge is configured and the metric asks one, the judge (a panel and each of its
    judges alone); without, the metric as configured."""
    needs_judge = "judge" in metric_class(metric).needs and config.judge_configured
    if not every:
        return [Method(CONFIGURED, {}, {}, needs_judge)]
    off = dict(JUDGE_OFF)
    table = METHOD_SETTINGS.get(metric, {OFFLINE: {}})
    methods = [Method(label, {**off, **s}, dict(s), False) for label, s in table.items()]
    if not needs_judge:
        return methods
    specs = list(getattr(config, "judge_models", []))
    if len(specs) < 2:
        return [*methods, Method("llm", {}, {}, True)]
    members = config.judge_members()
    panel = Method(f"llm panel ({config.panel})", {}, {"panel": config.panel}, True)
    alone = [
        Method(f"llm:{member.label}", {"judge_models": [spec]}, {"judge": member.label}, True)
        for spec, member in zip(specs, members, strict=True)
    ]
    return [*methods, panel, *alone]
