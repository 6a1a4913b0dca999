"""The RAG specification's RAGAS-style judged metrics and their composite, ``ragas_score``.

``ragas_faithfulness``, ``ragas_context_precision`` and ``ragas_context_recall`` ask the
same ONE question per sample (`RAG_VERDICTS`: claims extracted and verified, every
context rated, reference statements attributed), asked once for the three;
``ragas_answer_relevance`` asks one (3 generated questions) and, only when no question
comes back, a follow-up (the direct rubric); ``ragas_score`` declares the asks of the
four. So the four and their composite cost 2 calls per sample.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from assay.core.result import MetricResult
from assay.core.sample import Sample
from assay.engine import Answers, Ask, embed_ask, judge_ask
from assay.engine.resources import Resources
from assay.estimators.entailment import COMBINED_SUPPORTED, ENTAILED
from assay.estimators.offline import (
    CONTEXT_RELEVANCE_THRESHOLD,
    SUPPORT_THRESHOLD,
    context_similarity,
    context_similarity_texts,
)
from assay.judge.client import JudgeReply
from assay.judge.prompts import (
    ANSWER_QUESTIONS,
    ANSWER_RELEVANCE_DIRECT,
    RAG_VERDICTS,
    RagVerdicts,
)
from assay.metrics.base import Source
from assay.metrics.judged.base import (
    SUPPORT_NEEDS,
    JudgedMetric,
    embed_asks,
    pass_threshold,
    rag_values,
    shared_supports,
    support_asks,
)
from assay.metrics.judged.formulas import (
    RAGAS_WEIGHTS,
    average_precision,
    ragas_composite,
    unit_score,
)
from assay.metrics.judged.rubric import QuestionAnswerCosineEstimate
from assay.metrics.registry import register

__all__ = [
    "RagasAnswerRelevance",
    "RagasContextPrecision",
    "RagasContextRecall",
    "RagasFaithfulness",
    "RagasScore",
]


class _RagVerdictMetric(JudgedMetric):
    """Metrics read from the one RAG_VERDICTS call of a sample."""

    suites = ("judged", "rag")
    source = Source.RAG_EVALUATION

    def judge_plan(self, sample: Sample, answers: Answers) -> list[Ask]:
        return [judge_ask(RAG_VERDICTS, **rag_values(sample))]

    def reduce(self, sample: Sample, answers: Answers) -> MetricResult:
        [ask] = self.judge_plan(sample, answers)
        return self.from_verdicts(sample, answers.reply(ask), answers.model)

    def from_verdicts(
        self, sample: Sample, reply: JudgeReply[RagVerdicts], model: str
    ) -> MetricResult:
        raise NotImplementedError


#: the sentence support at which a claim counts as supported, by estimator (the graded
#: support and the support head: `SUPPORT_THRESHOLD`)
_SUPPORTED_AT = {
    "entailment": ENTAILED,
    "entailment+sentences": ENTAILED,
    "sentence_support+entailment": COMBINED_SUPPORTED,
    "sentence_support+entailment+sentences": COMBINED_SUPPORTED,
}


class _SupportedShare(_RagVerdictMetric):
    """A share of items (the answer's claims, the reference's statements) that the contexts
    support: read from the RAG_VERDICTS reply, or estimated by sentence support.

    Subclasses name the reply list (``items``), each item's text and verdict attributes,
    the sample field the estimator splits into sentences, and the evidence keys."""

    needs = SUPPORT_NEEDS
    items: ClassVar[str]  # RagVerdicts attribute: "claims" or "statements"
    item_text: ClassVar[str]  # attribute of an item holding its text
    item_ok: ClassVar[str]  # attribute of an item holding its verdict
    checked_field: ClassVar[str]  # Sample field the local estimator checks sentence by sentence
    count_key: ClassVar[str]
    ok_key: ClassVar[str]
    missing_key: ClassVar[str]
    #: reason of the 1.0 given when there is no item (the RAG specification's rule)
    none_reason: ClassVar[str]

    def from_verdicts(
        self, sample: Sample, reply: JudgeReply[RagVerdicts], model: str
    ) -> MetricResult:
        items = getattr(reply.output, self.items)
        verdicts = [item.model_dump() for item in items]
        if not items:
            return self.llm(
                1.0,
                model,
                [RAG_VERDICTS],
                reason=f"{self.none_reason}: 1.0 by the specification's rule",
                verdicts=verdicts,
                **{self.count_key: 0, self.ok_key: 0},
            )
        ok = sum(bool(getattr(item, self.item_ok)) for item in items)
        return self.llm(
            ok / len(items),
            model,
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

    def estimate_plan(self, sample: Sample, answers: Answers) -> list[Ask]:
        checked = getattr(sample, self.checked_field) or ""
        return support_asks(answers, [checked], [sample.contexts or []])

    def estimate(
        self, samples: Sequence[Sample], answers: Answers, res: Resources
    ) -> list[MetricResult]:
        texts = [getattr(s, self.checked_field) or "" for s in samples]
        supports = shared_supports(answers, res, texts, [s.contexts or [] for s in samples])
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
                    support.score,
                    res,
                    estimator=support.estimator,
                    **pass_threshold(support.decision_threshold),
                    threshold=_SUPPORTED_AT.get(support.estimator, SUPPORT_THRESHOLD),
                    **{self.count_key: n, self.ok_key: ok, self.missing_key: missing},
                    **support.details(),
                )
            )
        return out


@register
class RagasFaithfulness(_SupportedShare):
    """Share of the answer's atomic claims that the retrieved contexts support (RAGAS-style, RAG
    specification).

    Formula: ``supported claims / claims``; the judge extracts the answer's atomic,
    self-contained claims and verifies all of them against the contexts in ONE call
    (shared with context precision and recall). An answer with no factual claim scores
    1.0 (the specification's rule: nothing unsupported), flagged in the reason. Inputs: response,
    contexts (question and reference used when present). Range 0..1 (the specification: 0-100),
    higher is better. Evidence: every claim with its verdict and reason.
    Local estimator ``sentence_support+entailment``, the one estimator of every "is this
    text supported by the contexts?" metric (``faithfulness``, ``hallucination``,
    ``ragas_context_recall``): the mean of the graded support and the entailment support
    as for ``faithfulness`` (``support_estimator`` selects one of them, or the support
    head; each beats the share of sentences above a cut-off, which loses the grading:
    BEGIN dev AUROC 0.917 for the graded support against 0.840 for the share); each
    answer sentence is listed as a claim, supported when the mean of its graded support
    and its P(entailment) is at least 0.55 and none of its anchors is unsupported (the
    graded support alone: at least 0.6; the entailment model alone: P(entailment) at
    least 0.5). Weaknesses: the
    no-claims rule rewards evasive answers; the judge
    may split claims unevenly (one long claim vs many small ones changes the ratio);
    the estimator's sentences are not atomic claims.
    """

    name = "ragas_faithfulness"
    requires = ("response", "contexts")
    estimator = "sentence_support+entailment"
    items = "claims"
    item_text = "claim"
    item_ok = "verdict"
    checked_field = "response"
    count_key, ok_key, missing_key = "claims", "supported", "unsupported"
    none_reason = "the answer makes no factual claim"


@register
class RagasContextPrecision(_RagVerdictMetric):
    """Share of the retrieved contexts that are relevant to the question (RAGAS-style, the
    RAG specification).

    Formula: ``(1/N) * sum(relevance_i)``, relevance_i in {0, 1} from the judge, which
    rates all N contexts of a sample in ONE call (RAG specification's JSON array form; the
    reference answer, when given, informs the verdicts). Component ``precision_at_k``:
    the rank-aware form ``sum_k(rel_k * P@k) / (relevant contexts in top K)`` (0 when
    none is relevant), which rewards relevant contexts ranked first. Inputs: query,
    contexts. Range 0..1 (the specification: 0-100), higher is better. Evidence: each context's
    verdict, 0-100 relevance score and reasoning.
    Local estimator ``context_similarity``: a context is relevant when its best cosine
    with the question or the reference (over the context and its sentence sharing the
    most words with each) is at least 0.5. Weaknesses: binary verdicts hide near misses;
    the estimator judges topic, not whether the needed fact is present.
    """

    name = "ragas_context_precision"
    requires = ("query", "contexts")
    estimator = "context_similarity"
    components = ("precision_at_k",)

    def from_verdicts(
        self, sample: Sample, reply: JudgeReply[RagVerdicts], model: str
    ) -> MetricResult:
        by_index = {v.context_index: v for v in reply.output.contexts}
        n = len(sample.contexts or [])
        flags = [bool(by_index[i].is_relevant) if i in by_index else False for i in range(1, n + 1)]
        return self.llm(
            sum(flags) / n,
            model,
            [RAG_VERDICTS],
            components={"precision_at_k": average_precision(flags)},
            relevant=sum(flags),
            contexts=n,
            verdicts=[by_index[i].model_dump() for i in range(1, n + 1) if i in by_index],
        )

    def estimate_plan(self, sample: Sample, answers: Answers) -> list[Ask]:
        return embed_asks(
            context_similarity_texts(
                [sample.query or ""], [sample.contexts or []], [sample.expected]
            )
        )

    def estimate(
        self, samples: Sequence[Sample], answers: Answers, res: Resources
    ) -> list[MetricResult]:
        questions = [s.query or "" for s in samples]
        contexts = [s.contexts or [] for s in samples]
        references = [s.expected for s in samples]
        vectors = answers.vectors(context_similarity_texts(questions, contexts, references))
        sims = context_similarity(vectors, questions, contexts, references)
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
    the RAG specification).

    Formula: ``attributable statements / statements``; the judge breaks the reference
    (ground truth) answer into atomic statements and attributes each to a context, in
    the same ONE call as faithfulness and precision. No statements -> 1.0 (the specification's
    rule, flagged in the reason). Inputs: expected (ground truth), contexts. Range 0..1
    (the specification: 0-100), higher is better. Evidence: statements with verdicts and supporting
    context.
    Local estimator ``sentence_support+entailment``: the support of the reference by the
    contexts, as for ``ragas_faithfulness`` (``support_estimator`` selects another);
    each reference sentence is listed as a statement, attributed as a claim is there.
    Weaknesses: a one-word reference ("Cornish heath") is one statement, so
    recall is all or nothing; the estimator's sentences are not atomic.
    """

    name = "ragas_context_recall"
    requires = ("expected", "contexts")
    estimator = "sentence_support+entailment"
    items = "statements"
    item_text = "statement"
    item_ok = "attributed"
    checked_field = "expected"
    count_key, ok_key, missing_key = "statements", "attributed", "missing"
    none_reason = "no statements in the reference"


