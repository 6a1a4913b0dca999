"""The learned agreement head (`assay.models.agreement_head`): its features worked out by
hand, the shipped file, where the rule score stays, and answer classification with it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from assay.core.config import AssayConfig
from assay.core.sample import Sample
from assay.engine.resources import Resources
from assay.estimators.agreement import (
    Agreement,
    agreement_features,
    agreement_parse_texts,
    content_f1,
    reference_agreement,
    reference_agreement_texts,
)
from assay.metrics.judged import AnswerClassification
from assay.models.agreement_head import FEATURES, AgreementHead
from assay.text.anchors import parse_texts

PEACH_Q = "What U.S. state produces the most peaches?"
PEACH_REF = "California produces the most peaches in the U.S."


def test_content_f1() -> None:
    # {red, apple, pie} vs {red, apple}: 2 common, precision 2/3, recall 1 -> F1 0.8
    assert content_f1("red apple pie", "red apple") == pytest.approx(0.8)
    assert content_f1("the of", "red apple") == 0.0  # stop words only: no content


def test_features_worked_out_by_hand() -> None:
    rule = Agreement(0.4, 0.7, None, True, -1, [("red", "green")])
    got = agreement_features("What colour is the pie?", "Red apple pie.", "Green apple pie.", rule)
    # words [red apple pie] vs [green apple pie]: LCS 2 of 3 each side; content F1 2/3;
    # "red" is in neither the reference nor the question: 1 of 3 new; equal lengths
    expected = [0.4, 0.7, 0.7, 1.0, -1.0, 1.0, 2 / 3, 2 / 3, 2 / 3, 1 / 3, 0.0]
    assert dict(zip(FEATURES, got, strict=True)) == pytest.approx(
        dict(zip(FEATURES, expected, strict=True))
    )


def test_the_shipped_head_file() -> None:
    head = AgreementHead()
    assert tuple(head.metadata["features"]) == FEATURES
    assert head.embedder == "use-multilingual-v3"
    # nested grouped CV on TruthfulQA dev, above the rule score's 0.817 on the same answers
    assert head.metadata["nested_cv"]["all"]["auroc"] > 0.83
    assert 0.0 < head.threshold < 1.0


def _agreements(res: Resources, answers: list[str], anchors: bool = True) -> list[Agreement]:
    questions, references = [PEACH_Q] * len(answers), [PEACH_REF] * len(answers)
    texts = reference_agreement_texts(questions, answers, references)
    vectors = dict(zip(texts, res.embedder.embed(texts), strict=True))
    triples = list(zip(questions, answers, references, strict=True))
    docs = parse_texts(res.nlp, agreement_parse_texts(triples)) if anchors else None
    return reference_agreement(res, vectors, questions, answers, references, docs=docs)


def _probability(head: AgreementHead, features: dict[str, float]) -> float:
    x = np.array([features[name] for name in FEATURES])
    z = ((x - head.mean) / head.scale) @ head.weights + head.bias
    return 1 / (1 + math.exp(-(head.slope * z + head.intercept)))


def test_the_head_scores_where_it_applies_and_the_rule_stays_elsewhere(
    resources: Resources,
) -> None:
    right, wrong = _agreements(
        resources, ["California produces the most peaches.", "Alabama produces the most peaches."]
    )
    head = resources.agreement_head
    for agreement in (right, wrong):
        assert agreement.estimator == "agreement_head"
        assert agreement.head_features is not None
        assert agreement.head_features["rule_score"] == pytest.approx(
            agreement.rule_score, abs=1e-4
        )
        assert agreement.score == pytest.approx(
            _probability(head, agreement.head_features), abs=1e-3
        )
    assert right.score > head.threshold > wrong.score
    # without spaCy's anchors (one of its features) the rule score stays, and says so
    [unchecked] = _agreements(resources, ["Alabama produces the most peaches."], anchors=False)
    assert unchecked.estimator == "reference_agreement"
    assert unchecked.score == unchecked.rule_score and unchecked.head_features is None
    # another embedder's cosines are not the head's features: the rule score stays
    minilm = Resources(AssayConfig(cache_dir=resources.config.cache_dir, embedder="minilm"))
    [other] = _agreements(minilm, ["Alabama produces the most peaches."])
    assert other.estimator == "reference_agreement" and other.score == other.rule_score


def test_answer_classification_uses_the_heads_threshold(resources: Resources) -> None:
    samples = [
        Sample(question=PEACH_Q, answer=a, ground_truth=PEACH_REF)
        for a in ("California produces the most peaches.", "Alabama produces the most peaches.")
    ]
    res = Resources(AssayConfig(cache_dir=resources.config.cache_dir, judge_model=None))
    res.__dict__["embedder"] = resources.embedder
    right, wrong = AnswerClassification().score_batch(samples, res)
    threshold = round(res.agreement_head.threshold, 4)
    assert (right.value, right.details["label"]) == (1.0, "CORRECT")
    assert (wrong.value, wrong.details["label"]) == (0.0, "WRONG")
    assert right.details["threshold"] == wrong.details["threshold"] == threshold
    assert right.components["agreement"] >= threshold > wrong.components["agreement"]
    assert right.details["estimator"] == "agreement_head"
    assert f"+{res.agreement_head.identity}" in right.signature
