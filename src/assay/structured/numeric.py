"""The NUMERIC strategy: two numbers match when they differ by at most a tolerance.

Rule (``b`` is the ground-truth number, ``a`` the output's)::

    match  <=>  |a − b| <= max(abs_tol, rel_tol · |b|)        score 1 if match else 0

The tolerance is relative to the ground truth, not symmetric: the ground truth is the
reference a user states an error budget against (``rel_tol=0.01``: "within 1% of the
right answer").

What counts as a number is the JSON comparison's own rule
(`assay.structured.values.numeric_value`): JSON numbers and plain numeric text (``"3.50"``,
``"1,200"``, ``"6.02e23"``); ``"12%"``, ``"$5"``, booleans, NaN and infinities are not.
A NUMERIC field where either side is not a number scores 0 with a reason naming the side
and value; there is no fallback to EXACT, so a field configured NUMERIC is always compared
as numbers or visibly not at all.

Arithmetic is decimal (60 significant digits) on the numbers' decimal text, so a
difference exactly at the tolerance matches as it does by hand: 100.01 vs 100 with
``rel_tol=1e-4`` is ``0.01 <= 0.01``, where binary floats give 0.010000000000005 > 0.01.

Defaults: ``rel_tol=1e-6``, ``abs_tol=0``. NUMERIC with the defaults means "the same
number": it forgives formatting (``"3.50"`` vs ``3.5``, ``"1,200"`` vs ``1200``) and float
noise (``0.1 + 0.2`` vs ``0.3``), and nothing a person would call a different value. A
looser default (numpy's ``rtol=1e-5, atol=1e-8`` or 1%) would pass wrong amounts silently;
``abs_tol=0`` keeps small quantities apart (with ``atol=1e-8``, 1e-9 would equal 0). Set
the tolerance the task allows (``rel_tol=0.01`` for estimates, ``abs_tol=0.005`` for
amounts rounded to cents). With ``abs_tol=0`` a ground truth of 0 matches only 0.
"""

from __future__ import annotations

import decimal
import math
from typing import Any

from assay.structured.values import numeric_value

__all__ = ["DEFAULT_ABS_TOL", "DEFAULT_REL_TOL", "check_tolerance", "numeric_match"]

#: default relative tolerance of NUMERIC (module docstring says why)
DEFAULT_REL_TOL = 1e-6
#: default absolute tolerance of NUMERIC
DEFAULT_ABS_TOL = 0.0

_CONTEXT = decimal.Context(
    prec=60, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN, traps=[decimal.InvalidOperation]
)
_SHOWN_CHARS = 40


def check_tolerance(name: str, value: float) -> float:
    """``value`` as a float when it is a finite number >= 0, else a ValueError naming it."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
    ):
        raise ValueError(f"The '{name}' parameter must be a finite number >= 0. Got {value!r}.")
    return float(value)


def _show(number: decimal.Decimal) -> str:
    """A decimal as a person writes it: no trailing zeros, no exponent unless huge/tiny."""
    if number.is_zero():
        return "0"
    number = number.normalize(_CONTEXT)
    if -12 <= number.adjusted() <= 20:
        return f"{number:f}"
    return f"{number:e}"


def _as_given(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 1] + "…"


def numeric_match(expected: Any, output: Any, rel_tol: float, abs_tol: float) -> tuple[float, str]:
    """NUMERIC for one field: (1.0 or 0.0, the reason stating both values and the
    tolerance). ``expected`` is the ground truth ``b`` of ``|a − b| <= max(abs_tol,
    rel_tol·|b|)``."""
    b, a = numeric_value(expected), numeric_value(output)
    if b is None or a is None:
        side, value = ("expected", expected) if b is None else ("output", output)
        return 0.0, (
            f"NUMERIC: {side} value {_as_given(value)} is not a number (JSON numbers or "
            "plain numeric text such as 1,234.50), so it cannot match"
        )
    rel, absolute = decimal.Decimal(repr(rel_tol)), decimal.Decimal(repr(abs_tol))
    difference = _CONTEXT.abs(_CONTEXT.subtract(a, b))
    tolerance = max(absolute, _CONTEXT.multiply(rel, _CONTEXT.abs(b)))
    ok = difference <= tolerance
    reason = (
        f"NUMERIC: |{_as_given(output)} − {_as_given(expected)}| = {_show(difference)} "
        f"{'<=' if ok else '>'} {_show(tolerance)} = max(abs_tol {abs_tol:g}, "
        f"rel_tol {rel_tol:g} × {_show(_CONTEXT.abs(b))})"
    )
    return (1.0 if ok else 0.0), reason
