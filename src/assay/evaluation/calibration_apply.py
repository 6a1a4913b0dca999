"""Applying calibration files to a run's results (``--calibration``, the setting
``calibration``).

After a calibrated metric has scored a sample, its result becomes::

    value      = sigmoid(b + w · x)     (the probability that the team labels it 1, 0..1,
                                         in the metric's direction; x its features)
    method     = "calibrated"
    signature  = the result's own, method=calibrated and calibration=<file hash, 12 hex>
    details    = the result's own, plus "uncalibrated" (value, method, signature,
                 components), "calibration" (hash, method, threshold),
                 "pass_threshold" (the file's threshold) and "in_domain" false (with the
                 reason in "out_of_domain") when a feature falls outside the labelled
                 data's range by more than `DOMAIN_MARGIN` of that range

A result the file cannot read (no value, another method than it was fitted on, missing
evidence) keeps its value and method, and says why in ``details["calibration"]``. A
judge's result whose prompt carried the file's ``judge_examples`` (method ``llm``,
``details["judge_examples"]`` = k, ``calibration=<hash>`` in its signature) keeps its value
and method, with ``details["calibration"]`` saying ``method: judge_examples``.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from assay.core.config import AssayNote
from assay.core.result import MetricResult, format_signature, parse_signature
from assay.core.sample import Sample
from assay.engine.resources import Resources
from assay.evaluation.calibration_features import (
    DEFAULT_SCORE,
    MissingEvidence,
    default_score,
    features_of,
)
from assay.evaluation.calibration_file import (
    HEAD_METHOD,
    SCORE_METHOD,
    Calibration,
    load_calibration,
)
from assay.evaluation.calibration_fit import logit
from assay.evaluation.calibration_head import head_embeddings
from assay.metrics.base import PASS_THRESHOLD

__all__ = ["DOMAIN_MARGIN", "Calibrations", "calibration_paths"]

#: how far past a training range a feature may fall, as a share of that range
DOMAIN_MARGIN = 0.05
#: the method of a calibrated result
CALIBRATED = "calibrated"


def calibration_paths(setting: str | Sequence[str] | None) -> list[str]:
    """The calibration files a setting names: a list, or one string of paths separated
    by commas."""
    if not setting:
        return []
    items = setting.split(",") if isinstance(setting, str) else list(setting)
    return [item.strip() for item in items if item.strip()]


class Calibrations:
    """The calibration files of a run, one per metric, applied to each chunk's results."""

    def __init__(self, calibrations: Iterable[Calibration]) -> None:
        self.by_metric: dict[str, Calibration] = {}
        for calibration in calibrations:
            if calibration.metric in self.by_metric:
                raise ValueError(
                    f"two calibration files for {calibration.metric}: "
                    f"{self.by_metric[calibration.metric].path} and {calibration.path}"
                )
            self.by_metric[calibration.metric] = calibration

    @classmethod
    def for_run(cls, setting: str | Sequence[str] | None, metrics: Iterable[str]) -> Calibrations:
        """The files of ``setting`` (`calibration_paths`) for the run's ``metrics``; a
        file for a metric the run does not score is left out with a note (`AssayNote`).
        Raises `CalibrationFileError` for an unusable file."""
        asked = set(metrics)
        kept = []
        for path in calibration_paths(setting):
            calibration = load_calibration(path)
            if calibration.metric in asked:
                kept.append(calibration)
            else:
                warnings.warn(
                    f"calibration {path} ({calibration.hash}) is for {calibration.metric}, "
                    "which this run does not score: ignored",
                    AssayNote,
                    stacklevel=2,
                )
        return cls(kept)

    def __bool__(self) -> bool:
        return bool(self.by_metric)

    def apply(
        self, samples: Sequence[Sample], rows: list[dict[str, MetricResult]], res: Resources
    ) -> list[dict[str, MetricResult]]:
        """``rows`` (one dict of results per sample) with every calibrated metric's
        results replaced by their calibrated version (in place, and returned)."""
        for name, calibration in self.by_metric.items():
            present = [i for i, row in enumerate(rows) if name in row]
            if not present:
                continue
            if calibration.method == HEAD_METHOD:
                _apply_head(
                    calibration, [samples[i] for i in present], [rows[i] for i in present], res
                )
            else:
                for i in present:
                    rows[i][name] = _apply_evidence(calibration, rows[i][name])
        return rows


def _not_applied(calibration: Calibration, result: MetricResult, why: str) -> MetricResult:
    details = {
        **result.details,
        "calibration": {"hash": calibration.hash, "applied": False, "reason": why},
    }
    return dataclasses.replace(result, details=details)


