"""The receiver's limits on what a span may hold (`assay.inputs.otlp.limits`), each sent
over a real socket to ``POST /v1/traces``: a span over a limit is rejected with its
reason (400 when it is the export's only span, a partial success beside a good span),
never a 5xx; the good spans of the same export are stored. And a hypothesis fuzz of
hostile attributes, JSON and protobuf, after which the worker still scores good traces."""

from __future__ import annotations

import json
import logging
import resource
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assay.core.config import AssayConfig
from assay.engine.resources import Resources
from assay.inputs.otlp import read_otlp
from assay.inputs.otlp.limits import (
    MAX_ATTRIBUTES,
    MAX_EVENTS,
    MAX_INDEX,
    MAX_KEY_CHARS,
    MAX_VALUE_CHARS,
    MAX_VALUE_DEPTH,
)
from assay.metrics.registry import resolve_metrics
from assay.server.app import create_app
from assay.server.live import running_server
from assay.server.live_scoring import LiveScoring
from assay.store.db import Store
from assay.store.live_traces import LiveTraces

GOOD_SPAN = "1111111111111111"
BAD_SPAN = "2222222222222222"
TRACE = "5b8efff798038103d269b633813fc60c"
JSON_HEADERS = {"content-type": "application/json"}


def _string(key: str, value: str) -> dict[str, Any]:
    return {"key": key, "value": {"stringValue": value}}


def _span(trace: str, span: str, attributes: list[Any], **extra: Any) -> dict[str, Any]:
    now = time.time_ns()
    return {
        "traceId": trace,
        "spanId": span,
        "name": "chat",
        "startTimeUnixNano": str(now - 10**9),
        "endTimeUnixNano": str(now),
        "attributes": attributes,
        **extra,
    }


def _export(*spans: dict[str, Any], resource_attributes: list[Any] | None = None) -> bytes:
    attributes = resource_attributes or [_string("service.name", "svc")]
    return json.dumps(
        {
            "resourceSpans": [
                {"resource": {"attributes": attributes}, "scopeSpans": [{"spans": list(spans)}]}
            ]
        }
    ).encode()


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"stringValue": "leaf"}
    for _ in range(depth):
        value = {"arrayValue": {"values": [value]}}
    return value


CHAT = _string("gen_ai.operation.name", "chat")
OVER_LIMITS = [
    (
        [_string("k" * (MAX_KEY_CHARS + 1), "v")],
        f"an attribute key of {MAX_KEY_CHARS + 1} characters",
    ),
    (
        [_string("gen_ai.prompt", "x" * (MAX_VALUE_CHARS + 1))],
        f"the value of 'gen_ai.prompt' holds {MAX_VALUE_CHARS + 1} characters",
    ),
    (
        [{"key": "deep", "value": _nested(MAX_VALUE_DEPTH + 1)}],
        f"an attribute value nests arrays or kvlists over {MAX_VALUE_DEPTH} deep",
    ),
    (
        [_string(f"a{i}", "v") for i in range(MAX_ATTRIBUTES + 1)],
        f"the span has {MAX_ATTRIBUTES + 1} attributes, over the limit of {MAX_ATTRIBUTES}",
    ),
    (
        [_string(f"gen_ai.prompt.{MAX_INDEX + 1}.content", "hi")],
        f"whose index is over the limit of {MAX_INDEX}",
    ),
    (
        [_string("gen_ai.prompt." + "9" * 900 + ".content", "hi")],
        f"whose index is over the limit of {MAX_INDEX}",
    ),
    (
        [{"key": "n", "value": {"intValue": "9" * 5000}}],
        "intValue is not a 64-bit integer",
    ),
    (
        [{"key": "n", "value": {"intValue": str(2**63)}}],
        "intValue is not a 64-bit integer",
    ),
    (
        [{"key": "n", "value": {"stringValue": [[["not text"]]]}}],
        "a stringValue is not text",
    ),
]


