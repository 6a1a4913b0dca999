"""The structured metrics (json_completeness, json_hallucination, json_accuracy, rqs,
rqs_normalized): registration and polarity, the walkthrough sample, JSON strings,
undefined inputs and per-sample field strategies; and hostile documents: nesting past the
depth limit, Python dict keys named as JSON writes them, integers over 4,300 digits, NaN
and infinity, documents the JSON parser refuses, and field evidence that is strict JSON."""

from __future__ import annotations

import json

import pytest
from tests.structured_helpers import FixedScorer

from assay.core.config import AssayConfig
from assay.core.sample import Sample
from assay.engine.resources import Resources
from assay.metrics.base import Source
from assay.metrics.registry import get_metric, metric_class, suite
from assay.structured import StrategyConfigError, canonical, evaluate_json
from assay.structured.batch import pairs_from_jsonl
from json_walkthrough import AIO, CONFIG, GT

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
