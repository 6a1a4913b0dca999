"""One OTLP/HTTP trace export (what ``POST /v1/traces`` receives) as checked spans.

The body is an ``ExportTraceServiceRequest``: protobuf (``application/x-protobuf``,
decoded with the official ``opentelemetry-proto`` package) or the protocol's JSON
encoding (``application/json``, ids in hex), optionally gzip-compressed
(``Content-Encoding: gzip``, its decompressed size held to the same limit as the body).

Each span is turned into the OTLP JSON form the file reader reads
(`assay.inputs.otlp.reader`) and checked as it checks a span, and more: the trace id must
be 32 and the span id 16 hex digits, not all zero, its times must be plausible (not
before 2000, not more than a day ahead), and it must be within the limits of
`assay.inputs.otlp.limits` (key and value sizes, nesting, counts, indices in keys). A span
that fails is rejected with its reason
(the export's partial success); a body that cannot be read at all raises `BadExport`.
"""

from __future__ import annotations

import base64
import json
import math
import re
import time
import zlib
from dataclasses import dataclass, field
from typing import Any

from assay.inputs.otlp.limits import attributes_over_limits, over_limits
from assay.inputs.otlp.reader import MalformedSpan, Span, attributes_of, span_of

__all__ = [
    "BadExport",
    "ExportTooLarge",
    "ReceivedExport",
    "ReceivedSpan",
    "UnsupportedExport",
    "decode_export",
]

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
#: 2000-01-01T00:00:00Z in nanoseconds: no span of an LLM application starts before it
_EARLIEST_NS = 946_684_800 * 10**9
#: how far ahead of this server's clock a span may end (clocks drift; a day is absurd)
_AHEAD_NS = 86_400 * 10**9
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_HEX_ID = {32: re.compile("[0-9a-f]{32}"), 16: re.compile("[0-9a-f]{16}")}


class BadExport(ValueError):
    """The body is not an export request (malformed protobuf or JSON, wrong shape)."""


class ExportTooLarge(ValueError):
    """The body, once decompressed, is over the limit."""


class UnsupportedExport(ValueError):
    """A content type or encoding this receiver does not read."""


@dataclass(frozen=True)
class ReceivedSpan:
    """A span that passed the checks: as read (`Span`), as OTLP JSON (``raw``, ids in
    hex), its resource's attributes and its service (``service.name``)."""

    span: Span
    raw: dict[str, Any]
    resource: dict[str, Any]
    service: str


@dataclass
class ReceivedExport:
    """The spans of one export that passed, and why each other one was rejected."""

    spans: list[ReceivedSpan] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)


def decode_export(
    body: bytes,
    content_type: str,
    content_encoding: str | None,
    max_bytes: int,
    now_ns: int | None = None,
) -> ReceivedExport:
    """The spans of an export body. Raises `UnsupportedExport` (415), `ExportTooLarge`
    (413) or `BadExport` (400); a span that fails its checks is in ``rejected``."""
    media = content_type.split(";", 1)[0].strip().lower()
    if media not in {PROTOBUF, JSON}:
        raise UnsupportedExport(
            f"send {PROTOBUF} or {JSON} (OTLP/HTTP), not {media or 'no content type'!r}"
        )
    body = _decompressed(body, (content_encoding or "").strip().lower(), max_bytes)
    requests = _protobuf_spans(body) if media == PROTOBUF else _json_spans(body)
    now = time.time_ns() if now_ns is None else now_ns
    export = ReceivedExport()
    for raw, resource in requests:
        try:
            received = _checked(raw, resource, now)
        except RecursionError:
            received = "a span's attributes nest too deeply"
        if isinstance(received, str):
            export.rejected.append(received)
        else:
            export.spans.append(received)
    return export


def _decompressed(body: bytes, encoding: str, max_bytes: int) -> bytes:
    if encoding in {"", "identity"}:
        return body
    if encoding != "gzip":
        raise UnsupportedExport(f"Content-Encoding {encoding!r}: send gzip or none")
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(body, max_bytes + 1)
    except zlib.error as exc:
        raise BadExport(f"the gzip body cannot be read: {exc}") from None
    if len(out) > max_bytes:
        raise ExportTooLarge(f"the body is over {max_bytes} bytes once decompressed: send less")
    if not inflater.eof:
        raise BadExport("the gzip body is cut short")
    return out


def _json_spans(body: bytes) -> list[tuple[Any, dict[str, Any]]]:
    # the standard library's parser stops at the recursion limit; orjson 3.8 recursed
    # until a body of 200,000 '[' crashed the server
    try:
        document = json.loads(body, parse_constant=_no_constant, parse_float=_finite)
    except RecursionError:
        raise BadExport("the body is not an export: it nests too deeply") from None
    except ValueError as exc:
        raise BadExport(f"the body is not valid JSON: {exc}") from None
    if _SURROGATE_ESCAPE.search(body):  # \ud800 alone parses, but is no text to store
        try:
            json.dumps(document, ensure_ascii=False).encode("utf-8")
        except (UnicodeEncodeError, RecursionError):
            raise BadExport(
                "the body is not valid JSON: a \\u escape is half of a surrogate pair"
            ) from None
    if not isinstance(document, dict):
        raise BadExport("the body is not an ExportTraceServiceRequest: expected a JSON object")
    out: list[tuple[Any, dict[str, Any]]] = []
    for resource_spans in _items(document, "resourceSpans", "resource_spans"):
        resource = resource_spans.get("resource") if isinstance(resource_spans, dict) else None
        if resource is not None and not isinstance(resource, dict):
            raise BadExport("a resource is not a JSON object")
        attributes = _resource_attributes(resource.get("attributes") if resource else None)
        for scope_spans in _items(resource_spans, "scopeSpans", "scope_spans"):
            out.extend((raw, attributes) for raw in _items(scope_spans, "spans"))
    return out


