"""The per-sample shortcuts give what the full path gives: JSON text written by the C
encoder equals the text of `to_jsonable` then ``json.dumps``; an output line written
without walking its evidence equals the redacted line, and a line with a secret or a
credential is still redacted; signatures built once follow a changed parameter."""

from __future__ import annotations

import json

import numpy as np
import pytest

from assay.core.jsonout import dumps, line_bytes, to_jsonable
from assay.core.redaction import REDACTED, register_secret
from assay.core.result import MetricResult
from assay.core.sample import Sample
from assay.metrics.registry import get_metric
from assay.outputs.sinks import _MAYBE_CREDENTIAL, _line, _maybe_credential, evidence_of


def slow(value: object, **options: object) -> str:
    return json.dumps(to_jsonable(value), allow_nan=False, **options)  # type: ignore[arg-type]


VALUES = [
    {"a": 1, "b": [1.5, "x", None, True], "c": {"d": (1, 2)}},
    {"nan": float("nan"), "inf": float("-inf")},
    {"numpy": np.float32(0.25), "int": np.int64(3), "set": {1}},
    {"lone": "a\ud800b", "pair": "😀"},
    {True: 1, None: 2, 1.5: 3, 7: 4},
    {"big": 10**5000},
]


@pytest.mark.parametrize("value", VALUES)
@pytest.mark.parametrize("ensure_ascii", [False, True])
def test_dumps_equals_the_walked_text(value: object, ensure_ascii: bool) -> None:
    assert dumps(value, ensure_ascii=ensure_ascii) == slow(value, ensure_ascii=ensure_ascii)


@pytest.mark.parametrize("value", VALUES)
def test_a_line_holds_the_values_dumps_writes(value: object) -> None:
    assert json.loads(line_bytes(value)) == json.loads(dumps(value))


def test_a_line_is_compact_json_with_the_same_floats() -> None:
    floats = [0.1, 1e16, 2.5e-7, -0.0, 5e-324, 1e-5, 1.2345678901234567e300]
    value = {"id": "s1", "v": floats, "t": "café \u2028"}
    line = line_bytes(value)
    # each float in the line is the same float (orjson's shortest form, e.g. 0.00001)
    written = [float(token) for token in line.split(b"[")[1].split(b"]")[0].split(b",")]
    assert [x.hex() for x in written] == [x.hex() for x in floats]  # the same bits, -0.0 too
    assert json.loads(line) == value
    standard = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    assert len(line.split(b",")) == len(standard.split(","))  # no space anywhere
    assert b", " not in line and b": " not in line
    assert line.decode("utf-8").endswith('"t":"café \u2028"}')  # text as is, not escaped


@pytest.mark.parametrize(
    "text",
    [
        "plain answer",
        "Authorization: BEARER x",
        "ba\u017fic x",  # long s: the pattern's Unicode case folding reads it as "basic"
        "\u212a",
        "https://host/a",
        "a?api_key=1",
        "a & b = c",
        "a&b=c",
        "caf\u00e9 ?x=1",
    ],
)
def test_the_credential_check_of_a_line_is_the_patterns(text: str) -> None:
    line = line_bytes({"t": text})
    assert _maybe_credential(line) == bool(_MAYBE_CREDENTIAL.search(line.decode("utf-8")))


def _results(details: dict[str, object]) -> dict[str, MetricResult]:
    result = MetricResult(name="m", value=0.5, details=details, signature="assay=0|metric=m@1")
    return {"m": result}


def _walked(row: dict[str, object], results: dict[str, MetricResult]) -> bytes:
    return line_bytes({**row, "evidence": evidence_of(results)})


def test_line_without_secrets_equals_the_walked_line() -> None:
    row = {"id": "s1", "m": 0.5}
    results = _results({"label": "CORRECT", "scores": [0.1, float("nan")], "n": np.int64(2)})
    assert _line(row, results) == _walked(row, results)


@pytest.mark.parametrize(
    "text",
    [
        "the key is s3cr3t-value-123 here",
        "call https://user:hunter22@example.com/v1",
        "sent Authorization: Bearer abcdefghijklmnop",
        "see https://host/api?api_key=abcdef123456",
    ],
)
def test_line_with_a_secret_or_credential_is_redacted(text: str) -> None:
    register_secret("s3cr3t-value-123")
    row = {"id": "s1"}
    results = _results({"judge_said": text})
    line = _line(row, results)
    assert line == _walked(row, results)
    assert REDACTED in json.loads(line)["evidence"]["m"]["details"]["judge_said"]
    assert b"s3cr3t-value-123" not in line and b"hunter22" not in line


def test_signature_follows_a_changed_parameter() -> None:
    metric = get_metric("exact_match")
    first = metric.signature("pattern", None)
    assert metric.signature("pattern", None) is first  # built once
    assert metric.signature("pattern", "m1") != first
    metric.params = lambda: {"normalise": False}  # type: ignore[method-assign]
    assert "normalise=False" in metric.signature("pattern", None)


def test_records_with_field_names_and_with_aliases_give_the_same_sample() -> None:
    named = Sample.model_validate({"query": "q", "response": "r", "tags": {"a": "1"}})
    aliased = Sample.model_validate({"question": "q", "answer": "r", "tags": {"a": "1"}})
    assert named == aliased
    assert Sample.model_validate({"response": "r"}).metadata == {}
