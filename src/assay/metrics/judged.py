"""Judged metrics: LLM-as-judge scores of seeds 001 and 003, with offline estimators.

With a judge configured (`Resources.judge`, see `assay.judge.client`) each metric asks it
with the seeds' prompts (`assay.judge.prompts`) and its result says ``method="llm"``;
without one, each falls back to a named local estimator (`assay.judge.estimators`) and
says ``method="local"`` with ``details["estimator"]``. All judge calls of a batch run
concurrently; a question that finally fails gives that sample ``None`` with the error.

Calls per sample (with a judge; identical questions are asked once per run and cached):

- seed 001: one call each for ``judged_relevance``, ``faithfulness``, ``hallucination``
  and ``contextual_relevance``; ``answer_correctness`` reuses the first two.
- seed 003: ``ragas_faithfulness``, ``ragas_context_precision`` and
  ``ragas_context_recall`` share ONE call (`RAG_VERDICTS`: claims extracted and
  verified, every context rated, reference statements attributed);
  ``ragas_answer_relevance`` makes one (3 generated questions; a second, direct rubric
  call only when no question comes back); ``ragas_score`` reuses them: 2 calls per
  sample for the four RAGAS metrics and their composite.
- ``factual_accuracy`` one call; ``answer_classification`` one call unless the answer
  contains an uncertainty phrase.

`prefetch` asks every judge question of several metrics at once, so a runner scoring
metric after metric spends one round of concurrent calls instead of one per metric.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from assay.judge.client import JudgeClient, JudgeReply
from assay.judge.estimators import (
    CONTEXT_RELEVANCE_THRESHOLD,
    SUPPORT_THRESHOLD,
    context_similarity,
    question_answer_cosine,
    reference_agreement,
    sentence_support,
    uncertainty_phrase,
)
from assay.judge.prompts import (
    ANSWER_CLASSIFICATION,
    ANSWER_QUESTIONS,
    ANSWER_RELEVANCE_DIRECT,
    CONTEXTUAL_RELEVANCE,
    FAITHFULNESS,
    GEVAL_FACTUAL_ACCURACY,
    HALLUCINATION,
    RAG_VERDICTS,
    RELEVANCE,
    Prompt,
    RagVerdicts,
)
from assay.metric import Metric, clamp01
from assay.registry import register
from assay.resources import Resources
from assay.result import MetricResult
from assay.sample import Sample

__all__ = [
    "FACTUAL_ACCURACY_WEIGHTS",
    "RAGAS_WEIGHTS",
    "average_precision",
    "factual_grade",
    "prefetch",
    "ragas_composite",
    "weighted_correctness",
]

Request = tuple[Prompt[Any], dict[str, Any]]

#: seed 003's composite weights
RAGAS_WEIGHTS: dict[str, float] = {
    "faithfulness": 0.30,
    "context_precision": 0.20,
    "context_recall": 0.20,
    "answer_relevance": 0.30,
}
#: seed 003's G-Eval criteria weights
FACTUAL_ACCURACY_WEIGHTS: dict[str, float] = {
    "correctness": 0.5,
    "completeness": 0.3,
    "consistency": 0.2,
}


# ---- pure formulas ---------------------------------------------------------------------


def weighted_correctness(
    relevance: float, faithfulness: float, weights: Mapping[str, float]
) -> float:
    """Seed 001: ``w_r * relevance + w_f * faithfulness``, divided by ``w_r + w_f``
    (1 for the default 0.7/0.3), e.g. 0.7 * 0.90 + 0.3 * 1.00 = 0.93."""
    w_r, w_f = weights["relevance"], weights["faithfulness"]
    return (w_r * relevance + w_f * faithfulness) / (w_r + w_f)


def ragas_composite(
    values: Mapping[str, float | None], weights: Mapping[str, float] = RAGAS_WEIGHTS
) -> tuple[float | None, dict[str, float]]:
    """Seed 003's weighted composite, renormalised over the values that exist.

    Returns (score or None when no value exists, the renormalised weights used). Seed
    example: faithfulness 1.00, precision missing, recall 1.00, answer relevance 0.8327
    -> (0.3 * 1 + 0.2 * 1 + 0.3 * 0.8327) / 0.8 = 0.9373.
    """
    present = {k: v for k, v in values.items() if v is not None and k in weights}
    total = sum(weights[k] for k in present)
    if not present or total <= 0:
        return None, {}
    used = {k: weights[k] / total for k in present}
    return sum(present[k] * used[k] for k in present), used


def average_precision(verdicts: Sequence[bool]) -> float:
    """Rank-aware precision@K of seed 003: ``sum_k(rel_k * P@k) / (relevant in top K)``,
    0.0 when no context is relevant. E.g. [1, 0, 1] -> (1/1 + 2/3) / 2 = 0.8333."""
    hits, total = 0, 0.0
    for k, relevant in enumerate(verdicts, 1):
        if relevant:
            hits += 1
            total += hits / k
    return total / hits if hits else 0.0


def factual_grade(score: float) -> str:
    """Seed 003's letter grade of a 0..1 factual accuracy: A >= 0.8, B >= 0.6, C >= 0.4,
    D >= 0.2, else E (compared in percent, rounded to 6 decimals)."""
    percent = round(100.0 * score, 6)
    for bound, grade in ((80, "A"), (60, "B"), (40, "C"), (20, "D")):
        if percent >= bound:
            return grade
    return "E"


def _unit_score(score: float) -> tuple[float, bool]:
    """A judge's 0..1 score; a score in (10, 100] is read as percent. Other scores outside
    0..1 never get here: `ScoreVerdict` rejects them as unparsable (the seed clamps them)."""
    if 1.0 < score <= 100.0:
        return score / 100.0, True
    return clamp01(score), False


# ---- base ------------------------------------------------------------------------------


def _rag_values(sample: Sample) -> dict[str, Any]:
    return {
        "question": sample.query,
        "answer": sample.response,
        "reference_answer": sample.expected,
        "contexts": sample.contexts,
    }


class _Judged(Metric):
    """Shared machinery: judge path (concurrent, per-sample errors) or local estimator."""

    family = "judged"
    suites: ClassVar[tuple[str, ...]] = ("judged",)
    needs = frozenset({"judge", "embedder"})
    #: name of the offline estimator (details["estimator"] of local results)
    estimator: ClassVar[str] = ""

    def compute_batch(self, samples: Sequence[Sample], res: Resources) -> list[MetricResult]:
        judge = res.judge
        if judge is None:
            return self.estimate(samples, res)
        return self.judge_batch(samples, res, judge)

    # -- judge path
    def requests(self, sample: Sample) -> list[Request]:
        """The judge questions this metric asks for ``sample`` (for `prefetch`)."""
        return []

    async def judge_one(self, sample: Sample, res: Resources, judge: JudgeClient) -> MetricResult:
        raise NotImplementedError

    def judge_batch(
        self, samples: Sequence[Sample], res: Resources, judge: JudgeClient
    ) -> list[MetricResult]:
        async def one(sample: Sample) -> MetricResult:
            try:
                return await self.judge_one(sample, res, judge)
            except Exception as exc:
                return self.judge_failed(exc, judge)

        return judge.gather(one(s) for s in samples)

    def judge_failed(self, error: BaseException, judge: JudgeClient) -> MetricResult:
        return MetricResult(
            name=self.name,
            value=None,
            method="llm",
            reason="judge call failed",
            error=f"{type(error).__name__}: {error}",
            signature=self.signature("llm", judge.model),
        )

    def llm(
        self,
        value: float | None,
        judge: JudgeClient,
        prompts: Iterable[Prompt[Any]],
        *,
        components: dict[str, float | None] | None = None,
        reason: str | None = None,
        **details: Any,
    ) -> MetricResult:
        signatures = [p.signature for p in prompts]
        return self.result(
            value,
            components=components,
            method="llm",
            reason=reason,
            model=f"{judge.model};{','.join(signatures)}",
            prompts=signatures,
            **details,
        )

    # -- local path
    def estimate(self, samples: Sequence[Sample], res: Resources) -> list[MetricResult]:
        raise NotImplementedError

    def local(
        self,
        value: float | None,
        res: Resources,
        *,
        components: dict[str, float | None] | None = None,
        reason: str | None = None,
        **details: Any,
    ) -> MetricResult:
        return self.result(
            value,
            components=components,
            method="local",
            reason=reason,
            model=_embedder_name(res),
            estimator=self.estimator,
            **details,
        )


def _embedder_name(res: Resources) -> str | None:
    embedder = res.__dict__.get("embedder")
    return getattr(embedder, "name", None) if embedder is not None else None


async def _score(judge: JudgeClient, prompt: Prompt[Any], **values: Any) -> tuple[float, dict]:
    reply = await judge.ask(prompt, **values)
    value, rescaled = _unit_score(float(reply.output.score))
    details: dict[str, Any] = {"judge_reason": reply.output.reason, "judge_source": reply.source}
    if rescaled:
        details["judge_score_read_as_percent"] = float(reply.output.score)
    return value, details


def prefetch(metrics: Iterable[Metric], samples: Sequence[Sample], res: Resources) -> int:
    """Ask every judge question of these metrics for these samples concurrently, so the
    metrics' own batches then hit the run's memo. Returns the number of questions (0
    without a judge). Failures are kept in the memo and surface in the metrics' results.
    """
    judge = res.judge
    if judge is None:
        return 0
    asks: list[Request] = []
    for metric in metrics:
        if not isinstance(metric, _Judged):
            continue
        for sample in samples:
            if not metric.missing_inputs(sample):
                asks.extend(metric.requests(sample))
    if not asks:
        return 0

    async def quiet(prompt: Prompt[Any], values: dict[str, Any]) -> None:
        with contextlib.suppress(Exception):  # kept in the memo; the metric reports it
            await judge.ask(prompt, **values)

    judge.gather(quiet(p, v) for p, v in asks)
    return len(asks)


class _RubricScore(_Judged):
    """Seed 001's metrics: one call with the metric's prompt; the judge's score is the value.

    ``fields`` are the Sample fields the prompt's data blocks take, by the same names."""

    prompt: ClassVar[Prompt[Any]]
    fields: ClassVar[tuple[str, ...]]

    def _values(self, sample: Sample) -> dict[str, Any]:
        return {field: getattr(sample, field) for field in self.fields}

    def requests(self, sample: Sample) -> list[Request]:
        return [(self.prompt, self._values(sample))]

    async def judge_one(self, sample: Sample, res: Resources, judge: JudgeClient) -> MetricResult:
        value, details = await _score(judge, self.prompt, **self._values(sample))
        return self.llm(value, judge, [self.prompt], **details)


