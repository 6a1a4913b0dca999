"""Live evaluation: ``POST /v1/traces`` receives OTLP/HTTP exports (here from the real
OpenTelemetry SDK and its protobuf exporter, from a JSON export and from OpenInference
attributes), stores the spans before it answers, and the worker scores each completed
trace into the run ``live/<service.name>``.

Metrics whose values follow from the spans by hand: ``e2e_latency`` (the root span's
duration in ms) and ``tool_call_count`` (the tool spans)."""

from __future__ import annotations

import gzip
import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from sqlalchemy import select

import assay
from assay.core.config import AssayConfig
from assay.engine.resources import Resources
from assay.metrics.registry import resolve_metrics
from assay.server.app import create_app
from assay.server.live import running_server
from assay.server.live_scoring import LiveScoring, sampled_in
from assay.store.db import Store
from assay.store.live_traces import live_run_id
from assay.store.models import LiveTrace, TestResult
from live_stores import live_app_on, sqlite_or_postgres  # noqa: F401 (the store_url fixture)

ROOT = Path(__file__).resolve().parent.parent
METRICS = ["e2e_latency", "tool_call_count"]
QUESTION = "What is the capital of France?"
ANSWER = "Paris is the capital of France."
DOCUMENTS = ["Paris is the capital and largest city of France.", "France is in Europe."]


@pytest.fixture()
def live_app(tmp_path: Path, store_url: str) -> Any:
    with live_app_on(store_url, tmp_path, METRICS, grace_seconds=0.5) as made:
        yield made


def _stored(store: Store, service: str) -> list[tuple[TestResult, dict[str, float | None]]]:
    with store.session() as session:
        rows = session.scalars(
            select(TestResult)
            .where(TestResult.run_id == live_run_id(service))
            .order_by(TestResult.sample_index)
        )
        return [(row, {s.metric_name: s.metric_value for s in row.scores}) for row in rows]


def _toy_rag(tracer: Any, question: str, answer: str) -> None:
    """A retrieval-augmented answer, instrumented with OpenInference attributes."""
    with tracer.start_as_current_span(
        "rag", attributes={"openinference.span.kind": "CHAIN", "input.value": question}
    ) as root:
        retriever = {"openinference.span.kind": "RETRIEVER", "input.value": question}
        for i, text in enumerate(DOCUMENTS):
            retriever[f"retrieval.documents.{i}.document.content"] = text
        with tracer.start_as_current_span("retrieve", attributes=retriever):
            time.sleep(0.002)
        with tracer.start_as_current_span(
            "lookup", attributes={"openinference.span.kind": "TOOL", "tool.name": "atlas"}
        ):
            pass
        with tracer.start_as_current_span(
            "llm",
            attributes={
                "openinference.span.kind": "LLM",
                "llm.model_name": "toy-1",
                "llm.input_messages.0.message.role": "user",
                "llm.input_messages.0.message.content": question,
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.content": answer,
            },
        ):
            time.sleep(0.002)
        root.set_attribute("output.value", answer)


