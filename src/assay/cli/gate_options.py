"""The ``METRIC=VALUE`` options of ``assay evaluate`` (``--threshold``, ``--fail-under``,
``--fail-over``): parsed, and checked against the metrics they name."""

from __future__ import annotations

import math

import typer

from assay.metrics.registry import metric_class

__all__ = ["check_bounds", "parse_pairs"]


def parse_pairs(items: list[str], option: str) -> dict[str, float]:
    """``METRIC=VALUE`` items as a mapping; `typer.BadParameter` naming ``option`` for a
    malformed item, a value that is no finite number, or a metric given twice."""
    pairs: dict[str, float] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise typer.BadParameter(f"expected METRIC=VALUE, got {item!r}", param_hint=option)
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not math.isfinite(number):
            raise typer.BadParameter(
                f"{value!r} is not a finite number in {item!r}", param_hint=option
            ) from None
        if name.strip() in pairs and pairs[name.strip()] != number:
            raise typer.BadParameter(
                f"{name.strip()} is given twice with different values", param_hint=option
            )
        pairs[name.strip()] = number
    return pairs


def _check_range(name: str, value: float, what: str) -> None:
    cls = metric_class(name)
    low, high = cls.value_range
    if value >= low and (high is None or value <= high):
        return
    span = f"{low:g}..{high:g}" if high is not None else f"{low:g} or more"
    unit = "" if cls.unit in {"ratio", "score", "bool"} else f" {cls.unit}"
    hint = ""
    if high == 1 and 1 < value <= 100:
        hint = f"; scores are 0..1 in Assay: did you mean {value / 100:g}?"
    raise ValueError(f"{what}: outside the range of {name} ({span}{unit}){hint}")


def check_bounds(
    thresholds: dict[str, float],
    under: dict[str, float],
    over: dict[str, float],
    run: list[str],
) -> None:
    """Every threshold and gate names a known metric and lies in its range; a gate's
    metric is one this run scores. Raises ValueError (or KeyError) saying which and why."""
    for name, value in thresholds.items():
        try:
            metric_class(name)
        except KeyError as exc:
            raise ValueError(f"threshold for an {exc.args[0]}") from None
        _check_range(name, value, f"threshold {name}={value:g}")
    for option, pairs in (("--fail-under", under), ("--fail-over", over)):
        for name, bound in pairs.items():
            metric_class(name)
            if name not in run:
                raise ValueError(
                    f"{option} {name}={bound:g}: {name} is not among the metrics of this run; "
                    f"add --metric {name}"
                )
            _check_range(name, bound, f"{option} {name}={bound:g}")
