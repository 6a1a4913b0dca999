"""The JSON API's reads and its errors: statistics, runs, comparison, the metrics catalogue
and the OpenAPI document; malformed reads and writes get a clear 4xx JSON error (never a
500) and scoring without a needed model or judge is a 503; and the same reads on
PostgreSQL.

The store is populated by `browser_conftest.populate`; every expected number is worked
out by hand there (EXPECTED) or in the comment beside the assertion. Scoring and the
field-strategy configurations are in tests/test_server_scoring.py, auth and ``assay
serve`` in tests/test_server_auth.py, the pages in tests/test_server_pages.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from assay.server import create_app
from assay.store.db import Store

pytest_plugins = ["browser_conftest", "tests.server_api_helpers"]
pytest.register_assert_rewrite("browser_conftest", "tests.server_api_helpers")

from browser_conftest import EXPECTED, XSS_SCRIPT, populate  # noqa: E402
from pg_databases import fresh_postgres  # noqa: E402


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
