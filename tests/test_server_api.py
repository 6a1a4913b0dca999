"""The JSON API, auth, escaping of the server-rendered pages, and ``assay serve``.

The store is populated by `browser_conftest.populate`; every expected number is worked
out by hand there (EXPECTED) or in the comment beside the assertion.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from assay.server import create_app
from assay.store.db import Store

pytest_plugins = ["browser_conftest"]
pytest.register_assert_rewrite("browser_conftest")

from browser_conftest import EXPECTED, XSS_IMG, XSS_SCRIPT, populate  # noqa: E402
from pg_databases import fresh_postgres  # noqa: E402

TOKEN = "s3cret-token"
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


def detail_text(response: Any) -> str:
    """A 422's messages, one after another (its detail is a list of {loc, msg, type})."""
    detail = response.json()["detail"]
    assert isinstance(detail, list) and all(set(d) == {"loc", "msg", "type"} for d in detail)
    return "; ".join(f"{'.'.join(str(p) for p in d['loc'])}: {d['msg']}" for d in detail)


#: the content type every write sends (the dashboard's import does too)
JSON = {"Content-Type": "application/json"}


@pytest.fixture(scope="module")
def client(stocked_store: Store) -> TestClient:
    return TestClient(create_app(stocked_store, token=""), base_url="http://localhost")


@pytest.fixture()
def fresh_client(tmp_path: Any) -> TestClient:
    """An app over an empty store of its own (for writes)."""
    return TestClient(
        create_app(Store(str(tmp_path / "fresh.db")), token=""), base_url="http://localhost"
    )


# ---- statistics ------------------------------------------------------------------------
def test_statistics_all_time(client: TestClient) -> None:
    stats = client.get("/api/statistics").json()
    assert stats["total"] == EXPECTED["total"]
    assert stats["passed"] == 7
    assert stats["failed"] == 1
    assert stats["pass_rate"] == pytest.approx(EXPECTED["pass_rate"])
    assert stats["avg_duration"] == pytest.approx(EXPECTED["avg_duration"])
    assert stats["timeout_rate"] == pytest.approx(EXPECTED["timeout_rate"])
    metrics = stats["metrics"]
    assert metrics["semantic_similarity"]["avg"] == pytest.approx(0.725)
    assert metrics["semantic_similarity"]["display"] == EXPECTED["semantic_similarity"]
    assert metrics["exact_match"]["count"] == 7  # the None of s3 is skipped
    assert metrics["exact_match"]["display"] == EXPECTED["exact_match"]
    # performance metrics keep their unit: ms, not ×100
    assert metrics["e2e_latency"]["display"] == EXPECTED["e2e_latency"]
    assert metrics["e2e_latency"]["unit"] == "ms"
    # no reliability metrics stored: health is the pass rate alone
    assert stats["health"] == pytest.approx(EXPECTED["pass_rate"])
    # no safety metric stored: N/A, never 0
    assert stats["safety"] is None
    assert stats["safety_index"] is None


def test_statistics_trends_and_window(client: TestClient) -> None:
    stats = client.get("/api/statistics").json()
    assert stats["trends"]["satisfaction"] == pytest.approx(EXPECTED["satisfaction_trend"])
    assert stats["trends"]["health"] == pytest.approx(EXPECTED["satisfaction_trend"])
    assert stats["trends"]["duration"] == pytest.approx(EXPECTED["duration_trend"])
    last_day = client.get("/api/statistics", params={"hours": 24}).json()
    assert last_day["total"] == 4  # run-a only (1 h ago); run-b is 30 h old
    assert last_day["pass_rate"] == pytest.approx(EXPECTED["a_pass_rate"])


def test_statistics_of_one_run(client: TestClient) -> None:
    stats = client.get("/api/statistics", params={"run_id": "run-a"}).json()
    assert stats["pass_rate"] == pytest.approx(EXPECTED["a_pass_rate"])
    assert stats["avg_duration"] == pytest.approx(EXPECTED["a_avg_duration"])
    assert stats["timeout_rate"] == pytest.approx(EXPECTED["a_timeout_rate"])
    assert stats["metrics"]["semantic_similarity"]["display"] == EXPECTED["a_semantic_similarity"]
    assert stats["metrics"]["exact_match"]["display"] == EXPECTED["a_exact_match"]


