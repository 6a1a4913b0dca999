"""JSON documents as Assay holds them: the JSON name of any object key (`key_name`), ints
beyond Python's 4,300-digit ``str`` limit (`int_text`), strict-JSON copies of values
(`json_safe`, `rebuild`), and the nesting and key rules every document obeys
(`check_document`, within a run's `depth_limit`).

Documents: at most `MAX_DEPTH` levels of nesting (a run's ``max_json_depth``, see
`depth_limit`), and object keys that JSON can hold. Parsed JSON always has string keys; a
Python ``dict`` may also use ``int``, ``float``, ``bool`` or ``None`` keys, which are named
as ``json.dumps`` writes them (``1`` -> ``"1"``, ``True`` -> ``"true"``, ``None`` ->
``"null"``), so a document compares the same as its JSON text. Two keys of one object
with the same JSON name (``1`` and ``"1"``), a key of another type (a tuple) or deeper
nesting is a ``ValueError`` naming the place.
"""

from __future__ import annotations

import decimal
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from assay.core.config import DEFAULT_MAX_JSON_DEPTH, MAX_JSON_DEPTH_CEILING, raise_hint

__all__ = [
    "BIG_INT_BITS",
    "MAX_DEPTH",
    "check_document",
    "depth_limit",
    "int_text",
    "json_safe",
    "key_name",
    "rebuild",
]

#: default deepest nesting of objects/arrays a document may have (a deeper one is a
#: ValueError); a run's ``max_json_depth`` replaces it through `depth_limit`
MAX_DEPTH = DEFAULT_MAX_JSON_DEPTH
_DEPTH: ContextVar[int] = ContextVar("assay_max_json_depth", default=MAX_DEPTH)
# ints with more bits than this may exceed Python's 4,300-digit str() limit
BIG_INT_BITS = 14_000


def key_name(key: Any) -> str:
    """The JSON name of an object key, as ``json.dumps`` writes it; ValueError for a key
    type JSON cannot hold."""
    if isinstance(key, str):
        return key
    if key is None:
        return "null"
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int):
        return int_text(key)
    if isinstance(key, float):
        return float.__repr__(key)
    raise ValueError(
        f"object key {key!r} ({type(key).__name__}) is not a JSON key: use str, int, float, "
        "bool or None keys"
    )


def int_text(value: int) -> str:
    """``str(value)``, also beyond Python's 4,300-digit limit for int -> str."""
    if value.bit_length() <= BIG_INT_BITS:
        return str(value)
    return str(decimal.Decimal(value))


def json_safe(value: Any) -> Any:
    """``value`` as strict JSON can hold it, for evidence and output rows: NaN/Infinity
    become the strings "NaN"/"Infinity"/"-Infinity" (``json.dumps`` would write bare
    ``NaN``, which jq, JavaScript and PostgreSQL reject), ints over 4,300 digits their
    decimal text, keys their JSON names, tuples lists. Other values are returned as-is."""
    return rebuild(value, _safe_scalar)


def _safe_scalar(value: Any) -> Any:
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, int) and not isinstance(value, bool):
        return value if value.bit_length() <= BIG_INT_BITS else int_text(value)
    return value


def rebuild(
    value: Any,
    scalar: Callable[[Any], Any],
    key: Callable[[Any], str] = key_name,
    sequences: tuple[type, ...] = (list, tuple),
) -> Any:
    """A copy of ``value`` with dicts rebuilt (keys through ``key``), ``sequences`` as
    lists and every other value through ``scalar``. Iterative: nesting costs no recursion,
    so documents as deep as ``max_json_depth`` allows never meet Python's recursion limit.
    """
    if not isinstance(value, (dict, *sequences)):
        return scalar(value)
    root: dict[str, Any] | list[Any] = {} if isinstance(value, dict) else []
    stack: list[tuple[Any, dict[str, Any] | list[Any]]] = [(value, root)]
    while stack:
        source, target = stack.pop()
        items = source.items() if isinstance(source, dict) else enumerate(source)
        for k, item in items:
            if isinstance(item, (dict, *sequences)):
                copy: Any = {} if isinstance(item, dict) else []
                stack.append((item, copy))
            else:
                copy = scalar(item)
            if isinstance(target, dict):
                target[key(k)] = copy
            else:
                target.append(copy)
    return root


@contextmanager
def depth_limit(levels: int) -> Iterator[None]:
    """Within the block, `check_document` allows ``levels`` levels of nesting (a run's
    ``max_json_depth``; at most the ceiling Python's JSON parser can hold)."""
    if not 1 <= levels <= MAX_JSON_DEPTH_CEILING:
        raise ValueError(f"max_json_depth must be in 1..{MAX_JSON_DEPTH_CEILING}. Got {levels}.")
    token = _DEPTH.set(levels)
    try:
        yield
    finally:
        _DEPTH.reset(token)


def check_document(document: Any, side: str = "document") -> None:
    """Raise ValueError when ``document`` nests deeper than the depth limit (`MAX_DEPTH`
    unless `depth_limit` says otherwise) or has an object whose keys are not JSON keys or
    collide once named (``1`` and ``"1"``)."""
    limit = _DEPTH.get()
    stack: list[tuple[Any, int]] = [(document, 0)]
    while stack:  # fast pass: no paths are built unless something is wrong
        value, depth = stack.pop()
        if isinstance(value, dict):
            if depth >= limit or not (all(type(k) is str for k in value) or _names_ok(value)):
                _locate_problem(document, side, limit)  # raises, naming the place
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list | tuple):
            if depth >= limit:
                _locate_problem(document, side, limit)
            stack.extend((v, depth + 1) for v in value)


def _names_ok(obj: dict[Any, Any]) -> bool:
    """True when every key of ``obj`` has a JSON name and no two share one."""
    try:
        names = {key_name(k) for k in obj}
    except ValueError:
        return False
    return len(names) == len(obj)


def _locate_problem(document: Any, side: str, limit: int) -> None:
    """Second pass of `check_document`: find the first problem and raise it with its path."""
    stack: list[tuple[Any, int, str]] = [(document, 0, "$")]
    while stack:
        value, depth, where = stack.pop()
        if isinstance(value, dict):
            items = list(value.items())
        elif isinstance(value, list | tuple):
            items = list(enumerate(value))
        else:
            continue
        if depth >= limit:
            shown = where if len(where) <= 60 else where[:40] + "…" + where[-19:]
            raise ValueError(
                f"{side} nests deeper than {limit} levels (at {shown}), the limit of "
                f"max_json_depth; {raise_hint('max_json_depth')}"
            )
        if isinstance(value, dict):
            names: dict[str, Any] = {}
            for key, _ in items:
                try:
                    name = key_name(key)
                except ValueError as exc:
                    raise ValueError(f"{side} at {where}: {exc}") from None
                if name in names:
                    raise ValueError(
                        f"{side} at {where}: keys {names[name]!r} and {key!r} have the same "
                        f"JSON name {name!r}"
                    )
                names[name] = key
            stack.extend((v, depth + 1, f"{where}.{key_name(k)}") for k, v in items)
        else:
            stack.extend((v, depth + 1, f"{where}[{i}]") for i, v in items)
