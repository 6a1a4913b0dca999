"""The JSON specification's four-phase comparison of an output JSON ("AIO") with its ground
truth ("GT").

Phase 0 classifies every field path of the two documents into buckets; phase 1 is
completeness, phase 2 hallucination, phase 3 accuracy over the fields both sides fill
(minus IGNORE), phase 4 the RQS composite. The counts are kept and the scores are pure
functions of them (`completeness_score`, `hallucination_score`, `accuracy_score`,
`rqs_score`).

Phase 0 (the joint flattening of nested documents and the buckets) is in
`assay.structured.flatten`.

A flat document (the specification's case) gives exactly the specification's numbers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from assay.core.json_documents import json_safe
from assay.structured.flatten import (
    FlatPair,
    KeyClassification,
    classify,
    flatten_pair,
)
from assay.structured.numeric import (
    DEFAULT_ABS_TOL,
    DEFAULT_REL_TOL,
    check_tolerance,
    numeric_match,
)
from assay.structured.scorers import FieldScorer, as_pair_scores, default_scorer
from assay.structured.strategies import Strategy, StrategyConfig, auto_strategy
from assay.structured.values import as_text, canonical, detect_type

__all__ = [
    "EvalOptions",
    "FieldResult",
    "JsonComparison",
    "JsonEvalResult",
    "RQSWeights",
    "accuracy_score",
    "compare_json",
    "completeness_score",
    "evaluate_json",
    "evaluate_many",
    "hallucination_score",
    "rqs_normalized_score",
    "rqs_score",
    "scorer_pairs",
]


# ---- options ------------------------------------------------------------------------
def _check_unit(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"The '{name}' parameter must be a number in [0, 1]. Got {value!r}.")
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"The '{name}' parameter must be in [0, 1]. Got {value!r}.")
    return float(value)


@dataclass(frozen=True, slots=True)
class RQSWeights:
    """Weights of the RQS composite (JSON specification defaults 0.45/0.25/0.15/0.15).

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
    """Thresholds, NUMERIC tolerances, RQS weights and the flattening switch of one
    evaluation. The tolerances (each a finite number >= 0) are NUMERIC's
    ``|a − b| <= max(numeric_abs_tol, numeric_rel_tol·|b|)``; their defaults are explained
    in `assay.structured.numeric`."""

    fuzzy_threshold: float = 0.85
    semantic_threshold: float = 0.80
    weights: RQSWeights = field(default_factory=RQSWeights)
    flatten: bool = True
    numeric_rel_tol: float = DEFAULT_REL_TOL
    numeric_abs_tol: float = DEFAULT_ABS_TOL

    def __post_init__(self) -> None:
        _check_unit("fuzzy_threshold", self.fuzzy_threshold)
        _check_unit("semantic_threshold", self.semantic_threshold)
        object.__setattr__(
            self, "numeric_rel_tol", check_tolerance("numeric_rel_tol", self.numeric_rel_tol)
        )
        object.__setattr__(
            self, "numeric_abs_tol", check_tolerance("numeric_abs_tol", self.numeric_abs_tol)
        )
        if not isinstance(self.weights, RQSWeights):
            object.__setattr__(self, "weights", RQSWeights.coerce(self.weights))


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

    >>> round(rqs_score(1.0, 0.75, 2 / 6), 4)   # the JSON specification's walkthrough
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

    ``similarity`` is what was compared with ``threshold`` (EXACT, NUMERIC: 1 or 0, no
    threshold, NUMERIC's tolerance is in ``reason``;
    IGNORE: None); ``score`` is the 0/1 accuracy credit (None for IGNORE). ``source`` is
    ``config`` or ``auto``; ``value_type`` the detected type of the GT value; ``method``
    ``pattern``/``local``/``llm``/``none``; ``scorer`` what computed the similarity.
    ``to_dict`` renders the values JSON-safe (`assay.core.json_documents.json_safe`).
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
            "numeric_tolerance": {
                "rel_tol": self.options.numeric_rel_tol,
                "abs_tol": self.options.numeric_abs_tol,
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


def _field_strategy(path: str, value: Any, config: StrategyConfig) -> tuple[str, Strategy, str]:
    """The detected type of a field's GT value, its strategy and where the strategy came
    from (``config`` or ``auto``)."""
    value_type = detect_type(value)
    configured = config.lookup(path)
    return value_type, configured or auto_strategy(value_type), "config" if configured else "auto"


def scorer_pairs(
    documents: Sequence[tuple[Any, Any]],
    strategies: StrategyConfig | Mapping[str, Any] | None = None,
    *,
    options: EvalOptions | None = None,
    strategy: Strategy = Strategy.SEMANTIC,
) -> list[tuple[str, str]]:
    """The (expected, output) text pairs that `evaluate_many` hands the scorer for
    ``strategy`` (FUZZY or SEMANTIC) on these documents, in its order, without scoring
    anything: phase 0 and each field's strategy only. The metrics plan their embed asks
    from the SEMANTIC pairs (`assay.structured.scorers.semantic_asks`), so the engine
    embeds them with the chunk's other texts before the comparison reads them.

    Raises ValueError as `evaluate_many` does (a document nested too deeply, keys JSON
    cannot hold)."""
    opts = options or EvalOptions()
    config = StrategyConfig.coerce(strategies)
    pairs: list[tuple[str, str]] = []
    for g, a in documents:
        comp = compare_json(g, a, config, flatten=opts.flatten)
        flat = comp.flat
        for path in comp.classification.both_non_null:
            if _field_strategy(path, flat.expected[path], config)[1] is strategy:
                pairs.append((as_text(flat.expected[path]), as_text(flat.output[path])))
    return pairs


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
    doc: int,
    comp: JsonComparison,
    config: StrategyConfig,
    pending: list[_Pending],
    opts: EvalOptions,
) -> list[FieldResult | None]:
    """Phase 3 for one document: EXACT, NUMERIC and IGNORE settled now, FUZZY/SEMANTIC
    queued (their slots stay None until the scorer answers)."""
    row: list[FieldResult | None] = []
    flat = comp.flat
    for path in comp.classification.both_non_null:
        g, a = flat.expected[path], flat.output[path]
        value_type, strategy, source = _field_strategy(path, g, config)
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
        elif strategy is Strategy.NUMERIC:
            score, reason = numeric_match(g, a, opts.numeric_rel_tol, opts.numeric_abs_tol)
            row.append(
                FieldResult(
                    **common,
                    similarity=score,
                    threshold=None,
                    score=score,
                    method="pattern",
                    scorer="numeric",
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
    rows = [_plan(d, comp, config, pending, opts) for d, comp in enumerate(comparisons)]
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
