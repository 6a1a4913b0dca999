"""The JSON specification: JSON output vs ground truth (phases 0-4, strategies, config,
nesting, batches)."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest
from rapidfuzz import fuzz
from rapidfuzz.utils import default_process

from assay.core.config import AssayConfig
from assay.core.sample import Sample
from assay.engine.resources import Resources
from assay.metrics.base import Source
from assay.metrics.registry import get_metric, metric_class, suite
from assay.structured import (
    BUCKETS,
    DocPair,
    EvalOptions,
    LocalFieldScorer,
    PairScore,
    RQSWeights,
    Strategy,
    StrategyConfig,
    StrategyConfigError,
    accuracy_score,
    canonical,
    compare_json,
    completeness_score,
    detect_config,
    detect_type,
    evaluate_json,
    evaluate_many,
    evaluate_pairs,
    field_aggregates,
    flatten_pair,
    hallucination_score,
    is_null,
    rqs_normalized_score,
    rqs_score,
)
from assay.structured.batch import pairs_from_jsonl
from assay.structured.scorers import semantic_asks
from json_walkthrough import AIO, CONFIG, GT

# ---- the specification's walkthrough (documents in json_walkthrough.py) ------------------


class FixedScorer:
    """Returns the specification's LLM scores: fuzzy 0.92, semantic 0.88; records the calls."""

    method = "llm"
    name = "specification-llm"

    def __init__(self, fuzzy: float = 0.92, semantic: float = 0.88) -> None:
        self._fuzzy, self._semantic = fuzzy, semantic
        self.calls: list[tuple[str, list[tuple[str, str]]]] = []

    def fuzzy(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        self.calls.append(("fuzzy", list(pairs)))
        return [self._fuzzy] * len(pairs)

    def semantic(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        self.calls.append(("semantic", list(pairs)))
        return [self._semantic] * len(pairs)


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
    from test_engine import offline

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


def _buckets(gt: dict, out: dict) -> dict[str, list[str]]:
    return compare_json(gt, out).classification.buckets()


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


# ---- the field-strategy config -----------------------------------------------------------
def test_config_round_trip(tmp_path) -> None:
    config = StrategyConfig(
        {
            "customer_name": "fuzzy",
            "address.city": "EXACT",
            "items.*.sku": "EXACT",
            "internal_notes": "IGNORE",
        }
    )
    path = tmp_path / "strategies.json"
    config.save(path)
    assert json.loads(path.read_text()) == {
        "customer_name": "FUZZY",
        "address.city": "EXACT",
        "items.*.sku": "EXACT",
        "internal_notes": "IGNORE",
    }
    assert StrategyConfig.load(path) == config


def test_config_unknown_strategy_names_field_and_valid_values(tmp_path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"bio": "SEMANTICS", "name": "FUZZY", "x": 3}))
    with pytest.raises(StrategyConfigError) as err:
        StrategyConfig.load(path)
    text = str(err.value)
    assert str(path) in text
    assert "field 'bio': unknown strategy 'SEMANTICS' (did you mean SEMANTIC?)" in text
    assert "valid values: EXACT, FUZZY, SEMANTIC, IGNORE" in text
    assert "field 'x': strategy must be a string" in text


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (["name"], "must be a JSON object"),
        ({"a..b": "EXACT"}, "empty segment"),
        ({"": "EXACT"}, "non-empty"),
    ],
)
def test_config_shape_errors(data: object, message: str) -> None:
    with pytest.raises(StrategyConfigError, match=message):
        StrategyConfig.from_data(data)


def test_config_accepts_field_strategies_wrapper_and_reports_bad_json(tmp_path) -> None:
    config = StrategyConfig.from_data({"field_strategies": {"a": "EXACT"}})
    assert config.to_dict() == {"a": "EXACT"}
    path = tmp_path / "broken.json"
    path.write_text('{"a": "EXACT",}')
    with pytest.raises(StrategyConfigError, match=r"not valid JSON \(line 1, column 15"):
        StrategyConfig.load(path)


def test_config_lookup_precedence() -> None:
    config = StrategyConfig({"items.*.*": "IGNORE", "items.*.sku": "EXACT", "items.0.sku": "FUZZY"})
    assert config.lookup("items.0.sku") is Strategy.FUZZY  # exact path wins
    assert config.lookup("items.3.sku") is Strategy.EXACT  # fewest wildcards next
    assert config.lookup("items.3.name") is Strategy.IGNORE
    assert config.lookup("items.3") is None
    assert config.lookup("other") is None


