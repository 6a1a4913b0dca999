"""The JSON specification: JSON output vs ground truth, phases 0-4: the walkthrough (with
the specification's LLM scores and with the local scorer), nulls and the partition into
buckets, accuracy and the field strategies, RQS, and the package's docstring examples
(the field-strategy config, nesting and batches: tests/test_structured_config.py; the
metrics and hostile documents: tests/test_structured_metrics.py; NUMERIC:
tests/test_structured_numeric.py)."""

from __future__ import annotations

import pytest
from rapidfuzz import fuzz
from rapidfuzz.utils import default_process
from tests.structured_helpers import FixedScorer

from assay.structured import (
    BUCKETS,
    DocPair,
    EvalOptions,
    LocalFieldScorer,
    PairScore,
    RQSWeights,
    Strategy,
    accuracy_score,
    canonical,
    compare_json,
    completeness_score,
    detect_type,
    evaluate_json,
    evaluate_many,
    evaluate_pairs,
    hallucination_score,
    is_null,
    rqs_normalized_score,
    rqs_score,
)
from assay.structured.scorers import semantic_asks
from json_walkthrough import AIO, CONFIG, GT

# ---- the specification's walkthrough (documents in json_walkthrough.py) ------------------


def test_walkthrough_reproduces_the_specification_with_its_llm_scores() -> None:
    scorer = FixedScorer()
    r = evaluate_json(GT, AIO, CONFIG, scorer=scorer)
    cls = r.classification
    assert cls.gt_non_null == ("name", "email", "bio", "status")
    assert cls.both_non_null == ("name", "email", "bio")
    assert cls.aio_missing_or_null == ("status",)
    assert cls.extra_keys == ("extra_field",)
    assert cls.gt_null_aio_has_value == ("internal_id",)
    assert cls.total_distinct == 6
    assert r.completeness == 0.75  # 3 / 4
    assert r.hallucination == pytest.approx(2 / 6)  # (extra_field + internal_id) / 6
    by_field = {f.field: f for f in r.fields}
    assert (by_field["name"].strategy, by_field["name"].source) == (Strategy.FUZZY, "config")
    assert (by_field["name"].similarity, by_field["name"].threshold) == (0.92, 0.85)
    assert (by_field["email"].strategy, by_field["email"].source) == (Strategy.EXACT, "auto")
    assert by_field["email"].value_type == "email"
    assert (by_field["bio"].similarity, by_field["bio"].threshold) == (0.88, 0.80)
    assert all(f.score == 1.0 for f in r.fields)
    assert r.accuracy == 1.0  # 3 / 3
    # 0.45·1.0 + 0.25·0.75 + 0.15·1.0 − 0.15·(2/6) = 0.45 + 0.1875 + 0.15 − 0.05 = 0.7375
    assert r.rqs == 0.7375
    assert r.method == "llm"
    assert scorer.calls == [
        ("fuzzy", [("John Smith", "John Smyth")]),
        ("semantic", [(GT["bio"], AIO["bio"])]),
    ]


def test_walkthrough_with_the_local_scorer(resources) -> None:
    """Offline: rapidfuzz gives 0.90 for the names (>= 0.85) and USE multilingual ~0.92
    cosine for the bios (>= 0.80), so the specification's numbers come out without a judge."""
    r = evaluate_json(GT, AIO, CONFIG, scorer=LocalFieldScorer(resources))
    by_field = {f.field: f for f in r.fields}
    expected_fuzzy = fuzz.token_set_ratio("John Smith", "John Smyth", processor=default_process)
    assert by_field["name"].similarity == expected_fuzzy / 100 == 0.9
    assert by_field["name"].scorer == "rapidfuzz.token_set_ratio"
    assert by_field["bio"].scorer.startswith("cosine:")
    assert 0.85 < by_field["bio"].similarity < 0.97  # measured 0.921 with USE multilingual v3
    assert (r.completeness, r.accuracy, r.rqs) == (0.75, 1.0, 0.7375)
    assert r.method == "local"