def _resource_attributes(raw: Any) -> dict[str, Any]:
    """A resource's attributes; raises `BadExport` when they do not read or are over a
    limit of `assay.inputs.otlp.limits` (every span of the resource would be)."""
    try:
        attributes = attributes_of(raw)
    except (ValueError, RecursionError) as exc:
        raise BadExport(f"a resource's attributes cannot be read: {exc}") from None
    why = attributes_over_limits(attributes, "a resource")
    if why is not None:
        raise BadExport(why)
    return attributes


def _no_constant(token: str) -> float:
    raise ValueError(f"{token} is not JSON (a doubleValue writes it as the text {token!r})")


def _finite(token: str) -> float:
    """A JSON number as a float; one that overflows to infinity is refused (it could not
    be stored as JSON again)."""
    number = float(token)
    if not math.isfinite(number):
        raise ValueError(f"the number {token[:40]} is out of a double's range")
    return number


def _items(obj: Any, *keys: str) -> list[Any]:
    if not isinstance(obj, dict):
        raise BadExport("the body is not an ExportTraceServiceRequest: expected JSON objects")
    for key in keys:
        value = obj.get(key)
        if value is None:
            continue
        if not isinstance(value, list):
            raise BadExport(f"{key!r} is not a list")
        return value
    return []


def _protobuf_spans(body: bytes) -> list[tuple[Any, dict[str, Any]]]:
    try:
        from google.protobuf.message import DecodeError
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )
    except ImportError:
        raise UnsupportedExport(
            "protobuf exports need the opentelemetry-proto package on the server "
            "(pip install 'assay-eval[server]'); JSON exports are read without it"
        ) from None

    try:
        request = ExportTraceServiceRequest.FromString(body)
    except (DecodeError, RecursionError) as exc:
        raise BadExport(f"the body is not a protobuf ExportTraceServiceRequest: {exc}") from None
    out: list[tuple[Any, dict[str, Any]]] = []
    for resource_spans in request.resource_spans:
        resource = _resource_attributes(
            [_key_value(kv) for kv in resource_spans.resource.attributes]
        )
        for scope_spans in resource_spans.scope_spans:
            out.extend((_span_json(span), resource) for span in scope_spans.spans)
    return out


def _span_json(span: Any) -> dict[str, Any]:
    """A protobuf span in the protocol's JSON form (ids in hex, as the JSON encoding
    writes them)."""
    raw: dict[str, Any] = {
        "traceId": span.trace_id.hex(),
        "spanId": span.span_id.hex(),
        "name": span.name,
        "kind": span.kind,
        "startTimeUnixNano": span.start_time_unix_nano,
        "endTimeUnixNano": span.end_time_unix_nano,
        "attributes": [_key_value(kv) for kv in span.attributes],
    }
    if span.parent_span_id:
        raw["parentSpanId"] = span.parent_span_id.hex()
    if span.events:
        raw["events"] = [
            {
                "name": event.name,
                "timeUnixNano": event.time_unix_nano,
                "attributes": [_key_value(kv) for kv in event.attributes],
            }
            for event in span.events
        ]
    if span.HasField("status"):
        raw["status"] = {"code": span.status.code, "message": span.status.message}
    return raw


def _key_value(kv: Any) -> dict[str, Any]:
    return {"key": kv.key, "value": _any_value(kv.value)}


def _any_value(value: Any) -> dict[str, Any]:
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return {"stringValue": value.string_value}
    if kind == "bool_value":
        return {"boolValue": value.bool_value}
    if kind == "int_value":
        return {"intValue": value.int_value}
    if kind == "double_value":
        return {"doubleValue": value.double_value}
    if kind == "array_value":
        return {"arrayValue": {"values": [_any_value(v) for v in value.array_value.values]}}
    if kind == "kvlist_value":
        return {"kvlistValue": {"values": [_key_value(kv) for kv in value.kvlist_value.values]}}
    if kind == "bytes_value":
        return {"bytesValue": base64.b64encode(value.bytes_value).decode("ascii")}
    return {}


def _checked(raw: Any, resource: dict[str, Any], now_ns: int) -> ReceivedSpan | str:
    """The span, or why it is rejected (naming its span id when it has one)."""
    span = span_of(raw, resource)
    if isinstance(span, MalformedSpan):
        return f"span {span.span_id}: {span.message}" if span.span_id else span.message
    for name, value, digits in (
        ("traceId", span.trace_id, 32),
        ("spanId", span.span_id, 16),
        ("parentSpanId", span.parent_id, 16),
    ):
        if value is None:
            continue
        if not _HEX_ID[digits].fullmatch(value.lower()) or not value.strip("0"):
            return f"span {span.span_id[:40]}: {name} is not {digits} hex digits (not all zero)"
    if span.start_ns < _EARLIEST_NS or span.end_ns > now_ns + _AHEAD_NS:
        return (
            f"span {span.span_id}: its times ({span.start_ns} to {span.end_ns} ns since 1970) "
            "are not plausible: before 2000 or more than a day ahead of this server's clock"
        )
    why = over_limits(span.name, span.attributes, span.events)
    if why is not None:
        return f"span {span.span_id}: {why}"
    span.trace_id, span.span_id = span.trace_id.lower(), span.span_id.lower()
    if span.parent_id is not None:
        span.parent_id = span.parent_id.lower()
    raw = {**raw, "traceId": span.trace_id, "spanId": span.span_id}
    if span.parent_id is not None:
        raw["parentSpanId"] = span.parent_id
    service = resource.get("service.name")
    return ReceivedSpan(
        span, raw, resource, str(service) if service not in (None, "") else "unknown_service"
    )
