"""Semantic metrics: hand-worked formulas on a fake embedder with fixed vectors (exact
cosines), and orderings on the real default embedder (USE multilingual v3)."""

from __future__ import annotations

import numpy as np
import pytest

from assay import evaluate
from assay.core.config import AssayConfig
from assay.core.sample import Sample
from assay.engine.resources import Resources
from assay.metrics.bertscore import BERTScore, BERTScoreF1Raw
from assay.metrics.registry import get_metric, resolve_metrics
from assay.metrics.semantic import SemanticSimilarity
from fakes import fake_resources

# Unit vectors whose cosines are exact: cos(E1, B) = 0.8, cos(E1, A) = 0.6,
# cos(A, B) = 0.6*0.8 + 0.8*0.6 = 0.96, cos(E1, E2) = 0, cos(E1, NEG) = -1,
# cos(E1, NEG_A) = -0.6.
E1 = (1.0, 0.0, 0.0)
E2 = (0.0, 1.0, 0.0)
A = (0.6, 0.8, 0.0)
B = (0.8, 0.6, 0.0)
NEG = (-1.0, 0.0, 0.0)
NEG_A = (-0.6, 0.8, 0.0)


def score(name: str, res: Resources, **fields: object) -> object:
    return get_metric(name).score(Sample(**fields), res)


# ---------------------------------------------------------------- semantic_similarity_percentage


def test_semantic_similarity_percentage_hand_worked() -> None:
    res = fake_resources({"ans": A, "gt": E1, "neg": NEG_A})
    r = score("semantic_similarity_percentage", res, answer="ans", ground_truth="gt")
    # cos = 0.6 -> round(0.6 * 100, 2) = 60.0 % -> ratio 0.6
    assert r.value == pytest.approx(0.6, abs=1e-9)
    assert r.details["percentage"] == pytest.approx(60.0)
    # negative cosine: max(0, -0.6) = 0
    r = score("semantic_similarity_percentage", res, answer="neg", ground_truth="gt")
    assert r.value == 0.0


def test_semantic_similarity_percentage_rounds_like_the_rag_specification() -> None:
    c = 0.967213
    res = fake_resources({"ans": (c, float(np.sqrt(1 - c * c)), 0.0), "gt": E1})
    r = score("semantic_similarity_percentage", res, answer="ans", ground_truth="gt")
    # 0.967213 * 100 = 96.7213 -> round(., 2) = 96.72 % (the specification's llm_with_context row)
    assert r.details["percentage"] == 96.72
    assert r.value == 0.9672


def test_semantic_similarity_percentage_empty_is_none_not_zero() -> None:
    res = fake_resources({})
    r = score("semantic_similarity_percentage", res, answer="   ", ground_truth="gt")
    # the RAG specification returns 0.0 here; Assay says "undefined" (documented departure)
    assert r.value is None
    assert "response" in r.reason


# ---------------------------------------------------------------- similarity aliases


@pytest.mark.parametrize("name", ["accuracy", "factual_consistency", "truthfulness"])
def test_an_alias_gives_the_similarity_under_the_name_asked_for(name: str) -> None:
    res = fake_resources({"resp": B, "exp": E1, "neg": NEG})
    metric = get_metric(name)
    assert isinstance(metric, SemanticSimilarity) and metric.name == name
    r = metric.score(Sample(response="resp", expected="exp"), res)
    # cos(B, E1) = 0.8*1 + 0.6*0 = 0.8, the value of semantic_similarity itself
    assert (r.name, r.value) == (name, pytest.approx(0.8, abs=1e-6))
    same = score("semantic_similarity", res, response="resp", expected="exp")
    assert (same.name, same.value) == ("semantic_similarity", r.value)
    assert f"metric={name}@1" in r.signature
    # clamped: cos = -1 -> 0
    assert score(name, res, response="neg", expected="exp").value == 0.0
    assert score(name, res, response="resp").value is None
    # the class keeps its own name: another instance is not renamed
    assert SemanticSimilarity.name == "semantic_similarity"
    assert get_metric("semantic_similarity").name == "semantic_similarity"


