"""One hostile trace never stops live scoring: a trace that fails to assemble, to score
or to be stored is quarantined (an error sample whose error gives the reason, counted and
listed in ``/api/live``, shown on the overview) and the traces after it are scored. Each
case sends its exports over a real socket to ``POST /v1/traces``.

Before: one span whose ``gen_ai.prompt`` held 100,000 ``[`` then 100,000 ``]`` (or whose
key held a 5,000-digit index) left 0 of 6 later traces scored, a traceback every 0.2 s,
and a backlog of 0."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from assay.inputs.otlp.reader import span_of
from assay.inputs.otlp.request import ReceivedSpan
from assay.server.live import running_server
from assay.server.live_scoring import LiveScoring
from assay.store.db import Store
from assay.store.live_traces import live_run_id
from assay.store.models import TestResult
from live_stores import live_app_on, sqlite_or_postgres  # noqa: F401 (the store_url fixture)

HOSTILE = "ffffffffffffffffffffffffffffff01"
GOOD = [f"{i + 1:032x}" for i in range(6)]
SPAN, LATE_SPAN = "1111111111111111", "2222222222222222"
HEADERS = {"content-type": "application/json"}
DEEP_PROMPT = "[" * 100_000 + "]" * 100_000


def _span(trace: str, span: str, prompt: str, **extra: Any) -> dict[str, Any]:
    now = time.time_ns()
    return {
        "traceId": trace,
        "spanId": span,
        "name": "chat",
        "startTimeUnixNano": str(now - 2 * 10**9),
        "endTimeUnixNano": str(now),
        "attributes": [
            {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
            {"key": "gen_ai.prompt", "value": {"stringValue": prompt}},
        ],
        **extra,
    }


def _body(*spans: dict[str, Any], service: str = "bot") -> bytes:
    scope = {"spans": list(spans)}
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]}
    return json.dumps({"resourceSpans": [{"resource": resource, "scopeSpans": [scope]}]}).encode()


@pytest.fixture()
def live_server(tmp_path: Path, store_url: str) -> Any:
    with (
        live_app_on(store_url, tmp_path, ["e2e_latency"], grace_seconds=0) as (app, live, store),
        running_server(app) as url,
        httpx.Client(base_url=url, timeout=30) as client,
    ):
        yield client, live, store


def _rows(store: Store) -> dict[str, tuple[str, str | None, int]]:
    """sample id -> (status, error, number of scores) of the live run ``live/bot``."""
    with store.session() as session:
        rows = session.scalars(select(TestResult).where(TestResult.run_id == live_run_id("bot")))
        return {r.sample_id: (r.status, r.error, len(r.scores)) for r in rows}


def _send_good(client: httpx.Client) -> None:
    for trace in GOOD:
        answer = client.post("/v1/traces", content=_body(_span(trace, SPAN, "hi")), headers=HEADERS)
        assert answer.status_code == 200


def _quarantines_the_hostile_and_scores_the_good(
    client: httpx.Client, live: LiveScoring, store: Store, reason: str
) -> None:
    """Post the trace ``HOSTILE``, then the good ones; one round takes all 7: ``HOSTILE``
    is quarantined with ``reason`` and the 6 others are scored."""
    hostile = _body(_span(HOSTILE, SPAN, "hi"))
    assert client.post("/v1/traces", content=hostile, headers=HEADERS).status_code == 200
    _send_good(client)
    assert live.run_once(now_offset=1) == 7
    rows = _rows(store)
    assert rows.pop(HOSTILE) == ("error", f"quarantined: {reason}", 0)
    assert rows == {trace: ("ungated", None, 1) for trace in GOOD}


def _refuse_to_store_the_hostile(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``store.record_many`` raise on any batch holding a scored (not error) row of
    ``HOSTILE``: 'a value the database refuses'."""
    real = store.record_many

    def record_many(rows: list[dict[str, Any]], then: Any = None) -> None:
        if any(r["sample"].id == HOSTILE and r["status"] != "error" for r in rows):
            raise ValueError("a value the database refuses")
        real(rows, then=then)

    monkeypatch.setattr(store, "record_many", record_many)


