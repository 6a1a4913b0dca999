"""A person's verdict on a sample, as a number: what a label may be and how it is read.

A label is the value a person would give the metric, in the metric's own direction (1 =
faithful for ``faithfulness``, 1 = toxic for ``toxicity_score``), normalised to [0, 1]:

- a boolean: ``true`` -> 1.0, ``false`` -> 0.0; the texts ``"true"``, ``"false"``,
  ``"yes"``, ``"no"`` (any case) likewise;
- a number (or the text of one) in [0, 1]: itself (``0``/``1`` for a binary verdict, a
  fraction for a graded one);
- with a declared `LabelScale` (``--label-scale 1-5``): a rating ``x`` in ``[low, high]``,
  mapped to ``(x - low) / (high - low)``, e.g. 4 on 1-5 -> (4 - 1) / (5 - 1) = 0.75.

Anything else (null, NaN, infinity, 3 without a scale, ``"maybe"``, a list, an object)
raises `LabelError`, whose message names the field and the value. `assay.core.labels`
is the public face of this module; `assay.core.sample` reads its ``label`` and ``labels``
fields through it (this module imports no other part of Assay, so the sample can).
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "LABEL_COLUMNS",
    "LabelError",
    "LabelScale",
    "is_binary",
    "label_value",
    "metric_labels",
    "number_text",
]

#: the file columns that name a sample's one verdict (the ``label`` field and its aliases)
LABEL_COLUMNS = ("label", "human_label", "human_score", "rating")

_TRUE = frozenset({"true", "yes"})
_FALSE = frozenset({"false", "no"})
_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)"
_SCALE = re.compile(rf"\s*({_NUMBER})\s*(?:-|–|\.\.|to)\s*({_NUMBER})\s*")
#: what a label may be, for messages
ACCEPTED = "true/false, yes/no, 1/0, a score in [0, 1], or a rating on a declared scale"


class LabelError(ValueError):
    """A value that is not a label. ``field`` and ``value`` are what was given;
    ``reason`` says why without naming the field (a reader's error names it with the
    file and line); ``str()`` is ``"<field>: <reason>"``."""

    def __init__(self, reason: str, *, field: str = "label", value: Any = None) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.value = value
        self.reason = reason


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def number_text(value: float) -> str:
    """A number as a label's text: ``4.0`` -> ``"4"``, ``0.5`` -> ``"0.5"``."""
    value = float(value)
    return str(int(value)) if value.is_integer() else repr(value)


@dataclass(frozen=True)
class LabelScale:
    """A declared rating scale ``[low, high]`` (``"1-5"``): a rating ``x`` on it is the
    label ``(x - low) / (high - low)``, in [0, 1]; ``low`` < ``high``, both finite."""

    low: float
    high: float

    def __post_init__(self) -> None:
        if not (math.isfinite(self.low) and math.isfinite(self.high)) or self.low >= self.high:
            raise LabelError(
                f"a scale needs finite bounds, the lower first (got {self.low}-{self.high})",
                field="label scale",
                value=(self.low, self.high),
            )

    @classmethod
    def parse(cls, text: str) -> LabelScale:
        """``"1-5"``, ``"0-10"``, ``"1..7"``, ``"1 to 5"``; `LabelError` otherwise."""
        match = _SCALE.fullmatch(text) if isinstance(text, str) else None
        if match is None:
            raise LabelError(
                f"{_shown(text)} is not a scale: write its lowest and highest rating, "
                "e.g. 1-5 or 0-10",
                field="label scale",
                value=text,
            )
        return cls(float(match.group(1)), float(match.group(2)))

    def __str__(self) -> str:
        return f"{number_text(self.low)}-{number_text(self.high)}"

    def normalise(self, rating: float, field: str = "label") -> float:
        """``(rating - low) / (high - low)``; `LabelError` outside ``[low, high]``."""
        if not self.low <= rating <= self.high:
            raise LabelError(
                f"{number_text(rating)} is outside the scale {self}",
                field=field,
                value=rating,
            )
        return (rating - self.low) / (self.high - self.low)


def _as_number(raw: Any, field: str) -> float | None:
    """The number ``raw`` is or spells (infinity for an integer too large for a float),
    None for a text that is not a number; `LabelError` for a list, an object or another
    kind of value."""
    if isinstance(raw, str):
        try:
            return float(raw.strip())
        except ValueError:
            return None
    if isinstance(raw, numbers.Real):  # int, float, numpy's numbers, Fraction
        try:
            return float(raw)
        except OverflowError:  # an integer past the float range
            return math.inf
    kind = "an object" if isinstance(raw, dict) else f"a {type(raw).__name__}"
    if isinstance(raw, list | tuple):
        kind = "a list"
    raise LabelError(
        f"{kind} is not a label: give one verdict ({ACCEPTED}); a verdict per metric goes "
        'in "labels": {"metric": value}',
        field=field,
        value=raw,
    )


def label_value(raw: object, scale: LabelScale | None = None, *, field: str = "label") -> float:
    """The label in [0, 1] that ``raw`` gives (module docstring: bools, 0/1, scores in
    [0, 1], ratings on ``scale``, and their texts); `LabelError` naming ``field`` and the
    value for anything else. With a scale, every number is a rating on it (a bool or
    yes/no is still 1.0/0.0)."""
    if raw is None:
        raise LabelError(f"null is not a label ({ACCEPTED})", field=field, value=raw)
    if isinstance(raw, bool):
        return 1.0 if raw else 0.0
    if isinstance(raw, str):
        word = raw.strip().lower()
        if word in _TRUE:
            return 1.0
        if word in _FALSE:
            return 0.0
    number = _as_number(raw, field)
    if number is None:
        raise LabelError(f"{_shown(raw)} is not a label ({ACCEPTED})", field=field, value=raw)
    if not math.isfinite(number):
        raise LabelError(f"{_shown(raw)} is not a finite number", field=field, value=raw)
    if scale is not None:
        return scale.normalise(number, field)
    if not 0.0 <= number <= 1.0:
        raise LabelError(
            f"{number_text(number)} is outside [0, 1]: a rating needs its scale, e.g. "
            "--label-scale 1-5",
            field=field,
            value=raw,
        )
    return number


def metric_labels(
    raw: object, scale: LabelScale | None = None, *, field: str = "labels"
) -> dict[str, float]:
    """A ``labels`` object ``{"metric": verdict, ...}`` with each verdict read by
    `label_value` (a null verdict leaves its metric out); `LabelError` naming
    ``labels.<metric>`` for a bad verdict, or ``labels`` when it is not an object."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise LabelError(
            f"{_shown(raw)} is not an object of verdicts per metric, e.g. "
            '{"faithfulness": 1, "toxicity_score": 0}',
            field=field,
            value=raw,
        )
    out: dict[str, float] = {}
    for metric, verdict in raw.items():
        if not isinstance(metric, str) or not metric.strip():
            raise LabelError(f"{_shown(metric)} is not a metric name", field=field, value=metric)
        if verdict is not None:
            out[metric.strip()] = label_value(verdict, scale, field=f"{field}.{metric}")
    return out


def is_binary(values: Sequence[float]) -> bool:
    """Whether every value is 0.0 or 1.0 (binary verdicts; true for no values)."""
    return all(v == 0.0 or v == 1.0 for v in values)
