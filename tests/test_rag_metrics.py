"""RAG metrics: hand-worked formulas (fake embedder with exact cosines), the piecewise
context-intrusion curve at and between every breakpoint, source matching rules, and
orderings on the real default embedder."""

from __future__ import annotations

import numpy as np
import pytest

from assay.core.sample import Sample
from assay.engine.resources import Resources
from assay.metrics.rag import intrusion_score, match_source
from assay.metrics.registry import get_metric
from assay.text.tokenize import content_words
from fakes import fake_resources

# Exact cosines: cos(E1, B) = 0.8, cos(E1, A) = 0.6, cos(A, B) = 0.96, cos(E1, E2) = 0,
# cos(E1, NEG_A) = -0.6, cos(E1, NEAR) = 0.9.
E1 = (1.0, 0.0, 0.0)
E2 = (0.0, 1.0, 0.0)
A = (0.6, 0.8, 0.0)
B = (0.8, 0.6, 0.0)
NEG_A = (-0.6, 0.8, 0.0)
NEAR = (0.9, float(np.sqrt(0.19)), 0.0)


# ---------------------------------------------------------------- source matching rules


def test_match_source_rules() -> None:
    doc = "[doc_3] The Eiffel Tower was completed in 1889 for the World's Fair."
    assert match_source("Doc 3!", "doc 3", 0.0) == "exact"
    assert match_source("doc_3", doc, 0.0) == "source_in_doc"  # id quoted in the chunk
    assert match_source("eiffel tower", doc, 0.0) == "source_in_doc"  # title in the chunk
    assert match_source("doc_31", doc, 0.0) is None  # token boundary: doc 31 != doc 3
    passage = "History. The Eiffel Tower was completed in 1889. It is 330 m tall."
    chunk = "the Eiffel Tower was completed in 1889"  # 7 words, inside the passage
    assert match_source(passage, chunk, 0.0) == "doc_in_source"
    assert match_source(passage, "Eiffel Tower", 0.0) is None  # 2 words < MIN_CHUNK_WORDS
    assert match_source("a paraphrase", "another text", 0.85) == "similarity"
    assert match_source("a paraphrase", "another text", 0.79) is None
    assert match_source("a paraphrase", "another text", 0.5, threshold=0.5) == "similarity"


# ---------------------------------------------------------------- retrieval recall / precision


DOCS = ["d1 about apples", "[src-a] d2", "d3 text", "d4 text", "d5 text", "d6 has src-b"]


def test_retrieval_recall_hand_worked() -> None:
    res = fake_resources({"passage c": E1, "d4 text": NEAR})
    s = Sample(retrieved_docs=DOCS, expected_sources=["src-a", "src-b", "passage c", "src-z"])
    r = get_metric("retrieval_recall_5").score(s, res)
    # top 5: src-a in d2 (rank 2, contained); src-b only in d6 (rank 6, outside k=5);
    # passage c ~ d4 (cos 0.9 >= 0.8, rank 4); src-z nowhere -> 2 / 4
    assert r.value == 0.5
    assert r.details["k"] == 5 and r.details["found"] == 2 and r.details["expected"] == 4
    found = {p["source"]: (p["rank"], p["how"]) for p in r.details["sources"]}
    assert found["src-a"] == (2, "source_in_doc")
    assert found["passage c"] == (4, "similarity")
    assert found["src-b"] == (None, None)
    assert "k=5" in r.signature
    # k = 6 reaches d6: 3 / 4
    r6 = get_metric("retrieval_recall_5", k=6).score(s, res)
    assert r6.value == 0.75 and "k=6" in r6.signature
    # k from the configuration
    res3 = fake_resources({"passage c": E1, "d4 text": NEAR}, retrieval_k=3)
    r3 = get_metric("retrieval_recall_5").score(s, res3)
    assert r3.value == 0.25 and r3.details["k"] == 3  # only src-a within the top 3


