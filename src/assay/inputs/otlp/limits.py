"""Limits on what one span may hold, for spans sent by strangers (``POST /v1/traces``).

Each limit is a bound on something an exporter chooses, checked before the span is
stored; a span over one is rejected with the reason (the export's partial success), and
the other spans of the export are taken. The defaults are far above what an OpenTelemetry
SDK or an OpenInference instrumentation writes:

===================================  ==========  ==========================================
what                                 default     past it
===================================  ==========  ==========================================
characters of an attribute key, a    1,024       the span is rejected
span's name or an event's name
characters of an attribute value     4,194,304   the span is rejected (text of a value's
                                                 arrays and kvlists summed)
nesting of arrayValue / kvlistValue  32          the span is rejected
attributes of a span, event or       1,024       the span is rejected (a resource over it:
resource                                         the export is answered 400)
events of a span                     1,024       the span is rejected
N of ``gen_ai.prompt.N.content``     10,000      the span is rejected (and a file's key
and the other indexed conventions                over it is left unread, kept as metadata)
nesting of a JSON message value      64          the trace is quarantined with the reason
spans of one trace                   10,000      the spans past it are rejected
===================================  ==========  ==========================================
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = [
    "INDEXED_PREFIXES",
    "MAX_ATTRIBUTES",
    "MAX_EVENTS",
    "MAX_INDEX",
    "MAX_KEY_CHARS",
    "MAX_MESSAGE_DEPTH",
    "MAX_SPANS_PER_TRACE",
    "MAX_VALUE_CHARS",
    "MAX_VALUE_DEPTH",
    "SpanOverLimit",
    "attributes_over_limits",
    "json_value",
    "key_index",
    "over_limits",
]

MAX_KEY_CHARS = 1_024
MAX_VALUE_CHARS = 4 * 1024 * 1024
MAX_VALUE_DEPTH = 32
MAX_ATTRIBUTES = 1_024
MAX_EVENTS = 1_024
MAX_INDEX = 10_000
MAX_MESSAGE_DEPTH = 64
MAX_SPANS_PER_TRACE = 10_000

#: the conventions whose keys carry an index: ``PREFIX.N.REST``
INDEXED_PREFIXES = (
    "gen_ai.prompt",
    "gen_ai.completion",
    "llm.input_messages",
    "llm.output_messages",
    "retrieval.documents",
)
_INDEX_DIGITS = len(str(MAX_INDEX))
_INDEXED = re.compile(r"^(?P<prefix>.+?)\.(?P<index>\d+)\.(?P<rest>.+)$")


class SpanOverLimit(ValueError):
    """A span or a trace holds more than a limit allows (the message says which)."""


def key_index(key: str, prefix: str) -> tuple[int, str] | None:
    """(N, REST) of a ``PREFIX.N.REST`` key, or None when the key is not one or its N is
    over `MAX_INDEX` (never converting more than a few digits)."""
    match = _INDEXED.match(key)
    if match is None or match["prefix"] != prefix:
        return None
    return _within_index(match)


def _within_index(match: re.Match[str]) -> tuple[int, str] | None:
    digits = match["index"]
    if len(digits) > _INDEX_DIGITS or int(digits) > MAX_INDEX:
        return None
    return int(digits), match["rest"]


def _index_over_limit(key: str) -> bool:
    """Whether ``key`` is ``PREFIX.N.REST`` of one of `INDEXED_PREFIXES` with N over
    `MAX_INDEX` (one match of the pattern; most keys are skipped by their start)."""
    if not key.startswith(INDEXED_PREFIXES):
        return False
    match = _INDEXED.match(key)
    return (
        match is not None and match["prefix"] in INDEXED_PREFIXES and _within_index(match) is None
    )


def json_value(text: str, what: str) -> Any:
    """``text`` parsed as JSON, at most `MAX_MESSAGE_DEPTH` arrays and objects deep.
    Raises ValueError when it is not JSON, `SpanOverLimit` (naming ``what``) when it nests
    deeper (the check walks the parsed value with a stack, never recursing). The standard
    library's parser, not orjson: it stops at the interpreter's recursion limit, where
    orjson 3.8 recursed until a 200,000-deep array crashed the process in a thread."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise SpanOverLimit(f"{what} nests deeper than {MAX_MESSAGE_DEPTH} levels") from None
    if _depth_over(value, MAX_MESSAGE_DEPTH):
        raise SpanOverLimit(f"{what} nests deeper than {MAX_MESSAGE_DEPTH} levels")
    return value


def _depth_over(value: Any, limit: int) -> bool:
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        elif not isinstance(item, list):
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in item if isinstance(child, list | dict))
    return False


def _chars(value: Any) -> int:
    """Characters of text in a value (its strings and keys, however nested)."""
    total, stack = 0, [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            total += len(item)
        elif isinstance(item, dict):
            total += sum(len(k) for k in item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return total


def attributes_over_limits(attributes: dict[str, Any], where: str) -> str | None:
    """Why a set of attributes is over a limit (naming ``where``), or None."""
    if len(attributes) > MAX_ATTRIBUTES:
        return f"{where} has {len(attributes)} attributes, over the limit of {MAX_ATTRIBUTES}"
    for key, value in attributes.items():
        if len(key) > MAX_KEY_CHARS:
            return (
                f"{where} has an attribute key of {len(key)} characters "
                f"({key[:40]!r}...), over the limit of {MAX_KEY_CHARS}"
            )
        size = _chars(value)
        if size > MAX_VALUE_CHARS:
            return (
                f"{where}: the value of {key!r} holds {size} characters, "
                f"over the limit of {MAX_VALUE_CHARS}"
            )
        if _index_over_limit(key):
            return (
                f"{where} has the key {key[:80]!r}..., whose index is over the limit of {MAX_INDEX}"
            )
    return None


def over_limits(
    name: str, attributes: dict[str, Any], events: list[tuple[str, dict[str, Any]]]
) -> str | None:
    """Why a span with this name, attributes and events is over a limit of this module,
    or None when it is within them all (a span's or an event's name is held to the
    length of a key)."""
    for text, what in [(name, "the span's name"), *((e, "an event's name") for e, _ in events)]:
        if len(text) > MAX_KEY_CHARS:
            return f"{what} has {len(text)} characters, over the limit of {MAX_KEY_CHARS}"
    if len(events) > MAX_EVENTS:
        return f"the span has {len(events)} events, over the limit of {MAX_EVENTS}"
    held = [("the span", attributes), *((f"its event {e[:40]!r}", a) for e, a in events)]
    for where, these in held:
        why = attributes_over_limits(these, where)
        if why is not None:
            return why
    return None
