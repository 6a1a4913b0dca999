"""Strict JSON out: every JSON document Assay writes goes through this module.

Standard JSON has no NaN or Infinity; Python's ``json.dumps`` writes them as bare tokens
by default, which strict parsers (JavaScript's ``JSON.parse``, Go, Rust) refuse. Here a
non-finite float becomes ``null``, numpy scalars become Python numbers, integers too
large for ``json.dumps`` become their decimal text, and anything else unknown becomes its
``str``. `dumps` then serialises with ``allow_nan=False``, so a non-finite number that
slipped past `to_jsonable` raises instead of producing invalid JSON.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import orjson

from assay.core.json_documents import int_text, key_name, rebuild

__all__ = ["dumps", "line_bytes", "to_jsonable"]

_MAX_INT_BITS = 14_000  # json.dumps (via str) refuses ints over 4,300 decimal digits
# a lone surrogate (what undecodable input bytes become under surrogateescape) cannot be
# written as UTF-8: it becomes U+FFFD, the replacement character
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
#: a surrogate written as an escape by ``ensure_ascii`` (a lone one, or half of a pair)
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def to_jsonable(value: Any) -> Any:
    """``value`` with only JSON types left: non-finite floats as None, numpy scalars as
        numbers, tuples and sets as lists, keys as strings, huge ints as decimal text, lone
    surrogates as U+FFFD (so the text encodes as UTF-8). Nesting
        costs no recursion (`assay.core.json_documents.rebuild`)."""
    return rebuild(value, _scalar, key=_key, sequences=(list, tuple, set, frozenset))


def _text(value: str) -> str:
    return _LONE_SURROGATE.sub("\ufffd", value)


def _key(key: Any) -> str:
    """A key's JSON name (``true``, ``null``, ``1.5``: as ``json.dumps`` writes keys),
    ``str(key)`` for a key JSON cannot hold."""
    try:
        return _text(key_name(key))
    except ValueError:
        return _text(str(key))


def _scalar(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return to_jsonable(value.item())
    if isinstance(value, int) and not isinstance(value, bool):
        return int_text(value) if value.bit_length() > _MAX_INT_BITS else value
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, int | float | bool) or value is None:
        return value
    return _text(str(value))


def dumps(
    value: Any,
    *,
    indent: int | None = None,
    sort_keys: bool = False,
    ensure_ascii: bool = False,
) -> str:
    """Standard JSON text of ``value`` (never NaN/Infinity tokens; see `to_jsonable`).

    A value of JSON types only is written by the C encoder as it is; `to_jsonable` walks
    the value first only when that fails (NaN, numpy scalars, sets, huge ints, nesting
    past the encoder's recursion) or the text holds a lone surrogate. The text is the
    same either way."""
    try:
        text = json.dumps(
            value, indent=indent, sort_keys=sort_keys, ensure_ascii=ensure_ascii, allow_nan=False
        )
    except (TypeError, ValueError, RecursionError):
        pass
    else:
        if not (_SURROGATE_ESCAPE if ensure_ascii else _LONE_SURROGATE).search(text):
            return text
    return json.dumps(
        to_jsonable(value),
        indent=indent,
        sort_keys=sort_keys,
        ensure_ascii=ensure_ascii,
        allow_nan=False,
    )


#: types orjson would write in a form of its own: left to `to_jsonable`, as `dumps` does
_PASSTHROUGH = (
    orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_SUBCLASS
)


def line_bytes(value: Any) -> bytes:
    """Compact standard JSON of ``value`` as UTF-8, for one line of a JSONL output: the
    values of `dumps` (non-finite floats as ``null``, `to_jsonable` for what JSON cannot
    hold), written by orjson about ten times faster, without spaces after ``,`` and
    ``:``, and with each float as orjson writes it (``1e+16``, ``2.5e-7``,
    ``0.00001``: shortest forms that read back as the same floats)."""
    try:
        return orjson.dumps(value, option=_PASSTHROUGH)
    except TypeError:  # orjson.JSONEncodeError is one: a type or text orjson refuses
        pass
    plain = to_jsonable(value)
    try:
        return orjson.dumps(plain)
    except TypeError:  # nested deeper than orjson's 255 levels
        text = json.dumps(plain, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        return text.encode("utf-8")