# ---- nested JSON ---------------------------------------------------------------------------
NESTED_GT = {
    "id": 7,
    "address": {"city": "Oslo", "zip": "0150"},
    "items": [{"sku": "A-1", "qty": 2}, {"sku": "B-2", "qty": 1}],
    "tags": ["x", "y"],
}


def test_nested_objects_and_arrays_of_objects_get_dotted_paths() -> None:
    out = {
        "id": 7,
        "address": {"city": "oslo", "zip": "0151"},
        "items": [{"sku": "A-1", "qty": 2}, {"sku": "B-2", "qty": 1}, {"sku": "C-3"}],
        "tags": ["x", "y"],
    }
    r = evaluate_json(NESTED_GT, out, {"items.*.sku": "EXACT"}, scorer=FixedScorer())
    cls = r.classification
    assert cls.gt_non_null == (
        "id",
        "address.city",
        "address.zip",
        "items.0.sku",
        "items.0.qty",
        "items.1.sku",
        "items.1.qty",
        "tags",
    )
    assert cls.extra_keys == ("items.2.sku",)  # a surplus element is invented fields
    assert r.wrong == ("address.zip",)  # "0150" is numeric -> EXACT
    assert r.completeness == 1.0  # 8/8
    assert r.hallucination == pytest.approx(1 / 9)
    assert r.accuracy == pytest.approx(7 / 8)
    aggregates = {a.field: a for a in field_aggregates([r])}
    assert aggregates["items.*.sku"].expected == 2
    assert aggregates["items.*.sku"].hallucinated == 1


def test_config_can_name_a_nested_field() -> None:
    out = dict(NESTED_GT, address={"city": "Oslo city", "zip": "0150"})
    skus = {"items.*.sku": "EXACT"}
    auto = evaluate_json(NESTED_GT, out, skus, scorer=FixedScorer(semantic=0.5))
    named = evaluate_json(
        NESTED_GT, out, {**skus, "address.city": "FUZZY"}, scorer=FixedScorer(0.9, 0.5)
    )
    assert {f.field: f.strategy for f in auto.fields}["address.city"] is Strategy.SEMANTIC
    assert {f.field: f.strategy for f in named.fields}["address.city"] is Strategy.FUZZY
    assert auto.wrong == ("address.city",)  # 0.5 < 0.80
    assert named.wrong == ()  # 0.9 >= 0.85


def test_config_naming_a_container_compares_it_whole() -> None:
    flat = flatten_pair(NESTED_GT, NESTED_GT, StrategyConfig({"address": "SEMANTIC"}))
    assert "address" in flat.expected and "address.city" not in flat.expected
    scorer = FixedScorer()
    evaluate_json(NESTED_GT, NESTED_GT, {"address": "SEMANTIC"}, scorer=scorer)
    assert scorer.calls[0][1][0][0] == '{"city": "Oslo", "zip": "0150"}'


def test_null_container_in_output_makes_its_fields_missing_not_extra() -> None:
    c = compare_json(NESTED_GT, dict(NESTED_GT, address=None))
    assert c.classification.aio_missing_or_null == ("address.city", "address.zip")
    assert c.classification.extra_keys == ()
    assert c.hallucination == 0.0
    # and a container the GT has as null: its fields are hallucinated
    c = compare_json({"a": 1, "address": None}, {"a": 1, "address": {"city": "Oslo"}})
    assert c.classification.gt_null_aio_has_value == ("address.city",)


def test_type_mismatch_is_one_wrong_field() -> None:
    r = evaluate_json(NESTED_GT, dict(NESTED_GT, address="Oslo 0150"), scorer=FixedScorer())
    assert "address" in r.classification.both_non_null
    assert r.wrong == ("address",)  # GT value is an object -> EXACT
    assert {f.field: f.value_type for f in r.fields}["address"] == "object"


def test_arrays_of_scalars_and_empty_containers_are_whole_values() -> None:
    r = evaluate_json({"tags": ["a", "b"], "meta": {}}, {"tags": ["b", "a"], "meta": {}})
    assert r.classification.both_non_null == ("tags", "meta")
    assert r.wrong == ("tags",)  # order-sensitive, as the specification's JSON comparison