# ---- seed 001 ----------------------------------------------------------------------------


@register
class JudgedRelevance(_RubricScore):
    """How relevant the response is to the query, rated 0..1 by an LLM judge (seed 001).

    Formula: the judge's score with seed 001's relevance prompt and rubric (1.0 = directly
    answers with complete information ... 0.0-0.3 = does not address the question),
    on [0, 1] (a reply above 10 and at most 100 is read as a percentage; any other score
    outside [0, 1] makes the reply unparsable, where the seed clamps it). Inputs:
    query, response. Range 0..1, higher is better. Named ``judged_relevance`` because
    ``relevance`` is seed 004's lexical metric.
    Local estimator ``question_answer_cosine``: clip(cos(embed(query), embed(response)),
    0, 1), and 0 for a non-committal answer ("I don't know"). Weaknesses: the judge is
    a single holistic number (no evidence beyond its reason); the estimator measures
    topical closeness, so an answer that restates the question scores high, and its
    scale is compressed (good answers often sit at 0.4-0.7).
    """

    name = "judged_relevance"
    requires = ("query", "response")
    seed = "001"
    estimator = "question_answer_cosine"
    prompt = RELEVANCE
    fields = ("query", "response")

    def estimate(self, samples: Sequence[Sample], res: Resources) -> list[MetricResult]:
        return _relevance_estimates(self, samples, res)


