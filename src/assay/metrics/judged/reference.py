"""The RAG specification's reference-based judged metrics: G-Eval factual accuracy and answer
classification (CORRECT / WRONG / DON'T KNOW). Both read the same ONE ask per sample
(`REFERENCE_VERDICTS`: the specification's two task texts, each filling its key of the reply);
classification asks nothing for an answer that declines to answer."""

from __future__ import annotations

from collections.abc import Sequence

from assay.core.result import MetricResult
from assay.core.sample import Sample
from assay.engine import Answers, Ask, judge_ask, parse_ask
from assay.engine.resources import Resources
from assay.estimators.agreement import (
    Agreement,
    agreement_parse_texts,
    reference_agreement,
    reference_agreement_texts,
)
from assay.estimators.offline import sentence_support, sentence_support_texts, uncertainty_phrase
from assay.metrics.base import Source
from assay.metrics.judged.base import AGREEMENT_NEEDS, JudgedMetric, embed_asks, parses_or_none
from assay.metrics.judged.formulas import FACTUAL_ACCURACY_WEIGHTS, factual_grade
from assay.metrics.judged.shared_prompts import REFERENCE_VERDICTS
from assay.metrics.registry import register

__all__ = ["AGREEMENT_THRESHOLD", "AnswerClassification", "FactualAccuracy"]


def _reference_ask(sample: Sample) -> Ask:
    """The `REFERENCE_VERDICTS` ask of ``sample``, shared by both metrics."""
    return judge_ask(
        REFERENCE_VERDICTS,
        question=sample.query,
        reference_answer=sample.expected,
        answer=sample.response,
    )


def _triple(sample: Sample) -> tuple[str | None, str, str]:
    """What the local reference agreement of ``sample`` compares: question, answer,
    reference."""
    return sample.query, sample.response or "", sample.expected or ""


def _agreement_plan(sample: Sample) -> list[Ask]:
    """The embed and parse asks of the local reference agreement of ``sample``."""
    question, answer, reference = _triple(sample)
    return [
        *embed_asks(reference_agreement_texts([question], [answer], [reference])),
        *(parse_ask(text) for text in agreement_parse_texts([_triple(sample)])),
    ]


def _agreements(samples: Sequence[Sample], answers: Answers, res: Resources) -> list[Agreement]:
    """The local reference agreement of each sample, from the vectors of `_agreement_plan`,
    computed once per (question, answer, reference) in a chunk: kept in the answers' memo,
    so factual accuracy and answer classification scored together share it."""

    def compute(todo: list[tuple[str | None, str, str]]) -> list[Agreement]:
        questions, said, references = ([t[i] for t in todo] for i in range(3))
        vectors = answers.vectors(reference_agreement_texts(questions, said, references))  # type: ignore[arg-type]
        docs = parses_or_none(answers, agreement_parse_texts(todo))
        return reference_agreement(res, vectors, questions, said, references, docs=docs)  # type: ignore[arg-type]

    return answers.computed_once("reference_agreement", [_triple(s) for s in samples], compute)


@register
class FactualAccuracy(JudgedMetric):
    """Factual accuracy of the answer against the reference: G-Eval correctness 50%, completeness
    30%, consistency 20%, graded A–E (RAG specification).

    Formula: the judge scores three criteria 0-100 with the RAG specification's
    chain-of-thought rubric (the ``factual_accuracy`` task of the `REFERENCE_VERDICTS` ask
    shared with ``answer_classification``); value = ``(0.5 * correctness + 0.3 *
    completeness + 0.2 * consistency) / 100`` (computed here, the judge's own final_score
    kept as evidence); grade A >= 0.8, B >= 0.6, C >= 0.4, D >= 0.2, else E in
    ``details["grade"]``. Inputs: response, expected (query used when present). Range 0..1,
    higher is better. The RAG specification reports it as ``factual_accuracy_percentage``
    (the grade of the same score); that is the 0-100 view of this metric, not a separate
    one. Local estimator ``agreement_head+coverage``: correctness = the agreement head's
    calibrated probability that the answer says what the reference says
    (`assay.models.agreement_head`: a logistic model over the rule-based
    ``reference_agreement`` score — cosine of what answer and reference add to the
    question, halved by each contradiction cue: negation mismatch, conflicting number,
    date or entity, yes/no disagreement — and ten more features relating the answer to
    the reference; ``reference_agreement+coverage``, the rule score itself, without spaCy
    or with another embedder than the head's), completeness = the graded sentence support
    of the reference by the answer;
    consistency is not estimated offline, so the weights renormalise to 0.625/0.375
    (``details["weights"]``). Weaknesses: G-Eval's single call asks for three numbers whose
    scale drifts between judges; the estimator cannot tell a fluent misconception from the
    truth unless a cue marks it (see ``reference_agreement``).
    """

    name = "factual_accuracy"
    requires = ("response", "expected")
    needs = AGREEMENT_NEEDS
    source = Source.RAG_EVALUATION
    estimator = "agreement_head+coverage"
    components = ("correctness", "completeness", "consistency")

    def judge_plan(self, sample: Sample, answers: Answers) -> list[Ask]:
        return [_reference_ask(sample)]

    def reduce(self, sample: Sample, answers: Answers) -> MetricResult:
        out = answers.reply(_reference_ask(sample)).output.factual_accuracy
        components = {
            "correctness": out.step1_correctness.score / 100.0,
            "completeness": out.step2_completeness.score / 100.0,
            "consistency": out.step3_consistency.score / 100.0,
        }
        value = sum(FACTUAL_ACCURACY_WEIGHTS[k] * v for k, v in components.items())
        return self.llm(
            value,
            answers.model,
            [REFERENCE_VERDICTS],
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

    def estimate_plan(self, sample: Sample, answers: Answers) -> list[Ask]:
        coverage = sentence_support_texts([sample.expected or ""], [[sample.response or ""]])
        return [*_agreement_plan(sample), *embed_asks(coverage)]

    def estimate(
        self, samples: Sequence[Sample], answers: Answers, res: Resources
    ) -> list[MetricResult]:
        agreements = _agreements(samples, answers, res)
        references = [s.expected or "" for s in samples]
        responses = [[s.response or ""] for s in samples]
        coverage = sentence_support(
            res,
            answers.vectors(sentence_support_texts(references, responses)),
            references,
            responses,
            use_head=False,  # the head is trained on answers against contexts, not this
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
                    estimator=f"{agreement.estimator}+coverage",
                    components=components,
                    grade=factual_grade(value),
                    weights=weights,
                    agreement=agreement.details(),
                )
            )
        return out


