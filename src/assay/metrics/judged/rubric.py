"""The judge specification's judged metrics: four rubric scores and their composite, answer
correctness.

``judged_relevance`` asks one question per sample (the judge specification's relevance
prompt);
``faithfulness``, ``hallucination`` and ``contextual_relevance`` ask the same ONE question
(`GROUNDING`: the judge specification's three rubrics, each filling its key of the reply),
so together they cost one call per sample; ``answer_correctness`` declares the asks of
``judged_relevance`` and ``faithfulness``, so scored with them it costs no call of its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from assay.core.result import MetricResult
from assay.core.sample import Sample
from assay.engine import Answers, Ask
from assay.engine.resources import Resources
from assay.estimators.offline import (
    context_similarity,
    context_similarity_texts,
    question_answer_cosine,
    question_answer_texts,
    uncertainty_phrase,
)
from assay.judge.prompts import RELEVANCE
from assay.metrics.base import Source
from assay.metrics.judged.base import (
    SUPPORT_NEEDS,
    JudgedMetric,
    RubricScore,
    embed_asks,
    pass_threshold,
    shared_supports,
    support_asks,
)
from assay.metrics.judged.formulas import weighted_correctness
from assay.metrics.judged.shared_prompts import GROUNDING
from assay.metrics.registry import register

__all__ = [
    "AnswerCorrectness",
    "ContextualRelevance",
    "Faithfulness",
    "Hallucination",
    "JudgedRelevance",
    "QuestionAnswerCosineEstimate",
]


class QuestionAnswerCosineEstimate(JudgedMetric):
    """The local estimator ``question_answer_cosine`` (0 for a non-committal answer), for
    the metrics that ask how relevant the response is to the query."""

    def estimate_plan(self, sample: Sample, answers: Answers) -> list[Ask]:
        return embed_asks(question_answer_texts([sample.query or ""], [sample.response or ""]))

    def estimate(
        self, samples: Sequence[Sample], answers: Answers, res: Resources
    ) -> list[MetricResult]:
        questions = [s.query or "" for s in samples]
        responses = [s.response or "" for s in samples]
        vectors = answers.vectors(question_answer_texts(questions, responses))
        cosines = question_answer_cosine(vectors, questions, responses)
        out = []
        for sample, cosine in zip(samples, cosines, strict=True):
            phrase = uncertainty_phrase(sample.response or "")
            value = 0.0 if phrase else cosine
            out.append(self.local(value, res, cosine=round(cosine, 4), noncommittal=phrase))
        return out


@register
class JudgedRelevance(QuestionAnswerCosineEstimate, RubricScore):
    """How relevant the response is to the query, rated 0..1 by an LLM judge (judge specification).

    Formula: the judge's score with the judge specification's relevance prompt and rubric
    (1.0 = directly answers with complete information ... 0.0-0.3 = does not address the
    question), on [0, 1] (a reply above 10 and at most 100 is read as a percentage; any
    other score outside [0, 1] makes the reply unparsable, where the specification clamps
    it). Inputs: query, response. Range 0..1, higher is better. Named ``judged_relevance``
    because ``relevance`` is the pipeline specification's lexical metric. Local estimator
    ``question_answer_cosine``: clip(cos(embed(query), embed(response)), 0, 1), and 0 for a
    non-committal answer ("I don't know"). Weaknesses: the judge is a single holistic number
    (no evidence beyond its reason); the estimator measures topical closeness, so an answer
    that restates the question scores high, and its scale is compressed (good answers often
    sit at 0.4-0.7).
    """

    name = "judged_relevance"
    requires = ("query", "response")
    source = Source.LLM_JUDGE
    estimator = "question_answer_cosine"
    prompt = RELEVANCE
    fields = ("query", "response")


class _SupportBased(RubricScore):
    """Faithfulness-style metrics whose local estimator is sentence support."""

    needs = SUPPORT_NEEDS

    def estimate_plan(self, sample: Sample, answers: Answers) -> list[Ask]:
        return support_asks(answers, [sample.response or ""], [sample.contexts or []])

    def _supports(self, samples: Sequence[Sample], answers: Answers, res: Resources) -> list[Any]:
        texts = [s.response or "" for s in samples]
        return shared_supports(answers, res, texts, [s.contexts or [] for s in samples])


@register
class Faithfulness(_SupportBased):
    """Whether the response is grounded in the retrieved context, rated 0..1 by an LLM judge (judge
    specification).

    Formula: the judge's score with the judge specification's faithfulness rubric (the
    ``faithfulness`` task of the `GROUNDING` ask shared with ``hallucination`` and
    ``contextual_relevance``; 1.0 = every fact/number in the response is directly from the
    context ... 0.0-0.3 = many unsupported claims), on [0, 1] as for ``judged_relevance``.
    Inputs: response, contexts. Range 0..1, higher is better. Local estimator
    (``support_estimator = "auto"``, the default) ``sentence_support+entailment``, the
    plain mean of two supports where the models extra is installed (else the first alone):
    the graded support (``sentence_support``, fitted on nothing: per response sentence,
    the mean of its best embedding cosine against the context sentences and the share of
    its content words found in the context, averaged over sentences and multiplied by
    ``0.5 + 0.5 * (supported anchors / anchors)``; numbers, dates, entities and asserted
    subject-verb-object claims checked by `assay.text.anchors`; factor 1 without
    anchors) and the entailment support (``entailment``: per response sentence, the
    largest P(entailment) of Assay's entailment model over the two context windows that
    share the most content words with it, averaged over sentences;
    `assay.estimators.entailment`, `assay.models.entailment`). Both data sets were left
    out of both: AUROC BEGIN dev 0.947, QAGS CNN/DM 0.815 for the mean, against
    0.917 and 0.775 for the graded support and 0.932 and 0.798 for the
    entailment model alone (``support_estimator = "graded"`` or ``"entailment"``).
    ``entailment_premises = "windows+sentences"`` also reads each sentence against its
    two closest single context sentences, the entailment support then being the mean of
    the best window's and the best sentence's P(entailment) (``entailment+sentences``):
    it ranks answers that put a fact on the wrong name of a passage better (0.048 to
    0.144 with the mean) and QAGS at 0.822, but BEGIN at 0.9466, so it is an option.
    Evidence per sentence: both scores, the deciding window and its three
    probabilities; ``details["in_domain"]`` is false when the model read text unlike its
    training (not English, or cut). ``support_estimator = "head"``
    selects the learned support head (``support_head``, `assay.models.support_head`: a
    calibrated logistic model over 16 features of the response against the contexts,
    with USE multilingual v3 only; its threshold 0.53 is the pass threshold of its
    results, ``details["pass_threshold"]``): nested grouped CV AUROC BEGIN 0.926, QAGS
    0.839 on the data it was trained on, but fitted on one of them and scored on the
    other it lost to the graded support on both (0.894, 0.745), and it lost on
    paraphrasing answers held out of Assay, so it is not the default. Weaknesses: the
    judge gives one holistic number; the graded half rewards words shared with the
    context and the model half reads local windows only (a claim that joins facts from
    far apart in the context finds no window with both) and lets a changed subject pass
    ("Sydney is the capital of Australia" against "Canberra is ..."; the graded half's
    anchors catch a name the context lacks); swapped roles ("Beats acquired Apple")
    are caught by neither; see ``ragas_faithfulness`` for the claim-by-claim judge
    method.
    """

    name = "faithfulness"
    requires = ("response", "contexts")
    suites = ("judged", "rag")
    source = Source.LLM_JUDGE
    estimator = "sentence_support+entailment"
    prompt = GROUNDING
    fields = ("query", "contexts", "response")
    key = "faithfulness"

    def estimate(
        self, samples: Sequence[Sample], answers: Answers, res: Resources
    ) -> list[MetricResult]:
        return [
            self.local(
                s.score,
                res,
                estimator=s.estimator,
                **pass_threshold(s.decision_threshold),
                **s.details(),
            )
            for s in self._supports(samples, answers, res)
        ]


@register
class Hallucination(_SupportBased):
    """How much of the response is fabricated (not in the context), 0..1 from an LLM judge; lower
    is better (judge specification).

    Formula: the judge's score with the judge specification's hallucination rubric (its task in the
    `GROUNDING` ask shared with ``faithfulness``; 0.0 = everything is
    from the context ... 0.9-1.0 = mostly or completely fabricated), on [0, 1] as for
    ``judged_relevance``. Inputs: response, contexts. Range 0..1, LOWER is better.
    Evaluated by its own rubric, not as 1 - faithfulness (the specification's choice).
    Local estimator ``unsupported_share``: 1 - the local estimate of ``faithfulness``
    (``1 - sentence_support+entailment`` by default, ``1 - sentence_support`` without
    the models extra or with ``support_estimator = "graded"``, ``1 - entailment``,
    ``1 - support_head`` with the other settings).
    Weaknesses: as ``faithfulness``; an answer that is all hedges and
    pleasantries scores low (nothing to fabricate) whether or not it helps.
    """

    name = "hallucination"
    requires = ("response", "contexts")
    higher_is_better = False
    suites = ("judged", "rag")
    source = Source.LLM_JUDGE
    estimator = "unsupported_share"
    prompt = GROUNDING
    fields = ("query", "contexts", "response")
    key = "hallucination"

    def estimate(
        self, samples: Sequence[Sample], answers: Answers, res: Resources
    ) -> list[MetricResult]:
        return [
            self.local(
                1.0 - s.score,
                res,
                estimator=None if s.estimator == "sentence_support" else f"1 - {s.estimator}",
                **pass_threshold(
                    None if s.decision_threshold is None else 1 - s.decision_threshold
                ),
                support=round(s.score, 4),
                **s.details(),
            )
            for s in self._supports(samples, answers, res)
        ]


@register
class ContextualRelevance(RubricScore):
    """Whether the retrieved context is relevant for answering the query, rated 0..1 by an LLM
    judge (judge specification).

    Formula: the judge's score with the judge specification's contextual relevance rubric
    (its task in the `GROUNDING` ask shared with ``faithfulness``; 1.0 = context directly
    contains the information needed ... 0.0-0.3 = irrelevant), on [0, 1] as for
    ``judged_relevance``. Inputs: query, contexts. Range 0..1, higher is better. Local
    estimator ``context_similarity``: the best cosine of the query with any context or
    its sentence sharing the most words with the query, clipped to [0, 1] (per-context
    values in details). Weaknesses: topical similarity, not usefulness: a passage about
    the right subject that lacks the needed fact still scores high.
    """

    name = "contextual_relevance"
    requires = ("query", "contexts")
    suites = ("judged", "rag")
    source = Source.LLM_JUDGE
    estimator = "context_similarity"
    prompt = GROUNDING
    fields = ("query", "contexts", "response")
    key = "contextual_relevance"

    def estimate_plan(self, sample: Sample, answers: Answers) -> list[Ask]:
        return embed_asks(context_similarity_texts([sample.query or ""], [sample.contexts or []]))

    def estimate(
        self, samples: Sequence[Sample], answers: Answers, res: Resources
    ) -> list[MetricResult]:
        questions = [s.query or "" for s in samples]
        contexts = [s.contexts or [] for s in samples]
        vectors = answers.vectors(context_similarity_texts(questions, contexts))
        sims = context_similarity(vectors, questions, contexts)
        return [
            self.local(max(per) if per else 0.0, res, per_context=[round(x, 4) for x in per])
            for per in sims
        ]


@register
class AnswerCorrectness(JudgedMetric):
    """The judge specification's composite: 0.7 × judged relevance + 0.3 × faithfulness.

    Formula: ``(w_r * judged_relevance + w_f * faithfulness) / (w_r + w_f)`` with weights
    from ``answer_correctness_weights`` (default relevance 0.7, faithfulness 0.3, so
    0.90 and 1.00 give 0.93). Inputs: query, response, contexts (those of its two
    parts). Range 0..1, higher is better. With a judge it reuses the two judge calls
    of ``judged_relevance`` and ``faithfulness`` (no call of its own); without one, their
    local estimators. When either part is unavailable (e.g. its judge call failed) the
    result is None with the reason. Weakness (the specification's design): despite its name it
    never compares the answer with a reference answer, so a relevant, grounded but
    wrong answer scores high; ``factual_accuracy`` and ``answer_classification``
    compare with the expected answer.
    """

    name = "answer_correctness"
    requires = ("query", "response", "contexts")
    needs = SUPPORT_NEEDS
    source = Source.LLM_JUDGE
    estimator = "question_answer_cosine+sentence_support+entailment"
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

    def judge_plan(self, sample: Sample, answers: Answers) -> list[Ask]:
        return [JudgedRelevance().ask(sample), Faithfulness().ask(sample)]

    def estimate_plan(self, sample: Sample, answers: Answers) -> list[Ask]:
        return [
            *JudgedRelevance().estimate_plan(sample, answers),
            *Faithfulness().estimate_plan(sample, answers),
        ]

    def _combine(
        self,
        relevance: MetricResult,
        faithfulness: MetricResult,
        res: Resources,
        model: str | None,
    ) -> MetricResult:
        weights = self._weights(res)
        parts = {"relevance": relevance, "faithfulness": faithfulness}
        missing = {k: r for k, r in parts.items() if r.value is None}
        if missing:
            why = "; ".join(f"{k}: {r.error or r.reason}" for k, r in missing.items())
            method, reason = ("llm" if model else "local"), f"needs both parts; unavailable {why}"
            error = next((r.error for r in missing.values() if r.error), None)
            if error is None:
                return self.na(reason, method=method)
            return self.failed(error, reason=reason, method=method)
        value = weighted_correctness(relevance.value, faithfulness.value, weights)  # type: ignore[arg-type]
        components = {"relevance": relevance.value, "faithfulness": faithfulness.value}
        if model is not None:
            return self.llm(
                value, model, [RELEVANCE, GROUNDING], components=components, weights=weights
            )
        estimator = f"question_answer_cosine+{faithfulness.details['estimator']}"
        return self.local(value, res, estimator=estimator, components=components, weights=weights)

    def reduce_batch(
        self, samples: Sequence[Sample], answers: Answers, res: Resources
    ) -> list[MetricResult]:
        rel_metric, faith_metric = JudgedRelevance(), Faithfulness()
        return [
            self._combine(
                rel_metric.reduced(s, answers), faith_metric.reduced(s, answers), res, answers.model
            )
            for s in samples
        ]

    def estimate(
        self, samples: Sequence[Sample], answers: Answers, res: Resources
    ) -> list[MetricResult]:
        rels = JudgedRelevance().estimate(samples, answers, res)
        faiths = Faithfulness().estimate(samples, answers, res)
        return [self._combine(r, f, res, None) for r, f in zip(rels, faiths, strict=True)]