def _relevance_estimates(
    metric: _Judged, samples: Sequence[Sample], res: Resources
) -> list[MetricResult]:
    cosines = question_answer_cosine(
        res, [s.query or "" for s in samples], [s.response or "" for s in samples]
    )
    out = []
    for sample, cosine in zip(samples, cosines, strict=True):
        phrase = uncertainty_phrase(sample.response or "")
        value = 0.0 if phrase else cosine
        out.append(metric.local(value, res, cosine=round(cosine, 4), noncommittal=phrase))
    return out


class _SupportBased(_RubricScore):
    """Faithfulness-style metrics whose local estimator is sentence support."""

    def _supports(self, samples: Sequence[Sample], res: Resources) -> list[Any]:
        return sentence_support(
            res, [s.response or "" for s in samples], [s.contexts or [] for s in samples]
        )


@register
class Faithfulness(_SupportBased):
    """Whether the response is grounded in the retrieved context, rated 0..1 by an LLM judge (seed
    001).

    Formula: the judge's score with seed 001's faithfulness prompt (1.0 = every
    fact/number in the response is directly from the context ... 0.0-0.3 = many
    unsupported claims), on [0, 1] as for ``judged_relevance``. Inputs: response, contexts.
    Range 0..1, higher is better.
    Local estimator ``sentence_support``: for each response sentence, the mean of its best
    embedding cosine against the context sentences and the share of its content words
    found in the context; averaged over sentences and multiplied by
    ``0.5 + 0.5 * (supported anchors / anchors)`` (numbers, dates, entities and asserted
    subject-verb-object claims checked by `assay.text.anchors`; factor 1 without
    anchors). AUROC 0.92 on BEGIN (attributable vs not). Weaknesses: the judge gives one
    holistic number; the estimator rewards copying, under-rates faithful paraphrase, and
    misses role swaps ("Beats acquired Apple"); see ``ragas_faithfulness`` for the
    claim-by-claim judge method.
    """

    name = "faithfulness"
    requires = ("response", "contexts")
    suites = ("judged", "rag")
    seed = "001"
    estimator = "sentence_support"
    prompt = FAITHFULNESS
    fields = ("contexts", "response")

    def estimate(self, samples: Sequence[Sample], res: Resources) -> list[MetricResult]:
        return [self.local(s.score, res, **s.details()) for s in self._supports(samples, res)]


@register
class Hallucination(_SupportBased):
    """How much of the response is fabricated (not in the context), 0..1 from an LLM judge; lower
    is better (seed 001).

    Formula: the judge's score with seed 001's hallucination prompt (0.0 = everything is
    from the context ... 0.9-1.0 = mostly or completely fabricated), on [0, 1] as for
    ``judged_relevance``. Inputs: response, contexts. Range 0..1, LOWER is better.
    Evaluated by its own prompt, not as 1 - faithfulness (the seed's choice).
    Local estimator ``unsupported_share``: 1 - the ``sentence_support`` score of
    ``faithfulness``. Weaknesses: as ``faithfulness``; an answer that is all hedges and
    pleasantries scores low (nothing to fabricate) whether or not it helps.
    """

    name = "hallucination"
    requires = ("response", "contexts")
    higher_is_better = False
    suites = ("judged", "rag")
    seed = "001"
    estimator = "unsupported_share"
    prompt = HALLUCINATION
    fields = ("contexts", "response")

    def estimate(self, samples: Sequence[Sample], res: Resources) -> list[MetricResult]:
        return [
            self.local(1.0 - s.score, res, support=round(s.score, 4), **s.details())
            for s in self._supports(samples, res)
        ]


@register
class ContextualRelevance(_RubricScore):
    """Whether the retrieved context is relevant for answering the query, rated 0..1 by an LLM
    judge (seed 001).

    Formula: the judge's score with seed 001's contextual relevance prompt (1.0 = context
    directly contains the information needed ... 0.0-0.3 = irrelevant), on [0, 1] as for
    ``judged_relevance``. Inputs: query, contexts. Range 0..1, higher is better.
    Local estimator ``context_similarity``: the best cosine of the query with any context
    or context sentence, clipped to [0, 1] (per-context values in details). Weaknesses:
    topical similarity, not usefulness: a passage about the right subject that lacks the
    needed fact still scores high.
    """

    name = "contextual_relevance"
    requires = ("query", "contexts")
    suites = ("judged", "rag")
    seed = "001"
    estimator = "context_similarity"
    prompt = CONTEXTUAL_RELEVANCE
    fields = ("query", "contexts")

    def estimate(self, samples: Sequence[Sample], res: Resources) -> list[MetricResult]:
        sims = context_similarity(
            res, [s.query or "" for s in samples], [s.contexts or [] for s in samples]
        )
        return [
            self.local(max(per) if per else 0.0, res, per_context=[round(x, 4) for x in per])
            for per in sims
        ]


