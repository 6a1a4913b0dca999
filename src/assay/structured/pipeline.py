"""Seed 002's four-phase comparison of an output JSON ("AIO") with its ground truth ("GT").

Phase 0 classifies every field path of the two documents into buckets; phase 1 is
completeness, phase 2 hallucination, phase 3 accuracy over the fields both sides fill
(minus IGNORE), phase 4 the RQS composite. The counts are kept and the scores are pure
functions of them (`completeness_score`, `hallucination_score`, `accuracy_score`,
`rqs_score`).

Nested documents are flattened *jointly* into leaf fields named by dotted paths
(`assay.structured.paths`):

- where both sides hold an object, the comparison descends into the union of their keys
  (``address.city``); where both hold a non-empty array whose elements are all objects, it
  descends by index (``items.0.sku``, ``items.1.sku``; element i is compared with element i,
  so order matters and surplus elements are missing or extra fields);
- where one side holds such a container and the other side lacks the key or holds null,
  the container's leaves are compared against missing/null (the output's
  ``"address": null`` makes every ``address.*`` field of the GT missing, not an extra key);
- everything else is one field compared whole: scalars, arrays of scalars (EXACT: JSON,
  order-sensitive), empty ``{}``/``[]`` (values, not nulls, per the seed), and a type
  mismatch (an object in the GT and a string in the output: one field, wrong under EXACT);
- a path named in the strategy config is one field even when it holds a container
  (``"address": "SEMANTIC"`` compares the whole address object as text);
- ``flatten=False`` keeps the seed's flat behaviour: top-level keys only, nested values
  compared whole.

Both documents are checked first (`assay.structured.values.check_document`): nesting deeper
than the depth limit (``max_json_depth``, default 500; `depth_limit` raises it for a block),
or object keys JSON cannot hold, is a ValueError naming the place; keys of
a Python ``dict`` are matched by their JSON name (``1`` and ``"1"`` are the same field).

A flat document (the seed's case) gives exactly the seed's numbers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from assay.structured.paths import ROOT, WILDCARD, join
from assay.structured.scorers import FieldScorer, as_pair_scores, default_scorer
from assay.structured.strategies import Strategy, StrategyConfig, auto_strategy
from assay.structured.values import (
    as_text,
    canonical,
    check_document,
    detect_type,
    is_null,
    json_safe,
    key_name,
)

__all__ = [
    "BUCKETS",
    "EvalOptions",
    "FieldResult",
    "FlatPair",
    "JsonComparison",
    "JsonEvalResult",
    "KeyClassification",
    "RQSWeights",
    "accuracy_score",
    "classify",
    "compare_json",
    "completeness_score",
    "evaluate_json",
    "evaluate_many",
    "flatten_pair",
    "hallucination_score",
    "rqs_normalized_score",
    "rqs_score",
]

#: bucket names in the order they are reported (seed 002's five, then ``skipped``)
BUCKETS = (
    "gt_non_null",
    "both_non_null",
    "aio_missing_or_null",
    "extra_keys",
    "gt_null_aio_has_value",
    "skipped",
)


# ---- options ------------------------------------------------------------------------
def _check_unit(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"The '{name}' parameter must be a number in [0, 1]. Got {value!r}.")
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"The '{name}' parameter must be in [0, 1]. Got {value!r}.")
    return float(value)


@dataclass(frozen=True, slots=True)
class RQSWeights:
    """Weights of the RQS composite (seed 002 defaults 0.45/0.25/0.15/0.15).

    Each must be a finite number >= 0; they need not sum to 1 (the result is clamped).
    """

    accuracy: float = 0.45
    completeness: float = 0.25
    hallucination: float = 0.15
    safety: float = 0.15

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The weights' names, in declaration order."""
        return tuple(f.name for f in fields(cls))

    def __post_init__(self) -> None:
        for name in self.names():
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or value < 0
            ):
                raise ValueError(
                    f"The RQS weight '{name}' must be a finite number >= 0. Got {value!r}."
                )

    @classmethod
    def coerce(cls, value: RQSWeights | Mapping[str, float] | None) -> RQSWeights:
        if value is None:
            return cls()
        if isinstance(value, RQSWeights):
            return value
        unknown = set(value) - set(cls.names())
        if unknown:
            raise ValueError(
                f"unknown RQS weight(s) {sorted(unknown)}; valid: {', '.join(cls.names())}"
            )
        return cls(**{k: float(v) for k, v in value.items()})

    def to_dict(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in self.names()}