def test_retrieval_recall_needs_expected_sources() -> None:
    res = fake_resources({})
    assert get_metric("retrieval_recall_5").score(Sample(contexts=DOCS), res).value is None
    r = get_metric("retrieval_recall_5").score(Sample(contexts=DOCS, expected_sources=[" "]), res)
    assert r.value is None
    with pytest.raises(ValueError, match="'k' parameter"):
        get_metric("retrieval_recall_5", k=0)
    with pytest.raises(ValueError, match="'match_threshold' parameter"):
        get_metric("retrieval_precision_5", match_threshold=1.5)


def test_retrieval_precision_by_query_similarity() -> None:
    # query E1; docs: B 0.8 (rel), E2 0 (not), A 0.6 (rel), NEG_A -0.6 -> 0 (not),
    # "x5" orthogonal (not), "x6" = B (rel but rank 6, outside k)
    table = {"q": E1, "d1": B, "d2": E2, "d3": A, "d4": NEG_A, "d6": B}
    res = fake_resources(table)
    s = Sample(query="q", contexts=["d1", "d2", "d3", "d4", "x5", "d6"])
    r = get_metric("retrieval_precision_5").score(s, res)
    assert r.value == pytest.approx(2 / 5)  # relevant 2 / min(6, 5)
    assert r.details["relevance"] == "query_similarity"
    assert [d["relevant"] for d in r.details["documents"]] == [True, False, True, False, False]
    # fewer docs than k: denominator is len(docs) = 3 -> 2 / 3
    s3 = Sample(query="q", contexts=["d1", "d2", "d3"])
    assert get_metric("retrieval_precision_5").score(s3, res).value == pytest.approx(2 / 3)
    # relevance threshold from the configuration: 0.7 keeps only d1 -> 1 / 3
    res7 = fake_resources(table, retrieval_relevance_threshold=0.7)
    r7 = get_metric("retrieval_precision_5").score(s3, res7)
    assert r7.value == pytest.approx(1 / 3)
    assert "retrieval_relevance_threshold=0.7" in r7.signature


def test_retrieval_precision_prefers_expected_sources() -> None:
    res = fake_resources({"q": E1, "d1": B, "d3": A})
    s = Sample(query="q", contexts=["d1", "[src-a] d2", "d3"], expected_sources=["src-a"])
    r = get_metric("retrieval_precision_5").score(s, res)
    # only d2 quotes the expected source, though d1/d3 are similar to the query -> 1 / 3
    assert r.value == pytest.approx(1 / 3)
    assert r.details["relevance"] == "expected_sources"
    assert r.details["documents"][1]["matched_source"] == "src-a"
    assert get_metric("retrieval_precision_5").score(Sample(contexts=["d1"]), res).value is None


@pytest.mark.parametrize(
    "name", ["retrieval_recall_5", "retrieval_precision_5", "context_precision_at_k"]
)
def test_ranked_metrics_all_blank_contexts_is_none(name: str) -> None:
    # every retrieved document is blank: undefined (None), as for the other context
    # metrics; these used to score 0.0
    res = fake_resources({"q": E1})
    s = Sample(query="q", contexts=["", "  "], expected_sources=["src-a"])
    r = get_metric(name).score(s, res)
    assert r.value is None and "blank" in (r.reason or "")


@pytest.mark.parametrize(
    "name",
    [
        "retrieval_recall_5",
        "retrieval_precision_5",
        "context_precision_at_k",
        "context_relevance",
        "context_coverage",
        "reranker_score",
        "context_intrusion",
    ],
)
def test_empty_contexts_list_is_missing_input(name: str) -> None:
    res = fake_resources({})
    s = Sample(query="q", response="an answer", contexts=[], expected_sources=["src"])
    r = get_metric(name).score(s, res)
    assert r.value is None and r.reason == "missing input: contexts"


def test_ranked_metrics_blank_document_keeps_its_rank() -> None:
    res = fake_resources({"q": E1, "d1": B})
    s = Sample(query="q", contexts=["  ", "d1"])
    # rank 1 blank (not relevant), rank 2 relevant (0.8): precision 1 / 2, AP = (1/2) / 1
    assert get_metric("retrieval_precision_5").score(s, res).value == pytest.approx(0.5)
    assert get_metric("context_precision_at_k").score(s, res).value == pytest.approx(0.5)