@register
class AnswerCorrectness(_Judged):
    """Seed 001's composite: 0.7 × judged relevance + 0.3 × faithfulness.

    Formula: ``(w_r * judged_relevance + w_f * faithfulness) / (w_r + w_f)`` with weights
    from ``answer_correctness_weights`` (default relevance 0.7, faithfulness 0.3, so
    0.90 and 1.00 give 0.93). Inputs: query, response, contexts (those of its two
    parts). Range 0..1, higher is better. With a judge it reuses the two judge calls
    of ``judged_relevance`` and ``faithfulness`` (no call of its own); without one, their
    local estimators. When either part is unavailable (e.g. its judge call failed) the
    result is None with the reason. Weakness (the seed's design): despite its name it
    never compares the answer with a reference answer, so a relevant, grounded but
    wrong answer scores high; ``factual_accuracy`` and ``answer_classification``
    compare with the expected answer.
    """

    name = "answer_correctness"
    requires = ("query", "response", "contexts")
    seed = "001"
    estimator = "question_answer_cosine+sentence_support"
    components = ("relevance", "faithfulness")

    def __init__(self, weights: Mapping[str, float] | None = None) -> None:
        if weights is not None:
            if set(weights) != {"relevance", "faithfulness"}:
                raise ValueError(
                    "AnswerCorrectness weights need exactly the keys 'relevance' and "
                    f"'faithfulness'. Got {sorted(weights)}."
                )
            if any(w < 0 for w in weights.values()) or sum(weights.values()) <= 0:
                raise ValueError(
                    "AnswerCorrectness weights must be non-negative with a positive sum. "
                    f"Got {dict(weights)}."
                )
        self.weights = dict(weights) if weights is not None else None

    def params(self) -> dict[str, Any]:
        return {"weights": self.weights} if self.weights else {}

    def _weights(self, res: Resources) -> dict[str, float]:
        return self.weights or dict(res.config.answer_correctness_weights)

    def requests(self, sample: Sample) -> list[Request]:
        return JudgedRelevance().requests(sample) + Faithfulness().requests(sample)

    def _combine(
        self,
        relevance: MetricResult,
        faithfulness: MetricResult,
        res: Resources,
        judge: JudgeClient | None,
    ) -> MetricResult:
        weights = self._weights(res)
        parts = {"relevance": relevance, "faithfulness": faithfulness}
        missing = {k: r for k, r in parts.items() if r.value is None}
        if missing:
            why = "; ".join(f"{k}: {r.error or r.reason}" for k, r in missing.items())
            return MetricResult(
                name=self.name,
                value=None,
                method="llm" if judge else "local",
                reason=f"needs both parts; unavailable {why}",
                error=next((r.error for r in missing.values() if r.error), None),
                signature=self.signature("llm" if judge else "local", None),
            )
        value = weighted_correctness(relevance.value, faithfulness.value, weights)  # type: ignore[arg-type]
        components = {"relevance": relevance.value, "faithfulness": faithfulness.value}
        if judge is not None:
            return self.llm(
                value, judge, [RELEVANCE, FAITHFULNESS], components=components, weights=weights
            )
        return self.local(value, res, components=components, weights=weights)

    def judge_batch(
        self, samples: Sequence[Sample], res: Resources, judge: JudgeClient
    ) -> list[MetricResult]:
        rel_metric, faith_metric = JudgedRelevance(), Faithfulness()
        prefetch([rel_metric, faith_metric], samples, res)
        rels = rel_metric.judge_batch(samples, res, judge)
        faiths = faith_metric.judge_batch(samples, res, judge)
        return [self._combine(r, f, res, judge) for r, f in zip(rels, faiths, strict=True)]

    def estimate(self, samples: Sequence[Sample], res: Resources) -> list[MetricResult]:
        rels = JudgedRelevance().estimate(samples, res)
        faiths = Faithfulness().estimate(samples, res)
        return [self._combine(r, f, res, None) for r, f in zip(rels, faiths, strict=True)]


# ---- seed 003: RAGAS-style -------------------------------------------------------------


class _RagVerdictMetric(_Judged):
    """Metrics read from the one RAG_VERDICTS call of a sample."""

    suites = ("judged", "rag")
    seed = "003"

    def requests(self, sample: Sample) -> list[Request]:
        return [(RAG_VERDICTS, _rag_values(sample))]

    async def judge_one(self, sample: Sample, res: Resources, judge: JudgeClient) -> MetricResult:
        reply = await judge.ask(RAG_VERDICTS, **_rag_values(sample))
        return self.from_verdicts(sample, reply, judge)

    def from_verdicts(
        self, sample: Sample, reply: JudgeReply[RagVerdicts], judge: JudgeClient
    ) -> MetricResult:
        raise NotImplementedError