@register
class RagasAnswerRelevance(QuestionAnswerCosineEstimate):
    """How well the answer addresses the question: mean cosine of the question with 3 questions
    generated from the answer (RAGAS-style, the RAG specification).

    Formula: the judge generates 3 questions the answer would address (seeing the answer
    only); the value is ``mean_i clip(cos(embed(question), embed(generated_i)), 0, 1)``
    with the run's embedder. If the judge returns no question, the specification's direct rubric
    (1.0 / 0.75 / 0.5 / 0.25 / 0.0) is asked instead (``details["fallback"]``). Inputs:
    query, response. Range 0..1 (the specification: 0-100), higher is better.
    Local estimator ``question_answer_cosine``: clip(cos(question, answer), 0, 1), 0 for
    a non-committal answer. Weaknesses: cosine levels depend on the embedder (the specification's
    exact-answer example scores 0.83, not 1.0); generated questions can echo the answer's
    wording; the estimator measures topic, not answer-ness.
    """

    name = "ragas_answer_relevance"
    requires = ("query", "response")
    suites = ("judged", "rag")
    source = Source.RAG_EVALUATION
    estimator = "question_answer_cosine"

    @staticmethod
    def _questions(reply: JudgeReply[Any]) -> list[str]:
        return [q.strip() for q in reply.output.questions if q and q.strip()][:3]

    def judge_plan(self, sample: Sample, answers: Answers) -> list[Ask]:
        first = judge_ask(ANSWER_QUESTIONS, answer=sample.response)
        question = embed_ask(sample.query or "")
        reply = answers.get(first)
        if reply is None:  # the first round: the question embeds while the judge answers
            return [first, question]
        generated = self._questions(reply)
        if not generated:  # follow-up: no question came back, so the direct rubric is asked
            direct = judge_ask(
                ANSWER_RELEVANCE_DIRECT, question=sample.query, answer=sample.response
            )
            return [first, direct]
        # follow-up: the generated questions' vectors
        return [first, question, *(embed_ask(g) for g in generated)]

    def reduce(self, sample: Sample, answers: Answers) -> MetricResult:
        first, *rest = self.judge_plan(sample, answers)
        questions = self._questions(answers.reply(first))
        if not questions:
            direct = answers.reply(rest[0])
            value, _ = unit_score(float(direct.output.score))
            return self.llm(
                value,
                answers.model,
                [ANSWER_QUESTIONS, ANSWER_RELEVANCE_DIRECT],
                fallback="direct rubric score (no question generated)",
                judge_reason=direct.output.reason,
            )
        q, *generated = (answers.reply(ask) for ask in rest)
        sims = [float(np.clip(q @ g, 0.0, 1.0)) for g in generated]
        return self.llm(
            sum(sims) / len(sims),
            answers.model,
            [ANSWER_QUESTIONS],
            embedder=answers.embedder,
            generated_questions=questions,
            similarities=[round(s, 4) for s in sims],
        )


