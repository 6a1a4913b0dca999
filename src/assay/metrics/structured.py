"""Structured-output metrics: a JSON output vs its ground-truth JSON (JSON specification).

Thin layers over `assay.structured`: each metric reads ``Sample.expected_json`` (aliases
``ground_truth_json``, ``gt_json``) and ``Sample.output_json`` (``aio_json``,
``extracted_json``); a value may be a parsed JSON value or a string holding JSON. A
sample may carry its own field strategies as ``field_strategies`` (kept in its metadata),
which override the metric's ``strategies`` for that sample; and its RQS safety input as
``safety_score``.

The JSON specification names its scores completeness, hallucination and accuracy; here they
are ``json_completeness``, ``json_hallucination`` and ``json_accuracy`` because the plain
names ``completeness`` and ``relevance`` belong to the pipeline specification's text
pipeline. ``rqs`` keeps the specification's name.

The phase 3-4 metrics plan the embed asks of their SEMANTIC fields (`assay.engine`: the
texts of the pairs `assay.structured.pipeline.scorer_pairs` gives, `semantic_asks`), so
a run embeds them once with the chunk's other texts and the local scorer reads the
vectors from the answers.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from assay.core.config import AssayConfig
from assay.core.json_documents import check_document, depth_limit
from assay.core.result import MetricResult
from assay.core.sample import Sample
from assay.engine import Answers, Ask, answered, execute
from assay.engine.resources import Resources
from assay.metrics.base import Metric, Source
from assay.metrics.registry import register
from assay.structured.batch import unreadable_json
from assay.structured.numeric import DEFAULT_ABS_TOL, DEFAULT_REL_TOL
from assay.structured.pipeline import (
    EvalOptions,
    JsonComparison,
    JsonEvalResult,
    RQSWeights,
    compare_json,
    evaluate_many,
    scorer_pairs,
)
from assay.structured.scorers import FieldScorer, default_scorer, semantic_asks
from assay.structured.strategies import Strategy, StrategyConfig, StrategyConfigError

__all__ = [
    "JsonAccuracy",
    "JsonCompleteness",
    "JsonHallucination",
    "NormalizedResponseQualityScore",
    "ResponseQualityScore",
]

_INPUTS = ("expected_json", "output_json")


def _document(value: Any, field: str) -> tuple[Any, str | None]:
    """The JSON value of a Sample field (strings are parsed), or why it is unusable."""
    if isinstance(value, str):
        try:
            return json.loads(value), None
        except json.JSONDecodeError as exc:
            return (
                None,
                f"{field} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})",
            )
        except (ValueError, RecursionError) as exc:  # a 4,300+ digit number, deep nesting
            return None, f"{field}: {unreadable_json(exc)}"
    return value, None


class _StructuredMetric(Metric):
    """Shared parameters and input handling of the JSON specification metrics."""

    family = "structured"
    requires = _INPUTS
    suites = ("structured",)
    source = Source.JSON_COMPARISON
    scored: ClassVar[bool] = False  # True: phase 3 (needs a field scorer)

    def __init__(
        self,
        strategies: StrategyConfig | Mapping[str, Any] | str | Path | None = None,
        *,
        fuzzy_threshold: float = 0.85,
        semantic_threshold: float = 0.80,
        weights: RQSWeights | Mapping[str, float] | None = None,
        safety_score: float = 1.0,
        flatten: bool = True,
        scorer: FieldScorer | None = None,
        numeric_rel_tol: float = DEFAULT_REL_TOL,
        numeric_abs_tol: float = DEFAULT_ABS_TOL,
    ) -> None:
        self.strategies = StrategyConfig.coerce(strategies)
        self.options = EvalOptions(
            fuzzy_threshold=fuzzy_threshold,
            semantic_threshold=semantic_threshold,
            weights=RQSWeights.coerce(weights),
            flatten=flatten,
            numeric_rel_tol=numeric_rel_tol,
            numeric_abs_tol=numeric_abs_tol,
        )
        if isinstance(safety_score, bool) or not 0.0 <= float(safety_score) <= 1.0:
            raise ValueError(
                f"The 'safety_score' parameter must be in [0, 1]. Got {safety_score!r}."
            )
        self.safety_score = float(safety_score)
        self.scorer = scorer

    def params(self) -> dict[str, Any]:
        params: dict[str, Any] = {}
        if self.strategies:
            params["strategies"] = json.dumps(self.strategies.to_dict(), sort_keys=True)
        if not self.options.flatten:
            params["flatten"] = False
        if self.scored:
            params["fuzzy_threshold"] = self.options.fuzzy_threshold
            params["semantic_threshold"] = self.options.semantic_threshold
            # the tolerances change nothing unless a field is NUMERIC, so they are named
            # when the config has one or they differ from the defaults
            tolerances = (self.options.numeric_rel_tol, self.options.numeric_abs_tol)
            if Strategy.NUMERIC in self.strategies.values() or tolerances != (
                DEFAULT_REL_TOL,
                DEFAULT_ABS_TOL,
            ):
                params["numeric_rel_tol"], params["numeric_abs_tol"] = tolerances
        return params

    def missing_inputs(self, sample: Sample) -> list[str]:
        # an empty object {} is a document (nothing expected), so only None/blank is missing
        missing = []
        for name in _INPUTS:
            value = getattr(sample, name)
            if value is None or (isinstance(value, str) and not value.strip()):
                missing.append(name)
        return missing

    def _documents(self, sample: Sample) -> tuple[Any, Any, str | None]:
        gt, err_gt = _document(sample.expected_json, "expected_json")
        out, err_out = _document(sample.output_json, "output_json")
        return gt, out, err_gt or err_out

    def _config(self, sample: Sample) -> StrategyConfig:
        """The metric's config, overridden by the sample's ``field_strategies`` (metadata)."""
        extra = sample.metadata.get("field_strategies")
        if not extra:
            return self.strategies
        if isinstance(extra, str):
            extra = json.loads(extra)
        own = StrategyConfig.from_data(extra, source="field_strategies")
        return StrategyConfig({**self.strategies.to_dict(), **own.to_dict()})

    def _safety(self, sample: Sample) -> float:
        value = sample.metadata.get("safety_score")
        if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 1:
            return float(value)
        return self.safety_score

    def _prepare(self, sample: Sample) -> tuple[Any, Any, StrategyConfig] | str:
        gt, output, error = self._documents(sample)
        if error:
            return error
        try:
            check_document(gt, "expected_json")
            check_document(output, "output_json")
        except ValueError as exc:  # too deep, or keys JSON cannot hold
            return str(exc)
        try:
            return gt, output, self._config(sample)
        except (ValueError, StrategyConfigError) as exc:
            return f"invalid field_strategies: {exc}"

    def _evaluate(self, samples: Sequence[Sample], res: Resources) -> list[JsonEvalResult | str]:
        """Phases 0-4 for each sample; samples sharing a config are scored together (all
        their FUZZY/SEMANTIC pairs in one scorer call each)."""
        out: list[JsonEvalResult | str] = []
        groups: dict[str, tuple[StrategyConfig, list[int], list[tuple[Any, Any]], list[float]]]
        groups = {}
        for sample in samples:
            prepared = self._prepare(sample)
            if isinstance(prepared, str):
                out.append(prepared)
                continue
            gt, output, config = prepared
            key = json.dumps(config.to_dict(), sort_keys=True)
            group = groups.setdefault(key, (config, [], [], []))
            group[1].append(len(out))
            group[2].append((gt, output))
            group[3].append(self._safety(sample))
            out.append("")
        scorer = self.scorer or default_scorer(res)
        for config, slots, docs, safeties in groups.values():
            evaluated = evaluate_many(
                docs, config, options=self.options, scorer=scorer, safety_scores=safeties
            )
            for slot, result in zip(slots, evaluated, strict=True):
                out[slot] = result
        return out

    def _compare(self, sample: Sample) -> JsonComparison | str:
        prepared = self._prepare(sample)
        if isinstance(prepared, str):
            return prepared
        gt, output, config = prepared
        return compare_json(gt, output, config, flatten=self.options.flatten)


class _ComparedMetric(_StructuredMetric):
    """Shared body of the phase 1-2 metrics: one sample compared (no scorer), one score read."""

    def _score(self, comp: JsonComparison) -> tuple[float, dict[str, Any]]:
        """The value from the comparison, and its evidence for the details."""
        raise NotImplementedError

    def compute(self, sample: Sample, res: Resources) -> MetricResult:
        comp = self._compare(sample)
        if isinstance(comp, str):
            return self.na(comp, method="pattern")
        value, details = self._score(comp)
        return self.result(value, method="pattern", **details)


class _EvaluatedMetric(_StructuredMetric):
    """Shared body of the phase 3-4 metrics: the batch evaluated by ``_evaluate`` (samples
    sharing a config in one scorer call per strategy), one result built per document."""

    needs = frozenset({"embedder"})
    scored = True

    def _from_evaluation(self, item: JsonEvalResult) -> MetricResult:
        raise NotImplementedError

    def plan(self, sample: Sample, answers: Answers) -> list[Ask]:
        """The embed asks of the sample's SEMANTIC fields for the default (local) scorer:
        both texts of every pair the comparison will score SEMANTIC; none with a scorer
        of one's own, or for a document that cannot be compared (its result says why).
        Worked out once per sample and config for the metrics of a chunk (``json_accuracy``,
        ``rqs`` and ``rqs_normalized`` plan the same asks)."""
        if self.scorer is not None:
            return []
        config = answers.resources.config if answers.resources is not None else AssayConfig()
        key = (id(sample), json.dumps(self.strategies.to_dict()), self.options.flatten)

        def compute(keys: list[Any]) -> list[tuple[Sample, list[Ask]]]:
            # the memo keeps the sample, so its id is not reused while the memo lives
            with depth_limit(config.max_json_depth):
                return [(sample, self._semantic_asks(sample))]

        return answers.computed_once("json_semantic_asks", [key], compute)[0][1]

    def _semantic_asks(self, sample: Sample) -> list[Ask]:
        prepared = self._prepare(sample)
        if isinstance(prepared, str):
            return []
        gt, output, strategies = prepared
        return semantic_asks(scorer_pairs([(gt, output)], strategies, options=self.options))

    def compute_batch(self, samples: Sequence[Sample], res: Resources) -> list[MetricResult]:
        # the batch's embed asks in one call (in a run: already in the chunk's answers)
        with answered(execute([self], samples, res)):
            evaluated = self._evaluate(samples, res)
        return [
            self.na(item) if isinstance(item, str) else self._from_evaluation(item)
            for item in evaluated
        ]


@register
class JsonCompleteness(_ComparedMetric):
    """Share of the ground truth's non-null fields that the output also fills (JSON
    specification phase 1).

    The JSON specification calls it *completeness*; it is ``json_completeness`` here because
    ``completeness`` is the pipeline specification's query-keyword coverage.
    Formula: ``|both_non_null| / |gt_non_null|`` over leaf fields (nested objects flattened
    to dotted paths, arrays of objects by index; see docs/structured.md); null means None,
    "" or whitespace. Inputs: expected_json, output_json (objects or JSON strings).
    Range 0..1, higher is better; 1.0 when the ground truth has no non-null field (nothing
    expected). Details: the bucket lists and counts.
    Weakness: presence only: a filled but wrong value counts as complete (see
    ``json_accuracy``); a key whose value is an empty ``{}`` or ``[]`` counts as filled.
    Absent or blank document: None (missing input); unparseable JSON: None with the
    reason; a document nested deeper than ``max_json_depth`` (default 500): an error.
    """

    name = "json_completeness"

    def _score(self, comp: JsonComparison) -> tuple[float, dict[str, Any]]:
        cls = comp.classification
        return comp.completeness, {
            "matched": len(cls.both_non_null),
            "expected": len(cls.gt_non_null),
            "missing": list(cls.aio_missing_or_null),
            "buckets": cls.buckets(),
        }


@register
class JsonHallucination(_ComparedMetric):
    """Share of all fields that the output invents: keys absent from the ground truth, or
    null there but filled in the output (JSON specification phase 2). Lower is better.

    The JSON specification calls it *hallucination*; it is ``json_hallucination`` here to
    keep it apart from the text hallucination metrics of the chatbot hub and the judge and
    pipeline specifications.
    Formula: ``(|extra_keys| + |gt_null_aio_has_value|) / |GT fields ∪ output fields|``, the
    denominator counting every distinct field path regardless of null status. Inputs:
    expected_json, output_json. Range 0..1, lower is better; 0.0 when both documents are
    empty. Details: the extra and gt-null-but-filled fields and the counts. Weaknesses: as
    the specification specifies, an extra key counts even when its output value is null, and
    the denominator grows with the output's own extra keys (10 invented keys on a 10-field
    GT give 0.5, not 1.0). Absent or blank document: None (missing input); unparseable JSON:
    None with the reason; a document nested deeper than ``max_json_depth`` (default 500): an
    error.
    """

    name = "json_hallucination"
    higher_is_better = False

    def _score(self, comp: JsonComparison) -> tuple[float, dict[str, Any]]:
        cls = comp.classification
        return comp.hallucination, {
            "hallucination_count": cls.hallucination_count,
            "total_distinct": cls.total_distinct,
            "extra_keys": list(cls.extra_keys),
            "gt_null_aio_has_value": list(cls.gt_null_aio_has_value),
        }


@register
class JsonAccuracy(_EvaluatedMetric):
    """Share of the fields both sides fill whose values match under the field's strategy
    (JSON specification phase 3).

    The JSON specification calls it *accuracy*; it is ``json_accuracy`` here.
    Formula: ``sum(field scores) / (|both_non_null| − |IGNORE fields|)``, each score 0 or 1:
    EXACT = case-insensitive equality (objects and arrays as JSON with sorted keys; array
    order matters), FUZZY = similarity ≥ fuzzy threshold (0.85), SEMANTIC = similarity ≥
    semantic threshold (0.80), NUMERIC = ``|a − b| ≤ max(numeric_abs_tol,
    numeric_rel_tol·|b|)`` with b the GT number (defaults 0 and 1e-6; a side that is not a
    number scores 0). Strategy: the config's, else by the GT value's type (number, boolean,
    date, e-mail, array, object → EXACT, never NUMERIC; other text → SEMANTIC). Without a judge
    FUZZY is rapidfuzz token-set ratio and SEMANTIC the embedder's cosine (method
    ``local``); with an LLM-judge scorer the method is ``llm``; EXACT alone is ``pattern``.
    Inputs: expected_json, output_json. Range 0..1, higher is better; 1.0 when no field is
    scorable. Details: per field the strategy, its source, the similarity, threshold,
    score, scorer and reason.
    Weaknesses: binary per field (0.79 and 0.10 similarity both score 0); auto-detection
    sends short codes and IDs ("SKU-12") to SEMANTIC, where embeddings of different codes
    can be close: name such fields EXACT in the config; dates in different formats fail
    EXACT.
    Absent or blank document: None (missing input); unparseable JSON: None with the
    reason; a document nested deeper than ``max_json_depth`` (default 500): an error.
    """

    name = "json_accuracy"

    def _from_evaluation(self, item: JsonEvalResult) -> MetricResult:
        return self.result(
            item.accuracy,
            method=item.method,
            correct=item.correct,
            scorable=item.scorable,
            ignored=list(item.ignored),
            wrong=list(item.wrong),
            fields=[f.to_dict() for f in item.fields],
        )


@register
class ResponseQualityScore(_EvaluatedMetric):
    """Response Quality Score: the JSON specification's weighted composite of JSON accuracy,
    completeness, safety and hallucination.

    Formula: ``clamp(0.45·accuracy + 0.25·completeness + 0.15·safety − 0.15·hallucination,
    0, 1)`` with the three phase scores of ``json_accuracy``, ``json_completeness`` and
    ``json_hallucination``; weights configurable (``weights={"accuracy": ...}``); the safety
    score is an input (parameter ``safety_score``, or ``safety_score`` in the sample's
    metadata; default 1.0). Inputs: expected_json, output_json. Range 0..1, higher is
    better. The specification's example: accuracy 1.0, completeness 0.75, hallucination 2/6
    → 0.7375. Details: the full breakdown (buckets, per-field results, counts, weights).
    Weaknesses: the ceiling is ``wa + wc + ws`` = 0.85, not 1.0: a perfect output scores
    0.85 (``rqs_normalized`` divides by the ceiling); with the default safety 1.0 every
    document gets 0.15 for free, so an output with nothing right scores 0.15 minus its
    hallucination penalty; the components are not independent (a missing field lowers
    completeness and is not scored for accuracy). Absent or blank document: None (missing
    input); unparseable JSON: None with the reason; a document nested deeper than
    ``max_json_depth`` (default 500): an error.
    """

    name = "rqs"
    components = ("accuracy", "completeness", "hallucination", "safety")

    def params(self) -> dict[str, Any]:
        params = super().params()
        if self.options.weights != RQSWeights():
            params["weights"] = json.dumps(self.options.weights.to_dict(), sort_keys=True)
        return params

    def _value(self, item: JsonEvalResult) -> float | None:
        return item.rqs

    def _from_evaluation(self, item: JsonEvalResult) -> MetricResult:
        value = self._value(item)
        if value is None:
            return self.na("the RQS ceiling (sum of positive weights) is 0")
        breakdown = item.to_dict()
        breakdown.pop("method")
        return self.result(
            value,
            components={
                "accuracy": item.accuracy,
                "completeness": item.completeness,
                "hallucination": item.hallucination,
                "safety": item.safety_score,
            },
            method=item.method,
            **breakdown,
        )


@register
class NormalizedResponseQualityScore(ResponseQualityScore):
    """RQS rescaled so a perfect JSON output scores 1.0: the JSON specification's RQS
    divided by its ceiling.

    Formula: ``clamp(rqs / (wa + wc + ws), 0, 1)``; with the default weights
    ``rqs / 0.85``. The JSON specification's RQS can never exceed ``wa + wc + ws`` (0.85 by default)
    because hallucination only subtracts, so its 0.85 means "perfect"; this puts perfect at
    1.0 and keeps the order of documents. The specification's example: 0.7375 / 0.85 = 0.8676.
    Inputs, parameters and details as ``rqs``. Range 0..1, higher is better; None when
    the positive weights sum to 0.
    Weakness: the other caveats of ``rqs`` (free safety credit, dependent components).
    """

    name = "rqs_normalized"

    def _value(self, item: JsonEvalResult) -> float | None:
        return item.rqs_normalized