class _SupportedShare(_RagVerdictMetric):
    """A share of items (the answer's claims, the reference's statements) that the contexts
    support: read from the RAG_VERDICTS reply, or estimated by sentence support.

    Subclasses name the reply list (``items``), each item's text and verdict attributes,
    the sample field the estimator splits into sentences, and the evidence keys."""

    items: ClassVar[str]  # RagVerdicts attribute: "claims" or "statements"
    item_text: ClassVar[str]  # attribute of an item holding its text
    item_ok: ClassVar[str]  # attribute of an item holding its verdict
    source: ClassVar[str]  # Sample field the local estimator checks sentence by sentence
    count_key: ClassVar[str]
    ok_key: ClassVar[str]
    missing_key: ClassVar[str]
    none_reason: ClassVar[str]  # reason of the 1.0 given when there is no item (seed rule)

    def from_verdicts(
        self, sample: Sample, reply: JudgeReply[RagVerdicts], judge: JudgeClient
    ) -> MetricResult:
        items = getattr(reply.output, self.items)
        verdicts = [item.model_dump() for item in items]
        if not items:
            return self.llm(
                1.0,
                judge,
                [RAG_VERDICTS],
                reason=f"{self.none_reason}: 1.0 by the seed's rule",
                verdicts=verdicts,
                **{self.count_key: 0, self.ok_key: 0},
            )
        ok = sum(bool(getattr(item, self.item_ok)) for item in items)
        return self.llm(
            ok / len(items),
            judge,
            [RAG_VERDICTS],
            verdicts=verdicts,
            **{
                self.count_key: len(items),
                self.ok_key: ok,
                self.missing_key: [
                    getattr(item, self.item_text)
                    for item in items
                    if not getattr(item, self.item_ok)
                ],
            },
        )

    def estimate(self, samples: Sequence[Sample], res: Resources) -> list[MetricResult]:
        supports = sentence_support(
            res,
            [getattr(s, self.source) or "" for s in samples],
            [s.contexts or [] for s in samples],
        )
        out = []
        for support in supports:
            n = len(support.sentences)
            ok = support.supported_sentences
            if n == 0:
                out.append(self.local(1.0, res, reason=self.none_reason, **{self.count_key: 0}))
                continue
            missing = [x["text"] for x in support.sentences if not x["supported"]]
            out.append(
                self.local(
                    ok / n,
                    res,
                    threshold=SUPPORT_THRESHOLD,
                    **{self.count_key: n, self.ok_key: ok, self.missing_key: missing},
                    **support.details(),
                )
            )
        return out


@register
class RagasFaithfulness(_SupportedShare):
    """Share of the answer's atomic claims that the retrieved contexts support (RAGAS-style, seed
    003).

    Formula: ``supported claims / claims``; the judge extracts the answer's atomic,
    self-contained claims and verifies all of them against the contexts in ONE call
    (shared with context precision and recall). An answer with no factual claim scores
    1.0 (the seed's rule: nothing unsupported), flagged in the reason. Inputs: response,
    contexts (question and reference used when present). Range 0..1 (seed: 0-100),
    higher is better. Evidence: every claim with its verdict and reason.
    Local estimator ``sentence_support``: each answer sentence is a claim, supported when
    its sentence support (see ``faithfulness``) is at least 0.6 and none of its anchors
    is unsupported. Weaknesses: the no-claims rule rewards evasive answers; the judge
    may split claims unevenly (one long claim vs many small ones changes the ratio);
    the estimator's sentences are not atomic claims.
    """

    name = "ragas_faithfulness"
    requires = ("response", "contexts")
    estimator = "sentence_support"
    items = "claims"
    item_text = "claim"
    item_ok = "verdict"
    source = "response"
    count_key, ok_key, missing_key = "claims", "supported", "unsupported"
    none_reason = "the answer makes no factual claim"


@register
class RagasContextPrecision(_RagVerdictMetric):
    """Share of the retrieved contexts that are relevant to the question (RAGAS-style, seed 003).

    Formula: ``(1/N) * sum(relevance_i)``, relevance_i in {0, 1} from the judge, which
    rates all N contexts of a sample in ONE call (seed 003's JSON array form; the
    reference answer, when given, informs the verdicts). Component ``precision_at_k``:
    the rank-aware form ``sum_k(rel_k * P@k) / (relevant contexts in top K)`` (0 when
    none is relevant), which rewards relevant contexts ranked first. Inputs: query,
    contexts. Range 0..1 (seed: 0-100), higher is better. Evidence: each context's
    verdict, 0-100 relevance score and reasoning.
    Local estimator ``context_similarity``: a context is relevant when its best cosine
    with the question or the reference (over the context and its sentences) is at least
    0.5. Weaknesses: binary verdicts hide near misses; the estimator judges topic, not
    whether the needed fact is present.
    """

    name = "ragas_context_precision"
    requires = ("query", "contexts")
    estimator = "context_similarity"
    components = ("precision_at_k",)

    def from_verdicts(
        self, sample: Sample, reply: JudgeReply[RagVerdicts], judge: JudgeClient
    ) -> MetricResult:
        by_index = {v.context_index: v for v in reply.output.contexts}
        n = len(sample.contexts or [])
        flags = [bool(by_index[i].is_relevant) if i in by_index else False for i in range(1, n + 1)]
        return self.llm(
            sum(flags) / n,
            judge,
            [RAG_VERDICTS],
            components={"precision_at_k": average_precision(flags)},
            relevant=sum(flags),
            contexts=n,
            verdicts=[by_index[i].model_dump() for i in range(1, n + 1) if i in by_index],
        )

    def estimate(self, samples: Sequence[Sample], res: Resources) -> list[MetricResult]:
        sims = context_similarity(
            res,
            [s.query or "" for s in samples],
            [s.contexts or [] for s in samples],
            [s.expected for s in samples],
        )
        out = []
        for per in sims:
            flags = [x >= CONTEXT_RELEVANCE_THRESHOLD for x in per]
            out.append(
                self.local(
                    sum(flags) / len(flags),
                    res,
                    components={"precision_at_k": average_precision(flags)},
                    relevant=sum(flags),
                    contexts=len(flags),
                    threshold=CONTEXT_RELEVANCE_THRESHOLD,
                    per_context=[round(x, 4) for x in per],
                )
            )
        return out