def test_an_unknown_name_still_errors_with_close_matches() -> None:
    with pytest.raises(KeyError, match=r"unknown metric 'acuracy'.*Did you mean: accuracy"):
        get_metric("acuracy")
    with pytest.raises(KeyError, match="Did you mean: truthfulness"):
        get_metric("truthfullness")


def test_a_suite_computes_the_similarity_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = SemanticSimilarity.compute_batch

    def counting(self: SemanticSimilarity, samples: object, res: Resources) -> object:
        calls.append(self.name)
        return real(self, samples, res)  # type: ignore[arg-type]

    monkeypatch.setattr(SemanticSimilarity, "compute_batch", counting)
    # no BERTScore model for this test: its metrics say N/A
    for cls in (BERTScore, BERTScoreF1Raw):
        monkeypatch.setattr(cls, "compute_batch", lambda self, s, res: [self.na("off") for _ in s])
    res = fake_resources({"resp": B, "exp": E1})
    sample = Sample(response="resp", expected="exp")
    # base, base-model and semantic all hold the similarity (base-model once held it
    # four times: accuracy, factual_consistency, truthfulness, and f1 beside bertscore)
    row = evaluate([sample], suites=["base", "base-model", "semantic"], resources=res).results[0]
    assert calls == ["semantic_similarity"]
    assert row["semantic_similarity"].value == pytest.approx(0.8, abs=1e-6)
    assert not {"accuracy", "factual_consistency", "truthfulness", "f1"} & set(row)
    # an alias asked for by name beside a suite stands in for the suite's name: still once
    calls.clear()
    row = evaluate([sample], ["accuracy"], suites=["base-model"], resources=res).results[0]
    assert calls == ["accuracy"]
    assert row["accuracy"].value == pytest.approx(0.8, abs=1e-6)
    assert "semantic_similarity" not in row
    names = [m.name for m in resolve_metrics(["f1"], ["base"])]
    assert "f1" in names and "bertscore" not in names


def test_accuracy_threshold_setting_and_arabic_detail() -> None:
    metric = get_metric("accuracy")
    assert AssayConfig(semantic_similarity_threshold=0.65).threshold_for(metric) == 0.65
    res = fake_resources({"باريس": B, "Paris": E1})
    r = metric.score(Sample(response="باريس", expected="Paris"), res)
    assert r.details["arabic"] is True
    assert r.details["pass_threshold"] == 0.5


def test_source_grounding_prefers_query_then_expected() -> None:
    res = fake_resources({"q": E1, "resp": B, "exp": A})
    r = score("source_grounding", res, query="q", response="resp", expected="exp")
    assert r.value == pytest.approx(0.8, abs=1e-6)  # cos(q, resp)
    assert r.details["against"] == "query"
    r = score("source_grounding", res, response="resp", expected="exp")
    assert r.value == pytest.approx(0.96, abs=1e-6)  # cos(exp, resp) = 0.6*0.8 + 0.8*0.6
    assert r.details["against"] == "expected"
    r = score("source_grounding", res, response="resp")
    assert r.value is None and "query" in r.reason


# ---------------------------------------------------------------- top_k_accuracy


def test_top_k_proxy_formula() -> None:
    res = fake_resources({"resp": A, "exp": E1, "close": (0.9, float(np.sqrt(0.19)), 0.0)})
    r = score("top_k_accuracy", res, response="resp", expected="exp")
    # sim 0.6 < 0.8 -> 0.6 / 0.8 = 0.75
    assert r.value == pytest.approx(0.75, abs=1e-6)
    assert r.details["method"] == "proxy"
    assert r.method == "local"
    # sim 0.9 >= 0.8 -> 1.0
    assert score("top_k_accuracy", res, response="close", expected="exp").value == 1.0


