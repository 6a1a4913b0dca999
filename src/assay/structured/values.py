"""Value rules of the JSON comparison: what counts as null, value-type detection, and the
canonical form EXACT compares.

Null (JSON specification): ``None``, ``""`` or a whitespace-only string. Empty objects ``{}`` and
empty arrays ``[]`` are *values*, not nulls (the specification's definition is kept as written).

Value types (used to auto-detect a field's strategy, checked in this order):

- ``boolean``: ``true``/``false`` (JSON booleans, or the strings "true"/"false" in any case);
- ``numeric``: JSON numbers, or strings that are plain numbers: ``42``, ``-3.5``, ``1,234.50``,
  ``6.02e23`` (no currency symbols or units: ``$12`` and ``12 kg`` are text);
- ``date``: strings that are a whole date: ISO 8601 dates and date-times (``2024-03-05``,
  ``2024-03-05T10:00:00Z``, ``2024-03-05 10:00``), numeric day/month/year with ``/``, ``.`` or
  ``-`` (``05/03/2024``, ``5.3.24``, ``2024/03/05``; day and month must be in range in at
  least one order), and English month-name dates (``5 March 2024``, ``March 5, 2024``,
  ``Mar 5th 2024``, ``March 2024``). Times alone and relative dates ("yesterday") are text;
- ``email``: ``local@domain.tld`` with no spaces and a 2+ letter top-level domain;
- ``array`` (JSON array), ``object`` (JSON object);
- ``text``: every other string.

Documents (`check_document`): at most `MAX_DEPTH` levels of nesting (a run's
``max_json_depth``, see `depth_limit`), and object keys that
JSON can hold. Parsed JSON always has string keys; a Python ``dict`` may also use ``int``,
``float``, ``bool`` or ``None`` keys, which are named as ``json.dumps`` writes them
(``1`` -> ``"1"``, ``True`` -> ``"true"``, ``None`` -> ``"null"``), so a document compares
the same as its JSON text. Two keys of one object with the same JSON name (``1`` and
``"1"``), a key of another type (a tuple) or deeper nesting is a ``ValueError`` naming the
place.
"""

from __future__ import annotations

import decimal
import json
import math
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime
from typing import Any

from assay.config import DEFAULT_MAX_JSON_DEPTH, MAX_JSON_DEPTH_CEILING, raise_hint

__all__ = [
    "MAX_DEPTH",
    "VALUE_TYPES",
    "as_text",
    "canonical",
    "check_document",
    "depth_limit",
    "detect_type",
    "int_text",
    "is_date",
    "is_email",
    "is_null",
    "is_numeric_text",
    "json_safe",
    "key_name",
    "numeric_value",
    "rebuild",
]

VALUE_TYPES = ("boolean", "numeric", "date", "email", "array", "object", "text")
#: default deepest nesting of objects/arrays a document may have (a deeper one is a
#: ValueError); a run's ``max_json_depth`` replaces it through `depth_limit`
MAX_DEPTH = DEFAULT_MAX_JSON_DEPTH
_DEPTH: ContextVar[int] = ContextVar("assay_max_json_depth", default=MAX_DEPTH)
# ints with more bits than this may exceed Python's 4,300-digit str() limit
_BIG_INT_BITS = 14_000


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
    if value.bit_length() <= _BIG_INT_BITS:
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
        return value if value.bit_length() <= _BIG_INT_BITS else int_text(value)
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


def is_null(value: Any) -> bool:
    """True for ``None``, ``""`` and whitespace-only strings (JSON specification's definition)."""
    if value is None:
        return True
    return isinstance(value, str) and value.strip() == ""


_NUMBER = re.compile(r"[+-]?(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)(?:[eE][+-]?\d+)?")
_EMAIL = re.compile(r"[A-Za-z0-9._%+'\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}")
_ISO_DATE = re.compile(
    r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?"
)
_NUMERIC_DMY = re.compile(r"(\d{1,2})([/.\-])(\d{1,2})\2(\d{2}|\d{4})")
_NUMERIC_YMD = re.compile(r"(\d{4})([/.])(\d{1,2})\2(\d{1,2})")
_MONTHS = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)
_DAY = r"(?:[12]\d|3[01]|0?[1-9])(?:st|nd|rd|th)?"
_NAMED_DATES = (
    re.compile(rf"{_DAY}\s+{_MONTHS},?\s+\d{{4}}", re.IGNORECASE),  # 5 March 2024
    re.compile(rf"{_MONTHS}\s+{_DAY},?\s+\d{{4}}", re.IGNORECASE),  # March 5, 2024
    re.compile(rf"{_MONTHS},?\s+\d{{4}}", re.IGNORECASE),  # March 2024
)