def test_shorter_output_array_leaves_fields_missing() -> None:
    c = compare_json(NESTED_GT, dict(NESTED_GT, items=[{"sku": "A-1", "qty": 2}]))
    assert c.classification.aio_missing_or_null == ("items.1.sku", "items.1.qty")


def test_flatten_false_keeps_top_level_keys() -> None:
    out = dict(NESTED_GT, address={"city": "Oslo", "zip": "9999"})
    r = evaluate_json(NESTED_GT, out, options=EvalOptions(flatten=False))
    assert r.classification.all_keys == ("id", "address", "items", "tags")
    assert r.wrong == ("address",)
    assert r.accuracy == 0.75


def test_keys_with_dots_are_escaped() -> None:
    flat = flatten_pair({"a.b": 1, "a": {"b": 2}}, None)
    assert flat.expected == {"a\\.b": 1, "a.b": 2}
    config = StrategyConfig({"a\\.b": "IGNORE"})
    assert config.lookup("a\\.b") is Strategy.IGNORE and config.lookup("a.b") is None


def test_detect_config_exports_every_field() -> None:
    config = detect_config(dict(NESTED_GT, note="free text", empty=None))
    assert config.to_dict() == {
        "id": "EXACT",
        "address.city": "SEMANTIC",
        "address.zip": "EXACT",
        "items.*.sku": "SEMANTIC",
        "items.*.qty": "EXACT",
        "tags": "EXACT",
        "note": "SEMANTIC",
    }


# ---- batches and aggregates -----------------------------------------------------------------
def test_field_aggregates_over_a_batch() -> None:
    docs = [
        DocPair("one", {"a": 1, "b": 2, "c": None}, {"a": 1, "b": 3, "x": 1}),
        DocPair("two", {"a": 1, "b": 2, "c": None}, {"b": 2, "c": "v"}),
        DocPair("bad", error="bad.json: malformed JSON"),
    ]
    results = evaluate_pairs(docs, scorer=FixedScorer())
    assert [r.error for r in results] == [None, None, "bad.json: malformed JSON"]
    assert results[2].row()["rqs"] is None
    agg = {a.field: a for a in field_aggregates(results)}
    assert (agg["a"].expected, agg["a"].missing, agg["a"].wrong) == (2, 1, 0)
    assert (agg["b"].scored, agg["b"].wrong, agg["b"].wrong_rate) == (2, 1, 0.5)
    assert agg["c"].hallucinated == 1 and agg["x"].hallucinated == 1
    assert agg["a"].missing_rate == 0.5
    # most troublesome first: a, b, c, x each have 1 problem; sorted by name
    assert [a.field for a in field_aggregates(results)] == ["a", "b", "c", "x"]


def test_a_document_that_fails_does_not_sink_the_batch() -> None:
    deep: dict = {}
    node = deep
    for _ in range(5000):  # deeper than Python's recursion limit and Assay's MAX_DEPTH
        node["k"] = {}
        node = node["k"]
    results = evaluate_pairs(
        [DocPair("ok", {"a": 1}, {"a": 1}), DocPair("deep", deep, deep, output_source="d.json")]
    )
    assert results[0].result is not None and results[0].result.accuracy == 1.0
    assert results[1].result is None
    # past the depth limit the pair is an error row before evaluation, naming its side
    assert results[1].error.startswith("deep: expected JSON nests deeper than 500 levels")


def test_jsonl_pairs_accept_aliases_and_report_bad_lines(tmp_path) -> None:
    path = tmp_path / "pairs.jsonl"
    lines = [
        json.dumps({"id": "w", "gt_json": GT, "aio_json": AIO, "safety_score": 0.5}),
        json.dumps({"expected_json": json.dumps({"a": 1}), "output_json": '{"a": 1}'}),
        "{not json",
        json.dumps({"expected_json": {"a": 1}}),
        "",
        json.dumps({"expected_json": {}, "output_json": {}, "safety_score": 3}),
    ]
    path.write_text("\n".join(lines))
    pairs = pairs_from_jsonl(path)
    assert [p.name for p in pairs] == ["w", "line 2", "line 3", "line 4", "line 6"]
    assert pairs[0].safety_score == 0.5 and pairs[0].error is None
    assert pairs[1].expected == {"a": 1} and pairs[1].output == {"a": 1}
    assert pairs[2].error.startswith(f"{path}:3: malformed JSON")
    assert pairs[3].error == f"{path}:4: add 'output_json' (or 'aio_json', 'extracted_json')"
    assert "safety_score must be a number in [0, 1]" in pairs[4].error