@dataclass(frozen=True, slots=True)
class EvalOptions:
    """Thresholds, RQS weights and the flattening switch of one evaluation."""

    fuzzy_threshold: float = 0.85
    semantic_threshold: float = 0.80
    weights: RQSWeights = field(default_factory=RQSWeights)
    flatten: bool = True

    def __post_init__(self) -> None:
        _check_unit("fuzzy_threshold", self.fuzzy_threshold)
        _check_unit("semantic_threshold", self.semantic_threshold)
        if not isinstance(self.weights, RQSWeights):
            object.__setattr__(self, "weights", RQSWeights.coerce(self.weights))


# ---- phase 0: flatten and classify ------------------------------------------------------
_MISSING: Any = object()


@dataclass(frozen=True, slots=True)
class FlatPair:
    """The leaf fields of both documents (path -> value; a path absent from a side is
    missing there) and, for paths through arrays, the path with indices as ``*``."""

    expected: dict[str, Any]
    output: dict[str, Any]
    generic: dict[str, str]

    def generic_path(self, path: str) -> str:
        return self.generic.get(path, path)


def _container(value: Any) -> str | None:
    if isinstance(value, dict):
        return "object" if value else None
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return "objects"
    return None


def _absent(value: Any) -> bool:
    return value is _MISSING or is_null(value)


def _child(value: Any, key: Any) -> Any:
    """The value under index ``key`` of a list, or how an absent/null parent propagates."""
    if isinstance(value, list):
        return value[key] if key < len(value) else _MISSING
    return value  # _MISSING stays missing, null stays null


def _by_name(value: Any) -> dict[str, Any]:
    """An object's entries keyed by JSON name (keys of a parsed document are already names)."""
    if not isinstance(value, dict):
        return {}
    if all(type(k) is str for k in value):
        return value
    return {key_name(k): v for k, v in value.items()}


def flatten_pair(
    expected: Any,
    output: Any,
    strategies: StrategyConfig | None = None,
    *,
    flatten: bool = True,
) -> FlatPair:
    """Flatten GT and output jointly into leaf fields (see the module docstring).

    Raises ValueError when a document nests too deeply or has keys JSON cannot hold.
    """
    check_document(expected, "expected JSON")
    check_document(output, "output JSON")
    config = strategies or StrategyConfig()
    gt: dict[str, Any] = {}
    out: dict[str, Any] = {}
    generic: dict[str, str] = {}

    def walk(path: str, gpath: str, g: Any, a: Any) -> None:
        if (not path or flatten) and (not path or config.lookup(path) is None):
            kind_g, kind_a = _container(g), _container(a)
            kind = None
            if kind_g and (kind_g == kind_a or _absent(a)):
                kind = kind_g
            elif kind_a and _absent(g):
                kind = kind_a
            if kind == "object":
                g_items, a_items = _by_name(g), _by_name(a)
                names = list(g_items)
                names.extend(k for k in a_items if k not in g_items)
                for name in names:
                    walk(
                        join(path, name),
                        join(gpath, name),
                        g_items.get(name, _MISSING) if isinstance(g, dict) else g,
                        a_items.get(name, _MISSING) if isinstance(a, dict) else a,
                    )
                return
            if kind == "objects":
                size = max(
                    len(g) if isinstance(g, list) else 0, len(a) if isinstance(a, list) else 0
                )
                for i in range(size):
                    walk(
                        join(path, i),
                        f"{gpath}.{WILDCARD}" if gpath else WILDCARD,
                        _child(g, i),
                        _child(a, i),
                    )
                return
        leaf = path or ROOT
        if g is not _MISSING:
            gt[leaf] = g
        if a is not _MISSING:
            out[leaf] = a
        if gpath != path:
            generic[leaf] = gpath

    walk("", "", expected, output)
    return FlatPair(gt, out, generic)


@dataclass(frozen=True, slots=True)
class KeyClassification:
    """Phase 0: every field path in exactly one of ``both_non_null``,
    ``aio_missing_or_null``, ``extra_keys``, ``gt_null_aio_has_value`` and ``skipped``;
    ``gt_non_null`` is ``both_non_null`` + ``aio_missing_or_null`` (seed 002's table).

    ``skipped`` holds the paths that are null in the GT and missing or null in the output
    (no effect on any score). ``all_keys`` is the union, GT order first.
    """

    gt_non_null: tuple[str, ...]
    both_non_null: tuple[str, ...]
    aio_missing_or_null: tuple[str, ...]
    extra_keys: tuple[str, ...]
    gt_null_aio_has_value: tuple[str, ...]
    skipped: tuple[str, ...]
    all_keys: tuple[str, ...]

    @property
    def total_distinct(self) -> int:
        return len(self.all_keys)

    @property
    def hallucination_count(self) -> int:
        return len(self.extra_keys) + len(self.gt_null_aio_has_value)

    def buckets(self) -> dict[str, list[str]]:
        return {name: list(getattr(self, name)) for name in BUCKETS}

    def counts(self) -> dict[str, int]:
        counts = {name: len(getattr(self, name)) for name in BUCKETS}
        counts["total_distinct"] = self.total_distinct
        counts["hallucination_count"] = self.hallucination_count
        return counts