def test_top_k_proxy_threshold_from_config() -> None:
    res = fake_resources({"resp": A, "exp": E1}, top_k_similarity_threshold=0.5)
    r = score("top_k_accuracy", res, response="resp", expected="exp")
    assert r.value == 1.0  # 0.6 >= 0.5
    assert "top_k_similarity_threshold=0.5" in r.signature


def test_true_top_k_by_normalised_exact_match() -> None:
    res = fake_resources({})  # every text orthogonal: only exact matches can match
    cands = ["Lyon", "Marseille", "  paris. "]
    s = Sample(response="Lyon", expected="Paris", candidates=cands)
    r = get_metric("top_k_accuracy", k=3).score(s, res)
    assert r.value == 1.0
    assert r.details["method"] == "true_top_k"
    assert r.details["matched_rank"] == 3
    assert r.details["candidates"][2]["exact"] is True
    assert "k=3" in r.signature
    # the match is at rank 3, outside the first 2
    r = get_metric("top_k_accuracy", k=2).score(s, res)
    assert r.value == 0.0 and r.details["matched_rank"] is None


def test_true_top_k_by_similarity_and_default_k() -> None:
    res = fake_resources({"exp": E1, "near": (0.96, 0.28, 0.0), "far": A})
    # "near": cos 0.96 >= 0.8 matches; "far": cos 0.6 does not
    five_misses = [f"wrong {i}" for i in range(4)]
    s = Sample(expected="exp", candidates=[*five_misses, "near"])
    r = get_metric("top_k_accuracy").score(s, res)  # k = config.retrieval_k = 5
    assert r.value == 1.0 and r.details["matched_rank"] == 5 and r.details["k"] == 5
    s = Sample(expected="exp", candidates=[*five_misses, "far", "near"])
    assert get_metric("top_k_accuracy").score(s, res).value == 0.0  # near is rank 6
    s = Sample(expected="exp", candidates=["far"])
    assert get_metric("top_k_accuracy").score(s, res).value == 0.0


def test_true_top_k_k_larger_than_candidates() -> None:
    res = fake_resources({"exp": E1, "near": (0.96, 0.28, 0.0)})
    # k = 10 but 2 candidates: both are looked at; "near" (cos 0.96) matches at rank 2
    r = get_metric("top_k_accuracy", k=10).score(
        Sample(expected="exp", candidates=["far away", "near"]), res
    )
    assert r.value == 1.0 and r.details["matched_rank"] == 2
    assert len(r.details["candidates"]) == 2


def test_top_k_needs_candidates_or_response() -> None:
    res = fake_resources({})
    assert score("top_k_accuracy", res, expected="x").value is None
    assert score("top_k_accuracy", res, expected="x", candidates=[" "]).value is None
    with pytest.raises(ValueError, match="'k' parameter of TopKAccuracy"):
        get_metric("top_k_accuracy", k=0)


# ---------------------------------------------------------------- known facts


def test_hallucination_rate_and_known_facts_hallucination() -> None:
    # response E1; facts: f1 cos 0.8, f2 cos 0 (< 0.3: conflicting), f3 cos 0.6
    res = fake_resources({"resp": E1, "f1": B, "f2": E2, "f3": A})
    fields = {"response": "resp", "known_facts": ["f1", "f2", "f3", " "]}
    rate = score("hallucination_rate", res, **fields)
    assert rate.value == pytest.approx(1 / 3)  # 1 conflicting of 3 non-blank facts
    assert [c["fact"] for c in rate.details["conflicting_facts"]] == ["f2"]
    assert rate.details["conflicting_facts"][0]["similarity"] == pytest.approx(0.0, abs=1e-6)
    flag = score("known_facts_hallucination", res, **fields)
    assert flag.value == 1.0
    fields["known_facts"] = ["f1", "f3"]
    assert score("hallucination_rate", res, **fields).value == 0.0
    assert score("known_facts_hallucination", res, **fields).value == 0.0
    assert score("known_facts_hallucination", res, response="resp").value is None