def test_ranked_metrics_k_larger_than_contexts() -> None:
    res = fake_resources({})  # every text orthogonal: only the token rules can match
    s = Sample(query="q", contexts=["d1", "x", "d3"], expected_sources=["d3", "src-z"])
    # k = 10 > 3 documents: all 3 are considered; the denominator is min(3, 10) = 3
    precision = get_metric("retrieval_precision_5", k=10).score(s, res)
    # expected_sources given: only d3 (exact match) is relevant -> 1 / 3
    assert precision.value == pytest.approx(1 / 3)
    assert precision.details["considered"] == 3 and precision.details["k"] == 10
    # recall: d3 found (rank 3), src-z nowhere -> 1 / 2
    assert get_metric("retrieval_recall_5", k=10).score(s, res).value == 0.5
    # AP: relevant only at rank 3 -> (1/3) / 1
    ap = get_metric("context_precision_at_k", k=10).score(s, res)
    assert ap.value == pytest.approx(1 / 3)


def test_duplicate_contexts_by_hand() -> None:
    res = fake_resources({"q": E1, "resp": E1, "d1": B, "d2": E2})
    s = Sample(query="q", response="resp", contexts=["d1", "d1", "d2"], expected_sources=["d1"])
    # precision: both copies of d1 match the source -> 2 / 3 (the specification counts documents)
    assert get_metric("retrieval_precision_5").score(s, res).value == pytest.approx(2 / 3)
    # recall: the one source is found (first at rank 1) -> 1 / 1, not 2
    r = get_metric("retrieval_recall_5").score(s, res)
    assert r.value == 1.0 and r.details["sources"][0]["rank"] == 1
    # AP: relevant at ranks 1 and 2 -> (1/1 + 2/2) / 2 = 1
    assert get_metric("context_precision_at_k").score(s, res).value == pytest.approx(1.0)
    # context_relevance: (0.8 + 0.8 + 0) / 3; coverage: 2 of 3 are >= 0.4
    rel = get_metric("context_relevance").score(s, res)
    assert rel.value == pytest.approx(1.6 / 3, abs=1e-6)
    assert get_metric("context_coverage").score(s, res).value == pytest.approx(2 / 3)
    # intrusion uses the set of context words, so a duplicate adds nothing:
    # response content {d1, tail, words} vs context {d1, d2}: r = 1 / 3 (in 0.30..0.50)
    # -> (20 + (1/3 - 0.30) / 0.20 * 40) / 100 = 26.667 / 100
    intr = get_metric("context_intrusion").score(
        Sample(response="d1 tail words", contexts=["d1", "d1", "d2"]), None
    )
    one = get_metric("context_intrusion").score(
        Sample(response="d1 tail words", contexts=["d1", "d2"]), None
    )
    assert intr.value == one.value == pytest.approx((20 + (1 / 3 - 0.30) / 0.20 * 40) / 100)


def test_context_precision_at_k_average_precision() -> None:
    res = fake_resources({"q": E1, "rel": B})
    metric = get_metric("context_precision_at_k")
    # relevant at ranks 1 and 3: (1/1 + 2/3) / 2
    s = Sample(query="q", contexts=["rel", "x", "rel", "y"])
    assert metric.score(s, res).value == pytest.approx((1 + 2 / 3) / 2)
    # relevant at ranks 2 and 3: (1/2 + 2/3) / 2 -- same precision@k, lower AP
    s = Sample(query="q", contexts=["x", "rel", "rel", "y"])
    assert metric.score(s, res).value == pytest.approx((1 / 2 + 2 / 3) / 2)
    assert get_metric("retrieval_precision_5").score(s, res).value == pytest.approx(2 / 4)
    # nothing relevant -> 0.0
    assert metric.score(Sample(query="q", contexts=["x", "y"]), res).value == 0.0


# ---------------------------------------------------------------- context vs response / query


CTX_TABLE = {"resp": E1, "q": E1, "c1": B, "c2": A, "c3": E2, "c4": NEG_A}
CTX = ["c1", "c2", "c3", "c4", "  "]  # the blank document is dropped