@register
class RagasContextRecall(_SupportedShare):
    """Share of the reference answer's statements that the retrieved contexts support (RAGAS-style,
    seed 003).

    Formula: ``attributable statements / statements``; the judge breaks the reference
    (ground truth) answer into atomic statements and attributes each to a context, in
    the same ONE call as faithfulness and precision. No statements -> 1.0 (the seed's
    rule, flagged in the reason). Inputs: expected (ground truth), contexts. Range 0..1
    (seed: 0-100), higher is better. Evidence: statements with verdicts and supporting
    context.
    Local estimator ``sentence_support``: each reference sentence is a statement,
    attributed when its sentence support by the contexts is at least 0.6 and none of its
    anchors is unsupported. Weaknesses: a one-word reference ("Cornish heath") is one
    statement, so recall is all or nothing; the estimator's sentences are not atomic.
    """

    name = "ragas_context_recall"
    requires = ("expected", "contexts")
    estimator = "sentence_support"
    items = "statements"
    item_text = "statement"
    item_ok = "attributed"
    source = "expected"
    count_key, ok_key, missing_key = "statements", "attributed", "missing"
    none_reason = "no statements in the reference"


@register
class RagasAnswerRelevance(_Judged):
    """How well the answer addresses the question: mean cosine of the question with 3 questions
    generated from the answer (RAGAS-style, seed 003).

    Formula: the judge generates 3 questions the answer would address (seeing the answer
    only); the value is ``mean_i clip(cos(embed(question), embed(generated_i)), 0, 1)``
    with the run's embedder. If the judge returns no question, the seed's direct rubric
    (1.0 / 0.75 / 0.5 / 0.25 / 0.0) is asked instead (``details["fallback"]``). Inputs:
    query, response. Range 0..1 (seed: 0-100), higher is better.
    Local estimator ``question_answer_cosine``: clip(cos(question, answer), 0, 1), 0 for
    a non-committal answer. Weaknesses: cosine levels depend on the embedder (the seed's
    exact-answer example scores 0.83, not 1.0); generated questions can echo the answer's
    wording; the estimator measures topic, not answer-ness.
    """

    name = "ragas_answer_relevance"
    requires = ("query", "response")
    suites = ("judged", "rag")
    seed = "003"
    estimator = "question_answer_cosine"

    def requests(self, sample: Sample) -> list[Request]:
        return [(ANSWER_QUESTIONS, {"answer": sample.response})]

    async def _ask(self, sample: Sample, judge: JudgeClient) -> tuple[list[str], Any]:
        reply = await judge.ask(ANSWER_QUESTIONS, answer=sample.response)
        questions = [q.strip() for q in reply.output.questions if q and q.strip()][:3]
        if questions:
            return questions, reply
        return [], await judge.ask(
            ANSWER_RELEVANCE_DIRECT, question=sample.query, answer=sample.response
        )

    def judge_batch(
        self, samples: Sequence[Sample], res: Resources, judge: JudgeClient
    ) -> list[MetricResult]:
        async def one(sample: Sample) -> tuple[list[str], Any] | BaseException:
            try:
                return await self._ask(sample, judge)
            except Exception as exc:
                return exc

        asked = judge.gather(one(s) for s in samples)
        texts = [s.query or "" for s in samples] + [
            q for a in asked if not isinstance(a, BaseException) for q in a[0]
        ]
        vectors = dict(zip(texts, res.embedder.embed(texts), strict=True)) if texts else {}
        out = []
        for sample, item in zip(samples, asked, strict=True):
            if isinstance(item, BaseException):
                out.append(self.judge_failed(item, judge))
                continue
            questions, reply = item
            if not questions:
                value, _ = _unit_score(float(reply.output.score))
                out.append(
                    self.llm(
                        value,
                        judge,
                        [ANSWER_QUESTIONS, ANSWER_RELEVANCE_DIRECT],
                        fallback="direct rubric score (no question generated)",
                        judge_reason=reply.output.reason,
                    )
                )
                continue
            q = vectors[sample.query or ""]
            sims = [float(np.clip(q @ vectors[g], 0.0, 1.0)) for g in questions]
            out.append(
                self.llm(
                    sum(sims) / len(sims),
                    judge,
                    [ANSWER_QUESTIONS],
                    embedder=_embedder_name(res),
                    generated_questions=questions,
                    similarities=[round(s, 4) for s in sims],
                )
            )
        return out

    def estimate(self, samples: Sequence[Sample], res: Resources) -> list[MetricResult]:
        return _relevance_estimates(self, samples, res)