def test_the_sdk_exporter_sends_spans_that_become_one_scored_sample(live_app: Any) -> None:
    app, live, store = live_app
    with running_server(app) as url:
        provider = TracerProvider(resource=Resource.create({"service.name": "toy-rag"}))
        # each span is exported as it ends, in its own request: the children first
        provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(f"{url}/v1/traces")))
        memory = InMemorySpanExporter()
        provider.add_span_processor(SimpleSpanProcessor(memory))
        _toy_rag(provider.get_tracer("toy"), QUESTION, ANSWER)
        provider.shutdown()
        # acknowledged means stored: four spans of one trace, waiting for the grace period
        assert live.traces.counts() == {"spans": 4, "traces": 1, "pending": 1}
        assert live.run_once() == 0
        assert live.run_once(now_offset=1.0) == 1
    root = next(s for s in memory.get_finished_spans() if s.parent is None)
    trace_id = f"{root.context.trace_id:032x}"
    ((row, scores),) = _stored(store, "toy-rag")
    assert (row.sample_id, row.query, row.response) == (trace_id, QUESTION, ANSWER)
    assert scores == {
        "e2e_latency": pytest.approx((root.end_time - root.start_time) / 1e6),
        "tool_call_count": 1.0,
    }
    assert [(step["kind"], step["name"]) for step in row.trace] == [
        ("tool", "atlas"),
        ("llm", "toy-1"),
    ]
    assert row.tags == {"model": "toy-1", "service": "toy-rag"}
    # the history reads the live run hour by hour: this hour's mean is the one value
    history = TestClient(app, base_url="http://127.0.0.1").get("/api/history").json()
    assert [point["avg"] for point in history["metrics"]["e2e_latency"]] == [
        pytest.approx(scores["e2e_latency"])
    ]
    assert [point["total"] for point in history["tests"]] == [1]
    assert live.backlog == 0
    status = TestClient(app, base_url="http://127.0.0.1").get("/api/live").json()
    assert status == {
        **{"spans": 4, "traces": 1, "pending": 0, "quarantined": 0, "quarantine": []},
        **{"scoring": True, "scored": 1, "sampled_out": 0, "unscored": 0},
        **{"metrics": METRICS, "sample_rate": 1.0, "grace_seconds": 0.5, "queue_limit": 10_000},
        **{"rules": [], "warnings": [], "webhook": None, "webhook_queue": None, "monitors": []},
        "last_error": None,
    }


def _json_export(tmp_path: Path) -> tuple[dict[str, Any], Path]:
    """The example OTLP export with protocol-conformant ids and present-day times."""
    document = json.loads((ROOT / "examples" / "traces.otlp.json").read_text())
    shift = time.time_ns() - 10**12
    ids: dict[str, str] = {}

    def hex_id(value: str, digits: int) -> str:
        return ids.setdefault(value, f"{len(ids) + 1:0{digits}x}")

    for resource_spans in document["resourceSpans"]:
        for scope_spans in resource_spans["scopeSpans"]:
            for span in scope_spans["spans"]:
                span["spanId"] = hex_id(span["spanId"], 16)
                if span.get("parentSpanId"):
                    span["parentSpanId"] = hex_id(span["parentSpanId"], 16)
                for key in ("startTimeUnixNano", "endTimeUnixNano"):
                    span[key] = str(int(span[key]) + shift)
    path = tmp_path / "export.otlp.json"
    path.write_text(json.dumps(document))
    return document, path


def test_a_json_export_gzipped_reads_as_the_file_reader_reads_it(
    live_app: Any, tmp_path: Path
) -> None:
    app, live, store = live_app
    document, path = _json_export(tmp_path)
    client = TestClient(app, base_url="http://127.0.0.1")
    body = gzip.compress(json.dumps(document).encode())
    headers = {"content-type": "application/json", "content-encoding": "gzip"}
    answer = client.post("/v1/traces", content=body, headers=headers)
    assert (answer.status_code, answer.json()) == (200, {})
    assert client.post("/v1/traces", content=body, headers=headers).status_code == 200
    assert live.traces.counts()["spans"] == sum(
        len(s["spans"]) for r in document["resourceSpans"] for s in r["scopeSpans"]
    )  # the retried export stored nothing twice
    assert live.run_once(now_offset=1.0) == 2
    expected, _ = assay.read_samples(path)
    found = {row.sample_id: row for row, _ in _stored(store, "weather-bot")}
    assert sorted(found) == sorted(s.id for s in expected)
    for sample in expected:
        row = found[sample.id]
        assert (row.query, row.response) == (sample.query, sample.response)
        assert row.duration == pytest.approx(sample.duration)
    # a live run's page shows its newest traces first
    detail = client.get(f"/api/runs/{live_run_id('weather-bot')}").json()
    assert [s["index"] for s in detail["samples"]] == [1, 0]
    assert detail["run"]["name"] == "live/weather-bot"