def test_context_relevance_and_coverage() -> None:
    res = fake_resources(CTX_TABLE)
    s = Sample(response="resp", contexts=CTX)
    # clamped cosines with the response: 0.8, 0.6, 0, max(0, -0.6) = 0
    r = get_metric("context_relevance").score(s, res)
    assert r.value == pytest.approx((0.8 + 0.6 + 0 + 0) / 4, abs=1e-6)
    cov = get_metric("context_coverage").score(s, res)
    assert cov.value == 0.5  # 0.8 and 0.6 are >= 0.4: 2 of 4
    assert cov.details["used"] == 2
    res7 = fake_resources(CTX_TABLE, context_usage_threshold=0.7)
    cov7 = get_metric("context_coverage").score(s, res7)
    assert cov7.value == 0.25 and "context_usage_threshold=0.7" in cov7.signature
    assert (
        get_metric("context_relevance").score(Sample(response="resp", contexts=[" "]), res).value
        is None
    )


def test_reranker_score_and_gold_context_match() -> None:
    res = fake_resources(CTX_TABLE)
    r = get_metric("reranker_score").score(Sample(query="q", contexts=CTX), res)
    assert r.value == pytest.approx(1.4 / 4, abs=1e-6)  # (0.8 + 0.6 + 0 + 0) / 4
    assert (
        get_metric("reranker_score").score(Sample(response="resp", contexts=CTX), res).value is None
    )
    g = get_metric("gold_context_match").score(Sample(gold_context="c1", response="resp"), res)
    assert g.value == pytest.approx(0.8, abs=1e-6)
    g = get_metric("gold_context_match").score(Sample(gold_context="c4", response="resp"), res)
    assert g.value == 0.0


def test_rag_batch_embeds_in_one_call() -> None:
    res = fake_resources(CTX_TABLE)
    samples = [
        Sample(response="resp", contexts=["c1", "c2"]),
        Sample(response="resp", contexts=["c3"]),
    ]
    results = get_metric("context_relevance").score_batch(samples, res)
    assert [round(r.value, 6) for r in results] == [0.7, 0.0]
    assert len(res.embedder.batches) == 1  # type: ignore[attr-defined]


# ---------------------------------------------------------------- context intrusion

NATO = [
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliett",
    "kilo",
    "lima",
    "mike",
    "november",
    "oscar",
    "papa",
    "quebec",
    "romeo",
    "sierra",
    "tango",
]
RESPONSE = " ".join(NATO)


@pytest.mark.parametrize(
    ("overlap", "expected"),
    [
        (0, 0.0),  # r = 0
        (3, 0.0),  # r = 0.15 (breakpoint): 0
        (4, 0.05 / 0.15 * 20 / 100),  # r = 0.20: (0.05 / 0.15) * 20 = 6.667 -> 0.0667
        (5, 0.10 / 0.15 * 20 / 100),  # r = 0.25: 13.333 -> 0.1333
        (6, 0.20),  # r = 0.30 (breakpoint): 20
        (8, 0.40),  # r = 0.40: 20 + (0.1 / 0.2) * 40 = 40
        (10, 0.60),  # r = 0.50 (breakpoint): 20 + 40 = 60
        (12, 0.75),  # r = 0.60: 60 + (0.1 / 0.2) * 30 = 75
        (14, 0.90),  # r = 0.70 (breakpoint): 60 + 30 = 90
        (17, 0.95),  # r = 0.85: 90 + (0.15 / 0.3) * 10 = 95
        (20, 1.00),  # r = 1.00: 90 + 10 = 100
    ],
)
def test_context_intrusion_piecewise(overlap: int, expected: float) -> None:
    assert len(set(content_words(RESPONSE))) == 20
    context = "The retrieved passage mentions " + " ".join(NATO[:overlap]) + " only."
    r = get_metric("context_intrusion").score(Sample(response=RESPONSE, contexts=[context]), None)
    assert r.value == pytest.approx(expected, abs=1e-9)
    assert r.details["n_overlap"] == overlap and r.details["n_response_words"] == 20
    assert r.method == "pattern"