def test_semantic_local_scorer_orders_paraphrase_above_unrelated(resources) -> None:
    scorer = LocalFieldScorer(resources)
    para, unrelated = scorer.semantic(
        [(GT["bio"], AIO["bio"]), (GT["bio"], "A recipe for chocolate cake with cherries")]
    )
    assert para.score > 0.8 > 0.3 > unrelated.score


def test_the_local_scorer_on_its_own_embeds_a_batch_in_one_engine_call(resources) -> None:
    """Outside a run (``assay json-eval``, the library) the scorer asks the engine for the
    vectors of its SEMANTIC texts: one embedder call for the distinct texts, and each
    similarity is the embedder's pair similarity (its former call), to the last bit; a
    blank text has cosine 0 and equal texts 1.0, neither embedded."""
    from tests.engine_helpers import offline

    res, counting = offline(resources)
    pairs = [
        (GT["bio"], AIO["bio"]),
        (GT["bio"], "A recipe for chocolate cake with cherries"),
        ("", "x"),
        ("Same text", "same  TEXT"),
    ]
    assert [a.values["text"] for a in semantic_asks(pairs)] == [
        GT["bio"],
        AIO["bio"],
        "A recipe for chocolate cake with cherries",
        "x",
    ]
    scores = LocalFieldScorer(res).semantic(pairs)
    assert counting.calls == 1
    assert sorted(counting.texts) == sorted(a.values["text"] for a in semantic_asks(pairs))
    former = resources.embedder.pair_similarity([a for a, _ in pairs], [b for _, b in pairs])
    assert [s.score for s in scores[:3]] == [min(1.0, max(0.0, float(v))) for v in former[:3]]
    assert scores[2].score == 0.0 and scores[3].score == 1.0
    assert [s.scorer for s in scores] == [f"cosine:{resources.embedder.name}"] * 3 + [
        "normalised-equal"
    ]
    # the json-eval path: every SEMANTIC pair of a batch of documents in one call
    docs = [({"t": f"text number {i}"}, {"t": f"another text {i}"}) for i in range(3)]
    results = evaluate_pairs(
        [DocPair(f"d{i}", g, o) for i, (g, o) in enumerate(docs)],
        scorer=LocalFieldScorer(res),
    )
    assert counting.calls == 2 and len(counting.texts) == 4 + 6
    sims = resources.embedder.pair_similarity([g["t"] for g, _ in docs], [o["t"] for _, o in docs])
    assert [r.result.fields[0].similarity for r in results] == [float(v) for v in sims]


# ---- null and phase 0 edge cases (every one the specification lists) ---------------------
@pytest.mark.parametrize(
    ("value", "null"),
    [
        (None, True),
        ("", True),
        ("   \t\n", True),
        (0, False),
        (False, False),
        ("0", False),
        ([], False),
        ({}, False),
        ("x", False),
    ],
)
def test_is_null(value: object, null: bool) -> None:
    assert is_null(value) is null


def test_gt_null_not_in_output_is_skipped() -> None:
    c = compare_json({"a": 1, "n": None}, {"a": 1})
    assert c.classification.skipped == ("n",)
    assert (c.completeness, c.hallucination) == (1.0, 0.0)  # 1/1; 0/2


def test_gt_null_output_null_is_skipped() -> None:
    c = compare_json({"a": 1, "n": None}, {"a": 1, "n": "  "})
    assert c.classification.skipped == ("n",)
    assert (c.completeness, c.hallucination) == (1.0, 0.0)


def test_gt_null_output_value_is_hallucination() -> None:
    c = compare_json({"a": 1, "n": None}, {"a": 1, "n": "abc"})
    assert c.classification.gt_null_aio_has_value == ("n",)
    assert c.hallucination == 0.5  # 1 / |{a, n}|
    assert c.completeness == 1.0  # n is not expected


def test_key_only_in_output_is_extra() -> None:
    c = compare_json({"a": 1}, {"a": 1, "b": 2, "c": None})
    assert c.classification.extra_keys == ("b", "c")  # the specification counts null extras too
    assert c.hallucination == pytest.approx(2 / 3)