def test_docstring_examples() -> None:
    import doctest

    import assay.structured
    import assay.structured.pipeline

    for module in (assay.structured, assay.structured.pipeline):
        failures, tried = doctest.testmod(module)
        assert tried > 0 and failures == 0, module.__name__


# ---- the metrics ---------------------------------------------------------------------------
METRICS = ("json_completeness", "json_hallucination", "json_accuracy", "rqs", "rqs_normalized")


def test_metrics_are_registered_with_polarity() -> None:
    for name in METRICS:
        cls = metric_class(name)
        assert (cls.family, cls.source) == ("structured", Source.JSON_COMPARISON)
        assert cls.higher_is_better is (name != "json_hallucination")
    assert set(METRICS) <= set(suite("structured"))


def test_metrics_on_the_walkthrough_sample(resources) -> None:
    sample = Sample(gt_json=GT, aio_json=AIO)
    values = {
        name: get_metric(name, strategies=CONFIG, scorer=FixedScorer()).score(sample, resources)
        for name in METRICS
    }
    assert values["json_completeness"].value == 0.75
    assert values["json_completeness"].details["missing"] == ["status"]
    assert values["json_hallucination"].value == pytest.approx(2 / 6)
    assert values["json_hallucination"].details["extra_keys"] == ["extra_field"]
    assert values["json_accuracy"].value == 1.0
    assert values["json_accuracy"].method == "llm"
    assert len(values["json_accuracy"].details["fields"]) == 3
    rqs = values["rqs"]
    assert rqs.value == 0.7375
    assert rqs.components == {
        "accuracy": 1.0,
        "completeness": 0.75,
        "hallucination": pytest.approx(2 / 6),
        "safety": 1.0,
    }
    assert rqs.details["buckets"]["gt_null_aio_has_value"] == ["internal_id"]
    assert values["rqs_normalized"].value == pytest.approx(0.7375 / 0.85)  # 0.8676


def test_metrics_parse_json_strings_and_read_safety_from_metadata(resources) -> None:
    sample = Sample(expected_json=json.dumps(GT), output_json=json.dumps(AIO), safety_score=0.0)
    rqs = get_metric("rqs", strategies=CONFIG, scorer=FixedScorer()).score(sample, resources)
    assert rqs.value == pytest.approx(0.7375 - 0.15)  # safety 0 instead of 1


def test_metrics_undefined_inputs(resources) -> None:
    metric = get_metric("json_completeness")
    missing = metric.score(Sample(expected_json={"a": 1}), resources)
    assert (missing.value, missing.reason) == (None, "missing input: output_json")
    broken = get_metric("rqs").score(Sample(expected_json={}, output_json="{oops"), resources)
    assert broken.value is None
    assert broken.reason.startswith("output_json is not valid JSON")
    empty = metric.score(Sample(expected_json={}, output_json={"a": 1}), resources)
    assert empty.value == 1.0  # an empty GT is a document that expects nothing


def test_sample_field_strategies_override_the_metric_config(resources) -> None:
    metric = get_metric("json_accuracy", strategies={"bio": "SEMANTIC"}, scorer=FixedScorer(0.5))
    plain = Sample(gt_json=GT, aio_json=AIO)
    own = Sample(gt_json=GT, aio_json=AIO, field_strategies={"name": "IGNORE"})
    bad = Sample(gt_json=GT, aio_json=AIO, field_strategies={"name": "NEAR"})
    results = metric.score_batch([plain, own, bad], resources)
    # plain: name auto SEMANTIC, stub 0.88 -> right; email right; bio right -> 3/3
    # own: name IGNORE -> 2/2; bad: the sample's config is invalid -> None with the reason
    assert [r.value for r in results] == [1.0, 1.0, None]
    assert results[1].details["ignored"] == ["name"]
    assert "field 'name': unknown strategy 'NEAR'" in results[2].reason


def test_metric_rejects_unknown_strategy() -> None:
    with pytest.raises(StrategyConfigError, match="field 'bio'"):
        get_metric("json_accuracy", strategies={"bio": "CLOSE"})