@register
class RagasScore(JudgedMetric):
    """Weighted composite of the four RAGAS-style metrics, renormalised over the missing ones (RAG
    specification).

    Formula: ``sum_k w_k * m_k / sum_k w_k`` over the metrics m_k that have a value, with
    w = faithfulness 0.30, context precision 0.20, context recall 0.20, answer relevance
    0.30 (RAG specification; its example 1.00, missing, 1.00, 0.8327 gives 0.9373). Inputs:
    whatever the four need; None when none of them can be computed. Range 0..1 (the
    specification: 0-100), higher is better. Components: the four values; details: the renormalised
    weights. Declares the asks of the four (no call of its own: scored with them, they
    are asked once; run alone, it asks their 2 questions per sample). Weaknesses: a
    missing metric shifts the weight onto the others, so composites over different
    subsets are not comparable; ``details["unavailable"]`` names the missing ones and why,
    and the run's table counts such values in its ``partial`` column ("2 (1 of 4)").
    """

    name = "ragas_score"
    requires = ()
    needs = SUPPORT_NEEDS
    suites = ("judged", "rag")
    source = Source.RAG_EVALUATION
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
    def members() -> dict[str, JudgedMetric]:
        return {
            "faithfulness": RagasFaithfulness(),
            "context_precision": RagasContextPrecision(),
            "context_recall": RagasContextRecall(),
            "answer_relevance": RagasAnswerRelevance(),
        }

    def plan(self, sample: Sample, answers: Answers) -> list[Ask]:
        return [
            ask
            for metric in self.members().values()
            if not metric.missing_inputs(sample)
            for ask in metric.plan(sample, answers)
        ]

    def reduce_batch(
        self, samples: Sequence[Sample], answers: Answers, res: Resources
    ) -> list[MetricResult]:
        # inside the engine's `answered` block: the members find every answer there
        return self._composite(samples, res)

    def estimate(
        self, samples: Sequence[Sample], answers: Answers, res: Resources
    ) -> list[MetricResult]:
        return self._composite(samples, res)

    def _composite(self, samples: Sequence[Sample], res: Resources) -> list[MetricResult]:
        """The composite of the members' results, each scored by the member itself."""
        members = self.members()
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