def is_numeric_text(text: str) -> bool:
    """A string that is one plain number (``42``, ``-3.5``, ``1,234.50``, ``6.02e23``)."""
    text = text.strip()
    return _NUMBER.fullmatch(text) is not None


def numeric_value(value: Any) -> decimal.Decimal | None:
    """The exact decimal number a value stands for, or None when it is not one.

    Numbers: ints; finite floats as their shortest decimal text (``100.01`` is exactly
    100.01, not the binary float's 100.0100000000000051...). Text: what `is_numeric_text`
    calls numeric (``"3.50"``, ``"1,200"``, ``"-7"``, ``"6.02e23"``; thousands commas
    dropped). None for booleans, NaN and infinities, text that is not one plain number
    (``"12%"``, ``"$5"``, ``"5 kg"``), numbers whose exponent is beyond what `decimal`
    holds, arrays, objects and everything else.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return decimal.Decimal(value)
    if isinstance(value, float):
        return decimal.Decimal(repr(value)) if math.isfinite(value) else None
    if isinstance(value, str) and is_numeric_text(value):
        try:
            return decimal.Decimal(value.strip().replace(",", ""))
        except decimal.InvalidOperation:  # an exponent past decimal's limits
            return None
    return None


def _valid_day_month(day: int, month: int) -> bool:
    return 1 <= day <= 31 and 1 <= month <= 12


def is_date(text: str) -> bool:
    """A string that is a whole calendar date or date-time (see the module docstring)."""
    text = text.strip()
    if _ISO_DATE.fullmatch(text):
        try:
            datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            return False
        return True
    m = _NUMERIC_DMY.fullmatch(text)
    if m:
        first, second = int(m.group(1)), int(m.group(3))
        return _valid_day_month(first, second) or _valid_day_month(second, first)
    m = _NUMERIC_YMD.fullmatch(text)
    if m:
        return _valid_day_month(int(m.group(4)), int(m.group(3)))
    return any(p.fullmatch(text) for p in _NAMED_DATES)


def is_email(text: str) -> bool:
    """A string that is one e-mail address."""
    return _EMAIL.fullmatch(text.strip()) is not None


def detect_type(value: Any) -> str:
    """The value type of a (non-null) JSON value: one of `VALUE_TYPES`."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "numeric"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    text = value if isinstance(value, str) else str(value)
    if text.strip().lower() in {"true", "false"}:
        return "boolean"
    if is_numeric_text(text):
        return "numeric"
    if is_date(text):
        return "date"
    if is_email(text):
        return "email"
    return "text"


def _normalise(value: Any) -> Any:
    return rebuild(value, _normal_scalar)


def _normal_scalar(value: Any) -> Any:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int) and value.bit_length() > _BIG_INT_BITS:
        return int_text(value)  # json.dumps and str() refuse ints over 4,300 digits
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer() and abs(value) < 1e16:
            return int(value)
        return value
    if isinstance(value, str):
        return value.strip()
    return value


def canonical(value: Any) -> str:
    """The form EXACT compares: the JSON specification's ``str(value).lower()``, JSON with
    sorted keys for objects and arrays.

    Two small additions to the specification: surrounding whitespace of strings is ignored, and a
    float with an integral value equals the integer (``42.0`` == ``42``), also inside arrays
    and objects. Booleans render as ``true``/``false`` so ``True`` equals ``"true"``. Array
    order matters (``[1, 2]`` != ``[2, 1]``).
    """
    if type(value) is str:
        return value.strip().lower()
    if type(value) is int:
        return int_text(value)
    value = _normalise(value)
    if isinstance(value, dict | list):
        text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    elif isinstance(value, bool):
        text = "true" if value else "false"
    else:
        text = str(value)
    return text.lower()


def as_text(value: Any) -> str:
    """The text FUZZY and SEMANTIC compare: strings as they are, other values as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(_normalise(value))
    return json.dumps(_normalise(value), sort_keys=True, ensure_ascii=False)