def _readable(calibration: Calibration, result: MetricResult) -> str | None:
    """Why the calibration cannot read ``result``, or None when it can."""
    if result.value is None or result.error:
        return "the metric has no value"
    fitted_on = calibration.data.get("calibrated_methods") or []
    if fitted_on and result.method not in fitted_on:
        return f"fitted on {', '.join(fitted_on)} results; this one is {result.method}"
    return None


def _outside(value: float, low: float, high: float) -> bool:
    margin = DOMAIN_MARGIN * (high - low)
    return value < low - margin or value > high + margin


def _calibrated(
    calibration: Calibration, result: MetricResult, probability: float, far: list[str]
) -> MetricResult:
    parts = parse_signature(result.signature)
    parts.update(method=CALIBRATED, calibration=calibration.hash)
    details: dict[str, Any] = dict(result.details)
    details["uncalibrated"] = {
        "value": result.value,
        "method": result.method,
        "signature": result.signature,
        "components": dict(result.components),
    }
    details["calibration"] = {
        "hash": calibration.hash,
        "method": calibration.method,
        "threshold": calibration.threshold,
        "applied": True,
    }
    details[PASS_THRESHOLD] = calibration.threshold
    if far:
        details["in_domain"] = False
        details["out_of_domain"] = [*(details.get("out_of_domain") or []), *far]
    else:
        details.setdefault("in_domain", True)
    return MetricResult(
        name=result.name,
        value=float(probability),
        details=details,
        method=CALIBRATED,
        reason=result.reason,
        signature=format_signature(parts),
    )


def _shown_examples(calibration: Calibration, result: MetricResult) -> bool:
    """Whether ``result`` is the judge's verdict with this file's examples in its prompt
    (`RubricScore.reduce`: ``details["judge_examples"]``, ``calibration=<hash>``)."""
    return (
        result.method == "llm"
        and bool(result.details.get("judge_examples"))
        and parse_signature(result.signature).get("calibration") == calibration.hash
    )


def _apply_evidence(calibration: Calibration, result: MetricResult) -> MetricResult:
    if _shown_examples(calibration, result):  # the judge was calibrated: its value stays
        details = {
            **result.details,
            "calibration": {
                "hash": calibration.hash,
                "method": "judge_examples",
                "examples": result.details["judge_examples"],
                "applied": True,
            },
        }
        return dataclasses.replace(result, details=details)
    why = _readable(calibration, result)
    if why is not None:
        return _not_applied(calibration, result, why)
    try:
        if calibration.method == SCORE_METHOD:  # the default's score is all it reads
            features = {DEFAULT_SCORE: float(logit(default_score(result)))}
        else:
            features = features_of(result)
        vector = np.array([features[n] for n in calibration.feature_names], dtype=np.float64)
    except MissingEvidence as exc:
        return _not_applied(calibration, result, str(exc))
    except KeyError as exc:
        return _not_applied(calibration, result, f"the feature {exc} is missing")
    ranges = calibration.data["training_ranges"]
    far = [
        f"calibration feature {name} = {value:.4g}, outside the labelled "
        f"{ranges[name]['min']:.4g} to {ranges[name]['max']:.4g}"
        for name, value in zip(calibration.feature_names, vector, strict=True)
        if _outside(float(value), ranges[name]["min"], ranges[name]["max"])
    ]
    probability = float(calibration.probabilities(vector[None, :])[0])
    return _calibrated(calibration, result, probability, far)


def _apply_head(
    calibration: Calibration,
    samples: list[Sample],
    row_list: list[dict[str, MetricResult]],
    res: Resources,
) -> None:
    name = calibration.metric
    readable = []
    for i, row in enumerate(row_list):
        why = _readable(calibration, row[name])
        if why is None:
            readable.append(i)
        else:
            row[name] = _not_applied(calibration, row[name], why)
    if not readable:
        return
    embeddings = head_embeddings([samples[i] for i in readable], res)
    logits = calibration.intercept + embeddings @ calibration.weights
    ranges = calibration.data["training_ranges"]
    centroid = np.asarray(ranges["centroid"], dtype=np.float64)
    lowest, low, high = ranges["min_cosine"], ranges["logit"]["min"], ranges["logit"]["max"]
    probabilities = calibration.probabilities(embeddings)
    for k, i in enumerate(readable):
        cosine = float(embeddings[k] @ centroid)
        far = []
        if cosine < lowest - DOMAIN_MARGIN * (1.0 - lowest):
            far.append(
                f"calibration: the response's embedding is {cosine:.3f} from the labelled "
                f"texts' centroid (cosine), below the lowest labelled {lowest:.3f}"
            )
        if _outside(float(logits[k]), low, high):
            far.append(
                f"calibration: refit head logit {logits[k]:.3g} outside the labelled "
                f"{low:.3g} to {high:.3g}"
            )
        row_list[i][name] = _calibrated(calibration, row_list[i][name], probabilities[k], far)
