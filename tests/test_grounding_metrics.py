"""The lightweight pipeline's metrics: relevance, completeness, anchor_hallucination."""

from __future__ import annotations

import math

import pytest
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.metrics.pairwise import cosine_similarity

from assay.core.sample import Sample
from assay.metrics.grounding import AnchorHallucination, Completeness, Relevance, tfidf_cosine
from assay.metrics.registry import get_metric, suite

IDF_ONE_DOC = math.log(3 / 2) + 1  # smooth idf, n = 2 documents, df = 1: ln((1+2)/(1+1)) + 1


def test_registered_in_pipeline_suite():
    assert {"relevance", "completeness", "anchor_hallucination"} <= set(suite("pipeline"))
    assert get_metric("relevance").higher_is_better
    assert get_metric("completeness").higher_is_better
    assert not get_metric("anchor_hallucination").higher_is_better
    assert get_metric("anchor_hallucination").family == "grounding"


# ---- relevance -------------------------------------------------------------------------


def test_relevance_by_hand(resources):
    # TF-IDF fit on the pair, English stop words removed ("what", "do"):
    #   query    "What do cats chase?" -> cats 1, chase 1                (df 2 -> idf 1)
    #   response "Cats chase mice."    -> cats 1, chase 1, mice 1.405465 (df 1 -> ln 1.5 + 1)
    #   cosine = (1 + 1) / (sqrt(2) * sqrt(2 + 1.405465^2)) = 2 / (1.414214 * 1.993824) = 0.709297
    # Jaccard of word sets: {what, do, cats, chase} vs {cats, chase, mice}: 2 / 5 = 0.4
    # relevance = (0.709297 + 0.4) / 2 = 0.554649
    cosine = 2 / (math.sqrt(2) * math.sqrt(2 + IDF_ONE_DOC**2))
    assert cosine == pytest.approx(0.709297, abs=1e-6)
    result = Relevance().score(
        Sample(query="What do cats chase?", response="Cats chase mice."), resources
    )
    assert result.components["tfidf_cosine"] == pytest.approx(cosine)
    assert result.components["jaccard"] == pytest.approx(0.4)
    assert result.value == pytest.approx((cosine + 0.4) / 2)
    assert result.value == pytest.approx(0.554649, abs=1e-6)


def test_relevance_cosine_matches_sklearn_on_the_pair():
    query, response = "Where is the Eiffel Tower?", "The Eiffel Tower is in Paris, France."
    matrix = TfidfVectorizer(stop_words="english").fit_transform([query, response])
    reference = cosine_similarity(matrix[0], matrix[1])[0, 0]
    # by hand: eiffel, tower in both (idf 1); paris, france only in the response
    # cos = 2 / (sqrt(2) * sqrt(2 + 2 * 1.405465^2)) = 0.579738
    by_hand = 2 / (math.sqrt(2) * math.sqrt(2 + 2 * IDF_ONE_DOC**2))
    assert tfidf_cosine(query, response) == pytest.approx(reference)
    assert tfidf_cosine(query, response) == pytest.approx(by_hand)


def test_relevance_orders_on_topic_above_off_topic(resources):
    metric = Relevance()
    on = metric.score(
        Sample(
            query="How tall is the Eiffel Tower?", response="The Eiffel Tower is 330 metres tall."
        ),
        resources,
    )
    off = metric.score(
        Sample(query="How tall is the Eiffel Tower?", response="Bananas are yellow."), resources
    )
    # off topic: no shared term (cosine 0), words {how, tall, is, the, eiffel, tower} vs
    # {bananas, are, yellow}: Jaccard 0
    assert off.value == 0.0
    assert on.value > 0.5


def test_relevance_falls_back_to_jaccard_without_vocabulary(resources):
    # every word is an English stop word: TF-IDF has no vocabulary (cosine undefined),
    # the pipeline specification's fallback is Jaccard alone: {is, it} vs {it, is} = 1
    result = Relevance().score(Sample(query="Is it?", response="It is."), resources)
    assert result.components["tfidf_cosine"] is None
    assert result.value == 1.0
    assert result.details["fallback"]


