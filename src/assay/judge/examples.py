"""A judge's few-shot examples chosen from a team's labelled samples (``assay calibrate``).

A `LabelledExample` is a labelled sample as a judge prompt reads it: the values of the
prompt's data blocks (``query``, ``contexts``, ``response``...) and the person's label in
[0, 1], in the metric's direction. `Prompt.with_examples` (`assay.judge.prompts`) shows
them to the judge before the sample, each block escaped exactly as the sample's own.

`choose_examples` picks ``k`` of them from the labelled samples:

- binary labels: balanced between the classes (``k // 2`` of each, the odd one from the
  larger class); graded labels: spread over the scale (the samples nearest ``k`` points
  evenly spaced from the lowest label to the highest);
- within a class, the samples the plain judge got most wrong first (``|value - label|``
  of a first pass, when given), ties and the rest in a seeded random order.

A calibration file keeps them under ``judge_examples`` (`examples_payload`); a run whose
``calibration`` setting names that file shows them to the judge (`examples_in_files`).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "DEFAULT_EXAMPLES",
    "JudgeExamples",
    "LabelledExample",
    "choose_examples",
    "examples_in_files",
    "examples_payload",
    "file_hash",
    "read_examples",
]

#: how many examples ``assay calibrate`` chooses by default (``--examples``)
DEFAULT_EXAMPLES = 4


@dataclass(frozen=True)
class LabelledExample:
    """One labelled sample as the judge sees it: ``values`` (block name, text or list of
    texts), in the prompt's block order, and the person's ``label`` in [0, 1]."""

    values: tuple[tuple[str, str | tuple[str, ...]], ...]
    label: float

    @classmethod
    def of(cls, values: Mapping[str, Any], label: float) -> LabelledExample:
        """An example from block values (None and empty values left out)."""
        kept: list[tuple[str, str | tuple[str, ...]]] = []
        for name, value in values.items():
            if value is None or (not isinstance(value, str) and len(value) == 0):
                continue
            kept.append((name, value if isinstance(value, str) else tuple(map(str, value))))
        return cls(tuple(kept), float(label))

    def as_dict(self) -> dict[str, Any]:
        return {
            **{k: v if isinstance(v, str) else list(v) for k, v in self.values},
            "label": self.label,
        }


@dataclass(frozen=True)
class JudgeExamples:
    """The examples a metric's judge prompt carries and the calibration file they came
    from (``source``: its hash, 12 hex digits; None for examples given directly)."""

    items: tuple[LabelledExample, ...]
    source: str | None = None


def file_hash(content: bytes) -> str:
    """The identity of a calibration file: sha256 of its bytes, first 12 hex digits."""
    return hashlib.sha256(content).hexdigest()[:12]


def choose_examples(
    labels: Sequence[float],
    k: int,
    *,
    seed: int = 0,
    first_pass: Sequence[float | None] | None = None,
) -> list[int]:
    """The positions (into ``labels``) of the ``k`` examples to show the judge.

    Binary labels (all 0 or 1): ``k // 2`` of each class and the odd one from the larger,
    fewer when a class has fewer. Graded labels: per j = 0..k-1 the sample whose label is
    nearest ``lo + j (hi - lo) / (k - 1)`` (k points evenly spread from the lowest label
    to the highest), each sample once. Within that
    rule, a sample with a larger ``|first_pass - label|`` (the plain judge's error) comes
    first; the order is otherwise a random permutation seeded with ``seed``."""
    y = np.asarray(labels, dtype=np.float64)
    n = len(y)
    if k <= 0 or n == 0:
        return []
    rank = np.random.default_rng(seed).permutation(n).astype(np.float64) / max(n, 1)
    error = np.zeros(n)
    if first_pass is not None:
        error = np.array(
            [abs(v - t) if v is not None else 0.0 for v, t in zip(first_pass, y, strict=True)]
        )
    # sort key: the largest error first, then the seeded order
    order = sorted(range(n), key=lambda i: (-round(float(error[i]), 9), rank[i]))
    place = {i: p for p, i in enumerate(order)}
    if np.all((y == 0.0) | (y == 1.0)):
        ones = [i for i in order if y[i] == 1.0]
        zeros = [i for i in order if y[i] == 0.0]
        take_one = min(len(ones), k // 2 + (k % 2 if len(ones) >= len(zeros) else 0))
        take_zero = min(len(zeros), k - take_one)
        take_one = min(len(ones), k - take_zero)  # a short class leaves its share to the other
        return sorted(ones[:take_one] + zeros[:take_zero], key=place.__getitem__)
    targets = np.linspace(y.min(), y.max(), k) if k > 1 else [float(np.median(y))]
    picked = []
    for target in targets:
        free = [i for i in order if i not in picked]
        if not free:
            break
        picked.append(min(free, key=lambda i: (abs(y[i] - target), place[i])))
    return picked


def examples_payload(
    examples: Sequence[LabelledExample], fields: Sequence[str]
) -> list[dict[str, Any]]:
    """The examples as the calibration file keeps them: each the sample's ``fields`` the
    prompt reads and its ``label``."""
    return [{f: dict(e.values).get(f) for f in fields} | {"label": e.label} for e in examples]


def read_examples(raw: Any, fields: Sequence[str], where: str) -> tuple[LabelledExample, ...]:
    """The examples of a calibration file's ``judge_examples.examples`` list; raises
    ValueError naming ``where`` (the file) and the field for a malformed one."""
    if not isinstance(raw, list):
        raise ValueError(f"{where}: field 'judge_examples.examples' must be a list")
    out = []
    for j, item in enumerate(raw):
        at = f"{where}: field 'judge_examples.examples[{j}]"
        if not isinstance(item, dict):
            raise ValueError(f"{at}' must be an object")
        label = item.get("label")
        if (
            isinstance(label, bool)
            or not isinstance(label, int | float)
            or not math.isfinite(label)
            or not 0.0 <= label <= 1.0
        ):
            raise ValueError(f"{at}.label' must be a number in [0, 1], got {label!r}")
        values: dict[str, Any] = {}
        for name in fields:
            value = item.get(name)
            ok = value is None or isinstance(value, str)
            ok = ok or (isinstance(value, list) and all(isinstance(v, str) for v in value))
            if not ok:
                raise ValueError(f"{at}.{name}' must be a text or a list of texts")
            values[name] = value
        out.append(LabelledExample.of(values, float(label)))
    return tuple(out)


@lru_cache(maxsize=64)
def _examples_of_file(path: str, stamp: tuple[int, int], metric: str) -> JudgeExamples | None:
    content = Path(path).read_bytes()
    data = json.loads(content)
    if not isinstance(data, dict) or data.get("metric") != metric:
        return None
    part = data.get("judge_examples")
    if not isinstance(part, dict) or not part.get("kept"):
        return None
    fields = part.get("fields")
    if not isinstance(fields, list) or not all(isinstance(f, str) for f in fields):
        raise ValueError(f"{path}: field 'judge_examples.fields' must be a list of field names")
    items = read_examples(part.get("examples"), fields, path)
    return JudgeExamples(items, file_hash(content)) if items else None


def examples_in_files(paths: Sequence[str], metric: str) -> JudgeExamples | None:
    """The judge examples the calibration files at ``paths`` keep for ``metric`` (None
    when none does, or its examples were not kept). Read once per file version."""
    for path in paths:
        stat = Path(path).stat()
        found = _examples_of_file(str(path), (stat.st_mtime_ns, stat.st_size), metric)
        if found is not None:
            return found
    return None