@register
class RagasScore(_Judged):
    """Weighted composite of the four RAGAS-style metrics, renormalised over the missing ones (seed
    003).

    Formula: ``sum_k w_k * m_k / sum_k w_k`` over the metrics m_k that have a value, with
    w = faithfulness 0.30, context precision 0.20, context recall 0.20, answer relevance
    0.30 (seed 003; its example 1.00, missing, 1.00, 0.8327 gives 0.9373). Inputs:
    whatever the four need; None when none of them can be computed. Range 0..1 (seed:
    0-100), higher is better. Components: the four values; details: the renormalised
    weights. Makes no judge call of its own (uses the memo of the four; run alone, it
    asks their 2 questions per sample). Weaknesses: a missing metric silently shifts the
    weight onto the others, so composites over different subsets are not comparable;
    check ``details["weights"]``.
    """

    name = "ragas_score"
    requires = ()
    suites = ("judged", "rag")
    seed = "003"
    estimator = "composite of the four local estimators"
    components = ("faithfulness", "context_precision", "context_recall", "answer_relevance")

    def __init__(self, weights: Mapping[str, float] | None = None) -> None:
        weights = dict(weights) if weights is not None else dict(RAGAS_WEIGHTS)
        unknown = set(weights) - set(RAGAS_WEIGHTS)
        if unknown or any(w < 0 for w in weights.values()) or sum(weights.values()) <= 0:
            raise ValueError(
                f"RagasScore weights take keys {sorted(RAGAS_WEIGHTS)} with non-negative "
                f"values and a positive sum. Got {weights}."
            )
        self.weights = weights

    def params(self) -> dict[str, Any]:
        return {} if self.weights == RAGAS_WEIGHTS else {"weights": self.weights}

    @staticmethod
    def members() -> dict[str, _Judged]:
        return {
            "faithfulness": RagasFaithfulness(),
            "context_precision": RagasContextPrecision(),
            "context_recall": RagasContextRecall(),
            "answer_relevance": RagasAnswerRelevance(),
        }

    def requests(self, sample: Sample) -> list[Request]:
        asks: list[Request] = []
        for metric in self.members().values():
            if not metric.missing_inputs(sample):
                asks.extend(metric.requests(sample))
        return asks

    def compute_batch(self, samples: Sequence[Sample], res: Resources) -> list[MetricResult]:
        members = self.members()
        if res.judge is not None:
            prefetch(members.values(), samples, res)
        scored = {key: m.score_batch(samples, res) for key, m in members.items()}
        out = []
        for i in range(len(samples)):
            parts = {key: scored[key][i] for key in members}
            values = {key: r.value for key, r in parts.items()}
            value, used = ragas_composite(values, self.weights)
            methods = {key: r.method for key, r in parts.items()}
            unavailable = {
                key: (r.error or r.reason) for key, r in parts.items() if r.value is None
            }
            method = "llm" if res.judge is not None else "local"
            if value is None:
                result = self.na(
                    "none of the four RAGAS metrics could be computed",
                    method=method,
                    unavailable=unavailable,
                )
                error = next((r.error for r in parts.values() if r.error), None)
                out.append(dataclasses.replace(result, error=error) if error else result)
                continue
            details: dict[str, Any] = {
                "weights": {k: round(w, 6) for k, w in used.items()},
                "methods": methods,
                "unavailable": unavailable,
            }
            if method == "local":
                details["estimator"] = self.estimator
            out.append(self.result(value, components=values, method=method, **details))
        return out


# ---- seed 003: reference-based --------------------------------------------------------


@register
class FactualAccuracy(_Judged):
    """Factual accuracy of the answer against the reference: G-Eval correctness 50%, completeness
    30%, consistency 20%, graded A–E (seed 003).

    Formula: the judge scores three criteria 0-100 with seed 003's chain-of-thought
    rubric; value = ``(0.5 * correctness + 0.3 * completeness + 0.2 * consistency) /
    100`` (computed here, the judge's own final_score kept as evidence); grade A >= 0.8,
    B >= 0.6, C >= 0.4, D >= 0.2, else E in ``details["grade"]``. Inputs: response,
    expected (query used when present). Range 0..1, higher is better. Seed 003 reports it
    as ``factual_accuracy_percentage`` (the grade of the same score); that is the 0-100
    view of this metric, not a separate one.
    Local estimator ``reference_agreement+coverage``: correctness = the
    ``reference_agreement`` score (cosine of what answer and reference add to the
    question, halved by each contradiction cue: negation mismatch, conflicting number,
    date or entity, yes/no disagreement), completeness = sentence support of the
    reference by the answer; consistency is not estimated offline, so the weights
    renormalise to 0.625/0.375 (``details["weights"]``). Weaknesses: G-Eval's single
    call asks for three numbers whose scale drifts between judges; the estimator cannot
    tell a fluent misconception from the truth unless a cue marks it (see
    ``reference_agreement``).
    """

    name = "factual_accuracy"
    requires = ("response", "expected")
    seed = "003"
    estimator = "reference_agreement+coverage"
    components = ("correctness", "completeness", "consistency")

    def _values(self, sample: Sample) -> dict[str, Any]:
        return {
            "question": sample.query,
            "reference_answer": sample.expected,
            "answer": sample.response,
        }

    def requests(self, sample: Sample) -> list[Request]:
        return [(GEVAL_FACTUAL_ACCURACY, self._values(sample))]

    async def judge_one(self, sample: Sample, res: Resources, judge: JudgeClient) -> MetricResult:
        reply = await judge.ask(GEVAL_FACTUAL_ACCURACY, **self._values(sample))
        out = reply.output
        components = {
            "correctness": out.step1_correctness.score / 100.0,
            "completeness": out.step2_completeness.score / 100.0,
            "consistency": out.step3_consistency.score / 100.0,
        }
        value = sum(FACTUAL_ACCURACY_WEIGHTS[k] * v for k, v in components.items())
        return self.llm(
            value,
            judge,
            [GEVAL_FACTUAL_ACCURACY],
            components=components,
            grade=factual_grade(value),
            judge_final_score=out.final_score,
            confidence=out.confidence,
            reasoning={
                "correctness": out.step1_correctness.reasoning,
                "completeness": out.step2_completeness.reasoning,
                "consistency": out.step3_consistency.reasoning,
                "overall": out.overall_reasoning,
            },
        )

    def estimate(self, samples: Sequence[Sample], res: Resources) -> list[MetricResult]:
        agreements = reference_agreement(
            res,
            [s.query for s in samples],
            [s.response or "" for s in samples],
            [s.expected or "" for s in samples],
        )
        coverage = sentence_support(
            res,
            [s.expected or "" for s in samples],
            [[s.response or ""] for s in samples],
            use_anchors=False,
        )
        total = FACTUAL_ACCURACY_WEIGHTS["correctness"] + FACTUAL_ACCURACY_WEIGHTS["completeness"]
        weights = {
            "correctness": round(FACTUAL_ACCURACY_WEIGHTS["correctness"] / total, 6),
            "completeness": round(FACTUAL_ACCURACY_WEIGHTS["completeness"] / total, 6),
        }
        out = []
        for agreement, cover in zip(agreements, coverage, strict=True):
            components = {
                "correctness": agreement.score,
                "completeness": cover.score,
                "consistency": None,
            }
            value = weights["correctness"] * agreement.score + weights["completeness"] * cover.score
            out.append(
                self.local(
                    value,
                    res,
                    components=components,
                    grade=factual_grade(value),
                    weights=weights,
                    agreement=agreement.details(),
                )
            )
        return out