def test_gt_value_missing_from_output_loses_completeness() -> None:
    c = compare_json({"a": 1, "b": 2}, {"a": 1})
    assert c.classification.aio_missing_or_null == ("b",)
    assert (c.completeness, c.hallucination) == (0.5, 0.0)


@pytest.mark.parametrize("null", [None, "", "   "])
def test_gt_value_null_in_output_loses_completeness(null: object) -> None:
    c = compare_json({"a": 1, "b": 2}, {"a": 1, "b": null})
    assert c.classification.aio_missing_or_null == ("b",)
    assert c.completeness == 0.5


def test_every_key_in_exactly_one_partition_bucket() -> None:
    gt = {"both": 1, "miss": 2, "nulled": 3, "gnull": None, "gnull2": None, "skip": None}
    out = {"both": 1, "nulled": "", "gnull": "x", "gnull2": None, "extra": 5}
    cls = compare_json(gt, out).classification
    partition = (
        "both_non_null",
        "aio_missing_or_null",
        "extra_keys",
        "gt_null_aio_has_value",
        "skipped",
    )
    seen = [k for name in partition for k in getattr(cls, name)]
    assert sorted(seen) == sorted(cls.all_keys) == sorted({*gt, *out})
    assert set(cls.gt_non_null) == set(cls.both_non_null) | set(cls.aio_missing_or_null)
    assert set(BUCKETS) >= set(partition)


def test_completeness_example_49_of_50() -> None:
    gt = {f"k{i}": i for i in range(50)}
    out = {f"k{i}": i for i in range(49)}
    assert compare_json(gt, out).completeness == 0.98


def test_empty_documents() -> None:
    r = evaluate_json({}, {})
    # nothing expected -> completeness 1; no keys -> hallucination 0; nothing scorable -> 1
    assert (r.completeness, r.hallucination, r.accuracy) == (1.0, 0.0, 1.0)
    assert r.rqs == 0.85  # 0.45 + 0.25 + 0.15 − 0: the RQS ceiling
    assert r.rqs_normalized == 1.0


def test_all_gt_null_gives_completeness_one() -> None:
    c = compare_json({"a": None, "b": ""}, {"a": None, "b": "x"})
    assert c.completeness == 1.0  # gt_non_null_count == 0
    assert c.hallucination == 0.5  # b / {a, b}


def test_pure_score_functions() -> None:
    assert completeness_score(0, 0) == 1.0
    assert completeness_score(3, 4) == 0.75
    assert hallucination_score(0, 0) == 0.0
    assert hallucination_score(2, 6) == pytest.approx(1 / 3)
    assert accuracy_score(0, 0) == 1.0
    assert accuracy_score(2, 3) == pytest.approx(2 / 3)


# ---- phase 3: accuracy and strategies ----------------------------------------------------
def test_ignore_is_left_out_of_the_accuracy_denominator() -> None:
    r = evaluate_json({"a": 1, "b": 2, "c": 3}, {"a": 1, "b": 99, "c": 4}, {"c": "IGNORE"})
    # scorable = 3 both_non_null − 1 IGNORE = 2; a right, b wrong -> 1/2
    assert r.accuracy == 0.5
    assert r.ignored == ("c",)
    assert r.scorable == 2
    assert r.completeness == 1.0  # IGNORE still counts for completeness


def test_all_ignored_gives_accuracy_one() -> None:
    r = evaluate_json({"a": 1}, {"a": 2}, {"a": "IGNORE"})
    assert r.accuracy == 1.0  # scorable_count == 0


