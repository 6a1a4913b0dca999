"""The calibration file: what ``assay calibrate`` writes and ``--calibration`` reads.

A JSON object (``version`` `FILE_VERSION`) with:

- ``metric``: the metric it calibrates; ``method``: ``score`` (a logistic map of the
  default's score alone), ``evidence`` (a logistic model on the metric's evidence,
  `assay.evaluation.calibration_features`) or ``toxicity_head_refit``
  (the toxicity head refit on its embeddings); ``calibrated_methods``: the result
  methods it was fitted on (e.g. ``local``); ``higher_is_better``: the metric's polarity;
- ``features``: the feature names, and ``weights``: ``{"intercept": b, "weights": [w...]}``
  of ``p = sigmoid(b + w · x)``; ``prior``: the weights it was pulled toward and how many
  labels the pull is worth (``labels_worth``);
- ``threshold``: the pass threshold on ``p`` (max balanced accuracy out of fold);
- ``labels``: n, per class, binary or graded, results skipped and why, the label source;
- ``out_of_fold``: agreement before (the default) and after on the same items;
- ``training_ranges``: each feature's min / max / mean over the labelled data (the
  refit head: the embeddings' centroid, their lowest cosine to it and the logit range),
  for flagging data far from the labels (``details.in_domain = false``);
- ``judge_examples`` (with a judge configured, `assay.evaluation.calibration_examples`):
  ``kept``, the ``fields`` the judge's prompt reads, the ``examples`` (those fields and
  the ``label``; shown to the judge before each sample when kept), their out-of-fold
  agreement before and after and the judge calls it cost.

Its identity is the sha256 of the file's bytes, first 12 hex digits (`Calibration.hash`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from assay.judge.examples import file_hash, read_examples

__all__ = [
    "EVIDENCE_METHOD",
    "FILE_VERSION",
    "HEAD_METHOD",
    "SCORE_METHOD",
    "Calibration",
    "CalibrationFileError",
    "calibration_hash",
    "load_calibration",
    "write_calibration",
]

#: the file format's version
FILE_VERSION = 1
#: the calibration method that fits the default's score alone (a monotone map)
SCORE_METHOD = "score"
#: the calibration method that fits the metric's evidence
EVIDENCE_METHOD = "evidence"
#: the calibration method that refits the toxicity head on the embeddings
HEAD_METHOD = "toxicity_head_refit"


class CalibrationFileError(ValueError):
    """A calibration file that cannot be used; the message names the file and field."""


def calibration_hash(content: bytes) -> str:
    """The identity of a calibration file: sha256 of its bytes, first 12 hex digits."""
    return file_hash(content)


def write_calibration(data: dict[str, Any], path: str | Path) -> str:
    """Write ``data`` as indented JSON to ``path``; returns its hash."""
    content = (json.dumps(data, indent=2) + "\n").encode("utf-8")
    Path(path).write_bytes(content)
    return calibration_hash(content)


@dataclass(frozen=True)
class Calibration:
    """A loaded calibration file: its ``path``, ``hash``, the ``data`` as read, and the
    model: ``intercept``, ``weights`` and ``feature_names``; ``threshold``."""

    path: str
    hash: str
    data: dict[str, Any]
    intercept: float
    weights: np.ndarray
    feature_names: tuple[str, ...]
    threshold: float

    @property
    def metric(self) -> str:
        return str(self.data["metric"])

    @property
    def method(self) -> str:
        return str(self.data["method"])

    def probabilities(self, features: np.ndarray) -> np.ndarray:
        """``sigmoid(b + w · x)`` per row of features (0..1)."""
        z = self.intercept + np.asarray(features, dtype=np.float64) @ self.weights
        return 1.0 / (1.0 + np.exp(-np.clip(z, -700.0, 700.0)))


def _field(data: dict[str, Any], path: str, key: str, kind: type | tuple[type, ...]) -> Any:
    if key not in data:
        raise CalibrationFileError(f"{path}: field '{key}' is missing")
    value = data[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise CalibrationFileError(
            f"{path}: field '{key}' must be {names}, got {type(value).__name__}"
        )
    return value


def _finite(value: Any, path: str, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise CalibrationFileError(
            f"{path}: field '{where}' must be a finite number, got {value!r}"
        )
    return float(value)


def load_calibration(path: str | Path) -> Calibration:
    """Read and check a calibration file; raises `CalibrationFileError` naming the file
    and the field for a file that is missing, not JSON, of another version or malformed."""
    where = str(path)
    try:
        content = Path(path).read_bytes()
    except OSError as exc:
        raise CalibrationFileError(
            f"{where}: cannot read the calibration file ({exc.strerror})"
        ) from exc
    try:
        data = json.loads(content)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CalibrationFileError(f"{where}: not a JSON calibration file ({exc})") from exc
    if not isinstance(data, dict):
        raise CalibrationFileError(f"{where}: a calibration file is a JSON object")
    version = _field(data, where, "version", int)
    if version != FILE_VERSION:
        raise CalibrationFileError(
            f"{where}: field 'version' is {version}; this Assay reads version {FILE_VERSION}"
        )
    _field(data, where, "metric", str)
    method = _field(data, where, "method", str)
    if method not in (SCORE_METHOD, EVIDENCE_METHOD, HEAD_METHOD):
        raise CalibrationFileError(
            f"{where}: field 'method' must be {SCORE_METHOD}, {EVIDENCE_METHOD} or "
            f"{HEAD_METHOD}, got {method!r}"
        )
    names = _field(data, where, "features", list)
    if not names or not all(isinstance(n, str) for n in names):
        raise CalibrationFileError(f"{where}: field 'features' must be a list of feature names")
    weights = _field(data, where, "weights", dict)
    intercept = _finite(weights.get("intercept"), where, "weights.intercept")
    values = weights.get("weights")
    if not isinstance(values, list) or len(values) != len(names):
        raise CalibrationFileError(
            f"{where}: field 'weights.weights' must list one weight per feature ({len(names)})"
        )
    array = np.array([_finite(v, where, "weights.weights") for v in values], dtype=np.float64)
    threshold = _finite(data.get("threshold"), where, "threshold")
    if not 0.0 <= threshold <= 1.0:
        raise CalibrationFileError(
            f"{where}: field 'threshold' must lie in [0, 1], got {threshold}"
        )
    _field(data, where, "higher_is_better", bool)
    _check_ranges(_field(data, where, "training_ranges", dict), method, names, where)
    if "judge_examples" in data:
        _check_examples(_field(data, where, "judge_examples", dict), where)
    return Calibration(
        path=where,
        hash=calibration_hash(content),
        data=data,
        intercept=intercept,
        weights=array,
        feature_names=tuple(names),
        threshold=threshold,
    )


def _check_ranges(ranges: dict[str, Any], method: str, names: list[str], where: str) -> None:
    if method == HEAD_METHOD:
        centroid = ranges.get("centroid")
        if not isinstance(centroid, list) or len(centroid) != len(names):
            raise CalibrationFileError(
                f"{where}: field 'training_ranges.centroid' must hold {len(names)} numbers"
            )
        _finite(ranges.get("min_cosine"), where, "training_ranges.min_cosine")
        logits = ranges.get("logit")
        if not isinstance(logits, dict):
            raise CalibrationFileError(f"{where}: field 'training_ranges.logit' is missing")
        for end in ("min", "max"):
            _finite(logits.get(end), where, f"training_ranges.logit.{end}")
        return
    for name in names:
        bounds = ranges.get(name)
        if not isinstance(bounds, dict):
            raise CalibrationFileError(f"{where}: field 'training_ranges.{name}' is missing")
        for end in ("min", "max"):
            _finite(bounds.get(end), where, f"training_ranges.{name}.{end}")


def _check_examples(part: dict[str, Any], where: str) -> None:
    """A file's ``judge_examples``: ``kept`` (bool), ``fields`` (names) and ``examples``
    (each those fields and a ``label`` in [0, 1], `read_examples`)."""
    kept = _field(part, f"{where}: judge_examples", "kept", bool)
    fields = part.get("fields")
    if not isinstance(fields, list) or not all(isinstance(f, str) for f in fields):
        raise CalibrationFileError(
            f"{where}: field 'judge_examples.fields' must be a list of field names"
        )
    try:
        examples = read_examples(part.get("examples"), fields, where)
    except ValueError as exc:
        raise CalibrationFileError(str(exc)) from exc
    if kept and not examples:
        raise CalibrationFileError(f"{where}: field 'judge_examples.examples' is empty")
