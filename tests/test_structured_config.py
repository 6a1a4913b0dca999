"""The JSON specification's field-strategy config (round trip, unknown strategies, shape
errors, lookup precedence), nested JSON (dotted paths, nested and container fields named
in the config, null containers, type mismatches, arrays, escaped dots, the exported
config), and batches: per-field aggregates, a failing document that does not sink the
batch, and JSONL pairs."""

from __future__ import annotations

import json

import pytest
from tests.structured_helpers import FixedScorer, saved_config

from assay.structured import (
    DocPair,
    EvalOptions,
    Strategy,
    StrategyConfig,
    StrategyConfigError,
    compare_json,
    detect_config,
    evaluate_json,
    evaluate_pairs,
    field_aggregates,
    flatten_pair,
)
from assay.structured.batch import pairs_from_jsonl
from json_walkthrough import AIO, GT


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
    assert saved_config(config, tmp_path / "strategies.json") == {
        "customer_name": "FUZZY",
        "address.city": "EXACT",
        "items.*.sku": "EXACT",
        "internal_notes": "IGNORE",
    }


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