def test_statistics_rejects_bad_window(client: TestClient) -> None:
    assert client.get("/api/statistics", params={"hours": -1}).status_code == 422


# ---- runs ------------------------------------------------------------------------------
def test_runs_list(client: TestClient) -> None:
    runs = {r["id"]: r for r in client.get("/api/runs").json()}
    assert set(runs) == {"run-a", "run-b"}
    assert runs["run-a"]["samples"] == 4
    assert runs["run-a"]["pass_rate"] == pytest.approx(75.0)
    assert runs["run-b"]["pass_rate"] == pytest.approx(100.0)
    assert runs["run-b"]["source"] == "pytest"


def test_run_detail_has_evidence_and_pages(client: TestClient) -> None:
    detail = client.get("/api/runs/run-a").json()
    assert detail["run"]["id"] == "run-a"
    assert [s["id"] for s in detail["samples"]] == ["s1", "s2", "s3", "s4"]
    s1 = detail["samples"][0]
    assert s1["response"] == f"Paris. {XSS_SCRIPT}"  # stored as given: escaping is the UI's job
    sim = s1["scores"]["semantic_similarity"]
    assert sim["value"] == 0.9
    assert sim["display"] == 90.0
    assert sim["details"]["label"] == "CORRECT"
    s3 = detail["samples"][2]
    assert s3["scores"]["exact_match"]["value"] is None
    assert s3["scores"]["exact_match"]["display"] is None
    assert s3["scores"]["exact_match"]["reason"].startswith("no expected answer")

    page = client.get("/api/runs/run-a", params={"limit": 2, "offset": 2}).json()
    assert [s["id"] for s in page["samples"]] == ["s3", "s4"]
    assert page["page"] == {"limit": 2, "offset": 2, "total": 4}


def test_run_detail_unknown_run_is_404(client: TestClient) -> None:
    response = client.get("/api/runs/nope")
    assert response.status_code == 404
    assert "nope" in response.json()["detail"]


def test_run_groups_by_method(client: TestClient) -> None:
    data = client.get("/api/runs/run-a/groups", params={"tag": "method"}).json()
    groups = {g["value"]: g for g in data["groups"]}
    assert list(groups) == ["basic_search", "local_search"]
    local, basic = groups["local_search"], groups["basic_search"]
    assert local["samples"] == 2
    assert local["pass_rate"] == pytest.approx(50.0)  # s1 passed, s3 failed
    # local_search: s1 0.9, s3 0.7 -> 0.8; basic_search: s2 0.5, s4 0.6 -> 0.55
    assert local["metrics"]["semantic_similarity"]["avg"] == pytest.approx(0.8)
    assert local["metrics"]["semantic_similarity"]["display"] == 80.0
    assert basic["metrics"]["semantic_similarity"]["display"] == 55.0
    # exact_match: local_search only s1 (s3 None skipped) -> 1.0; basic_search (0 + 1) / 2
    assert local["metrics"]["exact_match"] == {"avg": 1.0, "count": 1, "display": 100.0}
    assert basic["metrics"]["exact_match"]["display"] == 50.0
    assert local["labels"] == {"semantic_similarity": {"CORRECT": 2}}
    assert basic["labels"] == {"semantic_similarity": {"WRONG": 2}}
    assert {"metric": "semantic_similarity", "label": "WRONG"} in data["label_columns"]