def classify(expected: Mapping[str, Any], output: Mapping[str, Any]) -> KeyClassification:
    """Phase 0 over flattened fields (path -> value)."""
    gt_non_null: list[str] = []
    both: list[str] = []
    missing: list[str] = []
    extra: list[str] = []
    gt_null_has: list[str] = []
    skipped: list[str] = []
    for key, g in expected.items():
        a = output.get(key, _MISSING)
        present = a is not _MISSING and not is_null(a)
        if is_null(g):
            (gt_null_has if present else skipped).append(key)
        else:
            gt_non_null.append(key)
            (both if present else missing).append(key)
    extra = [key for key in output if key not in expected]
    return KeyClassification(
        gt_non_null=tuple(gt_non_null),
        both_non_null=tuple(both),
        aio_missing_or_null=tuple(missing),
        extra_keys=tuple(extra),
        gt_null_aio_has_value=tuple(gt_null_has),
        skipped=tuple(skipped),
        all_keys=(*expected, *extra),
    )


# ---- phases 1-4: scores as pure functions of counts ----------------------------------------
def completeness_score(matched: int, expected: int) -> float:
    """Phase 1: ``both_non_null / gt_non_null``; 1.0 when the GT expects nothing."""
    return 1.0 if expected == 0 else matched / expected


def hallucination_score(count: int, total_distinct: int) -> float:
    """Phase 2: ``(extra_keys + gt_null_aio_has_value) / |GT keys ∪ output keys|``;
    0.0 when both documents are empty."""
    return 0.0 if total_distinct == 0 else count / total_distinct


def accuracy_score(total: float, scorable: int) -> float:
    """Phase 3: ``sum of 0/1 field scores / (both_non_null - IGNORE)``; 1.0 when nothing
    is scorable."""
    return 1.0 if scorable == 0 else total / scorable


def rqs_score(
    accuracy: float,
    completeness: float,
    hallucination: float,
    safety: float = 1.0,
    weights: RQSWeights | None = None,
) -> float:
    """Phase 4: ``clamp(wa·accuracy + wc·completeness + ws·safety − wh·hallucination, 0, 1)``.

    Its ceiling is ``wa + wc + ws`` (0.85 with the default weights), since hallucination
    only subtracts; `rqs_normalized_score` rescales it to 1.0.

    >>> round(rqs_score(1.0, 0.75, 2 / 6), 4)   # seed 002's walkthrough
    0.7375
    """
    w = weights or RQSWeights()
    _check_unit("safety_score", safety)
    value = (
        w.accuracy * accuracy
        + w.completeness * completeness
        + w.safety * safety
        - w.hallucination * hallucination
    )
    # rounded to 12 places so float noise does not show (the walkthrough gives 0.7375,
    # not 0.7374999999999999)
    return round(max(0.0, min(1.0, value)), 12)


def rqs_normalized_score(rqs: float, weights: RQSWeights | None = None) -> float | None:
    """RQS divided by its ceiling ``wa + wc + ws`` (0.85 with the default weights), so a
    perfect document scores 1.0; None when the ceiling is 0."""
    w = weights or RQSWeights()
    ceiling = w.accuracy + w.completeness + w.safety
    return None if ceiling <= 0 else max(0.0, min(1.0, rqs / ceiling))


# ---- results --------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class FieldResult:
    """Phase 3 for one field both sides fill.

    ``similarity`` is what was compared with ``threshold`` (EXACT: 1 or 0, no threshold;
    IGNORE: None); ``score`` is the 0/1 accuracy credit (None for IGNORE). ``source`` is
    ``config`` or ``auto``; ``value_type`` the detected type of the GT value; ``method``
    ``pattern``/``local``/``llm``/``none``; ``scorer`` what computed the similarity.
    ``to_dict`` renders the values JSON-safe (`assay.structured.values.json_safe`).
    """

    field: str
    strategy: Strategy
    source: str
    value_type: str
    expected: Any
    output: Any
    similarity: float | None
    threshold: float | None
    score: float | None
    method: str
    scorer: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "field": self.field,
            "strategy": self.strategy.value,
            "source": self.source,
            "type": self.value_type,
            "expected": json_safe(self.expected),
            "output": json_safe(self.output),
            "similarity": self.similarity,
            "threshold": self.threshold,
            "score": self.score,
            "method": self.method,
            "scorer": self.scorer,
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class JsonComparison:
    """Phases 0-2 (no scorer needed): fields, buckets, completeness, hallucination."""

    flat: FlatPair
    classification: KeyClassification
    completeness: float
    hallucination: float


