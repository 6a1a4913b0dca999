"""Reasoning metrics: cot_validity, step_correctness, logic_consistency (hand-worked)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from assay.core.config import AssayConfig
from assay.core.sample import Sample
from assay.engine.resources import Resources
from assay.metrics.registry import get_metric, suite

TRAIN = [
    "The train travels 60 km every hour.",  # 7 words, no connector
    "It runs for 3 hours, so it covers 60 times 3 km.",  # 12 words, "so"
    "Therefore the distance is 180 km.",  # 6 words, "therefore" (also a conclusion)
]


def test_registered_in_reasoning_suite() -> None:
    names = suite("reasoning")
    for name in ("cot_validity", "step_correctness", "logic_consistency"):
        assert name in names
        assert get_metric(name).family == "reasoning"


# ---- cot_validity -------------------------------------------------------------------------


def cot(resources: Resources, **fields):
    return get_metric("cot_validity").score(Sample(**fields), resources)


def test_cot_validity_worked_by_hand(resources: Resources) -> None:
    r = cot(resources, reasoning_steps=TRAIN)
    # step length: 3 valid steps * 0.3 = 0.9; connectors in 2 of 3 steps: 0.4 * 2/3
    # conclusion "therefore" in the last step: 0.3;  max_score = 0.3 * 3 + 0.4 + 0.3 = 1.6
    # (0.9 + 0.26667 + 0.3) / 1.6 = 1.46667 / 1.6 = 0.916667
    assert r.value == pytest.approx((0.9 + 0.4 * 2 / 3 + 0.3) / 1.6)
    assert r.details["max_score"] == pytest.approx(1.6)
    assert [s["words"] for s in r.details["steps"]] == [7, 12, 6]
    assert r.details["conclusion_marker"] == "therefore"
    assert r.components == pytest.approx(
        {"length_ratio": 1.0, "connector_ratio": 2 / 3, "conclusion": 1.0}
    )
    assert r.details["steps_source"] == "reasoning_steps"


def test_cot_validity_short_step_no_conclusion(resources: Resources) -> None:
    r = cot(resources, reasoning_steps=["Add them.", "Because 2 plus 3 is 5 in total here."])
    # "Add them." has 2 words (< 5): 0.3 * 1 = 0.3; connector "because" in 1 of 2: 0.4 * 0.5
    # no conclusion marker, no "=": 0;  max = 0.6 + 0.7 = 1.3;  (0.3 + 0.2) / 1.3 = 0.384615
    assert r.value == pytest.approx(0.5 / 1.3)


def test_cot_validity_maximum_is_one(resources: Resources) -> None:
    steps = ["Since x plus 2 equals 5, x is 3.", "Thus doubling x gives 6 = 2 * 3."]
    assert cot(resources, reasoning_steps=steps).value == pytest.approx(1.0)


def test_cot_validity_long_chain_weakness(resources: Resources) -> None:
    steps = [f"Step number {i} is a plain statement here." for i in range(10)]
    # 10 valid steps, no connector, no conclusion: 3.0 / (3.0 + 0.7) = 0.8108 (documented)
    assert cot(resources, reasoning_steps=steps).value == pytest.approx(3.0 / 3.7)


def test_cot_validity_arabic(resources: Resources) -> None:
    steps = [
        "السرعة ستون كيلومترا في الساعة الواحدة.",  # 6 words
        "لذلك يقطع القطار مئة وثمانين كيلومترا في ثلاث ساعات.",  # 9 words, "لذلك"
    ]
    r = cot(resources, reasoning_steps=steps)
    # 0.6 + 0.4 * 1/2 + 0.3 (لذلك concludes) = 1.1;  max 1.3
    assert r.value == pytest.approx(1.1 / 1.3)
    assert r.details["conclusion_marker"] == "لذلك"


def test_cot_validity_splits_response_when_no_steps(resources: Resources) -> None:
    r = cot(resources, response="The sky is blue today. Therefore it is daytime now.")
    # two 5-word steps: 0.6 + 0.4 * 1/2 + 0.3 = 1.1;  max 1.3
    assert r.details["steps_source"] == "response_sentences"
    assert r.value == pytest.approx(1.1 / 1.3)


def test_cot_validity_no_steps_is_none(resources: Resources) -> None:
    r = cot(resources, response="Just one sentence.")
    assert r.value is None and "reasoning steps" in (r.reason or "")
    assert cot(resources, query="q").value is None


# ---- step_correctness -----------------------------------------------------------------------


class StubEmbedder:
    """Fixed 2-d vectors, so the formula can be worked by hand."""

    name = "stub"

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.vectors = {k: np.asarray(v, dtype=np.float32) for k, v in vectors.items()}

    def embed(self, texts):
        return np.stack([self.vectors[t] for t in texts])


def stub_resources(vectors: dict[str, list[float]]) -> Resources:
    """Resources whose embedder is a `StubEmbedder` over ``vectors``."""
    res = Resources(AssayConfig(use_cache=False))
    res.__dict__["embedder"] = StubEmbedder(vectors)
    return res


def test_step_correctness_worked_by_hand() -> None:
    res = stub_resources(
        {
            "s1": [1.0, 0.0],
            "s2": [0.0, 1.0],
            "r1": [1.0, 0.0],
            "r2": [0.6, 0.8],
            "s1 s2": [0.6, 0.8],
            "r1 r2": [1.0, 0.0],
        }
    )
    sample = Sample(reasoning_steps=["s1", "s2"], reference_steps=["r1", "r2"])
    r = get_metric("step_correctness").score(sample, res)
    # r1 best match s1 (cos 1.0); r2 best match s2 (cos 0.8 > 0.6): avg = 0.9
    # overall cos("s1 s2", "r1 r2") = 0.6;  0.7 * 0.9 + 0.3 * 0.6 = 0.81
    assert r.value == pytest.approx(0.81)
    assert r.components == pytest.approx({"avg_step_similarity": 0.9, "overall_similarity": 0.6})
    assert [(m["reference_step"], m["step"]) for m in r.details["matches"]] == [(0, 0), (1, 1)]
    # other direction: s1 best 1.0, s2 best 0.8 -> 0.9
    assert r.details["step_precision"] == pytest.approx(0.9)


def test_step_correctness_clamps_negative_cosine() -> None:
    res = stub_resources({"a": [1.0, 0.0], "b": [-1.0, 0.0], "c": [0.0, 1.0], "a c": [1.0, 0.0]})
    r = get_metric("step_correctness").score(Sample(reasoning_steps=["a", "c"], expected="b"), res)
    # reference = expected "b" (one sentence); best match max(0, -1 -> 0) = 0;
    # overall cos("a c", "b") = -1 -> 0;  value 0
    assert r.value == 0.0
    assert r.details["reference_source"] == "expected_sentences"


def test_step_correctness_identical_steps_score_one(resources: Resources) -> None:
    r = get_metric("step_correctness").score(
        Sample(reasoning_steps=TRAIN, reference_steps=TRAIN), resources
    )
    assert r.value == pytest.approx(1.0, abs=1e-4)


def test_step_correctness_orders_relevant_above_unrelated(resources: Resources) -> None:
    metric = get_metric("step_correctness")
    reference = [
        "The train moves at 60 kilometres per hour.",
        "It travels for three hours.",
        "So it covers 180 kilometres.",
    ]
    related = metric.score(Sample(reasoning_steps=TRAIN, reference_steps=reference), resources)
    unrelated = metric.score(
        Sample(
            reasoning_steps=["Cats purr when they are content.", "Tulips bloom in spring."],
            reference_steps=reference,
        ),
        resources,
    )
    assert related.value > unrelated.value + 0.2


def test_step_correctness_needs_reference(resources: Resources) -> None:
    r = get_metric("step_correctness").score(Sample(reasoning_steps=TRAIN), resources)
    assert r.value is None and "reference" in (r.reason or "")


# ---- logic_consistency -----------------------------------------------------------------------


def logic(resources: Resources, steps: list[str]):
    return get_metric("logic_consistency").score(Sample(reasoning_steps=steps), resources)


def test_logic_consistency_clean_chain(resources: Resources) -> None:
    r = logic(resources, TRAIN)
    assert r.value == 1.0 and r.details["penalties"] == []
    # content words (plural s stripped): {train, travel, 60, km, hour} vs {run, 3, hour,
    # cover, 60, time, km}: 3 shared / min(5, 7) = 0.6
    assert r.details["consecutive_overlaps"][0] == pytest.approx(0.6)


def test_logic_consistency_negation_flip(resources: Resources) -> None:
    r = logic(resources, ["Birds can fly.", "Penguins are birds.", "Birds cannot fly."])
    # steps 0 and 2 share {birds, fly} (Jaccard 1) with 0 vs 1 negation: 1 - 0.3 = 0.7
    assert r.value == pytest.approx(0.7)
    assert [(p["type"], p["steps"]) for p in r.details["penalties"]] == [("negation_flip", [0, 2])]


def test_logic_consistency_a_and_not_a(resources: Resources) -> None:
    r = logic(resources, ["The statement is true and not true at once.", "So the statement holds."])
    assert r.value == pytest.approx(0.7)  # 1 - 0.3
    assert r.details["penalties"][0]["text"] == "true and not true"


def test_logic_consistency_retraction_marker(resources: Resources) -> None:
    r = logic(resources, ["The total is 12 apples.", "Wait, no, the total is 14 apples."])
    # "wait, no": 1 - 0.2 = 0.8 (content {total, 12, apples} vs {wait, total, 14, apples}
    # has Jaccard 2/5 < 0.8, so no negation flip)
    assert r.value == pytest.approx(0.8)
    assert [p["type"] for p in r.details["penalties"]] == ["contradiction_marker"]


def test_logic_consistency_poor_overlap(resources: Resources) -> None:
    steps = [
        "Bananas are yellow fruit.",
        "Quantum chromodynamics governs quarks.",
        "Taxes rose in Denmark last year.",
    ]
    r = logic(resources, steps)
    # consecutive overlaps 0 and 0: mean 0 < 0.1 -> 1 - 0.2 = 0.8
    assert r.value == pytest.approx(0.8)
    assert r.details["mean_overlap"] == 0.0


def test_logic_consistency_inconsistent_terms(resources: Resources) -> None:
    steps = [
        "We clean the data set before training.",
        "Then we split the cleaned dataset for training.",
    ]
    r = logic(resources, steps)
    assert r.value == pytest.approx(0.9)  # 1 - 0.1
    assert r.details["penalties"][0]["text"] == [["data set", "dataset"]]
    r = logic(resources, ["The colour of the sky is blue.", "That blue color comes from the sky."])
    assert r.value == pytest.approx(0.9)


def test_logic_consistency_clamps_at_zero(resources: Resources) -> None:
    steps = [
        "x is 5.",
        "This contradicts the premise.",
        "That is wrong.",
        "I was wrong.",
        "Wait, no.",
        "Actually, no, this is a contradiction.",
    ]
    r = logic(resources, steps)
    # six markers at 0.2 = 1.2 > 1 -> clamped to 0
    assert r.details["total_penalty"] == pytest.approx(1.2)
    assert r.value == 0.0


def test_logic_consistency_arabic(resources: Resources) -> None:
    r = logic(resources, ["الطيور تستطيع الطيران.", "الطيور لا تستطيع الطيران."])
    assert r.value == pytest.approx(0.7)  # negation flip with لا
    r = logic(resources, ["لدينا خمس تفاحات.", "هذا خطأ، لدينا ست تفاحات."])
    assert r.value == pytest.approx(0.8)  # marker هذا خطأ


def test_logic_consistency_arabic_stop_words_with_hamza(resources: Resources) -> None:
    # "على" and "إلى" are stop words; after the steps' normalisation they read "علي" and
    # "الي", and the stop list is normalised the same way, so they are not "shared
    # concepts" (the shared "علي" used to give overlap 1 / min(4, 7) = 0.25, no penalty).
    # content {وضعت, الكتاب, الطاوله} vs {سافر, اخي, القاهره, متن, طائره}: overlap 0
    # < 0.1 -> poor concept overlap, 1 - 0.2 = 0.8
    r = logic(resources, ["وضعت الكتاب على الطاولة.", "سافر أخي إلى القاهرة على متن طائرة."])
    assert r.details["consecutive_overlaps"] == [0.0]
    assert r.value == pytest.approx(0.8)


def test_logic_consistency_no_steps_is_none(resources: Resources) -> None:
    r = get_metric("logic_consistency").score(Sample(response="One sentence."), resources)
    assert r.value is None


def test_logic_consistency_long_whitespace_is_linear(
    resources: Resources, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the marker "wait, no" was matched with "\W*\s*" between words, which backtracks
    # quadratically over a long run of spaces (100,000 spaces took about 8 s)
    # past the default max_field_chars (100,000): raised to test the metric itself
    monkeypatch.setattr(
        resources, "config", resources.config.model_copy(update={"max_field_chars": 2_000_000})
    )
    step = "wait," + " " * 100_000 + "the total is 14."
    start = time.perf_counter()
    r = logic(resources, [step, "Wait,   no: the total is 12."])
    assert time.perf_counter() - start < 2.0
    # one marker ("Wait,   no"; the first step's "wait," is followed by no "no"): 0.2.
    # content {wait, total, 14} vs {wait, total, 12}: Jaccard 2/4 < 0.8, no flip;
    # overlap 2/3 >= 0.1; 1 - 0.2 = 0.8
    assert [p["type"] for p in r.details["penalties"]] == ["contradiction_marker"]
    assert r.value == pytest.approx(0.8)
