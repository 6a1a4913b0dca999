"""``POST /v1/traces``: the OTLP/HTTP trace receiver of ``assay serve``.

What an OpenTelemetry SDK's OTLP/HTTP exporter or the Collector's ``otlphttp`` exporter
sends: an ``ExportTraceServiceRequest`` as protobuf or JSON, gzip or not
(`assay.inputs.otlp.request`). The spans are written to the results store before the
answer (`assay.store.live_traces`): a 200 means they survive a crash of the server.

Answers, as the OTLP/HTTP specification says:

- 200 with an ``ExportTraceServiceResponse`` in the request's encoding: empty when every
  span was taken, else its ``partialSuccess`` counting the rejected spans with the first
  reasons (a span that breaks the protocol, is over a limit of
  `assay.inputs.otlp.limits`, or would take its trace past the spans a trace may hold);
- 400 when the body cannot be read or every span was rejected, 413 past the body limit
  (before or after decompression), 415 for another content type or encoding, 401 without
  the token when the server has one: ``{"detail": message}``;
- 503 with ``Retry-After`` while the scoring worker has ``live_queue_limit`` traces
  waiting (counted as each export is stored) or the store is busy: the exporter sends
  again later, and nothing it was told was taken is dropped.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from sqlalchemy.exc import SQLAlchemyError
from starlette.concurrency import run_in_threadpool

from assay.inputs.otlp.request import (
    PROTOBUF,
    BadExport,
    ExportTooLarge,
    UnsupportedExport,
    decode_export,
)
from assay.server.errors import ERROR_RESPONSES, ErrorMessage, StrictJSONResponse
from assay.store.db import StoreError
from assay.store.live_monitors import monitor_states
from assay.store.live_traces import LiveTraces

__all__ = ["RECEIVER_MEDIA_TYPES", "RETRY_AFTER_SECONDS", "router"]

log = logging.getLogger("assay.live")

router = APIRouter(responses=ERROR_RESPONSES)

#: the bodies the receiver reads (the request guard lets these through on its path)
RECEIVER_MEDIA_TYPES = frozenset({PROTOBUF, "application/json"})
#: what a 503 asks the exporter to wait
RETRY_AFTER_SECONDS = 5
#: rejected spans whose reasons a partial success names
_REASONS_SHOWN = 3

_REQUEST_BODY: dict[str, Any] = {
    "required": True,
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "description": "An OTLP ExportTraceServiceRequest in the protocol's JSON "
                "encoding: resourceSpans -> scopeSpans -> spans (ids in hex).",
                "properties": {
                    # null is an empty list in the protocol's JSON mapping
                    "resourceSpans": {"type": ["array", "null"], "items": {"type": "object"}}
                },
            }
        },
        PROTOBUF: {"schema": {"type": "string", "format": "binary"}},
    },
}


def _answer(status: int, detail: str, retry_after: int | None = None) -> Response:
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
    return StrictJSONResponse({"detail": detail}, status, headers=headers)


def _success(protobuf: bool, rejected: list[str]) -> Response:
    message = "; ".join(rejected[:_REASONS_SHOWN])
    if len(rejected) > _REASONS_SHOWN:
        message += f"; and {len(rejected) - _REASONS_SHOWN} more"
    if protobuf:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceResponse,
        )

        response = ExportTraceServiceResponse()
        if rejected:
            response.partial_success.rejected_spans = len(rejected)
            response.partial_success.error_message = message
        return Response(response.SerializeToString(), 200, media_type=PROTOBUF)
    body: dict[str, Any] = {}
    if rejected:
        body["partialSuccess"] = {"rejectedSpans": str(len(rejected)), "errorMessage": message}
    return StrictJSONResponse(body)


@router.post(
    "/v1/traces",
    tags=["live"],
    summary="Receive OpenTelemetry traces (OTLP/HTTP)",
    openapi_extra={"requestBody": _REQUEST_BODY},
    responses={
        200: {
            "description": "ExportTraceServiceResponse (partialSuccess when spans were rejected)"
        },
        503: {
            "model": ErrorMessage,
            "description": "Behind (the scoring queue is full) or the store is busy: send "
            "again after Retry-After seconds",
        },
    },
)
async def receive_traces(request: Request) -> Response:
    """Store the spans of one OTLP export; the traces they complete are scored by the
    live worker (``assay serve --live-metrics``) into the runs ``live/<service.name>``."""
    live = request.app.state.live
    if live is not None and live.backlog >= live.queue_limit:
        return _answer(
            503,
            f"{live.backlog} traces are waiting to be scored (limit {live.queue_limit}): "
            "send again later",
            RETRY_AFTER_SECONDS,
        )
    body = await request.body()
    media = request.headers.get("content-type", "")
    try:
        export = decode_export(
            body, media, request.headers.get("content-encoding"), request.app.state.max_body
        )
    except UnsupportedExport as exc:
        return _answer(415, str(exc))
    except ExportTooLarge as exc:
        return _answer(413, str(exc))
    except BadExport as exc:
        return _answer(400, str(exc))
    if export.rejected and not export.spans:
        shown = "; ".join(export.rejected[:_REASONS_SHOWN])
        return _answer(400, f"every span was rejected ({len(export.rejected)}): {shown}")
    try:
        ingested = await run_in_threadpool(LiveTraces(request.app.state.store).ingest, export.spans)
    except (StoreError, SQLAlchemyError) as exc:
        log.warning("spans not stored: %s", exc)
        return _answer(503, "the results store is busy: send again later", RETRY_AFTER_SECONDS)
    if live is not None:  # counted now, not when the worker's round ends
        live.backlog = ingested.backlog
    rejected = export.rejected + ingested.rejected
    protobuf = media.split(";", 1)[0].strip().lower() == PROTOBUF
    return _success(protobuf, rejected)


@router.get("/api/live", tags=["live"])
def live_status(request: Request) -> dict[str, Any]:
    """The live receiver and its scoring: spans and traces stored, traces waiting to be
    scored, traces quarantined (with the latest ones' reasons), what this server's worker
    scored, sampled out and stored unscored, the live metrics and settings, the monitor
    rules (with a warning for each on a metric not scored) and each one's state on each
    live run, the webhook's host and queue, the last error."""
    from assay.server.errors import store_read

    live = request.app.state.live
    store = request.app.state.store
    with store_read():
        counts = LiveTraces(store).counts()
        quarantined, latest = LiveTraces(store).quarantined()
        monitors = monitor_states(store)
    counts |= {"quarantined": quarantined, "quarantine": latest}
    if live is None:
        return {**counts, "scoring": False, "metrics": [], "monitors": monitors}
    return {**counts, **live.status(), "monitors": monitors}