def test_a_prompt_nested_100000_deep_is_quarantined_and_6_of_6_later_traces_are_scored(
    live_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    client, live, store = live_server
    hostile = client.post(
        "/v1/traces", content=_body(_span(HOSTILE, SPAN, DEEP_PROMPT)), headers=HEADERS
    )
    assert hostile.status_code == 200  # a JSON-looking text is only read by the worker
    _send_good(client)
    assert live.backlog == 7  # counted at ingest, before any round
    with caplog.at_level(logging.WARNING, logger="assay.live"):
        assert live.run_once(now_offset=1) == 7
        assert live.run_once(now_offset=1) == 0  # never retried in a loop
    reason = "the trace does not assemble: SpanOverLimit: gen_ai.prompt nests deeper than 64 levels"
    rows = _rows(store)
    assert rows.pop(HOSTILE) == ("error", f"quarantined: {reason}", 0)
    assert rows == {trace: ("ungated", None, 1) for trace in GOOD}
    assert [r.getMessage() for r in caplog.records] == [f"trace {HOSTILE} quarantined: {reason}"]
    assert not any(r.exc_info for r in caplog.records)
    status = client.get("/api/live").json()
    assert (status["pending"], status["scored"], status["quarantined"]) == (0, 6, 1)
    assert status["quarantine"] == [
        {
            "trace_id": HOSTILE,
            "service": "bot",
            "run_id": live_run_id("bot"),
            "sample_index": 0,
            "reason": reason,
        }
    ]
    assert live.backlog == 0
    page = client.get("/").text
    assert 'id="live-quarantine"' in page and "1 received traces failed" in page
    assert "gen_ai.prompt nests deeper than 64 levels" in page
    # a new span of the quarantined trace makes it due once more: tried once, set aside again
    late = _body(_span(HOSTILE, LATE_SPAN, "fine", parentSpanId=SPAN))
    assert client.post("/v1/traces", content=late, headers=HEADERS).status_code == 200
    assert live.backlog == 1
    assert live.run_once(now_offset=1) == 1
    assert live.run_once(now_offset=1) == 0
    assert _rows(store)[HOSTILE] == ("error", f"quarantined: {reason}", 0)
    assert client.get("/api/live").json()["quarantined"] == 1


def test_a_5000_digit_index_is_refused_at_the_door_and_read_safely_when_stored(
    live_server: Any,
) -> None:
    client, live, store = live_server
    key = "gen_ai.prompt." + "9" * 5000 + ".content"
    span = _span(HOSTILE, SPAN, "hi")
    span["attributes"].append({"key": key, "value": {"stringValue": "x"}})
    answer = client.post("/v1/traces", content=_body(span), headers=HEADERS)
    assert answer.status_code == 400
    assert "an attribute key of 5022 characters" in answer.json()["detail"]
    # a span stored without the receiver's checks (an older server's): the index is not
    # read, the key is kept among the step's attributes, and the trace is scored
    raw = _span(HOSTILE, SPAN, "hi")
    raw["attributes"].append({"key": key, "value": {"stringValue": "x"}})
    resource = {"service.name": "bot"}
    live.traces.ingest([ReceivedSpan(span_of(raw, resource), raw, resource, "bot")])
    _send_good(client)
    assert live.run_once(now_offset=1) == 7
    assert _rows(store) == {trace: ("ungated", None, 1) for trace in [HOSTILE, *GOOD]}
    assert client.get("/api/live").json()["quarantined"] == 0


def test_a_trace_whose_scoring_raises_is_quarantined_and_the_others_scored(
    live_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import assay.evaluation.runner as runner

    client, live, store = live_server
    real = runner.evaluate

    def evaluate(samples: list[Any], **kwargs: Any) -> Any:
        if any(s.id == HOSTILE for s in samples):
            raise RecursionError("maximum recursion depth exceeded")
        return real(samples, **kwargs)

    monkeypatch.setattr(runner, "evaluate", evaluate)
    reason = "scoring failed: RecursionError: maximum recursion depth exceeded"
    _quarantines_the_hostile_and_scores_the_good(client, live, store, reason)
    assert (live.scored, live.quarantined) == (6, 1)


def test_a_trace_that_cannot_be_stored_is_quarantined_and_its_batch_stored(
    live_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    client, live, store = live_server
    _refuse_to_store_the_hostile(store, monkeypatch)
    reason = "the trace cannot be stored: ValueError: a value the database refuses"
    _quarantines_the_hostile_and_scores_the_good(client, live, store, reason)
    assert live.run_once(now_offset=1) == 0


def test_the_worker_thread_survives_a_prompt_nested_400000_deep(live_server: Any) -> None:
    """In the worker's own thread (a smaller stack than the main one): orjson 3.8 parsing
    such a value there crashed the whole process."""
    client, live, store = live_server
    deep = "[" * 400_000 + "]" * 400_000
    hostile = _body(_span(HOSTILE, SPAN, deep))
    assert client.post("/v1/traces", content=hostile, headers=HEADERS).status_code == 200
    _send_good(client)
    live.start()
    deadline = time.monotonic() + 30
    while live.traces.counts()["pending"]:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    rows = _rows(store)
    assert rows.pop(HOSTILE)[0:2] == (
        "error",
        "quarantined: the trace does not assemble: SpanOverLimit: gen_ai.prompt nests "
        "deeper than 64 levels",
    )
    assert rows == {trace: ("ungated", None, 1) for trace in GOOD}
    assert live.last_error is None


def test_a_scored_trace_whose_new_version_cannot_be_stored_is_quarantined_in_its_sample(
    live_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    client, live, store = live_server
    first = _body(_span(HOSTILE, SPAN, "hi"))
    assert client.post("/v1/traces", content=first, headers=HEADERS).status_code == 200
    assert live.run_once(now_offset=1) == 1
    assert _rows(store) == {HOSTILE: ("ungated", None, 1)}
    _refuse_to_store_the_hostile(store, monkeypatch)
    late = _body(_span(HOSTILE, LATE_SPAN, "more", parentSpanId=SPAN))
    assert client.post("/v1/traces", content=late, headers=HEADERS).status_code == 200
    assert live.run_once(now_offset=1) == 1
    reason = "the trace cannot be stored: ValueError: a value the database refuses"
    assert _rows(store) == {HOSTILE: ("error", f"quarantined: {reason}", 0)}  # the same sample
    assert (live.quarantined, live._held) == (1, {})


def test_a_service_name_of_300_characters_is_scored_into_a_run_named_within_256(
    live_server: Any,
) -> None:
    """On PostgreSQL the run's name ('live/' and 300 characters) did not fit its column:
    every round failed on it, and no trace of any service was scored."""
    client, live, _ = live_server
    long_name = "s" * 300
    body = _body(_span(HOSTILE, SPAN, "hi"), service=long_name)
    assert client.post("/v1/traces", content=body, headers=HEADERS).status_code == 200
    _send_good(client)
    assert live.run_once(now_offset=1) == 7
    assert (live.scored, live.last_error) == (7, None)
    run = client.get(f"/api/runs/{live_run_id(long_name[:256])}").json()["run"]
    assert run["name"] == "live/" + "s" * 251


def test_a_service_whose_run_cannot_start_is_held_and_the_others_scored(
    live_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    client, live, store = live_server
    real = store.start_run

    def start_run(run_id: str, **kwargs: Any) -> str:
        if kwargs["name"] == "live/broken":
            raise ValueError("a run the database refuses")
        return real(run_id, **kwargs)

    monkeypatch.setattr(store, "start_run", start_run)
    body = _body(_span(HOSTILE, SPAN, "hi"), service="broken")
    assert client.post("/v1/traces", content=body, headers=HEADERS).status_code == 200
    _send_good(client)
    assert live.run_once(now_offset=1) == 7
    assert live.run_once(now_offset=1) == 0  # held for a minute, not retried in a loop
    assert live.scored == 6
    assert live.last_error == (
        "the run of service 'broken' cannot be stored: ValueError: a run the database refuses"
    )
    assert live.backlog == 1  # still waiting: the queue limit counts it
    assert _rows(store) == {trace: ("ungated", None, 1) for trace in GOOD}


def test_a_trace_whose_row_cannot_be_made_is_quarantined_and_the_others_scored(
    live_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from assay.store.recorder import RunRecorder

    client, live, store = live_server
    real = RunRecorder.row

    def row(self: RunRecorder, index: int, sample: Any, results: dict) -> dict[str, Any]:
        if sample.id == HOSTILE:
            raise TypeError("a check that does not expect this sample")
        return real(self, index, sample, results)

    monkeypatch.setattr(RunRecorder, "row", row)
    reason = "the trace cannot be stored: TypeError: a check that does not expect this sample"
    _quarantines_the_hostile_and_scores_the_good(client, live, store, reason)