def test_known_facts_threshold_from_config() -> None:
    # with threshold 0.7, f3 (cos 0.6) also conflicts: 2 of 3
    res = fake_resources(
        {"resp": E1, "f1": B, "f2": E2, "f3": A}, hallucination_detection_threshold=0.7
    )
    r = score("hallucination_rate", res, response="resp", known_facts=["f1", "f2", "f3"])
    assert r.value == pytest.approx(2 / 3)
    assert "hallucination_detection_threshold=0.7" in r.signature


def test_polarity() -> None:
    for name in ("hallucination_rate", "known_facts_hallucination"):
        assert get_metric(name).higher_is_better is False
    for name in ("accuracy", "consistency", "cross_language_consistency", "top_k_accuracy"):
        assert get_metric(name).higher_is_better is True


# ---------------------------------------------------------------- consistency


def test_consistency_pairwise_mean() -> None:
    res = fake_resources({"r0": E1, "r1": B, "r2": A, "neg": NEG})
    r = score("consistency", res, response="r0", previous_responses=["r1", "r2"])
    # pairs: (r0,r1) 0.8, (r0,r2) 0.6, (r1,r2) 0.96 -> 2.36 / 3
    assert r.value == pytest.approx(2.36 / 3, abs=1e-6)
    assert r.details["min_similarity"] == pytest.approx(0.6, abs=1e-6)
    assert len(r.details["pairs"]) == 3
    # mean -1 clamps to 0
    assert score("consistency", res, response="r0", previous_responses=["neg"]).value == 0.0
    # one non-blank response only
    r = score("consistency", res, response="r0", previous_responses=["  "])
    assert r.value is None and "2" in r.reason
    assert score("consistency", res, response="r0").value is None


def test_consistency_edge_cases() -> None:
    res = fake_resources({"r0": E1, "r1": B})
    # a single response: no pair to compare -> None (empty list or blank entries alike)
    for previous in ([], [""], ["  ", "\n"]):
        r = score("consistency", res, response="r0", previous_responses=previous)
        assert r.value is None, previous
    # the same answer three times: pairs (0,1) (0,2) (1,2) all cos 1 -> 1.0
    r = score("consistency", res, response="r0", previous_responses=["r0", "r0"])
    assert r.value == pytest.approx(1.0) and len(r.details["pairs"]) == 3
    # duplicates are kept as separate responses: r0, r0, r1 -> (1 + 0.8 + 0.8) / 3
    r = score("consistency", res, response="r0", previous_responses=["r0", "r1"])
    assert r.value == pytest.approx(2.6 / 3, abs=1e-6)


def test_blank_inputs_are_none_not_zero() -> None:
    res = fake_resources({"a": E1})
    for name in ("semantic_similarity", "accuracy", "cross_language_consistency"):
        r = score(name, res, response="  ", expected="a", parallel_response="a")
        assert r.value is None and "response" in (r.reason or ""), name
    r = score("hallucination_rate", res, response="a", known_facts=[])
    assert r.value is None and "known_facts" in (r.reason or "")


def test_cross_language_consistency_formula() -> None:
    res = fake_resources({"en": E1, "ar": B, "neg": NEG})
    r = score("cross_language_consistency", res, response="en", parallel_response="ar")
    assert r.value == pytest.approx(0.8, abs=1e-6)
    assert (
        score("cross_language_consistency", res, response="en", parallel_response="neg").value
        == 0.0
    )


def test_batch_embeds_in_one_call() -> None:
    res = fake_resources({"r0": E1, "r1": B, "r2": A})
    samples = [
        Sample(response="r0", previous_responses=["r1"]),
        Sample(response="r1", previous_responses=["r2", "r0"]),
    ]
    results = get_metric("consistency").score_batch(samples, res)
    assert results[0].value == pytest.approx(0.8, abs=1e-6)
    assert results[1].value == pytest.approx((0.96 + 0.8 + 0.6) / 3, abs=1e-6)
    assert len(res.embedder.batches) == 1  # type: ignore[attr-defined]