# ---- hostile documents ----------------------------------------------------------------------
def _nested(depth: int) -> dict:
    root: dict = {}
    node = root
    for _ in range(depth):
        node["k"] = {}
        node = node["k"]
    node["k"] = "leaf"
    return root


def test_deep_documents_up_to_the_limit_compare_and_deeper_is_a_clear_error(resources) -> None:
    from assay.core.json_documents import MAX_DEPTH, check_document

    ok = evaluate_json(_nested(200), _nested(200))  # 200 levels: one leaf, k.k....k
    assert (ok.completeness, ok.hallucination, ok.accuracy) == (1.0, 0.0, 1.0)
    assert ok.classification.both_non_null == (".".join(["k"] * 201),)
    check_document(_nested(MAX_DEPTH - 1))  # 499 nested objects + the leaf string: fine
    with pytest.raises(ValueError, match="nests deeper than 500 levels"):
        evaluate_json(_nested(600), {"k": 1})
    # whole-value comparison of a deep array used to recurse past Python's limit
    deep_list: list = []
    for _ in range(3000):
        deep_list = [deep_list]
    with pytest.raises(ValueError, match="output JSON nests deeper"):
        evaluate_json({"a": 1}, {"a": deep_list})
    # the metrics give this sample an error naming the field and the limit
    result = get_metric("json_completeness").score(
        Sample(expected_json=_nested(600), output_json={}), resources
    )
    assert (result.value, result.reason) == (None, "input over a limit")
    assert result.error.startswith("expected_json nests 601 levels deep, over the limit of 500")


def test_keys_of_python_dicts_are_named_as_json_writes_them() -> None:
    # json.dumps writes 1 -> "1", False -> "false", None -> "null", 2.5 -> "2.5"; a dict and
    # its JSON text compare the same (before: "False"/"None" made these extra keys)
    gt = {1: 10, False: 20, None: 30, 2.5: 40}
    out = json.loads(json.dumps(gt))
    assert out == {"1": 10, "false": 20, "null": 30, "2.5": 40}
    result = evaluate_json(gt, out)
    assert (result.completeness, result.hallucination, result.accuracy) == (1.0, 0.0, 1.0)
    # (a dot inside a key is escaped in its path)
    assert set(result.classification.both_non_null) == {"1", "false", "null", "2\\.5"}
    with pytest.raises(ValueError, match="keys 1 and '1' have the same JSON name '1'"):
        evaluate_json({1: "a", "1": "b"}, {})
    with pytest.raises(ValueError, match=r"object key \(1, 2\) \(tuple\) is not a JSON key"):
        evaluate_json({"a": {(1, 2): "x"}}, {})
    # mixed key types inside a value compared whole (FUZZY/SEMANTIC text, EXACT form)
    from assay.structured.values import as_text

    assert as_text({1: "a", "b": 2}) == '{"1": "a", "b": 2}'
    assert canonical({1: "a", "b": 2}) == canonical({"b": 2, "1": "A"})


def test_integers_over_4300_digits_compare() -> None:
    # str() and json.dumps refuse ints over 4,300 digits; EXACT uses their decimal text
    big = 10**5000
    assert canonical(big) == "1" + "0" * 5000
    assert canonical([big]) == '["1' + "0" * 5000 + '"]'  # as decimal text inside arrays
    result = evaluate_json({"n": big, "m": [big]}, {"n": big, "m": [big + 1]})
    assert [f.score for f in result.fields] == [1.0, 0.0]