def test_relevance_vocalised_arabic_by_hand(resources):
    # the diacritics of "عَاصِمَةُ" are removed before both halves tokenise, so it is the
    # word "عاصمة" (it used to fall apart into letter fragments: relevance 0.279)
    # Jaccard: {ما, هي, عاصمة, فرنسا} vs {عاصمة, فرنسا, هي, باريس}: 3 / 5 = 0.6
    # TF-IDF (no English stop word here): ما and باريس have df 1 (idf c = ln 1.5 + 1),
    # هي, عاصمة, فرنسا df 2 (idf 1); both rows have norm sqrt(c^2 + 3), dot = 3
    # cosine = 3 / (c^2 + 3) = 3 / 4.975332 = 0.602975; relevance = 0.601487
    cosine = 3 / (IDF_ONE_DOC**2 + 3)
    result = Relevance().score(
        Sample(query="ما هي عَاصِمَةُ فرنسا؟", response="عاصمة فرنسا هي باريس"), resources
    )
    assert result.components["jaccard"] == pytest.approx(0.6)
    assert result.components["tfidf_cosine"] == pytest.approx(cosine)
    assert result.value == pytest.approx(0.601487, abs=1e-6)


def test_relevance_missing_input_is_none(resources):
    result = Relevance().score(Sample(response="Paris."), resources)
    assert result.value is None
    assert "query" in (result.reason or "")


# ---- completeness ----------------------------------------------------------------------


def test_completeness_by_hand(resources):
    # query keywords: "what", "is", "the", "of" are stop words -> {capital, france};
    # response keywords {paris, capital}: 1 of 2 covered
    result = Completeness().score(
        Sample(query="What is the capital of France?", response="Paris is the capital."),
        resources,
    )
    assert result.value == 0.5
    assert result.details["missing"] == ["france"]
    assert result.details["matched"] == ["capital"]


def test_completeness_full_and_no_keywords(resources):
    full = Completeness().score(
        Sample(query="Capital of France?", response="The capital of France is Paris."), resources
    )
    assert full.value == 1.0
    # no keyword in the query: 1.0 by the pipeline specification's rule
    none = Completeness().score(Sample(query="Is it?", response="No."), resources)
    assert none.value == 1.0
    assert none.details["query_keywords"] == []


def test_completeness_vocalised_arabic(resources):
    # query keywords: "ما" and "هي" are Arabic stop words -> {عاصمة, فرنسا} (the vocalised
    # "عَاصِمَةُ" is "عاصمة"); the response has both: 2 / 2
    result = Completeness().score(
        Sample(query="ما هي عَاصِمَةُ فرنسا؟", response="عاصمة فرنسا هي باريس."), resources
    )
    assert result.details["query_keywords"] == ["عاصمة", "فرنسا"]
    assert result.value == 1.0


def test_completeness_is_exact_word_match(resources):
    # keywords {cars, sold, 2021}; response keywords {car, sold, 2021}: 2 of 3
    result = Completeness().score(
        Sample(query="How many cars were sold in 2021?", response="One car was sold in 2021."),
        resources,
    )
    assert result.value == pytest.approx(2 / 3)
    assert result.details["missing"] == ["cars"]


# ---- anchor_hallucination --------------------------------------------------------------


def test_anchor_hallucination_revenue_example(resources):
    # anchors: claim (revenue, be, million) supported; MONEY "$5 million" supported;
    # DATE "2021" unsupported (the context says 2020) -> claim_error = 1/3.
    # overlap: {revenue, 5, million, 2021} vs context words -> 3/4 = 0.75 >= 0.2: no drift.
    # value = max(1/3, 0) = 1/3
    result = AnchorHallucination().score(
        Sample(
            response="Revenue was $5 million in 2021.", contexts=["Revenue was $5 million in 2020."]
        ),
        resources,
    )
    assert result.value == pytest.approx(1 / 3)
    assert result.components == {
        "claim_error": pytest.approx(1 / 3),
        "drift_penalty": 0.0,
        "topic_overlap": pytest.approx(0.75),
    }
    assert [(a["kind"], a["text"], a["supported"]) for a in result.details["anchors"]] == [
        ("claim", "Revenue was million", True),
        ("number", "$5 million", True),
        ("date", "2021", False),
    ]
    assert (result.details["n_anchors"], result.details["n_unsupported"]) == (3, 1)
    assert result.details["unsupported"] == ["2021"]
    assert result.method == "local"


def test_anchor_hallucination_supported_response_scores_zero(resources):
    # anchors (company, employ, people) and 1,200 = 1200 both supported; overlap 3/3
    result = AnchorHallucination().score(
        Sample(
            response="The factory employs 1,200 people.",
            contexts=["The factory employs 1200 people."],
        ),
        resources,
    )
    assert result.details["n_anchors"] == 2
    assert result.value == 0.0