def _span(trace: str, span: str, parent: str | None = None, **extra: Any) -> dict[str, Any]:
    now = time.time_ns()
    raw = {"traceId": trace, "spanId": span, "name": "step"}
    raw |= {"startTimeUnixNano": str(now - 10**9), "endTimeUnixNano": str(now)}
    if parent:
        raw["parentSpanId"] = parent
    return raw | extra


def _export(*spans: dict[str, Any], service: str = "svc") -> bytes:
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]}
    return json.dumps(
        {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": list(spans)}]}]}
    ).encode()


TRACE = "5b8efff798038103d269b633813fc60c"
ROOT_SPAN, CHILD, LATE = "eee19b7ec3c1b174", "eee19b7ec3c1b173", "eee19b7ec3c1b172"


def test_a_late_span_scores_its_trace_again_into_the_same_sample(live_app: Any) -> None:
    app, live, store = live_app
    client = TestClient(app, base_url="http://127.0.0.1")
    headers = {"content-type": "application/json"}
    tool = {
        "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}}]
    }
    first = _export(_span(TRACE, ROOT_SPAN), _span(TRACE, CHILD, ROOT_SPAN, **tool))
    assert client.post("/v1/traces", content=first, headers=headers).status_code == 200
    assert live.run_once(now_offset=1.0) == 1
    ((_, scores),) = _stored(store, "svc")
    assert scores["tool_call_count"] == 1.0
    late = _export(_span(TRACE, LATE, ROOT_SPAN, **tool))
    assert client.post("/v1/traces", content=late, headers=headers).status_code == 200
    assert live.run_once(now_offset=1.0) == 1
    ((row, scores),) = _stored(store, "svc")  # one sample, replaced: two tool calls now
    assert (row.sample_index, scores["tool_call_count"]) == (0, 2.0)
    with store.session() as session:
        trace = session.get(LiveTrace, TRACE)
        assert (trace.version, trace.scored_version, trace.pending) == (2, 2, False)


@pytest.mark.parametrize(
    ("body", "headers", "status", "says"),
    [
        (b"{not json", {"content-type": "application/json"}, 400, "not valid JSON"),
        (b"\x0a\xff\xff\xff", {"content-type": "application/x-protobuf"}, 400, "protobuf"),
        (_export({"name": "no ids"}), {"content-type": "application/json"}, 400, "no spanId"),
        (
            _export(_span(TRACE, ROOT_SPAN) | {"startTimeUnixNano": "5"}),
            {"content-type": "application/json"},
            400,
            "not plausible",
        ),
        (
            _export(_span("00" * 16, ROOT_SPAN)),
            {"content-type": "application/json"},
            400,
            "traceId is not 32 hex digits",
        ),
        (b"x", {"content-type": "text/plain"}, 415, "application/x-protobuf"),
        (
            gzip.compress(b" " * 70_000),
            {"content-type": "application/json", "content-encoding": "gzip"},
            413,
            "once decompressed",
        ),
        (b"{}" + b" " * 70_000, {"content-type": "application/json"}, 413, "over"),
        (
            b"\x1f\x8b\x08garbage",
            {"content-type": "application/json", "content-encoding": "gzip"},
            400,
            "gzip",
        ),
    ],
)
def test_bad_exports_get_a_4xx_that_says_why(
    tmp_path: Path, body: bytes, headers: dict[str, str], status: int, says: str
) -> None:
    store = Store(f"sqlite:///{tmp_path / 'bad.db'}")
    app = create_app(store, max_body_bytes=64_000)
    answer = TestClient(app, base_url="http://127.0.0.1").post(
        "/v1/traces", content=body, headers=headers
    )
    assert answer.status_code == status, answer.text
    assert says in answer.json()["detail"]
    store.close()


def test_a_partial_success_counts_the_rejected_spans(live_app: Any) -> None:
    app, live, _ = live_app
    client = TestClient(app, base_url="http://127.0.0.1")
    body = _export(_span(TRACE, ROOT_SPAN), {"spanId": CHILD, "name": "no trace id"})
    answer = client.post("/v1/traces", content=body, headers={"content-type": "application/json"})
    assert answer.status_code == 200
    assert answer.json() == {
        "partialSuccess": {
            "rejectedSpans": "1",
            "errorMessage": f"span {CHILD}: span has no traceId",
        }
    }
    assert live.traces.counts()["spans"] == 1


def test_writes_need_the_token_and_a_full_queue_answers_503(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'q.db'}")
    config = AssayConfig(cache_dir=str(tmp_path), live_grace_seconds=0, live_queue_limit=1)
    resources = Resources(config)
    live = LiveScoring(store, config, [], resources)
    app = create_app(store, token="s3cret-token", resources=resources, live=live)
    client = TestClient(app, base_url="http://127.0.0.1")
    headers = {"content-type": "application/json"}
    body = _export(_span(TRACE, ROOT_SPAN))
    assert client.post("/v1/traces", content=body, headers=headers).status_code == 401
    headers["authorization"] = "Bearer s3cret-token"
    assert client.post("/v1/traces", content=body, headers=headers).status_code == 200
    live.run_once(now_offset=-60)  # nothing due yet: the backlog is read, 1 trace
    other = _export(_span("6b8efff798038103d269b633813fc60c", ROOT_SPAN))
    behind = client.post("/v1/traces", content=other, headers=headers)
    assert (behind.status_code, behind.headers["retry-after"]) == (503, "5")
    assert "1 traces are waiting" in behind.json()["detail"]
    assert live.run_once(now_offset=1) == 1  # stored without scores (no live metrics)
    assert client.post("/v1/traces", content=other, headers=headers).status_code == 200
    ((row, scores),) = _stored(store, "svc")
    assert (row.sample_id, scores) == (TRACE, {})
    resources.close()
    store.close()


def test_the_sample_rate_chooses_traces_by_id() -> None:
    assert sampled_in("7fffffff" + "0" * 24, 0.5) is True
    assert sampled_in("80000000" + "0" * 24, 0.5) is False
    assert sampled_in("ffffffff" + "0" * 24, 1.0) is True
    assert sampled_in("00000000" + "1" * 24, 0.0) is False


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _serve(db: Path, port: int, cache: Path) -> Any:
    import os
    import subprocess
    import sys

    command = [sys.executable, "-m", "assay.cli", "serve", "--port", str(port)]
    command += ["--db", f"sqlite:///{db}", "--live-metrics", ",".join(METRICS)]
    command += ["--live-grace", "0.3", "--log-level", "warning"]
    child = subprocess.Popen(
        command,
        env=dict(os.environ, ASSAY_CACHE_DIR=str(cache)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    import httpx

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/runs", timeout=1).status_code == 200:
                return child
        except httpx.TransportError:
            time.sleep(0.1)
    child.kill()
    raise AssertionError("assay serve did not start in 60 s")


def test_traces_acknowledged_before_a_sigkill_are_all_scored_after_the_restart(
    tmp_path: Path,
) -> None:
    db, port = tmp_path / "live.db", _free_port()
    server = _serve(db, port, tmp_path / "cache")
    try:
        provider = TracerProvider(resource=Resource.create({"service.name": "toy-rag"}))
        provider.add_span_processor(
            SimpleSpanProcessor(OTLPSpanExporter(f"http://127.0.0.1:{port}/v1/traces"))
        )
        memory = InMemorySpanExporter()
        provider.add_span_processor(SimpleSpanProcessor(memory))
        tracer = provider.get_tracer("toy")
        for i in range(12):
            _toy_rag(tracer, f"{QUESTION} ({i})", ANSWER)
        provider.force_flush()
    finally:
        server.kill()  # SIGKILL, right after the last span was acknowledged
        server.wait()
    roots = {f"{s.context.trace_id:032x}": s for s in memory.get_finished_spans() if not s.parent}
    assert len(roots) == 12
    server = _serve(db, port, tmp_path / "cache")
    try:
        store = Store(f"sqlite:///{db}")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            rows = _stored(store, "toy-rag")
            if len(rows) == 12 and all(scores for _, scores in rows):
                break
            time.sleep(0.2)
        store.close()
    finally:
        server.kill()
        server.wait()
    assert sorted(row.sample_id for row, _ in rows) == sorted(roots)
    for row, scores in rows:
        root = roots[row.sample_id]
        assert scores["e2e_latency"] == pytest.approx((root.end_time - root.start_time) / 1e6)


def test_without_a_worker_the_receiver_only_stores(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'ingest.db'}")
    client = TestClient(create_app(store), base_url="http://127.0.0.1")
    body = _export(_span(TRACE, ROOT_SPAN), _span(TRACE, CHILD, ROOT_SPAN))
    answer = client.post("/v1/traces", content=body, headers={"content-type": "application/json"})
    assert answer.status_code == 200
    status = client.get("/api/live").json()
    assert status == {
        **{"spans": 2, "traces": 1, "pending": 1, "quarantined": 0, "quarantine": []},
        **{"scoring": False, "metrics": [], "monitors": []},
    }
    store.close()


def test_the_backlog_is_counted_at_ingest_so_the_limit_holds_during_a_slow_round(
    tmp_path: Path,
) -> None:
    """Before: the count was read only when a round ended; with ``queue_limit=3`` and a
    round that had not ended, 200 exports got 200 and 201 traces were pending."""
    store = Store(f"sqlite:///{tmp_path / 'q3.db'}")
    config = AssayConfig(cache_dir=str(tmp_path), live_grace_seconds=0, live_queue_limit=3)
    resources = Resources(config)
    live = LiveScoring(store, config, [], resources)  # its round never runs: infinitely slow
    app = create_app(store, resources=resources, live=live)
    with running_server(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        codes = [
            client.post(
                "/v1/traces",
                content=_export(_span(f"{i + 1:032x}", ROOT_SPAN)),
                headers={"content-type": "application/json"},
            ).status_code
            for i in range(200)
        ]
        assert codes == [200] * 3 + [503] * 197
        assert live.traces.counts()["pending"] == 3
        assert live.run_once(now_offset=1) == 3  # the round ends: room again
        assert live.backlog == 0
        again = client.post(
            "/v1/traces",
            content=_export(_span(f"{201:032x}", ROOT_SPAN)),
            headers={"content-type": "application/json"},
        )
        assert again.status_code == 200
        assert live.backlog == 1
    resources.close()
    store.close()


def test_api_live_counts_the_traces_scored_and_those_the_sample_rate_left_out(
    tmp_path: Path,
) -> None:
    """Before: with a sample rate of 0.25, 7 of 20 traces were scored and /api/live said
    ``scored: 20``. Ids are chosen so that 7 fall under 0.25 (first 8 hex digits below
    0x40000000)."""
    store = Store(f"sqlite:///{tmp_path / 'rate.db'}")
    config = AssayConfig(cache_dir=str(tmp_path), live_grace_seconds=0, live_sample_rate=0.25)
    resources = Resources(config)
    live = LiveScoring(store, config, resolve_metrics(["e2e_latency"]), resources)
    ids = [f"{i % 4:x}{i + 1:031x}" for i in range(7)]
    ids += [f"{4 + i % 12:x}{i + 1:031x}" for i in range(13)]
    assert sum(sampled_in(t, 0.25) for t in ids) == 7
    client = TestClient(
        create_app(store, resources=resources, live=live), base_url="http://127.0.0.1"
    )
    for trace in ids:
        answer = client.post(
            "/v1/traces",
            content=_export(_span(trace, ROOT_SPAN)),
            headers={"content-type": "application/json"},
        )
        assert answer.status_code == 200
    assert live.run_once(now_offset=1) == 20
    status = client.get("/api/live").json()
    assert (status["scored"], status["sampled_out"], status["unscored"]) == (7, 13, 0)
    stored = _stored(store, "svc")
    assert sorted(len(scores) for _, scores in stored) == [0] * 13 + [1] * 7
    resources.close()
    store.close()