@pytest.mark.parametrize(
    ("value", "value_type"),
    [
        (42, "numeric"),
        (3.5, "numeric"),
        ("1,234.50", "numeric"),
        ("-7", "numeric"),
        (True, "boolean"),
        ("FALSE", "boolean"),
        ("2024-03-05", "date"),
        ("2024-03-05T10:00:00Z", "date"),
        ("05/03/2024", "date"),
        ("2024/03/05", "date"),
        ("5 March 2024", "date"),
        ("March 5, 2024", "date"),
        ("Mar 5th 2024", "date"),
        ("2024-13-05", "text"),
        ("13/25/2024", "text"),
        ("john@example.com", "email"),
        ("a.b+c@mail.example.org", "email"),
        ("a@b", "text"),
        ([1, 2], "array"),
        ({"x": 1}, "object"),
        ("John Smith", "text"),
        ("+44 20 7946 0958", "text"),
        ("e5", "text"),
    ],
)
def test_detect_type(value: object, value_type: str) -> None:
    assert detect_type(value) == value_type


def test_auto_detection_per_the_specification() -> None:
    gt = {
        "n": 1,
        "b": True,
        "d": "2024-01-02",
        "e": "x@y.com",
        "arr": [1],
        "obj": {},
        "t": "free text",
    }
    scorer = FixedScorer()
    r = evaluate_json(gt, dict(gt), scorer=scorer)
    strategies = {f.field: f.strategy for f in r.fields}
    assert strategies == {
        "n": Strategy.EXACT,
        "b": Strategy.EXACT,
        "d": Strategy.EXACT,
        "e": Strategy.EXACT,
        "arr": Strategy.EXACT,
        "obj": Strategy.EXACT,
        "t": Strategy.SEMANTIC,
    }


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        ("Active", " active ", True),
        ({"x": 1, "y": [1, 2]}, {"y": [1, 2], "x": 1}, True),  # key order ignored
        ([1, 2], [2, 1], False),  # array order matters
        (42, 42.0, True),
        (42, "42", True),  # str(42) == "42", as the specification's str(...).lower()
        (True, "true", True),
        ("abc", "abd", False),
        ({"Name": "Ann"}, {"name": "ann"}, True),  # the specification lower-cases the JSON text
    ],
)
def test_exact_canonical_form(a: object, b: object, equal: bool) -> None:
    assert (canonical(a) == canonical(b)) is equal


def test_threshold_boundaries_and_configurable_thresholds() -> None:
    gt, out = {"a": "x", "b": "y"}, {"a": "x2", "b": "y2"}
    config = {"a": "FUZZY", "b": "SEMANTIC"}
    at = evaluate_json(gt, out, config, scorer=FixedScorer(fuzzy=0.85, semantic=0.80))
    assert at.accuracy == 1.0  # score == threshold passes
    below = evaluate_json(gt, out, config, scorer=FixedScorer(fuzzy=0.849, semantic=0.799))
    assert below.accuracy == 0.0
    assert below.fields[0].reason.startswith("FUZZY: 0.849 < 0.85")
    strict = evaluate_json(
        gt,
        out,
        config,
        scorer=FixedScorer(),
        options=EvalOptions(fuzzy_threshold=0.95, semantic_threshold=0.5),
    )
    assert [f.score for f in strict.fields] == [0.0, 1.0]  # 0.92 < 0.95; 0.88 >= 0.5


def test_scorer_pair_scores_keep_their_method_and_reason() -> None:
    class Judge:
        method = "llm"

        def fuzzy(self, pairs):
            return [PairScore(0.9, "llm", "llm:test", "same person") for _ in pairs]

        def semantic(self, pairs):
            return [1.7 for _ in pairs]  # out of range: clamped to 1

    r = evaluate_json({"a": "x", "b": "y"}, {"a": "x2", "b": "z"}, {"a": "FUZZY"}, scorer=Judge())
    a, b = r.fields
    assert (a.method, a.scorer) == ("llm", "llm:test")
    assert a.reason.endswith(": same person")
    assert b.similarity == 1.0
    assert r.method == "llm"


def test_scorer_returning_the_wrong_count_is_an_error() -> None:
    class Broken(FixedScorer):
        def semantic(self, pairs):
            return []

    with pytest.raises(ValueError, match="returned 0 scores for 1 pairs"):
        evaluate_json({"t": "text"}, {"t": "other"}, scorer=Broken())


