"""Reliability metrics (chatbot hub): stability, validity, JSON Schema compliance, determinism."""

from __future__ import annotations

import json

import jsonschema
import pytest

from assay.core.config import AssayConfig
from assay.core.sample import Sample
from assay.engine.resources import Resources
from assay.metrics.registry import get_metric
from assay.metrics.reliability import normalise_whitespace, validate_json


def score(name: str, resources, **fields):
    return get_metric(name).score(Sample(**fields), resources)


ANSWER = "The capital of France is Paris."
PARAPHRASES = [
    "Paris is the capital of France.",
    "France's capital city is Paris.",
    "The French capital is Paris.",
]
UNRELATED = [
    "Photosynthesis turns light into chemical energy.",
    "The stock market closed lower on Friday.",
    "Bake the bread for forty minutes.",
]


# ---- output_validity -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("response", "value", "failed"),
    [
        ("Paris is the capital of France.", 1.0, []),  # 4 of 4 checks
        ("Paris is the capital of France", 0.75, ["ends_properly"]),  # 3 of 4
        ("Paris.", 0.75, ["has_minimum_length"]),  # 6 characters < 10
        ("The answer is <b>Paris</b>.", 0.75, ["has_no_html_tags"]),
        ("<b>Paris</b>", 0.5, ["has_no_html_tags", "ends_properly"]),  # 2 of 4
    ],
)
def test_output_validity(resources, response, value, failed):
    result = score("output_validity", resources, response=response)
    assert result.value == pytest.approx(value)
    assert result.details["failed"] == failed
    assert result.method == "pattern"


def test_output_validity_uses_configured_lengths(cache_dir):
    res = Resources(AssayConfig(cache_dir=cache_dir, min_response_length=3, max_response_length=20))
    long = score("output_validity", res, response="Paris is the capital of France.")
    # 5 checks with a maximum: within_max_length fails (31 > 20) -> 4 / 5
    assert long.value == pytest.approx(0.8)
    assert long.details["failed"] == ["within_max_length"]
    assert score("output_validity", res, response="Yes.").value == 1.0  # 4 >= 3, 5 of 5


def test_blank_response_is_missing(resources):
    for name in ("output_validity", "output_stability", "determinism_score"):
        result = score(name, resources, response="   ")
        assert result.value is None and "response" in result.reason


# ---- output_stability ----------------------------------------------------------------------


def test_output_stability_of_identical_repeats_is_one(resources):
    result = score("output_stability", resources, response=ANSWER, previous_responses=[ANSWER] * 3)
    assert result.value == pytest.approx(1.0, abs=1e-5)
    assert result.details["measure"] == "similarity"
    assert result.details["compared"] == 3


def test_output_stability_orders_paraphrases_above_unrelated(resources):
    stable = score("output_stability", resources, response=ANSWER, previous_responses=PARAPHRASES)
    unstable = score("output_stability", resources, response=ANSWER, previous_responses=UNRELATED)
    assert stable.value > unstable.value + 0.3
    assert stable.value > 0.7


def test_output_stability_uses_the_last_five(resources):
    previous = [ANSWER, *UNRELATED, *UNRELATED[:2]]  # 6 responses; the identical one is first
    result = score("output_stability", resources, response=ANSWER, previous_responses=previous)
    assert result.details["compared"] == 5
    only_unrelated = score(
        "output_stability", resources, response=ANSWER, previous_responses=previous[1:]
    )
    assert result.value == pytest.approx(only_unrelated.value)  # the 6th-last is not used


def test_output_stability_falls_back_to_quality_checks(resources):
    result = score("output_stability", resources, response="Paris")
    # "Paris": too short, not empty, no HTML, no ending -> 2 of 4
    assert result.value == pytest.approx(0.5)
    assert result.details["measure"] == "quality_checks"
    assert result.method == "pattern"
    assert "fallback" in result.reason


def test_output_stability_batch_mixes_both_paths(resources):
    metric = get_metric("output_stability")
    results = metric.score_batch(
        [
            Sample(response=ANSWER, previous_responses=[ANSWER]),
            Sample(response="Paris"),
            Sample(response=ANSWER, previous_responses=UNRELATED),
        ],
        resources,
    )
    assert [r.details["measure"] for r in results] == [
        "similarity",
        "quality_checks",
        "similarity",
    ]
    assert results[0].value > results[2].value


# ---- schema_compliance ---------------------------------------------------------------------

FUND_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "nav": {"type": "number", "minimum": 0},
        "holdings": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"isin": {"type": "string"}, "weight": {"type": "number"}},
                "required": ["isin", "weight"],
            },
        },
        "contact": {"type": "string", "format": "email"},
    },
    "required": ["name", "nav"],
    "additionalProperties": False,
}


def test_schema_compliance_valid_response(resources):
    response = json.dumps({"name": "HDFC Top 100", "nav": 1023.4, "holdings": []})
    result = score("schema_compliance", resources, response=response, json_schema=FUND_SCHEMA)
    assert result.value == 1.0
    assert result.details["errors"] == [] and result.details["source"] == "response"
    assert result.method == "reference"