@dataclass(frozen=True, slots=True)
class JsonEvalResult:
    """All four phases for one document, with the counts and the per-field breakdown."""

    comparison: JsonComparison
    fields: tuple[FieldResult, ...]
    accuracy: float
    rqs: float
    safety_score: float
    options: EvalOptions

    @property
    def classification(self) -> KeyClassification:
        return self.comparison.classification

    @property
    def completeness(self) -> float:
        return self.comparison.completeness

    @property
    def hallucination(self) -> float:
        return self.comparison.hallucination

    @property
    def scorable(self) -> int:
        return sum(1 for f in self.fields if f.score is not None)

    @property
    def correct(self) -> float:
        return sum(f.score for f in self.fields if f.score is not None)

    @property
    def wrong(self) -> tuple[str, ...]:
        return tuple(f.field for f in self.fields if f.score == 0.0)

    @property
    def ignored(self) -> tuple[str, ...]:
        return tuple(f.field for f in self.fields if f.strategy is Strategy.IGNORE)

    @property
    def method(self) -> str:
        """``llm`` if a judge scored any field, ``local`` if a local model did, else
        ``pattern``."""
        methods = {f.method for f in self.fields}
        for candidate in ("llm", "local"):
            if candidate in methods:
                return candidate
        return "pattern"

    @property
    def rqs_normalized(self) -> float | None:
        return rqs_normalized_score(self.rqs, self.options.weights)

    def scores(self) -> dict[str, float]:
        return {
            "completeness": self.completeness,
            "hallucination": self.hallucination,
            "accuracy": self.accuracy,
            "rqs": self.rqs,
        }

    def to_dict(self) -> dict[str, Any]:
        """The breakdown: scores, counts, buckets, per-field results, settings."""
        counts = self.classification.counts()
        counts.update(scorable=self.scorable, ignored=len(self.ignored), correct=self.correct)
        return {
            **self.scores(),
            "rqs_normalized": self.rqs_normalized,
            "safety_score": self.safety_score,
            "method": self.method,
            "counts": counts,
            "buckets": {**self.classification.buckets(), "wrong": list(self.wrong)},
            "fields": [f.to_dict() for f in self.fields],
            "weights": self.options.weights.to_dict(),
            "thresholds": {
                "fuzzy": self.options.fuzzy_threshold,
                "semantic": self.options.semantic_threshold,
            },
        }


# ---- the pipeline ---------------------------------------------------------------------
def compare_json(
    expected: Any,
    output: Any,
    strategies: StrategyConfig | Mapping[str, Any] | None = None,
    *,
    flatten: bool = True,
) -> JsonComparison:
    """Phases 0-2 for one document pair."""
    config = StrategyConfig.coerce(strategies)
    flat = flatten_pair(expected, output, config, flatten=flatten)
    cls = classify(flat.expected, flat.output)
    return JsonComparison(
        flat=flat,
        classification=cls,
        completeness=completeness_score(len(cls.both_non_null), len(cls.gt_non_null)),
        hallucination=hallucination_score(cls.hallucination_count, cls.total_distinct),
    )


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(slots=True)
class _Pending:
    """A FUZZY/SEMANTIC field waiting for the scorer: where its result goes."""

    doc: int
    slot: int
    field: str
    strategy: Strategy
    source: str
    value_type: str
    expected: Any
    output: Any


def _plan(
    doc: int, comp: JsonComparison, config: StrategyConfig, pending: list[_Pending]
) -> list[FieldResult | None]:
    """Phase 3 for one document: EXACT and IGNORE settled now, FUZZY/SEMANTIC queued
    (their slots stay None until the scorer answers)."""
    row: list[FieldResult | None] = []
    flat = comp.flat
    for path in comp.classification.both_non_null:
        g, a = flat.expected[path], flat.output[path]
        value_type = detect_type(g)
        configured = config.lookup(path)
        strategy = configured or auto_strategy(value_type)
        source = "config" if configured else "auto"
        common = {
            "field": path,
            "strategy": strategy,
            "source": source,
            "value_type": value_type,
            "expected": g,
            "output": a,
        }
        if strategy is Strategy.EXACT:
            cg, ca = canonical(g), canonical(a)
            score = 1.0 if cg == ca else 0.0
            reason = (
                "EXACT: equal (case-insensitive)"
                if score
                else f"EXACT: {_short(cg)!r} != {_short(ca)!r}"
            )
            row.append(
                FieldResult(
                    **common,
                    similarity=score,
                    threshold=None,
                    score=score,
                    method="pattern",
                    scorer="exact",
                    reason=reason,
                )
            )
        elif strategy is Strategy.IGNORE:
            row.append(
                FieldResult(
                    **common,
                    similarity=None,
                    threshold=None,
                    score=None,
                    method="none",
                    scorer="none",
                    reason="IGNORE: left out of accuracy",
                )
            )
        else:
            pending.append(_Pending(doc, len(row), **common))
            row.append(None)
    return row