def test_batch_sends_all_pairs_in_one_call_per_strategy() -> None:
    scorer = FixedScorer()
    docs = [
        ({"t": f"text {i}", "n": f"name {i}"}, {"t": f"other {i}", "n": f"nm {i}"})
        for i in range(5)
    ]
    results = evaluate_many(docs, {"n": "FUZZY"}, scorer=scorer)
    assert [kind for kind, _ in scorer.calls] == ["fuzzy", "semantic"]
    assert [len(pairs) for _, pairs in scorer.calls] == [5, 5]
    assert [r.accuracy for r in results] == [1.0] * 5


def test_exact_only_documents_never_call_the_scorer() -> None:
    scorer = FixedScorer()
    r = evaluate_json({"a": 1, "b": "same text"}, {"a": 1, "b": "Same  TEXT"}, scorer=scorer)
    assert r.accuracy == 1.0
    assert scorer.calls == [("semantic", [("same text", "Same  TEXT")])]
    # the local scorer settles equal texts without an embedder: it asks nothing
    pairs = [("same text", "Same  TEXT")]
    assert semantic_asks(pairs) == []
    local = LocalFieldScorer(resources=object())  # type: ignore[arg-type]
    assert local.semantic(pairs)[0].scorer == "normalised-equal"
    assert local.texts_embedded == 0


# ---- phase 4: RQS -----------------------------------------------------------------------
def test_rqs_weights_safety_and_clamp() -> None:
    assert rqs_score(1.0, 0.75, 2 / 6) == 0.7375
    # safety 0.5: 0.45 + 0.1875 + 0.075 − 0.05 = 0.6625
    assert rqs_score(1.0, 0.75, 2 / 6, safety=0.5) == pytest.approx(0.6625)
    # lower clamp: 0 + 0 + 0 − 0.15 = −0.15 -> 0
    assert rqs_score(0.0, 0.0, 1.0, safety=0.0) == 0.0
    # upper clamp: 1 + 1 + 0 − 0 = 2 -> 1
    assert rqs_score(1.0, 1.0, 0.0, weights=RQSWeights(1, 1, 0, 0)) == 1.0
    # custom weights: 0.5·0.5 + 0.5·1.0 + 0 − 0.2·0.25 = 0.7
    w = RQSWeights(accuracy=0.5, completeness=0.5, hallucination=0.2, safety=0.0)
    assert rqs_score(0.5, 1.0, 0.25, weights=w) == pytest.approx(0.7)
    assert rqs_normalized_score(0.7375) == pytest.approx(0.7375 / 0.85)
    assert rqs_normalized_score(0.5, RQSWeights(0, 0, 1, 0)) is None


def test_rqs_in_the_pipeline_uses_safety_and_weights() -> None:
    r = evaluate_json(
        GT,
        AIO,
        CONFIG,
        scorer=FixedScorer(),
        safety_score=0.0,
        options=EvalOptions(weights=RQSWeights(0.5, 0.5, 0.0, 0.0)),
    )
    assert r.rqs == pytest.approx(0.5 * 1.0 + 0.5 * 0.75)  # 0.875


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: RQSWeights(accuracy=-0.1), "RQS weight 'accuracy' must be a finite number >= 0"),
        (lambda: RQSWeights.coerce({"accuracy": 1, "speed": 1}), "unknown RQS weight"),
        (lambda: EvalOptions(fuzzy_threshold=1.5), "'fuzzy_threshold' parameter must be in"),
        (lambda: rqs_score(1, 1, 0, safety=2.0), "'safety_score' parameter must be in"),
    ],
)
def test_parameter_validation_messages(make, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()


def test_docstring_examples() -> None:
    import doctest

    import assay.structured
    import assay.structured.pipeline

    for module in (assay.structured, assay.structured.pipeline):
        failures, tried = doctest.testmod(module)
        assert tried > 0 and failures == 0, module.__name__
