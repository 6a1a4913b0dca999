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

Documents follow the rules of `assay.core.json_documents` (key names, nesting).
"""

from __future__ import annotations

import decimal
import json
import math
import re
from datetime import datetime
from typing import Any

from assay.core.json_documents import BIG_INT_BITS, int_text, rebuild

__all__ = [
    "VALUE_TYPES",
    "as_text",
    "canonical",
    "detect_type",
    "is_date",
    "is_email",
    "is_null",
    "is_numeric_text",
    "numeric_value",
]

VALUE_TYPES = ("boolean", "numeric", "date", "email", "array", "object", "text")


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
    if isinstance(value, int) and value.bit_length() > BIG_INT_BITS:
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