def test_run_groups_by_question_type(client: TestClient) -> None:
    data = client.get("/api/runs/run-a/groups", params={"tag": "question_type"}).json()
    groups = {g["value"]: g for g in data["groups"]}
    # fact: s1 0.9, s2 0.5 -> 0.7; reasoning: s3 0.7, s4 0.6 -> 0.65
    assert groups["fact"]["metrics"]["semantic_similarity"]["display"] == 70.0
    assert groups["reasoning"]["metrics"]["semantic_similarity"]["display"] == 65.0
    # a tag no sample has: one group "-" with all 4 samples
    missing = client.get("/api/runs/run-a/groups", params={"tag": "language"}).json()
    assert [(g["value"], g["samples"]) for g in missing["groups"]] == [("-", 4)]
    assert client.get("/api/runs/nope/groups").status_code == 404


def test_history_buckets(client: TestClient) -> None:
    day = client.get("/api/history", params={"hours": 24}).json()
    assert len(day["tests"]) == 1  # run-a's 4 tests share one hourly bucket
    bucket = day["tests"][0]
    assert (bucket["total"], bucket["passed"]) == (4, 3)
    assert bucket["pass_rate"] == pytest.approx(75.0)
    assert bucket["avg_duration"] == pytest.approx(11.5)
    # metric history reads metrics_snapshots (the chatbot hub's get_metrics_history): one
    # point per finished run, stamped when it finished; both runs finished just now, so the
    # bucket is the mean of the run averages (0.675 + 0.775) / 2 = 0.725
    assert day["metrics"]["semantic_similarity"] == [
        {
            "bucket": day["metrics"]["semantic_similarity"][0]["bucket"],
            "avg": pytest.approx(0.725),
            "display": 72.5,
        }
    ]
    two_days = client.get("/api/history", params={"hours": 48}).json()
    assert [t["total"] for t in two_days["tests"]] == [4, 4]  # oldest first: run-b, run-a


def test_history_of_one_metric_type(client: TestClient) -> None:
    # the chatbot hub's get_metrics_history(metric_type): the snapshots of one family only
    performance = client.get("/api/history", params={"metric_type": "performance"}).json()
    assert set(performance["metrics"]) == {"e2e_latency"}
    # (2000 + 11500) / 2 ms: the two runs' averages, unit kept
    assert performance["metrics"]["e2e_latency"][0]["display"] == pytest.approx(6750.0)
    assert client.get("/api/history", params={"metric_type": "nope"}).json()["metrics"] == {}
    assert client.get("/api/history", params={"metric_type": ""}).status_code == 422


# ---- comparison ------------------------------------------------------------------------
def test_compare_runs_paired(client: TestClient) -> None:
    data = client.get("/api/compare", params={"a": "run-a", "b": "run-b"}).json()
    assert (data["a"], data["b"]) == ("run-a", "run-b")
    rows = {r["metric"]: r for r in data["rows"]}
    sim = rows["semantic_similarity"]
    # every pair differs by +0.1: mean difference 0.1, every bootstrap mean is 0.1
    assert sim["paired"] is True
    assert sim["n_pairs"] == 4
    assert sim["diff"] == pytest.approx(0.1)
    assert sim["ci_low"] == pytest.approx(0.1)
    assert sim["ci_high"] == pytest.approx(0.1)
    assert sim["display"]["diff"] == 10.0
    # sign flips of four equal differences reach |mean| >= 0.1 only when all four signs
    # agree: 2 of 16 arrangements -> p about 0.125 (randomisation estimate)
    assert sim["p_value"] == pytest.approx(0.125, abs=0.03)
    assert sim["better"] is True
    exact = rows["exact_match"]
    # pairs s1, s2, s4 (s3 is None in run-a): differences 0, 1, 0 -> 1/3
    assert exact["n_pairs"] == 3
    assert exact["diff"] == pytest.approx(1 / 3)
    assert exact["display"]["diff"] == 33.33
    latency = rows["e2e_latency"]
    # e2e: run-b 2000 each vs 1000, 2000, 40000, 3000 -> differences 1000, 0, -38000, -1000
    assert latency["diff"] == pytest.approx(-9500.0)
    assert latency["display"]["diff"] == -9500.0  # milliseconds, not ×100
    assert latency["better"] is True  # lower latency is better


