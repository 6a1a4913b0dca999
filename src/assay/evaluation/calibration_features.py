"""What a calibration fits on: each metric's offline evidence as named features.

A calibration (`assay.evaluation.calibration`) reads the features of a scored result
from what the metric already computed: its value and its ``details`` (entailment
probabilities, graded support, anchors, the heads' inputs, similarity). `FEATURES` holds
one extractor per metric; any other metric with values in [0, 1] uses `value_alone`, a
logistic recalibration of the value. Every extractor puts the DEFAULT's score first, as
``logit(score)``: the number the metric's threshold is applied to (the value, or the
agreement head's probability for ``answer_classification``), so the prior
``p = sigmoid(logit(score) - logit(threshold))`` is the default method's own ranking and
decision (weight 1 on the first feature, the threshold as the intercept, 0 elsewhere).

A result whose evidence an extractor cannot read (another method ran, e.g. a judge, or
the value is missing) raises `MissingEvidence` with the reason.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from assay.core.result import MetricResult
from assay.evaluation.calibration_fit import logit

__all__ = [
    "DEFAULT_SCORE",
    "FEATURES",
    "FeatureExtractor",
    "MissingEvidence",
    "default_score",
    "features_of",
    "value_alone",
]

#: the name of the first feature: logit of the score the default thresholds
DEFAULT_SCORE = "logit_default_score"

#: a metric's result -> its features by name (the default's score first)
FeatureExtractor = Callable[[MetricResult], dict[str, float]]


class MissingEvidence(ValueError):
    """A result lacks the evidence a calibration reads (the reason is the message)."""


def _number(details: Mapping[str, Any], key: str, what: str) -> float:
    value = details.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise MissingEvidence(f"details[{key!r}] ({what}) is missing")
    return float(value)


def _value(result: MetricResult) -> float:
    if result.value is None:
        raise MissingEvidence(result.error or result.reason or "the metric has no value")
    return float(result.value)


def default_score(result: MetricResult) -> float:
    """The score the default method thresholds, 0..1: the value, or for
    ``answer_classification`` (whose value is a 0/1 label) the agreement head's
    probability (its ``agreement`` component)."""
    if result.name == "answer_classification":
        agreement = result.components.get("agreement")
        if agreement is None:
            raise MissingEvidence("the 'agreement' component (the head's probability) is missing")
        return float(agreement)
    return _value(result)


def value_alone(result: MetricResult) -> dict[str, float]:
    """The generic features: ``logit(value)`` alone, for a metric with values in [0, 1]."""
    value = _value(result)
    if not 0.0 <= value <= 1.0:
        raise MissingEvidence(
            f"the value {value:g} is outside [0, 1]: only a ratio metric can be calibrated"
        )
    return {DEFAULT_SCORE: float(logit(value))}


def grounding_evidence(result: MetricResult) -> dict[str, float]:
    """``faithfulness`` / ``hallucination`` (sentence support + entailment estimator):
    logit of the value, of the graded support and of the entailment support; over the
    response's sentences the lowest entailment, the mean and highest contradiction, the
    lowest support and the share judged supported; the share of anchors (names, numbers)
    found in the contexts (1 when there are none)."""
    details = result.details
    sentences = details.get("sentences")
    if not isinstance(sentences, list) or not sentences:
        raise MissingEvidence("details['sentences'] (the per-sentence evidence) is missing")
    try:
        entailment = np.array([float(s["entailment"]) for s in sentences])
        contradiction = np.array([float(s["contradiction"]) for s in sentences])
        support = np.array([float(s["support"]) for s in sentences])
        supported = np.array([bool(s["supported"]) for s in sentences], dtype=np.float64)
    except (KeyError, TypeError, ValueError) as exc:
        raise MissingEvidence(f"a sentence lacks its evidence ({exc})") from exc
    anchors = details.get("anchors") or 0
    anchors_supported = details.get("anchors_supported") or 0
    return {
        DEFAULT_SCORE: float(logit(_value(result))),
        "logit_graded_support": float(logit(_number(details, "graded_support", "support"))),
        "logit_entailment_support": float(
            logit(_number(details, "entailment_support", "entailment"))
        ),
        "min_entailment": float(entailment.min()),
        "mean_contradiction": float(contradiction.mean()),
        "max_contradiction": float(contradiction.max()),
        "min_support": float(support.min()),
        "share_supported": float(supported.mean()),
        "share_anchors_supported": float(anchors_supported) / anchors if anchors else 1.0,
    }


def agreement_evidence(result: MetricResult) -> dict[str, float]:
    """``answer_classification`` (the agreement head offline): logit of the head's
    probability, then the head's own input features (cosines, content F1, negation
    mismatch, copied words, length ratio...)."""
    inputs = result.details.get("head_features")
    if not isinstance(inputs, dict) or not inputs:
        raise MissingEvidence("details['head_features'] (the agreement head's inputs) is missing")
    features = {DEFAULT_SCORE: float(logit(default_score(result)))}
    for name in inputs:
        features[f"head.{name}"] = _number(inputs, name, "a head feature")
    return features


def toxicity_evidence(result: MetricResult) -> dict[str, float]:
    """``toxicity_score``: logit of the value and of each model's probability (the
    toxicity head, alt-profanity-check when installed), and the highest keyword weight
    matched (0 when none)."""
    probabilities = result.details.get("probabilities")
    if not isinstance(probabilities, dict) or not probabilities:
        raise MissingEvidence("details['probabilities'] (each model's probability) is missing")
    features = {DEFAULT_SCORE: float(logit(_value(result)))}
    for name in sorted(probabilities):
        features[f"logit_{name}"] = float(logit(_number(probabilities, name, "a probability")))
    matches = result.details.get("keyword_matches") or []
    weights = [float(m["weight"]) for m in matches if isinstance(m, dict) and "weight" in m]
    features["max_keyword_weight"] = max(weights, default=0.0)
    return features


#: metric name -> its feature extractor (any other ratio metric: `value_alone`)
FEATURES: dict[str, FeatureExtractor] = {
    "faithfulness": grounding_evidence,
    "hallucination": grounding_evidence,
    "answer_classification": agreement_evidence,
    "toxicity_score": toxicity_evidence,
    "semantic_similarity": value_alone,
}


def features_of(result: MetricResult) -> dict[str, float]:
    """The features of one result by name (`FEATURES`, else `value_alone`); raises
    `MissingEvidence` when they cannot be read."""
    if result.error:
        raise MissingEvidence(f"the metric failed: {result.error}")
    return FEATURES.get(result.name, value_alone)(result)
