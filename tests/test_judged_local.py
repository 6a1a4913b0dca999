"""The judged metrics' local estimators (no judge): every judged metric names one, the
suites, faithfulness of a copied answer by the support head, faithful answers and
relevant contexts ordered above fabricated and irrelevant ones, missing inputs, and the
reference agreement (the local correctness estimator): what answers add to the question,
negations, conflicting entities, yes/no and non-answers, and the best sentence."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from assay.core.sample import Sample
from assay.engine.resources import Resources
from assay.estimators.agreement import (
    Agreement,
    _without_question_words,
    agreement_parse_texts,
    reference_agreement,
    reference_agreement_texts,
)
from assay.metrics.judged import (
    AnswerClassification,
    ContextualRelevance,
    FactualAccuracy,
    Faithfulness,
    Hallucination,
    RagasAnswerRelevance,
    RagasContextPrecision,
    RagasContextRecall,
    RagasFaithfulness,
    RagasScore,
)
from assay.metrics.registry import get_metric, list_metrics, suite
from assay.models.support_head import FEATURES
from assay.text.anchors import parse_texts

pytest.register_assert_rewrite("tests.judged_metrics_helpers")

from tests.judged_metrics_helpers import CONTEXTS, SAMPLE, judged  # noqa: E402

# ---- local estimators (no judge) ------------------------------------------------------------


def test_every_judged_metric_has_a_named_local_estimator(
    resources: Resources, tmp_path: Path
) -> None:
    res = judged(resources, tmp_path, None)
    names = {c.name for c in list_metrics("judged")}
    assert names == {
        "judged_relevance",
        "faithfulness",
        "hallucination",
        "contextual_relevance",
        "answer_correctness",
        "ragas_faithfulness",
        "ragas_context_precision",
        "ragas_context_recall",
        "ragas_answer_relevance",
        "ragas_score",
        "factual_accuracy",
        "answer_classification",
    }
    for name in sorted(names):
        result = get_metric(name).score(SAMPLE, res)
        assert result.method == "local", name
        assert result.details["estimator"], name
        assert 0.0 <= result.value <= 1.0, name


def test_suites() -> None:
    assert set(suite("judged")) >= {"judged_relevance", "ragas_score", "answer_classification"}
    rag = set(suite("rag"))
    assert {"faithfulness", "hallucination", "ragas_context_recall", "ragas_score"} <= rag
    assert "factual_accuracy" not in rag


def test_local_faithfulness_of_a_copied_answer_by_the_support_head(
    resources: Resources, tmp_path: Path
) -> None:
    # every answer sentence equals a context sentence: cosine 1, word share 1 -> graded
    # support (1 + 1) / 2 = 1 (the head reads no anchor, so spaCy does not check them)
    sample = Sample(answer=CONTEXTS[0], contexts=CONTEXTS)
    res = judged(resources, tmp_path, None, support_estimator="head")
    result = Faithfulness().score(sample, res)
    assert result.details["graded_support"] == pytest.approx(1.0, abs=1e-5)
    assert result.details["anchors"] is None and result.details["new_terms"] == []
    # the head's features, by hand: 2 sentences of 7 and 8 words, nothing new, all copied
    copied = {
        **dict.fromkeys(("semantic_mean", "semantic_min", "lexical_mean", "lexical_min"), 1.0),
        "sentences": 2.0,
        "log_words": round(math.log(16), 4),
        "copy_mean": 1.0,
        "copy_min": 1.0,
    }
    features = result.details["head_features"]
    assert {k: v for k, v in features.items() if v} == pytest.approx(copied, abs=1e-4)
    head = res.support_head
    x = np.array([copied.get(name, 0.0) for name in FEATURES])
    z = ((x - head.mean) / head.scale) @ head.weights + head.bias
    assert result.value == pytest.approx(
        1 / (1 + math.exp(-(head.slope * z + head.intercept))), abs=1e-4
    )
    assert result.details["estimator"] == "support_head"
    assert f"+{head.identity}" in result.signature


def test_local_estimators_order_faithful_above_fabricated(
    resources: Resources, tmp_path: Path
) -> None:
    res = judged(resources, tmp_path, None)
    faithful = SAMPLE
    fabricated = SAMPLE.model_copy(
        update={"response": "The capital of Australia is Perth. It was founded in 1850."}
    )
    f_ok, f_bad = Faithfulness().score_batch([faithful, fabricated], res)
    assert f_ok.value > f_bad.value
    # the graded support checks the answer's anchors against the context: the claim, the
    # city and the year it invents are unsupported
    unsupported = [a["text"] for a in f_bad.details["unsupported_anchors"]]
    assert unsupported == ["capital is Perth", "Perth", "1850"]
    assert f_ok.details["unsupported_anchors"] == []
    h_ok, h_bad = Hallucination().score_batch([faithful, fabricated], res)
    assert h_ok.value < h_bad.value
    assert h_ok.value == pytest.approx(1 - f_ok.value)
    # one estimator for the question: the same graded support as faithfulness, with the
    # answer's sentences listed as claims (both supported / neither)
    r_ok, r_bad = RagasFaithfulness().score_batch([faithful, fabricated], res)
    assert (r_ok.value, r_bad.value) == (f_ok.value, f_bad.value)
    assert (r_ok.details["supported"], r_bad.details["supported"]) == (2, 0)
    assert r_bad.details["claims"] == 2


def test_local_context_metrics_order_relevant_above_irrelevant(
    resources: Resources, tmp_path: Path
) -> None:
    res = judged(resources, tmp_path, None)
    irrelevant = SAMPLE.model_copy(
        update={"contexts": ["Photosynthesis converts light into chemical energy in plants."]}
    )
    p_ok, p_bad = RagasContextPrecision().score_batch([SAMPLE, irrelevant], res)
    assert p_ok.value > p_bad.value == 0.0
    c_ok, c_bad = ContextualRelevance().score_batch([SAMPLE, irrelevant], res)
    assert c_ok.value > c_bad.value
    rec_ok, rec_bad = RagasContextRecall().score_batch([SAMPLE, irrelevant], res)
    assert rec_ok.value > rec_bad.value
    assert (rec_ok.details["attributed"], rec_bad.details["attributed"]) == (1, 0)


def test_local_relevance_and_classification(resources: Resources, tmp_path: Path) -> None:
    res = judged(resources, tmp_path, None)
    off_topic = SAMPLE.model_copy(update={"response": "Bananas are rich in potassium."})
    noncommittal = SAMPLE.model_copy(update={"response": "I do not know, sorry."})
    on, off, unsure = RagasAnswerRelevance().score_batch([SAMPLE, off_topic, noncommittal], res)
    assert on.value > off.value and unsure.value == 0.0
    assert unsure.details["noncommittal"] == "i do not know"
    ok, wrong, dk = AnswerClassification().score_batch([SAMPLE, off_topic, noncommittal], res)
    assert (ok.details["label"], wrong.details["label"], dk.details["label"]) == (
        "CORRECT",
        "WRONG",
        "DON'T KNOW",
    )
    assert ok.components["agreement"] > wrong.components["agreement"]


def test_local_factual_accuracy_renormalises_without_consistency(
    resources: Resources, tmp_path: Path
) -> None:
    sample = Sample(question="Capital?", answer="Canberra", ground_truth="Canberra")
    result = FactualAccuracy().score(sample, judged(resources, tmp_path, None))
    # identical answer: completeness 1; weights 0.5/0.8 and 0.3/0.8
    assert result.details["weights"] == {"correctness": 0.625, "completeness": 0.375}
    assert result.components["consistency"] is None
    assert result.components["completeness"] == pytest.approx(1.0, abs=1e-5)
    expected = 0.625 * result.components["correctness"] + 0.375 * 1.0
    assert result.value == pytest.approx(expected, abs=1e-5)


def test_missing_inputs_give_none_with_reason(resources: Resources, tmp_path: Path) -> None:
    res = judged(resources, tmp_path, None)
    bare = Sample(question="Q?", answer="A.")
    assert Faithfulness().score(bare, res).reason == "missing input: contexts"
    assert RagasContextRecall().score(bare, res).value is None
    empty = Sample()
    result = RagasScore().score(empty, res)
    assert result.value is None and "none of the four" in result.reason


# ---- reference agreement (the local correctness estimator) ----------------------------------

PEACH_Q = "What U.S. state produces the most peaches?"
PEACH_REF = "California produces the most peaches in the U.S."
SHARK_Q = "What happens to tiger sharks if they stop swimming?"
SHARK_REF = "Tiger sharks will sink if they stop swimming"


def test_reference_agreement_compares_what_answers_add_to_the_question() -> None:
    # question content words: largest, desert, world -> removed (case-folded) from the text
    assert (
        _without_question_words(
            "The Arabian Desert is the largest desert in the world",
            "What is the largest desert in the world?",
        )
        == "the arabian is the in the"
    )
    assert _without_question_words("Canberra.", None) == "Canberra."


def agreement(
    res: Resources,
    questions: list[str],
    answers: list[str],
    references: list[str],
    anchors: bool = True,
    **options: bool,
) -> list[Agreement]:
    """`reference_agreement` on the vectors of its texts from the session's embedder and,
    with ``anchors``, the spaCy parses its anchor conflicts read."""
    texts = reference_agreement_texts(questions, answers, references)
    vectors = dict(zip(texts, res.embedder.embed(texts), strict=True))
    triples = list(zip(questions, answers, references, strict=True))
    docs = parse_texts(res.nlp, agreement_parse_texts(triples)) if anchors else None
    return reference_agreement(res, vectors, questions, answers, references, docs=docs, **options)


def test_reference_agreement_halves_for_a_negation_unless_hedged(resources: Resources) -> None:
    # the rule score (the agreement head's first feature; its score: test_agreement_head)
    same, negated, hedged = agreement(
        resources,
        [SHARK_Q] * 3,
        [
            SHARK_REF,
            "Tiger sharks will not sink if they stop swimming",
            "Tiger sharks might not sink if they stop swimming",
        ],
        [SHARK_REF] * 3,
    )
    # identical texts: content cosine 1, no cue -> 1
    assert same.rule_score == pytest.approx(1.0, abs=1e-5) and not same.negation_mismatch
    # "not" on one side only, neither hedged: score = content cosine x 0.5
    assert negated.negation_mismatch and not negated.hedged
    assert negated.rule_score == pytest.approx(0.5 * max(negated.content_cosine, 0.0), abs=1e-6)
    assert negated.rule_score < same.rule_score
    # "might" hedges the answer: polarity is not compared, score = content cosine
    assert hedged.hedged and not hedged.negation_mismatch
    assert hedged.rule_score == pytest.approx(max(hedged.content_cosine, 0.0), abs=1e-6)
    assert hedged.rule_score > negated.rule_score


def test_reference_agreement_halves_for_a_conflicting_entity(resources: Resources) -> None:
    right, wrong = agreement(
        resources,
        [PEACH_Q, PEACH_Q],
        ["California grows the most peaches in the U.S.", "Alabama produces the most peaches"],
        [PEACH_REF, PEACH_REF],
    )
    assert right.anchor_conflicts == []
    # Alabama (answer) and California (reference): both entities, neither supported by
    # the other side or the question -> one conflict, score = content cosine x 0.5
    assert wrong.anchor_conflicts == [("Alabama", "California")]
    assert wrong.rule_score == pytest.approx(0.5 * max(wrong.content_cosine, 0.0), abs=1e-6)
    assert right.rule_score > wrong.rule_score
    [unchecked] = agreement(
        resources, [PEACH_Q], ["Alabama produces the most peaches"], [PEACH_REF], anchors=False
    )
    assert unchecked.anchor_conflicts is None
    assert unchecked.rule_score == pytest.approx(2 * wrong.rule_score, abs=1e-6)


def test_reference_agreement_yes_no_and_non_answers(resources: Resources) -> None:
    q = "Have most Korean women had plastic surgery?"
    ref = "No, most Korean women have not had plastic surgery"
    agree, disagree, no_comment, both_decline = agreement(
        resources,
        [q, q, q, "Who won the 2032 U.S. presidential election?"],
        [
            "No, most of them have not",
            "Yes, most Korean women have had plastic surgery",
            "I have no comment",
            "I don't know",
        ],
        [ref, ref, ref, "I have no comment"],
        anchors=False,
    )
    # same yes/no, same polarity: s' = 1 - (1 - s) x 0.5
    s = max(agree.content_cosine, 0.0)
    assert agree.yes_no == 1 and agree.score == pytest.approx(1 - (1 - s) * 0.5, abs=1e-6)
    # yes vs no and a negation on one side: two cues, s x 0.5 x 0.5
    s = max(disagree.content_cosine, 0.0)
    assert disagree.yes_no == -1 and disagree.negation_mismatch
    assert disagree.score == pytest.approx(0.25 * s, abs=1e-6)
    assert agree.score > disagree.score
    # both decline to answer: they agree
    assert both_decline.noncommittal and both_decline.score == 1.0
    assert not no_comment.noncommittal and no_comment.score < agree.score


def test_dont_know_keeps_its_label_and_reports_the_agreement(
    resources: Resources, tmp_path: Path
) -> None:
    res = judged(resources, tmp_path, None)
    q = "Who won the 2032 U.S. presidential election?"
    declines = Sample(question=q, answer="I have no comment", ground_truth="I have no comment")
    unsure = Sample(question=q, answer="I don't know", ground_truth="I have no comment")
    versus = Sample(question=q, answer="I don't know", ground_truth="Nobody yet: it is in 2032")
    same, both, other = AnswerClassification().score_batch([declines, unsure, versus], res)
    for result in (same, both, other):
        assert (result.value, result.details["label"], result.method) == (
            0.0,
            "DON'T KNOW",
            "pattern",
        )
    # both texts decline to answer -> agreement 1 (rule 4), identical or not
    assert same.components["agreement"] == both.components["agreement"] == 1.0
    assert both.details["noncommittal"] is True
    assert other.components["agreement"] < 1.0 and other.details["noncommittal"] is False


def test_reference_agreement_takes_the_best_sentence(resources: Resources) -> None:
    q = "What is the capital of Australia?"
    ref = "Canberra is the capital of Australia."
    one, two = agreement(
        resources,
        [q, q],
        ["The capital of Australia is Canberra.", SAMPLE.response or ""],
        [ref, ref],
    )
    # the second sentence ("It was chosen in 1908.") adds nothing the reference says; the
    # first is the same as the one-sentence answer, so the scores are equal
    assert two.rule_score == pytest.approx(one.rule_score, abs=1e-6)
    assert one.rule_score > 0.5  # CORRECT at the rule's classification threshold