#: local classification by the rule score (no agreement head): CORRECT at or above this
AGREEMENT_THRESHOLD = 0.5


@register
class AnswerClassification(JudgedMetric):
    """Classifies the answer as CORRECT, WRONG or DON'T KNOW against the reference answer (RAG
    specification).

    Formula: an answer containing one of the RAG specification's uncertainty phrases ("i
    don't know", "unknown", "not sure", "cannot determine", "no information", ... plus "no
    comment") or a very short non-answer ("n/a") is DON'T KNOW without a judge call
    (``method`` "pattern"); otherwise the judge classifies CORRECT or WRONG with the RAG
    specification's prompt text (the ``classification`` task of the `REFERENCE_VERDICTS` ask
    shared with ``factual_accuracy``). Value: 1.0 for CORRECT, 0.0 for WRONG and for DON'T
    KNOW, so the mean over a run is the specification's "correct" percentage over all
    evaluations (17 of 24 = 70.8%); the label is in ``details["label"]`` and the runner
    counts labels per run (RAG specification's correct/wrong/dont_know_answers_count).
    Inputs: response, expected (query used when present). Range 0..1, higher is better;
    pass threshold 1.0 (CORRECT): with ``fallback_detection`` the gate of the ``base`` suite.
    Local estimator ``agreement_head``: CORRECT when the agreement head's calibrated
    probability (`assay.models.agreement_head`, over the rule-based agreement — cosine of
    answer and reference after removing the question's content words, halved by each
    contradiction cue: a negation on one side only when neither is hedged, a number, date
    or entity the two state differently, yes/no disagreement; see
    `assay.estimators.agreement.reference_agreement` — and word-overlap features) is at least
    the head's threshold (0.57, balanced accuracy on TruthfulQA dev's out-of-fold
    probabilities; ``details["threshold"]``); the probability is the ``agreement``
    component. Without spaCy or with another embedder than the head's the estimator is
    ``reference_agreement``, the rule score at threshold 0.5. A DON'T KNOW answer keeps
    its label and value 0 but still reports the ``agreement`` component (1 when the
    reference declines too, e.g. both "I have no comment"; otherwise usually low, since a
    non-answer adds nothing the reference says). On TruthfulQA dev, nested grouped CV
    AUROC of the component 0.848 (the rule score: 0.817). Weaknesses: the
    phrase test is a substring match ("the origin is unknown" is DON'T KNOW even when true);
    a similarity threshold cannot tell a fluent misconception from the truth unless a cue
    (negation, a different name or number) marks it.
    """

    name = "answer_classification"
    requires = ("response", "expected")
    default_threshold = 1.0  # CORRECT
    suites = ("judged", "base")
    needs = AGREEMENT_NEEDS
    source = Source.RAG_EVALUATION
    estimator = "agreement_head"
    components = ("agreement",)

    def judge_plan(self, sample: Sample, answers: Answers) -> list[Ask]:
        if uncertainty_phrase(sample.response or ""):
            return []  # DON'T KNOW by the pattern: no judge call
        return [_reference_ask(sample)]

    def _dont_know(self, phrase: str) -> MetricResult:
        return self.result(0.0, method="pattern", label="DON'T KNOW", matched_phrase=phrase)

    def reduce(self, sample: Sample, answers: Answers) -> MetricResult:
        phrase = uncertainty_phrase(sample.response or "")
        if phrase:
            return self._dont_know(phrase)
        verdict = answers.reply(_reference_ask(sample)).output.classification
        label = verdict.label
        return self.llm(
            1.0 if label == "CORRECT" else 0.0,
            answers.model,
            [REFERENCE_VERDICTS],
            label=label,
            judge_reason=verdict.reason,
        )

    def estimate_plan(self, sample: Sample, answers: Answers) -> list[Ask]:
        return _agreement_plan(sample)

    def estimate(
        self, samples: Sequence[Sample], answers: Answers, res: Resources
    ) -> list[MetricResult]:
        agreements = _agreements(samples, answers, res)
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
                        estimator=agreement.estimator,
                        **agreement.details(),
                    )
                )
                continue
            threshold = (
                AGREEMENT_THRESHOLD
                if agreement.decision_threshold is None
                else agreement.decision_threshold
            )
            correct = agreement.score >= threshold
            out.append(
                self.local(
                    1.0 if correct else 0.0,
                    res,
                    estimator=agreement.estimator,
                    components={"agreement": agreement.score},
                    label="CORRECT" if correct else "WRONG",
                    threshold=round(threshold, 4),
                    **agreement.details(),
                )
            )
        return out