def test_schema_compliance_reports_errors_with_paths(resources):
    instance = {
        "nav": -1,
        "holdings": [{"isin": "INE040A01034", "weight": "ten"}],
        "contact": "not-an-email",
        "extra": True,
    }
    result = score(
        "schema_compliance", resources, response=json.dumps(instance), json_schema=FUND_SCHEMA
    )
    assert result.value == 0.0
    found = {(e["path"], e["keyword"]) for e in result.details["errors"]}
    assert found == {
        ("$", "required"),  # name missing
        ("$", "additionalProperties"),  # extra
        ("$.nav", "minimum"),
        ("$.holdings[0].weight", "type"),
        ("$.contact", "format"),
    }
    assert result.details["error_count"] == 5
    messages = [e["message"] for e in result.details["errors"]]
    assert "'name' is a required property" in messages
    # the same verdict as the reference library
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(instance, FUND_SCHEMA)


def test_schema_compliance_prefers_output_json(resources):
    result = score(
        "schema_compliance",
        resources,
        response="Here is the fund: HDFC.",
        output_json={"name": "HDFC", "nav": 10},
        json_schema=FUND_SCHEMA,
    )
    assert result.value == 1.0 and result.details["source"] == "output_json"


def test_schema_compliance_unparseable_response(resources):
    result = score("schema_compliance", resources, response="{'name': 'x'}", json_schema={})
    assert result.value == 0.0
    assert result.details["errors"][0]["message"].startswith("not valid JSON")


@pytest.mark.parametrize(
    ("response", "reason"),
    [
        ("1" * 5000, "4300 digits"),  # json.loads raises ValueError, not JSONDecodeError
        ("[" * 5000 + "]" * 5000, "recursion"),  # RecursionError
    ],
    ids=["5000-digit number", "5000 levels"],
)
def test_schema_compliance_responses_json_refuses_are_not_json(resources, response, reason):
    result = score("schema_compliance", resources, response=response, json_schema={})
    assert result.error is None
    assert result.value == 0.0
    assert result.details["errors"][0]["keyword"] == "json"
    assert reason in result.details["errors"][0]["message"]


def test_schema_compliance_messages_are_cut(resources, monkeypatch):
    # past the default max_field_chars (100,000): raised to test the metric itself
    monkeypatch.setattr(
        resources, "config", resources.config.model_copy(update={"max_field_chars": 2_000_000})
    )
    huge = '"' + "x" * 100_000 + '"'
    result = score("schema_compliance", resources, response=huge, json_schema={"type": "integer"})
    assert result.value == 0.0
    message = result.details["errors"][0]["message"]
    # 460 characters kept; the message was "'x...x' is not of type 'integer'" (100,027)
    assert len(message) <= 500 and message.endswith("… (99567 more characters)")


def test_schema_compliance_recursive_schema_on_a_very_deep_instance_is_an_error(resources):
    deep: dict = {}
    node = deep
    for _ in range(2000):
        node["a"] = {}
        node = node["a"]
    schema = {
        "$defs": {"n": {"type": "object", "properties": {"a": {"$ref": "#/$defs/n"}}}},
        "$ref": "#/$defs/n",
    }
    result = score("schema_compliance", resources, output_json=deep, json_schema=schema)
    # 2,001 levels are past max_json_depth (500): the input-limit error, before any schema
    # recursion
    assert (result.value, result.reason) == (None, "input over a limit")
    assert result.error.startswith("output_json nests 2,001 levels deep, over the limit of 500")


def test_schema_compliance_fence_followed_by_blank_lines_is_fast(resources):
    # the fence pattern split a run of newlines at every position (about 10 s for 40,000)
    import time

    start = time.perf_counter()
    result = score("schema_compliance", resources, response="```\n" + "\n" * 40_000, json_schema={})
    assert time.perf_counter() - start < 1.0
    assert result.value == 0.0 and "hint" not in result.details


def test_schema_compliance_code_fence_is_not_json_but_hinted(resources):
    fenced = '```json\n{"name": "HDFC", "nav": 10}\n```'
    result = score("schema_compliance", resources, response=fenced, json_schema=FUND_SCHEMA)
    assert result.value == 0.0
    assert "code fence" in result.details["hint"]


def test_degenerate_case_object_schema(resources):
    # the chatbot hub: schema.type == "object" -> 1 when the response parses as JSON
    obj = {"type": "object"}
    assert score("schema_compliance", resources, response='{"a": 1}', json_schema=obj).value == 1
    assert score("schema_compliance", resources, response="not json", json_schema=obj).value == 0
    # stricter than the specification: valid JSON of the wrong type fails the schema
    arr = score("schema_compliance", resources, response="[1, 2]", json_schema=obj)
    assert arr.value == 0.0 and arr.details["errors"][0]["keyword"] == "type"