def test_nan_and_infinity_values_compare_by_their_text() -> None:
    # EXACT compares str(value).lower(): nan == nan, inf == inf, -inf != 1
    nan, inf = float("nan"), float("inf")
    result = evaluate_json({"a": nan, "b": inf, "c": -inf}, {"a": nan, "b": inf, "c": 1})
    assert [f.score for f in result.fields] == [1.0, 1.0, 0.0]
    assert result.accuracy == pytest.approx(2 / 3)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"a": ' + "1" * 5000 + "}", "unreadable JSON: Exceeds the limit (4300 digits)"),
        ("[" * 100_000 + "]" * 100_000, "JSON nested too deeply to parse"),
    ],
    ids=["5000-digit number", "100000 levels"],
)
def test_documents_json_refuses_become_error_rows(tmp_path, text: str, message: str) -> None:
    from assay.structured.batch import pairs_from_files

    gt, out = tmp_path / "gt.json", tmp_path / "out.json"
    gt.write_text(text)
    out.write_text('{"a": 1}')
    (pair,) = pairs_from_files(gt, out)
    assert pair.error.startswith(f"{gt}: {message}")
    jsonl = tmp_path / "pairs.jsonl"
    jsonl.write_text(json.dumps({"expected_json": text, "output_json": {"a": 1}}) + "\n")
    (line,) = pairs_from_jsonl(jsonl)
    assert line.error.startswith(f"{jsonl}:1: a document string is {message}")
    metric = get_metric("json_hallucination")
    # the 200,000-character text is past the default max_field_chars (100,000): raised here
    # so the parser's refusal is what the metric reports
    res = Resources(AssayConfig(use_cache=False, max_field_chars=len(text)))
    result = metric.score(Sample(expected_json=text, output_json={"a": 1}), res)
    assert result.error is None and result.value is None
    assert result.reason.startswith(f"expected_json: {message}")


def test_field_evidence_is_strict_json(resources) -> None:
    # the per-field breakdown carries the documents' values; NaN, Infinity and ints over
    # 4,300 digits are rendered so json.dumps(..., allow_nan=False) accepts them
    nan, big = float("nan"), 10**5000
    sample = Sample(
        expected_json={"a": nan, "b": big, "c": [1.5]}, output_json={"a": nan, "b": 1, "c": [1.5]}
    )
    result = get_metric("json_accuracy").score(sample, resources)
    assert result.value == pytest.approx(2 / 3)  # a: "nan" == "nan"; b wrong; c right
    fields = {f["field"]: f for f in result.details["fields"]}
    assert (fields["a"]["expected"], fields["a"]["output"]) == ("NaN", "NaN")
    assert fields["b"]["expected"] == "1" + "0" * 5000 and fields["b"]["output"] == 1
    assert fields["c"]["expected"] == [1.5]
    json.dumps(result.details, allow_nan=False)  # raises on NaN or an unprintable int


# ---- NUMERIC: |a − b| <= max(abs_tol, rel_tol·|b|), b the ground truth -------------------------
@pytest.mark.parametrize(
    ("gt", "out", "rel_tol", "abs_tol", "score"),
    [
        (100.0, 100.004, 1e-4, 0.0, 1.0),  # 0.004 <= max(0, 1e-4·100) = 0.01
        (100, 100.01, 1e-4, 0.0, 1.0),  # 0.01 <= 0.01: the boundary matches (decimal)
        (100, 100.0101, 1e-4, 0.0, 0.0),  # 0.0101 > 0.01
        (100, 111, 0.1, 0.0, 0.0),  # 11 > 0.1·100 = 10 ...
        (111, 100, 0.1, 0.0, 1.0),  # ... but 11 <= 0.1·111 = 11.1: relative to the GT
        ("1,200", 1200, 1e-6, 0.0, 1.0),  # numeric text as values.py parses it: diff 0
        ("3.50", 3.5, 1e-6, 0.0, 1.0),
        (0.3, 0.1 + 0.2, 1e-6, 0.0, 1.0),  # 0.30000000000000004: 4e-17 <= 3e-7
        (1_000_000, 1_000_001, 1e-6, 0.0, 1.0),  # 1 <= 1e-6·1e6 = 1
        (1_000_000, 1_000_002, 1e-6, 0.0, 0.0),  # 2 > 1
        (0, 1e-9, 1e-6, 0.0, 0.0),  # abs_tol 0: only 0 matches a GT of 0
        (0, 1e-9, 1e-6, 1e-8, 1.0),  # 1e-9 <= max(1e-8, 0)
        (-5, "-5.2", 0.0, 0.25, 1.0),  # 0.2 <= max(0.25, 0)
    ],
)
def test_numeric_tolerance_worked_by_hand(gt, out, rel_tol, abs_tol, score) -> None:
    options = EvalOptions(numeric_rel_tol=rel_tol, numeric_abs_tol=abs_tol)
    r = evaluate_json({"x": gt}, {"x": out}, {"x": "NUMERIC"}, options=options)
    (field,) = r.fields
    assert (field.strategy, field.score, field.similarity, field.method) == (
        Strategy.NUMERIC,
        score,
        score,
        "pattern",
    )
    assert r.accuracy == score