def _score_pending(
    pending: list[_Pending],
    strategy: Strategy,
    threshold: float,
    scorer: FieldScorer,
    rows: list[list[FieldResult | None]],
) -> None:
    """One scorer call for every queued field of one strategy; fills their slots."""
    call = "fuzzy" if strategy is Strategy.FUZZY else "semantic"
    pairs = [(as_text(p.expected), as_text(p.output)) for p in pending]
    scored = as_pair_scores(scorer, call, getattr(scorer, call)(pairs), len(pairs))
    for p, s in zip(pending, scored, strict=True):
        ok = s.score >= threshold
        reason = f"{strategy.value}: {s.score:.3f} {'>=' if ok else '<'} {threshold:g} ({s.scorer})"
        if s.reason:
            reason += f": {s.reason}"
        rows[p.doc][p.slot] = FieldResult(
            field=p.field,
            strategy=strategy,
            source=p.source,
            value_type=p.value_type,
            expected=p.expected,
            output=p.output,
            similarity=s.score,
            threshold=threshold,
            score=1.0 if ok else 0.0,
            method=s.method,
            scorer=s.scorer,
            reason=reason,
        )


def evaluate_many(
    documents: Sequence[tuple[Any, Any]],
    strategies: StrategyConfig | Mapping[str, Any] | None = None,
    *,
    options: EvalOptions | None = None,
    scorer: FieldScorer | None = None,
    safety_scores: float | Sequence[float] = 1.0,
) -> list[JsonEvalResult]:
    """All four phases for many (GT, output) pairs; every FUZZY pair of the batch goes to
    the scorer in one call, and every SEMANTIC pair in another."""
    opts = options or EvalOptions()
    config = StrategyConfig.coerce(strategies)
    if isinstance(safety_scores, int | float):
        safeties = [float(safety_scores)] * len(documents)
    else:
        safeties = [float(s) for s in safety_scores]
        if len(safeties) != len(documents):
            raise ValueError("safety_scores needs one value per document")
    for s in safeties:
        _check_unit("safety_score", s)

    comparisons = [compare_json(g, a, config, flatten=opts.flatten) for g, a in documents]
    pending: list[_Pending] = []
    rows = [_plan(d, comp, config, pending) for d, comp in enumerate(comparisons)]
    for strategy, threshold in (
        (Strategy.FUZZY, opts.fuzzy_threshold),
        (Strategy.SEMANTIC, opts.semantic_threshold),
    ):
        queued = [p for p in pending if p.strategy is strategy]
        if queued:
            scorer = scorer or default_scorer()
            _score_pending(queued, strategy, threshold, scorer, rows)

    results = []
    for comp, row, safety in zip(comparisons, rows, safeties, strict=True):
        fields = tuple(f for f in row if f is not None)
        scored = [f.score for f in fields if f.score is not None]
        accuracy = accuracy_score(sum(scored), len(scored))
        rqs = rqs_score(accuracy, comp.completeness, comp.hallucination, safety, opts.weights)
        results.append(JsonEvalResult(comp, fields, accuracy, rqs, safety, opts))
    return results


def evaluate_json(
    expected: Any,
    output: Any,
    strategies: StrategyConfig | Mapping[str, Any] | None = None,
    *,
    options: EvalOptions | None = None,
    scorer: FieldScorer | None = None,
    safety_score: float = 1.0,
) -> JsonEvalResult:
    """All four phases for one (GT, output) pair.

    >>> gt = {"name": "Ann", "age": 30, "city": "Oslo"}
    >>> result = evaluate_json(gt, {"name": "ann", "age": 31, "zip": "0150"})
    >>> result.completeness, round(result.hallucination, 3), result.accuracy
    (0.6666666666666666, 0.25, 0.5)
    """
    return evaluate_many(
        [(expected, output)],
        strategies,
        options=options,
        scorer=scorer,
        safety_scores=safety_score,
    )[0]
