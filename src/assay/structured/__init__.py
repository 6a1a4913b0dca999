"""Structured-output evaluation: a JSON output compared with its ground-truth JSON (JSON
specification).

The four phases (key classification, completeness, hallucination, accuracy with per-field
strategies) and the RQS composite, for one document (`evaluate_json`) or a batch
(`evaluate_many`, `evaluate_pairs`), with per-field aggregates across a batch
(`field_aggregates`). The metrics ``json_completeness``, ``json_hallucination``,
``json_accuracy`` and ``rqs`` (`assay.metrics.structured`) and the ``assay json-eval``
command are thin layers over these functions. See docs/structured.md.

>>> from assay.structured import evaluate_json
>>> r = evaluate_json({"id": 7, "tags": ["a", "b"]}, {"id": 7, "tags": ["a", "b"], "x": 1})
>>> r.completeness, r.hallucination, r.accuracy
(1.0, 0.3333333333333333, 1.0)
"""

from __future__ import annotations

from assay.structured.batch import (
    DocPair,
    DocResult,
    FieldAggregate,
    evaluate_pairs,
    field_aggregates,
    load_pairs,
)
from assay.structured.flatten import BUCKETS, FlatPair, KeyClassification, classify, flatten_pair
from assay.structured.numeric import numeric_match
from assay.structured.pipeline import (
    EvalOptions,
    FieldResult,
    JsonComparison,
    JsonEvalResult,
    RQSWeights,
    accuracy_score,
    compare_json,
    completeness_score,
    evaluate_json,
    evaluate_many,
    hallucination_score,
    rqs_normalized_score,
    rqs_score,
)
from assay.structured.scorers import FieldScorer, LocalFieldScorer, PairScore, default_scorer
from assay.structured.strategies import (
    AUTO_STRATEGY,
    Strategy,
    StrategyConfig,
    StrategyConfigError,
    auto_strategy,
)
from assay.structured.values import VALUE_TYPES, canonical, detect_type, is_null

__all__ = [
    "AUTO_STRATEGY",
    "BUCKETS",
    "VALUE_TYPES",
    "DocPair",
    "DocResult",
    "EvalOptions",
    "FieldAggregate",
    "FieldResult",
    "FieldScorer",
    "FlatPair",
    "JsonComparison",
    "JsonEvalResult",
    "KeyClassification",
    "LocalFieldScorer",
    "PairScore",
    "RQSWeights",
    "Strategy",
    "StrategyConfig",
    "StrategyConfigError",
    "accuracy_score",
    "auto_strategy",
    "canonical",
    "classify",
    "compare_json",
    "completeness_score",
    "default_scorer",
    "detect_config",
    "detect_type",
    "evaluate_json",
    "evaluate_many",
    "evaluate_pairs",
    "field_aggregates",
    "flatten_pair",
    "hallucination_score",
    "is_null",
    "load_pairs",
    "numeric_match",
    "rqs_normalized_score",
    "rqs_score",
]


def detect_config(document: object, *, flatten: bool = True) -> StrategyConfig:
    """A starting config: the auto-detected strategy of every non-null field of a
    ground-truth document, array elements pooled as ``*`` (what
    ``assay json-strategies export --from-doc`` writes)."""
    flat = flatten_pair(document, None, flatten=flatten)
    found: dict[str, Strategy] = {}
    for path, value in flat.expected.items():
        if not is_null(value):
            found.setdefault(flat.generic_path(path), auto_strategy(detect_type(value)))
    return StrategyConfig(found)