@pytest.fixture()
def receiver(tmp_path: Path) -> Any:
    store = Store(f"sqlite:///{tmp_path / 'limits.db'}")
    app = create_app(store, max_body_bytes=64 * 1024 * 1024)
    with running_server(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        yield client, store
    store.close()


@pytest.mark.parametrize(("attributes", "says"), OVER_LIMITS)
def test_a_span_over_a_limit_is_rejected_with_the_reason_and_the_good_one_kept(
    receiver: Any, attributes: list[Any], says: str
) -> None:
    client, store = receiver
    alone = client.post(
        "/v1/traces", content=_export(_span(TRACE, BAD_SPAN, attributes)), headers=JSON_HEADERS
    )
    assert alone.status_code == 400
    assert alone.json()["detail"].startswith(f"every span was rejected (1): span {BAD_SPAN}: ")
    assert says in alone.json()["detail"]
    both = _export(_span(TRACE, BAD_SPAN, attributes), _span(TRACE, GOOD_SPAN, [CHAT]))
    answer = client.post("/v1/traces", content=both, headers=JSON_HEADERS)
    assert answer.status_code == 200
    partial = answer.json()["partialSuccess"]
    assert partial["rejectedSpans"] == "1" and says in partial["errorMessage"]
    assert LiveTraces(store).counts() == {"spans": 1, "traces": 1, "pending": 1}


def test_events_and_resources_are_held_to_the_same_limits(receiver: Any) -> None:
    client, _ = receiver
    events = [{"name": "e", "timeUnixNano": "1"} for _ in range(MAX_EVENTS + 1)]
    answer = client.post(
        "/v1/traces",
        content=_export(_span(TRACE, BAD_SPAN, [], events=events)),
        headers=JSON_HEADERS,
    )
    assert answer.status_code == 400
    assert (
        f"the span has {MAX_EVENTS + 1} events, over the limit of {MAX_EVENTS}"
        in (answer.json()["detail"])
    )
    for span, says in [
        (_span(TRACE, BAD_SPAN, [], name="n" * 1025), "the span's name has 1025 characters"),
        (
            _span(TRACE, BAD_SPAN, [], events=[{"name": "n" * 1025}]),
            "an event's name has 1025 characters",
        ),
    ]:
        answer = client.post("/v1/traces", content=_export(span), headers=JSON_HEADERS)
        assert answer.status_code == 400
        assert f"{says}, over the limit of {MAX_KEY_CHARS}" in answer.json()["detail"]
    event = {"name": "prompt", "attributes": [_string("k" * (MAX_KEY_CHARS + 1), "v")]}
    answer = client.post(
        "/v1/traces",
        content=_export(_span(TRACE, BAD_SPAN, [], events=[event])),
        headers=JSON_HEADERS,
    )
    assert answer.status_code == 400
    assert "its event 'prompt' has an attribute key of 1025 characters" in answer.json()["detail"]
    crowded = [_string(f"r{i}", "v") for i in range(MAX_ATTRIBUTES + 1)]
    answer = client.post(
        "/v1/traces",
        content=_export(_span(TRACE, GOOD_SPAN, []), resource_attributes=crowded),
        headers=JSON_HEADERS,
    )
    assert answer.status_code == 400
    assert answer.json()["detail"] == (
        f"a resource has {MAX_ATTRIBUTES + 1} attributes, over the limit of {MAX_ATTRIBUTES}"
    )


def test_a_trace_holds_at_most_its_span_limit(tmp_path: Path) -> None:
    """The spans past a trace's limit are rejected as they come (here a limit of 3)."""
    from assay.inputs.otlp.request import decode_export

    store = Store(f"sqlite:///{tmp_path / 'spans.db'}")
    traces = LiveTraces(store)
    spans = [_span(TRACE, f"{i + 1:016x}", []) for i in range(5)]
    first = decode_export(_export(*spans[:2]), "application/json", None, 10**6)
    assert traces.ingest(first.spans, max_spans=3).new == 2
    second = decode_export(_export(*spans[2:]), "application/json", None, 10**6)
    ingested = traces.ingest(second.spans, max_spans=3)
    assert (ingested.new, ingested.backlog) == (1, 1)
    assert ingested.rejected == [
        f"span {i:016x}: its trace {TRACE} has 3 spans stored, the limit of a trace" for i in (4, 5)
    ]
    assert traces.counts() == {"spans": 3, "traces": 1, "pending": 1}
    store.close()


def test_a_file_with_a_hostile_trace_reads_the_others(tmp_path: Path) -> None:
    """The file reader shares the conventions: a prompt nested 100,000 deep is that
    trace's error, and a 5,000-digit index is left unread, kept as metadata."""
    deep = _span(TRACE, BAD_SPAN, [CHAT, _string("gen_ai.prompt", "[" * 100_000 + "]" * 100_000)])
    long_index = "gen_ai.prompt." + "9" * 5000 + ".content"
    other = "6b8efff798038103d269b633813fc60c"
    indexed = _span(other, GOOD_SPAN, [CHAT, _string(long_index, "hi")])
    path = tmp_path / "traces.otlp.json"
    path.write_bytes(_export(deep, indexed))
    samples, errors = read_otlp(path)
    assert [s.id for s in samples] == [other]
    assert samples[0].trace[0].model_dump()["attributes"] == {long_index: "hi"}
    assert [str(e) for e in errors] == [
        f"{path}, field 'trace {TRACE}': gen_ai.prompt nests deeper than 64 levels"
    ]


# ---- fuzz: hostile attributes to the real receiver, then good traces are scored ----------
_KEYS = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["gen_ai.prompt", "gen_ai.completion", "gen_ai.input.messages"]),
    st.builds(
        lambda prefix, digits, rest: f"{prefix}.{digits}.{rest}",
        st.sampled_from(["gen_ai.prompt", "llm.input_messages", "retrieval.documents"]),
        st.from_regex(r"[0-9]{1,3000}", fullmatch=True),
        st.sampled_from(["content", "role", "message.content", "document.content"]),
    ),
    st.integers(MAX_KEY_CHARS - 2, MAX_KEY_CHARS + 2).map(lambda n: "k" * n),
)
_SCALARS = st.one_of(
    st.text(max_size=50).map(lambda s: {"stringValue": s}),
    st.sampled_from(["[" * 5000 + "]" * 5000, '{"a":' * 3000 + "1" + "}" * 3000, "[[[", "NaN"]).map(
        lambda s: {"stringValue": s}
    ),
    st.integers(-(2**70), 2**70).map(lambda n: {"intValue": str(n)}),
    st.integers(-(2**70), 2**70).map(lambda n: {"intValue": n}),
    st.one_of(st.floats(), st.text(max_size=5)).map(lambda x: {"doubleValue": x}),
    st.booleans().map(lambda b: {"boolValue": b}),
    st.text(max_size=20).map(lambda s: {"bytesValue": s}),
    st.sampled_from([{}, None, [], "x", {"arrayValue": "x"}, {"kvlistValue": {"values": 3}}]),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(lambda v: {"arrayValue": {"values": v}}),
        st.lists(st.fixed_dictionaries({"key": _KEYS, "value": inner}), max_size=3).map(
            lambda v: {"kvlistValue": {"values": v}}
        ),
    ),
    max_leaves=8,
) | st.integers(MAX_VALUE_DEPTH - 1, MAX_VALUE_DEPTH + 40).map(_nested)
_STATUSES = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {
            "code": st.sampled_from([0, 1, 2, "2", "STATUS_CODE_ERROR", [2], {}, None, 2.0]),
            "message": st.one_of(st.text(max_size=10), st.lists(st.integers(), max_size=2)),
        }
    ),
    st.sampled_from([[1], "x", 3]),
)
_ATTRIBUTES = st.lists(st.fixed_dictionaries({"key": _KEYS, "value": _VALUES}), max_size=6)