#: local classification: CORRECT at or above this reference agreement
AGREEMENT_THRESHOLD = 0.5


@register
class AnswerClassification(_Judged):
    """Classifies the answer as CORRECT, WRONG or DON'T KNOW against the reference answer (seed
    003).

    Formula: an answer containing one of seed 003's uncertainty phrases ("i don't know",
    "unknown", "not sure", "cannot determine", "no information", ... plus "no comment")
    or a very short non-answer ("n/a") is DON'T KNOW without a judge call (``method``
    "pattern"); otherwise the judge classifies CORRECT or WRONG with seed 003's prompt.
    Value: 1.0 for CORRECT, 0.0 for WRONG and for DON'T KNOW, so the mean over a run is
    the seed's "correct" percentage over all evaluations (17 of 24 = 70.8%); the label is
    in ``details["label"]`` and the runner counts labels per run (seed 003's
    correct/wrong/dont_know_answers_count). Inputs: response, expected (query used when
    present). Range 0..1, higher is better.
    Local estimator ``reference_agreement``: CORRECT when the agreement score (cosine of
    answer and reference after removing the question's content words, halved by each
    contradiction cue: a negation on one side only when neither is hedged, a number,
    date or entity the two state differently, yes/no disagreement; see
    `assay.judge.estimators.reference_agreement`) is at least 0.5; the score is the
    ``agreement`` component. A DON'T KNOW answer keeps its label and value 0 but still
    reports the ``agreement`` component (1 when the reference declines too, e.g. both "I
    have no comment"; otherwise usually low, since a non-answer adds nothing the
    reference says). On TruthfulQA dev: AUROC of the component 0.83 without the DON'T
    KNOW answers, 0.82 as reported, 0.79 with DON'T KNOW scored 0; of the label, 0.74.
    Weaknesses: the phrase test is a substring match ("the origin is unknown" is DON'T
    KNOW even when true); a similarity threshold cannot tell a fluent misconception from
    the truth unless a cue (negation, a different name or number) marks it.
    """

    name = "answer_classification"
    requires = ("response", "expected")
    seed = "003"
    estimator = "reference_agreement"
    components = ("agreement",)

    def _values(self, sample: Sample) -> dict[str, Any]:
        return {
            "question": sample.query,
            "reference_answer": sample.expected,
            "answer": sample.response,
        }

    def requests(self, sample: Sample) -> list[Request]:
        if uncertainty_phrase(sample.response or ""):
            return []
        return [(ANSWER_CLASSIFICATION, self._values(sample))]

    def _dont_know(self, phrase: str) -> MetricResult:
        return self.result(0.0, method="pattern", label="DON'T KNOW", matched_phrase=phrase)

    async def judge_one(self, sample: Sample, res: Resources, judge: JudgeClient) -> MetricResult:
        phrase = uncertainty_phrase(sample.response or "")
        if phrase:
            return self._dont_know(phrase)
        reply = await judge.ask(ANSWER_CLASSIFICATION, **self._values(sample))
        label = reply.output.label
        return self.llm(
            1.0 if label == "CORRECT" else 0.0,
            judge,
            [ANSWER_CLASSIFICATION],
            label=label,
            judge_reason=reply.output.reason,
        )

    def estimate(self, samples: Sequence[Sample], res: Resources) -> list[MetricResult]:
        agreements = reference_agreement(
            res,
            [s.query for s in samples],
            [s.response or "" for s in samples],
            [s.expected or "" for s in samples],
        )
        out = []
        for sample, agreement in zip(samples, agreements, strict=True):
            phrase = uncertainty_phrase(sample.response or "")
            if phrase:  # the label stays the pattern's; the agreement is still reported
                out.append(
                    self.result(
                        0.0,
                        components={"agreement": agreement.score},
                        method="pattern",
                        label="DON'T KNOW",
                        matched_phrase=phrase,
                        estimator=self.estimator,
                        **agreement.details(),
                    )
                )
                continue
            correct = agreement.score >= AGREEMENT_THRESHOLD
            out.append(
                self.local(
                    1.0 if correct else 0.0,
                    res,
                    components={"agreement": agreement.score},
                    label="CORRECT" if correct else "WRONG",
                    threshold=AGREEMENT_THRESHOLD,
                    **agreement.details(),
                )
            )
        return out