def test_compare_tag_values_unpaired(client: TestClient) -> None:
    data = client.get(
        "/api/compare", params={"a": "run-a:method=basic_search", "b": "run-a:method=local_search"}
    ).json()
    sim = {r["metric"]: r for r in data["rows"]}["semantic_similarity"]
    assert data["a"] == "run-a:method=basic_search"
    assert sim["paired"] is False  # different sample ids: nothing pairs
    assert sim["mean_a"] == pytest.approx(0.55)
    assert sim["mean_b"] == pytest.approx(0.8)
    assert sim["diff"] == pytest.approx(0.25)
    assert sim["p_value"] is None


# ---- catalogue -------------------------------------------------------------------------
def test_metrics_catalogue(client: TestClient) -> None:
    from assay.metrics.registry import list_metrics

    data = client.get("/api/metrics").json()
    assert [m["name"] for m in data] == [c.name for c in list_metrics()]
    exact = next(m for m in data if m["name"] == "exact_match")
    assert exact["family"] == "lexical"
    assert exact["requires"] == ["response", "expected"]
    lexical = client.get("/api/metrics", params={"family": "lexical"}).json()
    assert {m["family"] for m in lexical} == {"lexical"}
    assert "exact_match" in {m["name"] for m in lexical}


def test_openapi_documents_the_endpoints(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    for path in (
        "/api/statistics",
        "/api/runs",
        "/api/runs/{run_id}",
        "/api/history",
        "/api/compare",
        "/api/metrics",
        "/api/evaluate",
        "/api/json-eval",
        "/api/field-strategies",
        "/api/field-strategies/{name}",
        "/api/field-strategies/{name}/import",
        "/api/field-strategies/{name}/export",
    ):
        assert path in paths, path
    assert client.get("/docs").status_code == 200


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


# ---- malformed input: a clear 4xx JSON error, never a 500 ---------------------------------
SQLISH = "' OR 1=1; DROP TABLE runs; --"
BAD_READS = [
    "/api/statistics?hours=1e308",  # was a 500: the window's start before year 1
    "/api/statistics?hours=inf",
    "/api/statistics?hours=nan",
    "/api/statistics?hours=-1",
    "/api/statistics?hours=abc",
    "/api/runs?limit=abc",
    "/api/runs?limit=0",
    "/api/runs?limit=100000",
    "/api/runs?offset=-1",
    "/api/runs?offset=9223372036854775808",  # was a 500: past SQLite's integers
    "/api/runs?offset=99999999999999999999999",
    "/api/runs/run-a?offset=9223372036854775808",
    "/api/runs/run-a?limit=-5",
    f"/api/runs/{SQLISH}",
    f"/api/runs/{SQLISH}/groups",
    "/api/runs/run-a/groups?tag=",
    "/api/runs/run-a/groups?tag=" + "t" * 200,
    "/api/history?hours=0",
    "/api/history?hours=inf",
    "/api/history?hours=99999",
    "/api/compare?a=run-a",
    "/api/compare?b=run-a",
    "/api/compare?a=&b=run-a",
    f"/api/field-strategies/{SQLISH}",
    "/api/field-strategies/a%00b",
    "/api/field-strategies/nope/export",
    "/?hours=1e308",  # was a 500 (the overview page)
    "/?hours=-3",
    "/runs?page=0",
    "/runs?page=9223372036854775807",  # was a 500: page x 50 past SQLite's integers
    "/runs/run-a?page=99999999999999999999",
]


@pytest.mark.parametrize("path", BAD_READS)
def test_malformed_reads_get_a_clear_4xx_json_error(client: TestClient, path: str) -> None:
    response = client.get(path)
    assert 400 <= response.status_code < 500, response.text
    assert response.headers["content-type"] == "application/json"
    assert response.json()["detail"]


BAD_WRITES = [
    ("post", "/api/evaluate", b"not json"),
    ("post", "/api/evaluate", b"[]"),
    ("post", "/api/evaluate", b"{}"),
    ("post", "/api/evaluate", b'{"samples": "x"}'),
    ("post", "/api/evaluate", b'{"samples": [1, 2]}'),
    ("post", "/api/evaluate", b'{"samples": [{}], "metrics": "exact_match"}'),
    ("post", "/api/evaluate", b'{"samples": [{"id": {"x": 1}}], "metrics": ["exact_match"]}'),
    ("post", "/api/evaluate", b'{"samples": [{"answer": "a"}], "metrics": ["x\' OR 1"]}'),
    ("post", "/api/evaluate", b'{"samples": [{"answer": "a"}], "suite": 5}'),
    ("post", "/api/evaluate", b'{"samples": [{"answer": "a"}], "store": "maybe"}'),
    ("post", "/api/evaluate", b'{"samples": [{"answer": "a"}], "tags": {"a": 1}}'),
    ("post", "/api/evaluate", b'{"samples": [{"answer": "a", "duration": NaN}]}'),
    ("post", "/api/evaluate", b'{"samples": [{"answer": "a"}], "unknown_field": 1}'),
    ("post", "/api/evaluate", b"[" * 50_000 + b"]" * 50_000),
    ("post", "/api/json-eval", b"{}"),
    ("post", "/api/json-eval", b'{"gt": {"a": 1}}'),
    ("post", "/api/json-eval", b'{"gt": {"a": 1}, "aio": {"a": 1}, "fuzzy_threshold": "x"}'),
    ("post", "/api/json-eval", b'{"gt": {"a": 1}, "aio": {"a": 1}, "safety_score": NaN}'),
    ("post", "/api/json-eval", b'{"gt": {"a": 1}, "aio": {"a": 1}, "weights": {"x": 1}}'),
    ("post", "/api/json-eval", b'{"gt": {"a": 1}, "aio": {"a": 1}, "strategies": {"a": 5}}'),
    ("post", "/api/json-eval", b'{"gt": {"a": 1}, "aio": {"a": 1}, "config": "nope"}'),
    ("put", "/api/field-strategies/a", b'{"strategies": []}'),
    ("put", "/api/field-strategies/a", b'{"strategies": {"": "EXACT"}}'),
    ("put", "/api/field-strategies/-a", b'{"strategies": {"x": "EXACT"}}'),
    ("post", "/api/field-strategies/a/import", b""),
    ("post", "/api/field-strategies/a/import", b"\xff\xfe"),
    ("post", "/api/field-strategies/a/import", b"[" * 50_000 + b"]" * 50_000),  # was a 500
    ("post", "/api/field-strategies/a/import", b" " * (1_000_001)),
    ("delete", "/api/field-strategies/zzz", b""),
]


@pytest.mark.parametrize(("method", "path", "body"), BAD_WRITES)
def test_malformed_writes_get_a_clear_4xx_json_error(
    fresh_client: TestClient, method: str, path: str, body: bytes
) -> None:
    response = fresh_client.request(
        method.upper(), path, content=body, headers={"Content-Type": "application/json"}
    )
    assert 400 <= response.status_code < 500, response.text
    assert response.headers["content-type"] == "application/json"
    assert response.json()["detail"]
    assert fresh_client.get("/api/field-strategies").json() == []  # nothing was saved


@pytest.mark.parametrize(
    ("missing", "message"),
    [
        ("model", "the embedding model is not installed"),
        ("judge", "the judge at http://127.0.0.1:1/v1 cannot be reached (refused)"),
    ],
)
def test_evaluate_without_a_needed_model_or_judge_is_a_503(
    fresh_client: TestClient, monkeypatch: pytest.MonkeyPatch, missing: str, message: str
) -> None:
    from assay.core.extras import ModelUnavailable
    from assay.judge.client import JudgeUnreachable

    def unavailable(*args: Any, **kwargs: Any) -> Any:
        raise (ModelUnavailable if missing == "model" else JudgeUnreachable)(message)

    monkeypatch.setattr("assay.evaluation.runner.evaluate", unavailable)
    body = {"samples": [{"answer": "a"}], "metrics": ["exact_match"], "store": True}
    response = fresh_client.post("/api/evaluate", json=body)
    assert response.status_code == 503
    assert response.json() == {"detail": message}
    (run,) = fresh_client.get("/api/runs").json()
    assert run["status"] == "error"  # the stored run is closed, not left running


# ---- auth ------------------------------------------------------------------------------
@pytest.fixture()
def token_client(tmp_path: Any) -> TestClient:
    return TestClient(
        create_app(Store(str(tmp_path / "auth.db")), token=TOKEN), base_url="http://localhost"
    )


WRITES = (
    ("put", "/api/field-strategies/a", {"json": {"strategies": {"x": "EXACT"}}}),
    ("post", "/api/field-strategies/a/import", {"content": b'{"x": "EXACT"}', "headers": JSON}),
    ("post", "/api/json-eval", {"json": {"gt": {"x": 1}, "output": {"x": 1}}}),
    ("post", "/api/evaluate", {"json": {"samples": [{"answer": "a"}], "metrics": ["bleu"]}}),
    ("post", "/v1/traces", {"content": b'{"resourceSpans": []}', "headers": JSON}),
)


@pytest.mark.parametrize(("method", "path", "kwargs"), WRITES)
def test_writes_need_the_token(
    token_client: TestClient, method: str, path: str, kwargs: dict[str, Any]
) -> None:
    kwargs = dict(kwargs)
    base = kwargs.pop("headers", {})

    def send(headers: dict[str, str] | None = None) -> Any:
        return getattr(token_client, method)(path, headers={**base, **(headers or {})}, **kwargs)

    missing = send()
    assert missing.status_code == 401
    assert missing.headers["www-authenticate"] == "Bearer"
    wrong = send({"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    basic = send({"Authorization": f"Basic {TOKEN}"})
    assert basic.status_code == 401
    ok = send({"Authorization": f"Bearer {TOKEN}"})
    assert ok.status_code == 200, ok.text


def test_every_write_route_is_covered_by_the_token_tests(client: TestClient) -> None:
    import re

    from assay.server.app import WRITE_METHODS

    paths = client.get("/openapi.json").json()["paths"]
    routes = {
        (method, path)
        for path, operations in paths.items()
        for method in operations
        if method.upper() in WRITE_METHODS
    }
    covered = {(m, re.sub(r"/a(?=/|$)", "/{name}", p)) for m, p, _ in WRITES}
    # the labels' writes: test_label_queue.py::test_writes_are_guarded_like_every_write
    labels = {
        ("post", "/api/runs/{run_id}/labels"),
        ("delete", "/api/runs/{run_id}/labels/{label_id}"),
    }
    assert routes == covered | labels | {("delete", "/api/field-strategies/{name}")}


def test_delete_needs_the_token_and_reads_stay_open(token_client: TestClient) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    token_client.put("/api/field-strategies/a", json={"strategies": {"x": "EXACT"}}, headers=auth)
    assert token_client.delete("/api/field-strategies/a").status_code == 401
    for path in ("/api/statistics", "/api/runs", "/api/field-strategies/a", "/", "/runs"):
        assert token_client.get(path).status_code == 200, path
    assert token_client.delete("/api/field-strategies/a", headers=auth).status_code == 204


def test_token_from_environment(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASSAY_API_TOKEN", "from-env")
    client = TestClient(create_app(Store(str(tmp_path / "env.db"))), base_url="http://localhost")
    body = {"strategies": {"x": "EXACT"}}
    assert client.put("/api/field-strategies/a", json=body).status_code == 401
    ok = client.put(
        "/api/field-strategies/a", json=body, headers={"Authorization": "Bearer from-env"}
    )
    assert ok.status_code == 200


def test_no_token_means_open_writes(fresh_client: TestClient) -> None:
    put = fresh_client.put("/api/field-strategies/a", json={"strategies": {"x": "EXACT"}})
    assert put.status_code == 200


# ---- pages: rendering and escaping ------------------------------------------------------
@pytest.mark.parametrize(
    "path",
    [
        "/",
        "/?hours=24",
        "/history",
        "/runs",
        "/runs/run-a",
        "/compare",
        "/compare?a=run-a&b=run-b",
        "/config/field-strategies",
    ],
)
def test_pages_render_and_escape_stored_text(client: TestClient, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    html = response.text
    assert "<script>window.__xss" not in html
    assert 'onerror="window.__xss' not in html
    assert "<img src=x" not in html


@pytest.mark.parametrize(
    "path", ["/", "/history", "/runs", "/compare", "/compare?a=x&b=y", "/config/field-strategies"]
)
def test_pages_on_an_empty_store(fresh_client: TestClient, path: str) -> None:
    response = fresh_client.get(path)
    assert response.status_code == 200
    assert "N/A" in response.text or "No " in response.text or "none yet" in response.text


def test_run_page_shows_payloads_as_text(client: TestClient) -> None:
    html = client.get("/runs/run-a").text
    assert "Paris. &lt;script&gt;window.__xss=1&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=&#34;window.__xss=2&#34;&gt;" in html
    # the evidence (a list of key: value) is escaped too
    escaped_note = (
        '<span class="ev-key">note:</span> '
        '<span class="ev-value">&lt;img src=x onerror=&#34;window.__xss=2&#34;&gt;</span>'
    )
    assert escaped_note in html
    assert XSS_IMG not in html


def test_compare_page_escapes_reflected_selection(client: TestClient) -> None:
    attack = "</script><script>window.__xss=4</script>"
    html = client.get("/compare", params={"a": attack, "b": "run-b"}).text
    assert "<script>window.__xss=4" not in html
    # inside the JSON data block, "<" is written as \u003c by |tojson
    assert "\\u003c/script\\u003e\\u003cscript\\u003ewindow.__xss=4" in html


def test_unknown_run_page_is_404(client: TestClient) -> None:
    response = client.get("/runs/%3Cscript%3Ex")
    assert response.status_code == 404
    assert "&lt;script&gt;x" in response.text


def test_plotly_is_served_locally(client: TestClient) -> None:
    response = client.get("/static/vendor/plotly.min.js")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/javascript")
    assert b"plotly" in response.content[:2000].lower()
    html = client.get("/history").text
    assert '<script src="/static/vendor/plotly.min.js"></script>' in html
    assert "cdn" not in html.lower()


# ---- assay serve ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.0.1", True),
        ("localhost", True),
        ("::1", True),
        ("[::1]", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.5", False),
        ("example.org", False),
    ],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    from assay.cli.serve import is_loopback

    assert is_loopback(host) is loopback


def test_serve_refuses_public_bind_without_token(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import uvicorn

    from assay.cli import app

    monkeypatch.delenv("ASSAY_API_TOKEN", raising=False)
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: calls.append(kw))
    db = str(tmp_path / "serve.db")
    result = CliRunner().invoke(app, ["serve", "--host", "0.0.0.0", "--db", db])
    assert result.exit_code == 2
    assert "ASSAY_API_TOKEN" in result.output
    assert calls == []


def test_serve_binds_with_token_or_on_loopback(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import uvicorn

    from assay.cli import app

    calls: list[tuple[Any, dict[str, Any]]] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: calls.append((app, kw)))
    db = str(tmp_path / "serve.db")
    monkeypatch.delenv("ASSAY_API_TOKEN", raising=False)
    local = CliRunner().invoke(app, ["serve", "--db", db, "--port", "8123"])
    assert local.exit_code == 0, local.output
    assert calls[-1][1]["host"] == "127.0.0.1"
    assert calls[-1][1]["port"] == 8123
    assert calls[-1][0].state.api_token is None
    monkeypatch.setenv("ASSAY_API_TOKEN", "t0k")
    public = CliRunner().invoke(app, ["serve", "--host", "0.0.0.0", "--db", db])
    assert public.exit_code == 0, public.output
    assert calls[-1][1]["host"] == "0.0.0.0"
    assert calls[-1][0].state.api_token == "t0k"


def test_serve_answers_the_hosts_given_with_allowed_host(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import uvicorn

    from assay.cli import app

    calls: list[Any] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: calls.append(app))
    monkeypatch.delenv("ASSAY_ALLOWED_HOSTS", raising=False)
    db = str(tmp_path / "serve.db")
    result = CliRunner().invoke(app, ["serve", "--db", db, "--allowed-host", "evals.example.org"])
    assert result.exit_code == 0, result.output
    client = TestClient(calls[-1], base_url="http://127.0.0.1")
    assert client.get("/api/runs", headers={"Host": "evals.example.org"}).status_code == 200
    assert client.get("/api/runs", headers={"Host": "localhost:8000"}).status_code == 200
    assert client.get("/api/runs", headers={"Host": "rebind.attacker.test"}).status_code == 400


# ---- the same reads on PostgreSQL ----------------------------------------------------------
def _pg_client(stocked: bool) -> Iterator[TestClient]:
    with fresh_postgres("assay_server") as url:
        store = Store(url)
        try:
            if stocked:
                populate(store)
            yield TestClient(create_app(store, token=""), base_url="http://localhost")
        finally:
            store.close()


@pytest.fixture(scope="module")
def pg_client() -> Iterator[TestClient]:
    """The populated store on PostgreSQL (read-only tests)."""
    yield from _pg_client(stocked=True)


@pytest.fixture()
def fresh_pg_client() -> Iterator[TestClient]:
    """An empty PostgreSQL store of its own (for writes)."""
    yield from _pg_client(stocked=False)


@pytest.mark.postgres
def test_reads_on_postgresql(pg_client: TestClient) -> None:
    stats = pg_client.get("/api/statistics").json()
    assert stats["pass_rate"] == pytest.approx(EXPECTED["pass_rate"])
    assert stats["avg_duration"] == pytest.approx(EXPECTED["avg_duration"])
    assert stats["metrics"]["exact_match"]["display"] == EXPECTED["exact_match"]
    assert stats["trends"]["duration"] == pytest.approx(EXPECTED["duration_trend"])
    groups = pg_client.get("/api/runs/run-a/groups", params={"tag": "method"}).json()
    local = next(g for g in groups["groups"] if g["value"] == "local_search")
    assert local["metrics"]["semantic_similarity"]["display"] == 80.0
    assert local["labels"] == {"semantic_similarity": {"CORRECT": 2}}  # JSON ->> on PG
    rows = pg_client.get("/api/compare", params={"a": "run-a", "b": "run-b"}).json()["rows"]
    assert {r["metric"]: r for r in rows}["semantic_similarity"]["diff"] == pytest.approx(0.1)
    history = pg_client.get("/api/history", params={"hours": 48}).json()
    assert [t["total"] for t in history["tests"]] == [4, 4]
    for path in ("/", "/runs/run-a", "/compare?a=run-a&b=run-b", "/history"):
        assert pg_client.get(path).status_code == 200, path


@pytest.mark.postgres
@pytest.mark.parametrize("path", [*BAD_READS, "/api/runs/a%00b", "/api/runs/a%00b/groups"])
def test_malformed_reads_on_postgresql(pg_client: TestClient, path: str) -> None:
    response = pg_client.get(path)  # before: a NUL in a run id was a 500 on PostgreSQL
    assert 400 <= response.status_code < 500, response.text
    assert response.json()["detail"]


@pytest.mark.postgres
def test_evaluate_stores_text_with_nul_on_postgresql(fresh_pg_client: TestClient) -> None:
    body = {
        "samples": [{"answer": "Paris\x00", "expected": "Paris", "id": "nul\x00id"}],
        "metrics": ["exact_match"],
        "store": True,
        "run_name": "with \x00",
    }
    response = fresh_pg_client.post("/api/evaluate", json=body)
    assert response.status_code == 200, response.text  # before: a 500 (psycopg DataError)
    run_id = response.json()["run_id"]
    (sample,) = fresh_pg_client.get(f"/api/runs/{run_id}").json()["samples"]
    assert (sample["id"], sample["response"]) == ("nul\ufffdid", "Paris\ufffd")