def test_drift_gate_fires_on_unrelated_response(resources):
    # no anchors (claim_error 0); no response content word in the context: overlap 0 < 0.2
    # -> P_drift = 0.2 -> value = max(0, 0.2) = 0.2
    result = AnchorHallucination().score(
        Sample(response="Bananas, apples and oranges.", contexts=["The Eiffel Tower is in Paris."]),
        resources,
    )
    assert result.details["n_anchors"] == 0
    assert result.components["topic_overlap"] == 0.0
    assert result.components["drift_penalty"] == 0.2
    assert result.value == 0.2


def test_claim_error_above_drift_wins(resources):
    # one negated claim against a positive context: claim_error 1/1 = 1; overlap
    # {drug, does, cure, cancer} vs context words: drug, cure, cancer -> 3/4; value 1
    result = AnchorHallucination().score(
        Sample(response="The drug does not cure cancer.", contexts=["The drug will cure cancer."]),
        resources,
    )
    assert result.value == 1.0
    assert result.components["topic_overlap"] == pytest.approx(0.75)


def test_hedged_response_has_no_claim_anchor(resources):
    # the hedged claim is no anchor; the number 1,200 is and is supported -> 0 / 1
    result = AnchorHallucination().score(
        Sample(
            response="The company may have hired 1,200 workers.",
            contexts=["The company hired 1200 people last year."],
        ),
        resources,
    )
    assert [a["kind"] for a in result.details["anchors"]] == ["number"]
    assert result.value == 0.0


def test_contexts_are_joined(resources):
    # "$5 million" is in the first passage, "2021" in the second: both supported
    result = AnchorHallucination().score(
        Sample(
            response="Revenue was $5 million in 2021.",
            contexts=["Revenue was $5 million.", "The report covers 2021."],
        ),
        resources,
    )
    flags = {a["text"]: a["supported"] for a in result.details["anchors"]}
    assert flags["$5 million"] and flags["2021"]


def test_entities_are_optional_anchors(resources):
    sample = Sample(response="Obama visited Paris.", contexts=["Obama visited Paris."])
    specified = AnchorHallucination().score(sample, resources)
    with_entities = AnchorHallucination(include_entities=True).score(sample, resources)
    assert [a["kind"] for a in specified.details["anchors"]] == ["claim"]
    assert sorted(a["kind"] for a in with_entities.details["anchors"]) == [
        "claim",
        "entity",
        "entity",
    ]
    assert "include_entities=True" in with_entities.signature
    with pytest.raises(TypeError, match="include_entities"):
        AnchorHallucination(include_entities="yes")  # type: ignore[arg-type]


def test_anchor_hallucination_needs_contexts(resources):
    result = AnchorHallucination().score(Sample(response="Revenue was $5 million."), resources)
    assert result.value is None
    assert "contexts" in (result.reason or "")
    blank = AnchorHallucination().score(
        Sample(response="Revenue was $5 million.", contexts=["  ", ""]), resources
    )
    assert blank.value is None


def test_batch_equals_one_by_one(resources):
    samples = [
        Sample(
            response="Revenue was $5 million in 2021.", contexts=["Revenue was $5 million in 2020."]
        ),
        Sample(response="Bananas, apples and oranges.", contexts=["The Eiffel Tower is in Paris."]),
        Sample(response="No context here."),
        Sample(response="The drug does not cure cancer.", contexts=["The drug will cure cancer."]),
    ]
    metric = AnchorHallucination()
    batch = [r.value for r in metric.score_batch(samples, resources)]
    single = [metric.score(s, resources).value for s in samples]
    assert batch == single
    assert batch == [pytest.approx(1 / 3), 0.2, None, 1.0]


def test_superscript_digits_do_not_break_anchor_hallucination(resources):
    # the context's "5²" used to raise ValueError in the number parser (the sample errored)
    context = "The side is 5 m, so the area is 5² = 25 square metres."
    # anchors: claim (area, be, metre) and QUANTITY "25 square metres", both in the
    # context; overlap {area, 25, square, metres} all in the context -> 0 / 2, no drift
    good = AnchorHallucination().score(
        Sample(response="The area is 25 square metres.", contexts=[context]), resources
    )
    assert good.error is None
    assert [(a["kind"], a["supported"]) for a in good.details["anchors"]] == [
        ("claim", True),
        ("number", True),
    ]
    assert good.value == 0.0
    # "30 square metres" is not in the context: claim_error 1 / 2; overlap 3 / 4 -> 0.5
    wrong = AnchorHallucination().score(
        Sample(response="The area is 30 square metres.", contexts=[context]), resources
    )
    assert wrong.error is None
    assert wrong.value == pytest.approx(0.5)