def test_suite_embeds_each_distinct_text_of_a_chunk_once() -> None:
    res = fake_resources({"resp": A, "exp": B, "q": E1})
    sample = Sample(query="q", response="resp", expected="exp", previous_responses=["exp"])
    names = (
        "semantic_similarity",
        "semantic_similarity_percentage",
        "accuracy",
        "factual_consistency",
        "truthfulness",
        "top_k_accuracy",
        "source_grounding",
        "consistency",
    )
    run = evaluate([sample], metrics=list(names), resources=res)
    values = {name: run.results[0][name].value for name in names}
    # cos(A, B) = 0.96 for the first six (top_k proxy: 0.96 >= 0.8 -> 1.0) and for
    # consistency (resp vs exp again); source_grounding: cos(E1, A) = 0.6
    assert values["semantic_similarity"] == pytest.approx(0.96, abs=1e-6)
    assert values["top_k_accuracy"] == 1.0
    assert values["source_grounding"] == pytest.approx(0.6, abs=1e-6)
    assert values["consistency"] == pytest.approx(0.96, abs=1e-6)
    # 8 metrics read 3 distinct texts: one model batch, each text once, longest first
    assert res.embedder.batches == [["resp", "exp", "q"]]  # type: ignore[attr-defined]


# ---------------------------------------------------------------- real model orderings


def test_real_paraphrase_above_unrelated(resources: Resources) -> None:
    expected = "The capital of France is Paris."
    para = Sample(response="Paris is France's capital city.", expected=expected)
    unrelated = Sample(response="The stock market fell sharply today.", expected=expected)
    for name in (
        "accuracy",
        "semantic_similarity_percentage",
        "factual_consistency",
        "top_k_accuracy",
    ):
        metric = get_metric(name)
        assert metric.score(para, resources).value > metric.score(unrelated, resources).value, name


def test_real_identical_short_answer_is_one(resources: Resources) -> None:
    # the RAG specification's example: "Cornish heath" vs "Cornish heath" -> 100.0 %
    r = get_metric("semantic_similarity_percentage").score(
        Sample(answer="Cornish heath", ground_truth="Cornish heath"), resources
    )
    assert r.value == 1.0


def test_real_cross_language_translation_above_unrelated(resources: Resources) -> None:
    metric = get_metric("cross_language_consistency")
    pair = Sample(
        response="The capital of France is Paris.", parallel_response="عاصمة فرنسا هي باريس."
    )
    unrelated = Sample(
        response="The capital of France is Paris.", parallel_response="أحب أكل البيتزا يوم الجمعة."
    )
    good, bad = metric.score(pair, resources), metric.score(unrelated, resources)
    assert good.value > bad.value
    assert good.details["parallel_arabic"] is True


def test_real_consistency_and_known_facts(resources: Resources) -> None:
    consistency = get_metric("consistency")
    same = Sample(
        response="Paris is the capital of France.",
        previous_responses=["The capital of France is Paris.", "France's capital city is Paris."],
    )
    mixed = Sample(
        response="Paris is the capital of France.",
        previous_responses=["I like to eat pizza on Fridays.", "The stock market fell today."],
    )
    assert consistency.score(same, resources).value > consistency.score(mixed, resources).value
    r = get_metric("known_facts_hallucination").score(
        Sample(
            response="Paris is the capital of France.",
            known_facts=["France's capital is Paris.", "Quarterly earnings rose by eight percent."],
        ),
        resources,
    )
    assert r.value == 1.0
    assert [c["fact"] for c in r.details["conflicting_facts"]] == [
        "Quarterly earnings rose by eight percent."
    ]