def test_numeric_reason_states_both_values_and_the_tolerance() -> None:
    options = EvalOptions(numeric_rel_tol=1e-4)
    r = evaluate_json(
        {"a": 100.0, "b": 250}, {"a": 100.004, "b": "251"}, {"*": "NUMERIC"}, options=options
    )
    a, b = r.fields
    assert a.reason == (
        "NUMERIC: |100.004 − 100.0| = 0.004 <= 0.01 = max(abs_tol 0, rel_tol 0.0001 × 100)"
    )
    assert b.reason == "NUMERIC: |'251' − 250| = 1 > 0.025 = max(abs_tol 0, rel_tol 0.0001 × 250)"
    assert r.accuracy == 0.5  # (1 + 0) / 2
    assert r.to_dict()["numeric_tolerance"] == {"rel_tol": 1e-4, "abs_tol": 0.0}


@pytest.mark.parametrize(
    ("gt", "out", "reason"),
    [
        ("12%", 12, "expected value '12%' is not a number"),
        (True, 1, "expected value True is not a number"),
        (5, "five", "output value 'five' is not a number"),
        (5, [5], "output value [5] is not a number"),
        (float("inf"), float("inf"), "expected value inf is not a number"),
    ],
)
def test_numeric_field_that_is_not_a_number_scores_zero_with_the_reason(gt, out, reason) -> None:
    # no fallback to EXACT: True vs 1 and inf vs inf would be equal there
    r = evaluate_json({"x": gt}, {"x": out}, {"x": "NUMERIC"})
    (field,) = r.fields
    assert field.score == 0.0
    assert field.reason.startswith("NUMERIC: " + reason)


def test_numeric_is_never_auto_detected_and_the_walkthrough_is_unchanged() -> None:
    r = evaluate_json({"n": 100.0}, {"n": 100.004})
    assert (r.fields[0].strategy, r.fields[0].score) == (Strategy.EXACT, 0.0)
    walkthrough = evaluate_json(GT, AIO, CONFIG, scorer=FixedScorer())
    assert (walkthrough.accuracy, walkthrough.rqs) == (1.0, 0.7375)


def test_numeric_tolerances_are_validated() -> None:
    with pytest.raises(ValueError, match="'numeric_rel_tol' parameter must be a finite number"):
        EvalOptions(numeric_rel_tol=-1e-6)
    with pytest.raises(ValueError, match="'numeric_abs_tol' parameter must be a finite number"):
        EvalOptions(numeric_abs_tol=float("nan"))
    assert (EvalOptions().numeric_rel_tol, EvalOptions().numeric_abs_tol) == (1e-6, 0.0)


def test_numeric_in_the_config_round_trip_and_errors(tmp_path) -> None:
    config = StrategyConfig({"total": "numeric", "items.*.price": "NUMERIC", "id": "EXACT"})
    path = tmp_path / "strategies.json"
    config.save(path)
    assert json.loads(path.read_text()) == {
        "total": "NUMERIC",
        "items.*.price": "NUMERIC",
        "id": "EXACT",
    }
    assert StrategyConfig.load(path) == config
    assert config.lookup("items.3.price") is Strategy.NUMERIC
    with pytest.raises(StrategyConfigError) as err:
        StrategyConfig({"total": "NUMBER"})
    assert "unknown strategy 'NUMBER' (did you mean NUMERIC?)" in str(err.value)
    assert "valid values: EXACT, FUZZY, SEMANTIC, IGNORE, NUMERIC" in str(err.value)


def test_json_accuracy_metric_takes_the_tolerances() -> None:
    sample = Sample(expected_json={"total": 19.99, "n": 3}, output_json={"total": 20, "n": 3})
    strict = get_metric("json_accuracy", strategies={"total": "NUMERIC"}, scorer=FixedScorer())
    # |20 − 19.99| = 0.01 > 1e-6·19.99: total wrong, n right (EXACT): 1/2
    assert strict.score(sample).value == 0.5
    loose = get_metric(
        "json_accuracy",
        strategies={"total": "NUMERIC"},
        numeric_abs_tol=0.01,
        scorer=FixedScorer(),
    )
    assert loose.score(sample).value == 1.0  # 0.01 <= max(0.01, ...)
    assert loose.params()["numeric_abs_tol"] == 0.01
    assert "numeric_rel_tol" not in get_metric("json_accuracy").params()
