"""Reading OTLP JSON trace files span by span, without loading the whole file.

Two layouts are read, both as the OpenTelemetry protocol's JSON encoding writes them
(``ExportTraceServiceRequest``: ``resourceSpans`` -> ``scopeSpans`` -> ``spans``):

* **JSON lines**, one request per line, as the OpenTelemetry Collector's file exporter
  writes them. Each line is parsed on its own: a malformed line is reported with its
  number and the rest of the file is read.
* **One JSON document** (what an SDK's console or a tool's export button writes). It is
  parsed as a stream of events, so memory holds one span at a time, not the file; a
  syntax error stops the reading there and is reported, keeping the spans before it.

Each span becomes a `Span` holding only what evaluation needs; a span that breaks the
protocol (no trace or span id, times that are not integers, an end before its start,
attributes that are not key/value pairs) is reported with its span id and skipped.
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from assay.inputs.otlp.limits import MAX_VALUE_DEPTH

__all__ = [
    "OTLP_HEAD_BYTES",
    "MalformedSpan",
    "Span",
    "attributes_of",
    "is_otlp",
    "iter_spans",
    "span_of",
    "starts_like_otlp",
]

_HEAD = re.compile(rb'^\s*\{\s*"(resourceSpans|resource_spans)"\s*:')
_STATUS_ERROR = {2, "2", "STATUS_CODE_ERROR"}
# event-stream paths of the pieces read from one document, in both spellings the
# protocol's JSON mapping accepts (lowerCamelCase is what exporters write)
_RESOURCE_SPANS_PATHS = {"resourceSpans.item", "resource_spans.item"}
_RESOURCE_PATHS = {"resourceSpans.item.resource", "resource_spans.item.resource"}
_SPAN_PATHS = {
    "resourceSpans.item.scopeSpans.item.spans.item",
    "resource_spans.item.scope_spans.item.spans.item",
}


@dataclass
class Span:
    """One span, reduced to what the trace mapping reads."""

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    start_ns: int
    end_ns: int
    error: str | None
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]
    resource: dict[str, Any] = field(default_factory=dict)
    line: int | None = None

    @property
    def seconds(self) -> float:
        return (self.end_ns - self.start_ns) / 1e9


@dataclass(frozen=True)
class MalformedSpan:
    """A span (or a whole line) that could not be read: where, which span, and why."""

    line: int | None
    span_id: str | None
    message: str


def is_otlp(path: str | Path) -> bool:
    """True when the file starts like an OTLP JSON export (``{"resourceSpans": ...``)."""
    with open(path, "rb") as handle:
        return starts_like_otlp(handle.read(OTLP_HEAD_BYTES))


#: the bytes `starts_like_otlp` looks at
OTLP_HEAD_BYTES = 4096


def starts_like_otlp(head: bytes) -> bool:
    """True when a file's first `OTLP_HEAD_BYTES` bytes start an OTLP JSON export."""
    return bool(_HEAD.match(head.removeprefix(b"\xef\xbb\xbf")))


def iter_spans(path: str | Path) -> Iterator[Span | MalformedSpan]:
    """Every span of an OTLP JSON file in file order, or the reason one could not be read."""
    with open(path, encoding="utf-8-sig", errors="surrogateescape") as handle:
        first = _first_line(handle)
        handle.seek(0)
        if first is not None:
            yield from _spans_of_lines(handle)
        else:
            yield from _spans_of_document(path)


def _first_line(handle: IO[str]) -> dict[str, Any] | None:
    """The first non-blank line parsed, when it is a whole request on its own (JSON lines)."""
    for line in handle:
        if line.strip():
            try:
                value = json.loads(line)
            except ValueError:
                return None
            return value if isinstance(value, dict) else None
    return None


def _spans_of_lines(handle: IO[str]) -> Iterator[Span | MalformedSpan]:
    for number, line in enumerate(handle, start=1):
        if not line.strip():
            continue
        try:
            request = json.loads(line)
        except ValueError as exc:
            yield MalformedSpan(number, None, f"not valid JSON ({exc})")
            continue
        if not isinstance(request, dict):
            yield MalformedSpan(number, None, "expected an OTLP request object")
            continue
        for resource_spans in _list(request, "resourceSpans", "resource_spans"):
            resource = _resource(resource_spans)
            for scope_spans in _list(resource_spans, "scopeSpans", "scope_spans"):
                for raw in _list(scope_spans, "spans"):
                    yield span_of(raw, resource, number)


def _spans_of_document(path: str | Path) -> Iterator[Span | MalformedSpan]:
    import ijson  # streaming JSON events; only needed for single-document files
    from ijson.common import ObjectBuilder

    resource: dict[str, Any] = {}
    builder: ObjectBuilder | None = None
    building = ""
    with open(path, "rb") as handle:
        try:
            for prefix, event, value in ijson.parse(handle, use_float=True):
                if builder is None:
                    if event == "start_map" and prefix in _RESOURCE_SPANS_PATHS:
                        resource = {}  # a new resource: its spans follow
                    elif event == "start_map" and (
                        prefix in _SPAN_PATHS or prefix in _RESOURCE_PATHS
                    ):
                        builder, building = ObjectBuilder(), prefix
                        builder.event(event, value)
                    continue
                builder.event(event, value)
                if event == "end_map" and prefix == building:
                    obj, builder = builder.value, None
                    if building in _RESOURCE_PATHS:
                        resource = _attributes_or_empty(obj)
                    else:
                        yield span_of(obj, resource, None)
        except ijson.JSONError as exc:
            yield MalformedSpan(None, None, f"the JSON document breaks off: {exc}")


def _list(obj: Any, *keys: str) -> list[Any]:
    for key in keys:
        value = obj.get(key) if isinstance(obj, dict) else None
        if isinstance(value, list):
            return value
    return []


def _resource(resource_spans: Any) -> dict[str, Any]:
    resource = resource_spans.get("resource") if isinstance(resource_spans, dict) else None
    return _attributes_or_empty(resource)


def _attributes_or_empty(obj: Any) -> dict[str, Any]:
    try:
        return attributes_of(obj.get("attributes") if isinstance(obj, dict) else None)
    except ValueError:
        return {}


def span_of(raw: Any, resource: dict[str, Any], line: int | None = None) -> Span | MalformedSpan:
    """One OTLP JSON span (with its resource's attributes) as a `Span`, or why it cannot
    be read."""
    if not isinstance(raw, dict):
        return MalformedSpan(line, None, "a span is not a JSON object")
    span_id = _id(raw, "spanId", "span_id")
    trace_id = _id(raw, "traceId", "trace_id")
    if span_id is None:
        return MalformedSpan(line, None, "span has no spanId")
    if trace_id is None:
        return MalformedSpan(line, span_id, "span has no traceId")
    try:
        name = _scalar_text(raw.get("name") or "", "the span's name")
        start = _nanos(raw, "startTimeUnixNano", "start_time_unix_nano")
        end = _nanos(raw, "endTimeUnixNano", "end_time_unix_nano")
        if end < start:
            raise ValueError(f"ends ({end}) before it starts ({start})")
        attributes = attributes_of(raw.get("attributes"))
        events = [
            (
                _scalar_text(event.get("name", ""), "an event name"),
                attributes_of(event.get("attributes")),
            )
            for event in raw.get("events") or []
            if isinstance(event, dict)
        ]
    except ValueError as exc:
        return MalformedSpan(line, span_id, str(exc))
    return Span(
        trace_id=trace_id,
        span_id=span_id,
        parent_id=_id(raw, "parentSpanId", "parent_span_id"),
        name=name,
        start_ns=start,
        end_ns=end,
        error=_error(raw, events),
        attributes=attributes,
        events=events,
        resource=resource,
        line=line,
    )


def _id(raw: dict[str, Any], *keys: str) -> str | None:
    for key in keys:
        value = raw.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _nanos(raw: dict[str, Any], *keys: str) -> int:
    for key in keys:
        if key in raw:
            value = raw[key]
            if isinstance(value, bool) or not isinstance(value, int | str):
                raise ValueError(f"{keys[0]} is not an integer: {str(value)[:40]!r}")
            try:
                number = int(value)
            except ValueError:
                raise ValueError(f"{keys[0]} is not an integer: {str(value)[:40]!r}") from None
            if number < 0:
                raise ValueError(f"{keys[0]} is negative")
            return number
    raise ValueError(f"span has no {keys[0]}")


def _error(raw: dict[str, Any], events: list[tuple[str, dict[str, Any]]]) -> str | None:
    status = raw.get("status")
    code = status.get("code") if isinstance(status, dict) else None
    if not isinstance(code, int | str) or code not in _STATUS_ERROR:
        return None
    message = status.get("message")
    if isinstance(message, str) and message:
        return message
    for name, attributes in events:
        if name == "exception":
            return str(attributes.get("exception.message") or attributes.get("exception.type"))
    return "error"


def attributes_of(raw: Any, depth: int = 0) -> dict[str, Any]:
    """A list of OTLP ``{"key": ..., "value": AnyValue}`` pairs as a plain dict (``depth``:
    the kvlists it is inside). Raises ValueError for a value that nests arrays and
    kvlists deeper than `MAX_VALUE_DEPTH` or an ``intValue`` that is not a 64-bit integer."""
    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise ValueError("attributes are not a list of key/value pairs")
    out: dict[str, Any] = {}
    for pair in raw:
        if not isinstance(pair, dict) or not isinstance(pair.get("key"), str):
            raise ValueError("an attribute has no string key")
        out[pair["key"]] = _any_value(pair.get("value"), depth)
    return out


def _any_value(value: Any, depth: int) -> Any:
    """An OTLP AnyValue as a Python value; non-finite doubles stay text, never NaN."""
    if not isinstance(value, dict) or not value:
        return None
    if "stringValue" in value:
        return _scalar_text(value["stringValue"], "a stringValue")
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "intValue" in value:
        return _int64(value["intValue"])
    if "doubleValue" in value:
        number = value["doubleValue"]
        try:
            number = float(number)
        except (TypeError, ValueError):
            raise ValueError(f"doubleValue is not a number: {number!r}") from None
        return number if math.isfinite(number) else str(value["doubleValue"])
    if ("arrayValue" in value or "kvlistValue" in value) and depth >= MAX_VALUE_DEPTH:
        raise ValueError(f"an attribute value nests arrays or kvlists over {MAX_VALUE_DEPTH} deep")
    if "arrayValue" in value:
        items = _values(value["arrayValue"])
        return [_any_value(item, depth + 1) for item in items]
    if "kvlistValue" in value:
        return attributes_of(_values(value["kvlistValue"]), depth + 1)
    if "bytesValue" in value:
        try:
            return base64.b64decode(value["bytesValue"]).decode("utf-8", "replace")
        except (TypeError, ValueError):
            return _scalar_text(value["bytesValue"], "a bytesValue")
    return None


def _values(holder: Any) -> list[Any]:
    values = holder.get("values") if isinstance(holder, dict) else None
    if values is None:
        return []
    if not isinstance(values, list):
        raise ValueError("an arrayValue's or kvlistValue's values are not a list")
    return values


def _int64(raw: Any) -> int:
    """An ``intValue`` (a JSON number or the decimal text the JSON encoding writes) as an
    int, held to the 64-bit range the protocol gives it."""
    text = raw if isinstance(raw, str) else None
    if isinstance(raw, bool) or not isinstance(raw, int | str) or (text and len(text) > 20):
        raise ValueError(f"intValue is not a 64-bit integer: {str(raw)[:40]!r}")
    try:
        number = int(raw)
    except ValueError:
        raise ValueError(f"intValue is not an integer: {str(raw)[:40]!r}") from None
    if not -(2**63) <= number < 2**63:
        raise ValueError(f"intValue is not a 64-bit integer: {str(raw)[:40]!r}")
    return number


def _scalar_text(value: Any, what: str) -> str:
    """A text field as text: a number or a boolean is written out, anything else (a list,
    an object, however deep) is not text."""
    if isinstance(value, str):
        return value
    if isinstance(value, int | float | bool) or value is None:
        return str(value)
    raise ValueError(f"{what} is not text")
