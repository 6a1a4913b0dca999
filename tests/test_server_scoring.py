"""The API's scoring: POST /api/evaluate scores and stores (or stores nothing), refuses
oversized bodies before scoring, reports bad input, accepts metric aliases and limits
the batch size; POST /api/json-eval on the JSON specification's walkthrough, with a
stored config and with an unknown strategy; and the stored field-strategy configurations:
create, read, update and delete, validation, import and export, NUMERIC in stored
configs, and import files that are refused."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from assay.server import create_app
from assay.store.db import Store

pytest_plugins = ["browser_conftest", "tests.server_api_helpers"]
pytest.register_assert_rewrite("browser_conftest", "tests.server_api_helpers")

from tests.server_api_helpers import JSON, detail_text  # noqa: E402

#: the JSON comparison specification's worked example: ground truth and output
WALKTHROUGH_GT = {
    "name": "John Smith",
    "email": "john@example.com",
    "bio": "Senior engineer with 10 years of experience...",
    "internal_id": None,
    "status": "active",
}
WALKTHROUGH_OUTPUT = {
    "name": "John Smyth",
    "email": "john@example.com",
    "bio": "Experienced senior engineer, 10+ years...",
    "internal_id": "abc123",
    "extra_field": "surprise",
}


# ---- scoring ---------------------------------------------------------------------------
def test_evaluate_scores_and_stores(fresh_client: TestClient) -> None:
    body = {
        "samples": [
            {
                "id": "q1",
                "question": "Capital of France?",
                "answer": " paris ",
                "ground_truth": "Paris",
            },
            {"id": "q2", "question": "Capital of France?", "answer": "Lyon", "expected": "Paris"},
        ],
        "metrics": ["exact_match"],
        "store": True,
        "run_name": "from the API",
    }
    response = fresh_client.post("/api/evaluate", json=body)
    assert response.status_code == 200, response.text
    data = response.json()
    assert data["metrics"] == ["exact_match"]
    # trimmed, lower-cased equality: "paris" == "paris" -> 1; "lyon" != "paris" -> 0
    assert [r["scores"]["exact_match"]["value"] for r in data["results"]] == [1.0, 0.0]
    assert [r["status"] for r in data["results"]] == ["passed", "failed"]  # threshold 1.0
    summary = data["summary"][0]
    assert summary["name"] == "exact_match"
    assert summary["mean"] == pytest.approx(0.5)
    run_id = data["run_id"]
    stored = fresh_client.get(f"/api/runs/{run_id}").json()
    assert stored["run"]["source"] == "api"
    assert stored["run"]["name"] == "from the API"
    assert stored["run"]["status"] == "finished"
    assert stored["run"]["pass_rate"] == pytest.approx(50.0)
    assert [s["id"] for s in stored["samples"]] == ["q1", "q2"]


def test_oversized_bodies_are_refused_before_scoring(tmp_path: Any) -> None:
    app = create_app(Store(str(tmp_path / "cap.db")), token="", max_body_bytes=1000)
    big = {"samples": [{"response": "x" * 2000, "expected": "y"}], "metrics": ["exact_match"]}
    response = TestClient(app, base_url="http://localhost").post("/api/evaluate", json=big)
    assert response.status_code == 413 and "over 1000 bytes" in response.json()["detail"]
    small = {"samples": [{"response": "x", "expected": "x"}], "metrics": ["exact_match"]}
    assert (
        TestClient(app, base_url="http://localhost").post("/api/evaluate", json=small).status_code
        == 200
    )


def test_evaluate_without_store_writes_nothing(fresh_client: TestClient) -> None:
    body = {"samples": [{"answer": "a", "expected": "a"}], "metrics": ["exact_match"]}
    data = fresh_client.post("/api/evaluate", json=body).json()
    assert data["run_id"] is None
    assert data["stored"] is False
    assert fresh_client.get("/api/runs").json() == []


def test_evaluate_reports_bad_input(fresh_client: TestClient) -> None:
    bad_sample = fresh_client.post(
        "/api/evaluate",
        json={"samples": [{"answer": "a"}, {"answer": "b", "duration": -1}], "metrics": ["bleu"]},
    )
    assert bad_sample.status_code == 422
    assert "body.samples.1.duration: samples[1].duration" in detail_text(bad_sample)
    unknown = fresh_client.post(
        "/api/evaluate", json={"samples": [{"answer": "a"}], "metrics": ["exact_matsh"]}
    )
    assert unknown.status_code == 422
    assert "exact_match" in detail_text(unknown)  # the did-you-mean hint
    empty = fresh_client.post("/api/evaluate", json={"samples": []})
    assert empty.status_code == 422


def test_evaluate_accepts_metric_aliases(fresh_client: TestClient) -> None:
    from assay.metrics.registry import metric_names
    from fakes import fake_resources

    schema = fresh_client.get("/openapi.json").json()["components"]["schemas"]["EvaluateRequest"]
    names = schema["properties"]["metrics"]["items"]["enum"]
    assert names == metric_names()
    assert {"accuracy", "factual_consistency", "truthfulness", "f1"} <= set(names)
    assert {"semantic_similarity", "bertscore"} <= set(names)
    # cos((0.8, 0.6), (1, 0)) = 0.8: semantic_similarity's value, under the name asked for
    fresh_client.app.state.resources = fake_resources({"resp": (0.8, 0.6), "exp": (1.0, 0.0)})
    body = {"samples": [{"response": "resp", "expected": "exp"}], "metrics": ["truthfulness"]}
    response = fresh_client.post("/api/evaluate", json=body)
    assert response.status_code == 200, response.text
    data = response.json()
    assert data["metrics"] == ["truthfulness"]
    (scores,) = [r["scores"] for r in data["results"]]
    assert list(scores) == ["truthfulness"]
    assert scores["truthfulness"]["value"] == pytest.approx(0.8, abs=1e-6)
    assert data["summary"][0]["name"] == "truthfulness"


def test_evaluate_limits_batch_size(tmp_path: Any) -> None:
    client = TestClient(
        create_app(Store(str(tmp_path / "x.db")), token="", max_samples=2),
        base_url="http://localhost",
    )
    body = {"samples": [{"answer": "a"}] * 3, "metrics": ["exact_match"]}
    response = client.post("/api/evaluate", json=body)
    assert response.status_code == 422  # more items than the documented maxItems
    assert "3 samples posted; this server scores at most 2 per call" in detail_text(response)
    assert (
        client.get("/openapi.json").json()["components"]["schemas"]["EvaluateRequest"][
            "properties"
        ]["samples"]["maxItems"]
        == 2
    )


def test_json_eval_json_specification_walkthrough(fresh_client: TestClient) -> None:
    # the JSON specification's example, with bio IGNOREd so no embedding model is needed:
    # completeness 3/4; hallucination 2/6 (extra_field, internal_id);
    # accuracy: name FUZZY token_set_ratio("John Smith", "John Smyth") = 0.90 >= 0.85 -> 1,
    # email EXACT -> 1: 2/2 = 1.0;
    # RQS = 0.45*1.0 + 0.25*0.75 + 0.15*1.0 - 0.15*(2/6) = 0.45 + 0.1875 + 0.15 - 0.05 = 0.7375
    response = fresh_client.post(
        "/api/json-eval",
        json={
            "gt": WALKTHROUGH_GT,
            "output": WALKTHROUGH_OUTPUT,
            "strategies": {"name": "fuzzy", "bio": "IGNORE"},
        },
    )
    assert response.status_code == 200, response.text
    data = response.json()
    assert data["completeness"] == pytest.approx(0.75)
    assert data["hallucination"] == pytest.approx(2 / 6)
    assert data["accuracy"] == pytest.approx(1.0)
    assert data["rqs"] == pytest.approx(0.7375)
    assert sorted(data["buckets"]["extra_keys"]) == ["extra_field"]
    assert data["buckets"]["gt_null_aio_has_value"] == ["internal_id"]
    fields = {f["field"]: f for f in data["fields"]}
    assert fields["name"]["strategy"] == "FUZZY"
    assert fields["name"]["similarity"] == pytest.approx(0.90)
    assert fields["email"]["source"] == "auto"
    assert fields["bio"]["score"] is None


def test_json_eval_uses_a_stored_config(fresh_client: TestClient) -> None:
    fresh_client.put(
        "/api/field-strategies/people", json={"strategies": {"name": "FUZZY", "bio": "IGNORE"}}
    )
    data = fresh_client.post(
        "/api/json-eval",
        json={"gt": WALKTHROUGH_GT, "output": WALKTHROUGH_OUTPUT, "config": "people"},
    ).json()
    assert data["rqs"] == pytest.approx(0.7375)
    missing = fresh_client.post(
        "/api/json-eval",
        json={"gt": WALKTHROUGH_GT, "output": WALKTHROUGH_OUTPUT, "config": "nope"},
    )
    assert missing.status_code == 404


def test_json_eval_rejects_unknown_strategy(fresh_client: TestClient) -> None:
    response = fresh_client.post(
        "/api/json-eval",
        json={"gt": WALKTHROUGH_GT, "output": WALKTHROUGH_OUTPUT, "strategies": {"name": "FUZZZY"}},
    )
    assert response.status_code == 422
    detail = detail_text(response)
    assert "'name'" in detail
    assert "EXACT, FUZZY, SEMANTIC, IGNORE" in detail
    bad_threshold = fresh_client.post(
        "/api/json-eval", json={"gt": {}, "output": {}, "fuzzy_threshold": 1.5}
    )
    assert bad_threshold.status_code == 422
    assert "fuzzy_threshold" in detail_text(bad_threshold)


# ---- field-strategy configurations -----------------------------------------------------
def test_field_strategy_crud(fresh_client: TestClient) -> None:
    assert fresh_client.get("/api/field-strategies").json() == []
    put = fresh_client.put(
        "/api/field-strategies/invoices",
        json={"strategies": {"customer_name": "fuzzy", "notes": "IGNORE"}},
    )
    assert put.status_code == 200
    assert put.json()["strategies"] == {"customer_name": "FUZZY", "notes": "IGNORE"}
    got = fresh_client.get("/api/field-strategies/invoices").json()
    assert got == {"name": "invoices", "strategies": {"customer_name": "FUZZY", "notes": "IGNORE"}}
    listed = fresh_client.get("/api/field-strategies").json()
    assert [c["name"] for c in listed] == ["invoices"]
    fresh_client.put("/api/field-strategies/invoices", json={"strategies": {"total": "EXACT"}})
    assert fresh_client.get("/api/field-strategies/invoices").json()["strategies"] == {
        "total": "EXACT"
    }
    assert fresh_client.delete("/api/field-strategies/invoices").status_code == 204
    assert fresh_client.get("/api/field-strategies/invoices").status_code == 404
    assert fresh_client.delete("/api/field-strategies/invoices").status_code == 404


def test_field_strategy_validation(fresh_client: TestClient) -> None:
    bad = fresh_client.put(
        "/api/field-strategies/x", json={"strategies": {"phone_number": "EXAKT"}}
    )
    assert bad.status_code == 422
    detail = detail_text(bad)
    assert "'phone_number'" in detail
    assert "did you mean EXACT" in detail
    assert "EXACT, FUZZY, SEMANTIC, IGNORE" in detail
    assert fresh_client.get("/api/field-strategies/x").status_code == 404  # nothing saved
    bad_name = fresh_client.put("/api/field-strategies/-bad", json={"strategies": {}})
    assert bad_name.status_code == 422


def test_field_strategy_import_export(fresh_client: TestClient) -> None:
    # the JSON specification's example configuration file
    example_config = {
        "customer_name": "FUZZY",
        "address_line_1": "SEMANTIC",
        "phone_number": "EXACT",
        "internal_notes": "IGNORE",
        "description": "SEMANTIC",
    }
    imported = fresh_client.post(
        "/api/field-strategies/customers/import",
        content=json.dumps(example_config).encode(),
        headers=JSON,
    )
    assert imported.status_code == 200, imported.text
    assert imported.json()["fields"] == 5
    export = fresh_client.get("/api/field-strategies/customers/export")
    assert export.status_code == 200
    assert export.headers["content-disposition"] == 'attachment; filename="customers.json"'
    assert json.loads(export.text) == example_config
    # the wrapped form {"field_strategies": {...}} is accepted too
    wrapped = fresh_client.post(
        "/api/field-strategies/wrapped/import",
        content=json.dumps({"field_strategies": {"a": "exact"}}).encode(),
        headers=JSON,
    )
    assert wrapped.json()["strategies"] == {"a": "EXACT"}


def test_numeric_strategy_in_stored_configs_and_json_eval(fresh_client: TestClient) -> None:
    put = fresh_client.put(
        "/api/field-strategies/invoices", json={"strategies": {"total": "numeric"}}
    )
    assert put.status_code == 200, put.text
    assert put.json()["strategies"] == {"total": "NUMERIC"}
    imported = fresh_client.post(
        "/api/field-strategies/amounts/import",
        content=json.dumps({"total": "Numeric", "id": "EXACT"}).encode(),
        headers=JSON,
    )
    assert imported.status_code == 200, imported.text
    export = fresh_client.get("/api/field-strategies/amounts/export")
    assert json.loads(export.text) == {"total": "NUMERIC", "id": "EXACT"}
    body = {"gt": {"total": 100.0}, "output": {"total": 100.004}, "config": "invoices"}
    # default rel_tol 1e-6: 0.004 > 0.0001; with rel_tol 1e-4: 0.004 <= 0.01
    assert fresh_client.post("/api/json-eval", json=body).json()["accuracy"] == 0.0
    loose = fresh_client.post("/api/json-eval", json={**body, "numeric_rel_tol": 1e-4}).json()
    assert loose["accuracy"] == 1.0
    assert loose["numeric_tolerance"] == {"rel_tol": 1e-4, "abs_tol": 0.0}
    assert loose["fields"][0]["reason"] == (
        "NUMERIC: |100.004 − 100.0| = 0.004 <= 0.01 = max(abs_tol 0, rel_tol 0.0001 × 100)"
    )
    negative = fresh_client.post("/api/json-eval", json={**body, "numeric_abs_tol": -1})
    assert negative.status_code == 422
    assert "numeric_abs_tol" in detail_text(negative)


def test_field_strategy_import_rejects_bad_files(fresh_client: TestClient) -> None:
    unknown = fresh_client.post(
        "/api/field-strategies/c/import", content=b'{"customer_name": "CLOSE_ENOUGH"}', headers=JSON
    )
    assert unknown.status_code == 422
    assert "'customer_name'" in detail_text(unknown)
    assert "valid values: EXACT, FUZZY, SEMANTIC, IGNORE" in detail_text(unknown)
    not_json = fresh_client.post(
        "/api/field-strategies/c/import", content=b'{"a": EXACT}', headers=JSON
    )
    assert not_json.status_code == 422
    assert "line 1, column 7" in detail_text(not_json)
    array = fresh_client.post("/api/field-strategies/c/import", content=b'["EXACT"]', headers=JSON)
    assert array.status_code == 422
    assert "JSON object" in detail_text(array)
    assert fresh_client.get("/api/field-strategies/c").status_code == 404