def test_schema_draft_follows_dollar_schema():
    # dependentRequired exists from 2019-09 on; Draft 7 ignores the keyword
    schema = {"dependentRequired": {"card": ["billing"]}}
    instance = {"card": "4111"}
    assert len(validate_json(instance, schema)) == 1  # default: Draft 2020-12
    draft7 = {"$schema": "http://json-schema.org/draft-07/schema#", **schema}
    assert validate_json(instance, draft7) == []


def test_validators_are_kept_per_schema_and_never_shared():
    """A validator is built once per schema (its repr, keys in order) and reused; schemas
    that differ in a value, or only in the order of their keywords, get their own."""
    from assay.metrics import reliability

    enum_first = {"enum": ["x"], "const": "y"}
    const_first = {"const": "y", "enum": ["x"]}
    # the errors of one path come in the order of the schema's keywords
    assert [e["keyword"] for e in validate_json("z", enum_first)] == ["enum", "const"]
    assert [e["keyword"] for e in validate_json("z", const_first)] == ["const", "enum"]
    assert validate_json("x", {"enum": ["x"]}) == []
    assert [e["message"] for e in validate_json("x", {"enum": ["w"]})] == [
        "'x' is not one of ['w']"
    ]
    kept = reliability._validator(enum_first)
    assert reliability._validator({"enum": ["x"], "const": "y"}) is kept
    assert reliability._validator(const_first) is not kept


def test_a_schema_changed_after_validation_is_validated_as_it_is_now():
    schema = {"type": "object", "required": ["order"]}
    assert [e["keyword"] for e in validate_json({}, schema)] == ["required"]
    schema["required"] = []  # the caller's dict, changed in place
    assert validate_json({}, schema) == []
    assert [e["keyword"] for e in validate_json({}, {"type": "object", "required": ["order"]})] == [
        "required"
    ]


def test_an_invalid_schema_raises_each_time_and_the_cache_stays_bounded():
    from assay.metrics import reliability

    for _ in range(2):
        with pytest.raises(jsonschema.SchemaError):
            validate_json({}, {"type": "objekt"})
    for n in range(reliability.MAX_CACHED_VALIDATORS + 5):
        assert validate_json(n, {"minimum": n}) == []
    assert len(reliability._validators) == reliability.MAX_CACHED_VALIDATORS
    assert [e["keyword"] for e in validate_json(0, {"minimum": 1})] == ["minimum"]


def test_invalid_schema_is_none_with_reason(resources):
    result = score(
        "schema_compliance", resources, response='{"a": 1}', json_schema={"type": "objekt"}
    )
    assert result.value is None and result.reason.startswith("invalid json_schema")


def test_schema_compliance_without_schema_is_the_labelled_proxy(resources):
    result = score("schema_compliance", resources, response="Paris is the capital of France.")
    assert result.value == 1.0  # 4 of 4 quality checks
    assert result.details["measure"] == "quality_checks" and result.method == "pattern"
    assert score("schema_compliance", resources, expected="x").value is None


# ---- determinism_score ---------------------------------------------------------------------


def test_determinism_exact_share(resources):
    previous = ["The  answer is 42.", "The answer is 42.\n", "the answer is 42.", "It is 41."]
    result = score(
        "determinism_score", resources, response="The answer is 42.", previous_responses=previous
    )
    # identical after whitespace normalisation: the first two; case counts -> 2 / 4
    assert result.value == pytest.approx(0.5)
    assert result.details["identical"] == 2 and result.details["compared"] == 4
    # distinct outputs among all 5 runs: "The answer is 42.", "the answer is 42.", "It is 41."
    assert result.details["distinct_outputs"] == 3
    assert result.components["exact_share"] == pytest.approx(0.5)
    assert 0.5 < result.components["mean_similarity"] <= 1.0


def test_determinism_all_identical_and_none_identical(resources):
    same = score("determinism_score", resources, response=ANSWER, previous_responses=[ANSWER] * 4)
    assert same.value == 1.0
    near = score("determinism_score", resources, response=ANSWER, previous_responses=PARAPHRASES)
    assert near.value == 0.0  # paraphrases are not the same output ...
    assert near.components["mean_similarity"] > 0.7  # ... though they are close in meaning


def test_determinism_proxy_without_repeats(resources):
    result = score("determinism_score", resources, response="Paris")
    stability = score("output_stability", resources, response="Paris")
    assert result.value == stability.value == pytest.approx(0.5)
    assert result.details["measure"] == "proxy:output_stability"


def test_normalise_whitespace():
    assert normalise_whitespace("  a \n\t b  ") == "a b"
    assert normalise_whitespace(None) == ""


def test_reliability_catalogue():
    for name in ("output_stability", "output_validity", "schema_compliance", "determinism_score"):
        cls = type(get_metric(name))
        assert cls.family == "reliability" and "reliability" in cls.suites
        assert cls.higher_is_better and cls.value_range == (0.0, 1.0)