def _protobuf(document: dict[str, Any]) -> bytes | None:
    """The JSON export as protobuf, when it fits the protocol's types (else None)."""
    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    for resource_spans in document["resourceSpans"]:
        for scope in resource_spans["scopeSpans"]:
            for span in scope["spans"]:  # the protobuf JSON mapping writes ids in base64
                for key in ("traceId", "spanId"):
                    span[key] = __import__("base64").b64encode(bytes.fromhex(span[key])).decode()
    try:
        return json_format.ParseDict(document, ExportTraceServiceRequest()).SerializeToString()
    except (json_format.ParseError, ValueError, TypeError, RecursionError):
        return None


class _Tracebacks(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info or record.levelno >= logging.ERROR:
            self.records.append(record)


def test_hostile_attributes_never_get_a_5xx_and_good_traces_are_still_scored(
    tmp_path: Path,
) -> None:
    store = Store(f"sqlite:///{tmp_path / 'fuzz.db'}")
    config = AssayConfig(cache_dir=str(tmp_path / "cache"), live_grace_seconds=0)
    resources = Resources(config)
    live = LiveScoring(store, config, resolve_metrics(["e2e_latency"]), resources)
    tracebacks = _Tracebacks()
    loggers = [logging.getLogger(), logging.getLogger("uvicorn")]  # uvicorn's do not propagate
    for logger in loggers:
        logger.addHandler(tracebacks)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    sent = [0]
    try:
        with running_server(create_app(store, resources=resources, live=live)) as url:
            client = httpx.Client(base_url=url, timeout=30)

            @settings(
                max_examples=60,
                deadline=None,
                derandomize=True,
                suppress_health_check=list(HealthCheck),
            )
            @given(
                attributes=_ATTRIBUTES,
                events=st.lists(_ATTRIBUTES, max_size=2),
                status=_STATUSES,
            )
            def post(attributes: list[Any], events: list[list[Any]], status: Any) -> None:
                sent[0] += 1
                trace = f"{sent[0]:032x}"
                span = _span(trace, GOOD_SPAN, [CHAT, *attributes], status=status)
                span["events"] = [
                    {"name": "gen_ai.content.prompt", "attributes": e} for e in events
                ]
                body = _export(span)
                answer = client.post("/v1/traces", content=body, headers=JSON_HEADERS)
                assert answer.status_code in {200, 400}, answer.text
                wire = _protobuf(json.loads(body))
                if wire is not None:
                    answer = client.post(
                        "/v1/traces",
                        content=wire,
                        headers={"content-type": "application/x-protobuf"},
                    )
                    assert answer.status_code in {200, 400}, answer.text

            post()
            while live.run_once(now_offset=1):
                pass
            good = [f"{0xF0000000 + i:032x}" for i in range(6)]
            for trace in good:
                body = _export(_span(trace, GOOD_SPAN, [CHAT, _string("gen_ai.prompt", "hi")]))
                assert (
                    client.post("/v1/traces", content=body, headers=JSON_HEADERS).status_code == 200
                )
            assert live.run_once(now_offset=1) == 6
            grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
            client.close()
    finally:
        for logger in loggers:
            logger.removeHandler(tracebacks)
        live.stop()
        resources.close()
    scored = LiveTraces(store)
    assert scored.counts()["pending"] == 0
    with store.session() as session:
        from sqlalchemy import select

        from assay.store.models import TestResult

        rows = session.execute(
            select(TestResult.sample_id, TestResult.status).where(TestResult.sample_id.in_(good))
        ).all()
    assert sorted(rows) == sorted((trace, "ungated") for trace in good)
    assert live.scored >= 6
    assert tracebacks.records == []
    assert grown_kib < 200_000  # the fuzzed exports and their scoring took under 200 MB more
    store.close()


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b'{"resourceSpans":' + b"[" * 300_000, "the body is not an export: it nests too deeply"),
        (
            b'{"resourceSpans": [], "x": NaN}',
            "the body is not valid JSON: NaN is not JSON (a doubleValue writes it as the "
            "text 'NaN')",
        ),
        (
            b'{"resourceSpans": [], "x": 1e999}',
            "the body is not valid JSON: the number 1e999 is out of a double's range",
        ),
        (
            _export(_span(TRACE, GOOD_SPAN, [_string("q", "x")])).replace(b'"x"', b'"\\ud800"'),
            "the body is not valid JSON: a \\u escape is half of a surrogate pair",
        ),
    ],
)
def test_a_body_that_could_not_be_stored_again_as_json_is_a_400(
    receiver: Any, body: bytes, says: str
) -> None:
    """orjson 3.8 recursed on the first until the server crashed; the others parse in
    Python but cannot be written back as JSON (PostgreSQL refuses them)."""
    client, store = receiver
    answer = client.post("/v1/traces", content=body, headers=JSON_HEADERS)
    assert (answer.status_code, answer.json()["detail"]) == (400, says)
    assert LiveTraces(store).counts()["spans"] == 0


def test_a_round_reads_at_most_its_spans_into_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Here 3 spans a round: traces of 2 spans are taken one a round (a round's first
    trace is taken whatever its size)."""
    from fastapi.testclient import TestClient

    import assay.server.live_scoring as live_scoring

    monkeypatch.setattr(live_scoring, "ROUND_SPANS", 3)
    store = Store(f"sqlite:///{tmp_path / 'round.db'}")
    config = AssayConfig(cache_dir=str(tmp_path), live_grace_seconds=0)
    resources = Resources(config)
    live = LiveScoring(store, config, [], resources)
    client = TestClient(
        create_app(store, resources=resources, live=live), base_url="http://127.0.0.1"
    )
    for t in range(3):
        trace = f"{t + 1:032x}"
        child = _span(trace, BAD_SPAN, [], parentSpanId=GOOD_SPAN)
        body = _export(_span(trace, GOOD_SPAN, []), child)
        assert client.post("/v1/traces", content=body, headers=JSON_HEADERS).status_code == 200
    assert [live.run_once(now_offset=1) for _ in range(4)] == [1, 1, 1, 0]
    assert live.unscored == 3
    resources.close()
    store.close()