def test_intrusion_curve_pieces_directly() -> None:
    assert intrusion_score(0.10) == 0.0
    assert intrusion_score(0.225) == pytest.approx(0.10)  # (0.075 / 0.15) * 20 = 10
    assert intrusion_score(0.35) == pytest.approx(0.30)  # 20 + (0.05 / 0.2) * 40 = 30
    assert intrusion_score(0.55) == pytest.approx(0.675)  # 60 + (0.05 / 0.2) * 30 = 67.5
    assert intrusion_score(0.79) == pytest.approx(0.93)  # 90 + (0.09 / 0.3) * 10 = 93
    assert intrusion_score(1.5) == 1.0  # min(10, ...) caps the last piece
    for point in (0.15, 0.30, 0.50, 0.70):  # continuous at every breakpoint
        assert intrusion_score(point + 1e-9) == pytest.approx(intrusion_score(point), abs=1e-6)


def test_context_intrusion_counts_content_words_only() -> None:
    metric = get_metric("context_intrusion")
    # response content words {alpha, bravo}; "the", "and" are stop words; contexts give alpha
    r = metric.score(Sample(response="The alpha and the bravo.", contexts=["alpha", " "]), None)
    assert r.details["overlap_words"] == ["alpha"]
    assert r.value == pytest.approx(0.60)  # r = 1/2 -> 60
    assert metric.score(Sample(response="and the of", contexts=["alpha"]), None).value is None
    assert metric.score(Sample(response="alpha", contexts=["  "]), None).value is None
    assert metric.higher_is_better is False


def test_context_intrusion_arabic_with_diacritics() -> None:
    # response content words {عاصمة, فرنسا, باريس} ("هي" is a stop word); the context's
    # vocalised "عَاصِمَةُ" is the word "عاصمة" (it used to split into fragments, giving
    # 2 / 3 overlap): 3 / 3 = 1.0 -> 90 + min(10, 0.3 / 0.3 * 10) = 100 -> 1.0
    r = get_metric("context_intrusion").score(
        Sample(response="عاصمة فرنسا هي باريس.", contexts=["باريس هِيَ عَاصِمَةُ فرنسا."]), None
    )
    assert r.details["overlap_words"] == ["باريس", "عاصمة", "فرنسا"]
    assert r.value == pytest.approx(1.0)
    # half the content words copied: {عاصمة, فرنسا, باريس, جميلة} vs {باريس, فرنسا} ->
    # 2 / 4 = 0.5 -> 60
    r = get_metric("context_intrusion").score(
        Sample(response="عاصمة فرنسا باريس الجميلة", contexts=["باريس في فَرَنْسَا"]), None
    )
    assert r.details["overlap_ratio"] == pytest.approx(0.5)
    assert r.value == pytest.approx(0.60)


# ---------------------------------------------------------------- real model orderings


def test_real_rag_orderings(resources: Resources) -> None:
    query = "When was the Eiffel Tower completed?"
    response = "The Eiffel Tower was completed in 1889."
    good = ["The Eiffel Tower in Paris was finished in 1889 for the World's Fair."]
    bad = ["Bananas are rich in potassium and grow in tropical climates."]
    for name in ("context_relevance", "reranker_score"):
        metric = get_metric(name)
        hi = metric.score(Sample(query=query, response=response, contexts=good), resources)
        lo = metric.score(Sample(query=query, response=response, contexts=bad), resources)
        assert hi.value > lo.value, name
    precision = get_metric("retrieval_precision_5")
    mixed = precision.score(Sample(query=query, contexts=[*good, *bad]), resources)
    assert mixed.value == 0.5  # the tower document is relevant (>= 0.5), the banana one not
    gold = get_metric("gold_context_match")
    assert (
        gold.score(Sample(gold_context=good[0], response=response), resources).value
        > gold.score(Sample(gold_context=bad[0], response=response), resources).value
    )
    # a paraphrased expected passage is found by the embedding rule, an unrelated one is not
    recall = get_metric("retrieval_recall_5")
    r = recall.score(
        Sample(
            contexts=good,
            expected_sources=[
                "The Eiffel Tower in Paris was completed in 1889 for the World's Fair.",
                "Bananas grow in the tropics.",
            ],
        ),
        resources,
    )
    assert r.value == 0.5
