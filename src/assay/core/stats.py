"""Summary statistics the runner, the store and the dashboard share (pure numpy).

Every function takes an iterable of numbers and skips ``None`` and NaN first, so metric
results can be passed straight in ("missing is not zero": an undefined value is left out
of an aggregate, never counted as 0). An empty input gives ``None``.

- Percentiles use numpy's ``linear`` method (Hyndman & Fan type 7, numpy's default): the
  q-th percentile of sorted values ``x[0..n-1]`` sits at position ``h = (n - 1) * q / 100``
  and is ``x[floor(h)] + (h - floor(h)) * (x[floor(h) + 1] - x[floor(h)])``. Example:
  ``[1, 2, 3, 4]`` has p50 = 2.5 and p90 = 3.7 (h = 2.7).
- ``bootstrap_ci`` is the percentile bootstrap of the mean: resample the values with
  replacement ``n_resamples`` times from ``numpy.random.default_rng(seed)``, take each
  resample's mean, and report the ``(1 - confidence) / 2`` and ``(1 + confidence) / 2``
  percentiles of those means (linear interpolation again). The same seed gives the same
  interval. It assumes independent samples and under-covers for very small n (< ~10).

Performance metrics should be summarised with p50/p90/p99, not only the mean: latency
distributions are long-tailed and the mean hides the tail.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "DEFAULT_PERCENTILES",
    "TOO_LARGE",
    "Summary",
    "bootstrap_ci",
    "clean",
    "mean",
    "percentile",
    "percentiles",
    "summarize",
]

#: the percentiles reported by default (p50 = median)
DEFAULT_PERCENTILES: tuple[float, ...] = (50.0, 90.0, 99.0)


def clean(values: Iterable[float | int | None]) -> np.ndarray:
    """The values as a float array with ``None`` and NaN removed (infinities rejected).

    Raises ValueError on an infinite value: a metric never produces one, so it is a bug
    upstream, not something to average.
    """
    if isinstance(values, np.ndarray) and values.dtype == np.float64 and values.ndim == 1:
        array = values  # a run's tally of values: no None to skip
    else:
        array = np.asarray([float(v) for v in values if v is not None], dtype=np.float64)
    array = array[~np.isnan(array)]
    if array.size and not np.all(np.isfinite(array)):
        raise ValueError("cannot summarise infinite values")
    return array


# values beyond this magnitude are scaled down before summing or interpolating, so that
# finite inputs near the float maximum (1.8e308) give finite means and percentiles
_SAFE_MAGNITUDE = 1e300


def _scale(array: np.ndarray) -> float:
    """1.0, or the largest magnitude when summing/subtracting the values could overflow."""
    if not array.size:
        return 1.0
    top = float(np.max(np.abs(array)))
    return top if top > _SAFE_MAGNITUDE else 1.0


def _mean(array: np.ndarray) -> float:
    scale = _scale(array)
    return float((array / scale).mean()) * scale


def _percentiles(array: np.ndarray, qs: Sequence[float]) -> list[float]:
    scale = _scale(array)
    found = np.percentile(array / scale, list(qs), method="linear")
    return [float(v) * scale for v in np.atleast_1d(found)]


def mean(values: Iterable[float | int | None]) -> float | None:
    """Arithmetic mean of the non-missing values; None when there are none."""
    array = clean(values)
    return _mean(array) if array.size else None


def percentile(values: Iterable[float | int | None], q: float) -> float | None:
    """The q-th percentile (0 <= q <= 100), linear interpolation; None for no values.

    >>> percentile([1, 2, 3, 4], 90)  # h = 3 * 0.9 = 2.7 -> 3 + 0.7 * (4 - 3)
    3.7
    """
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile q must be in [0, 100]. Got {q}.")
    array = clean(values)
    if not array.size:
        return None
    return _percentiles(array, [q])[0]


def percentiles(
    values: Iterable[float | int | None], qs: Sequence[float] = DEFAULT_PERCENTILES
) -> dict[str, float | None]:
    """Several percentiles at once, keyed ``p50``, ``p90``, ``p99`` (``p99.9`` for 99.9)."""
    array = clean(values)
    out: dict[str, float | None] = {}
    for q in qs:
        if not 0.0 <= q <= 100.0:
            raise ValueError(f"percentile q must be in [0, 100]. Got {q}.")
        key = f"p{q:g}"
        out[key] = _percentiles(array, [q])[0] if array.size else None
    return out


#: values from which `bootstrap_ci` resamples the counts of each distinct value, where
#: there are few (at most one in 16 values distinct), instead of the values' indices
COUNTS_FROM = 10_000


def bootstrap_ci(
    values: Iterable[float | int | None],
    *,
    confidence: float = 0.95,
    n_resamples: int = 1000,
    seed: int = 0,
) -> tuple[float | None, float | None]:
    """Percentile-bootstrap confidence interval of the mean: ``(low, high)``.

    Args:
        values: the per-sample values (None/NaN skipped).
        confidence: coverage of the interval, in (0, 1).
        n_resamples: bootstrap resamples (each of the same size as the data).
        seed: seed of ``numpy.random.default_rng``; the same seed gives the same interval.

    Returns ``(None, None)`` for no values and ``(x, x)`` for a single value (no spread
    can be estimated from one sample; callers wanting "undefined" should check n >= 2).

    Each resample draws ``n`` indices. From `COUNTS_FROM` values on, when at most one
    value in 16 is distinct (a pass/fail metric), it draws how often each distinct value
    is picked instead (multinomial): the same bootstrap, O(distinct values) a resample
    where indices cost O(n) (about 7 µs a value at 1,000 resamples), with other random
    draws than indices would give.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1). Got {confidence}.")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be at least 1. Got {n_resamples}.")
    array = clean(values)
    n = array.size
    if n == 0:
        return None, None
    if n == 1:
        return float(array[0]), float(array[0])
    scale = _scale(array)
    array = array / scale
    rng = np.random.default_rng(seed)
    distinct, counts = np.unique(array, return_counts=True) if n >= COUNTS_FROM else (array, None)
    if counts is not None and distinct.size * 16 <= n:
        # few distinct values (a pass/fail metric): each resample's count of each value,
        # one multinomial draw, instead of n indices; the same distribution of means
        means = rng.multinomial(n, counts / n, size=n_resamples) @ distinct / n
    else:
        means = np.empty(n_resamples, dtype=np.float64)
        # chunks bound the memory of the (resamples x n) index matrix for large n
        chunk = max(1, min(n_resamples, 2_000_000 // n))
        for start in range(0, n_resamples, chunk):
            stop = min(n_resamples, start + chunk)
            idx = rng.integers(0, n, size=(stop - start, n))
            means[start:stop] = array[idx].mean(axis=1)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.percentile(means, [100.0 * alpha, 100.0 * (1.0 - alpha)], method="linear")
    return float(low) * scale, float(high) * scale


#: why a statistic of finite values is None: its value is past the float range
TOO_LARGE = "exceeds the largest float (1.8e308)"


@dataclass(frozen=True)
class Summary:
    """Aggregate of one series: count, missing count, mean, spread and percentiles.

    ``reasons`` names each statistic that is None although there are enough values, and
    why (only the std can be: a spread past the float range, e.g. of -1.7e308 and 1.7e308;
    the mean, percentiles and interval lie between the min and max, so they always fit).
    """

    n: int
    n_missing: int
    mean: float | None
    std: float | None
    min: float | None
    max: float | None
    p50: float | None
    p90: float | None
    p99: float | None
    ci_low: float | None
    ci_high: float | None
    reasons: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def summarize(
    values: Iterable[float | int | None],
    *,
    confidence: float = 0.95,
    n_resamples: int = 1000,
    seed: int = 0,
) -> Summary:
    """Count, mean, sample standard deviation (ddof=1), min/max, p50/p90/p99 and the
    bootstrap CI of the mean (None where undefined: no values, or std/CI for n < 2)."""
    raw = list(values)
    array = clean(raw)
    n = int(array.size)
    if n == 0:
        return Summary(0, len(raw), None, None, None, None, None, None, None, None, None)
    pct = percentiles(array)
    low, high = (
        bootstrap_ci(array, confidence=confidence, n_resamples=n_resamples, seed=seed)
        if n >= 2
        else (None, None)
    )
    scale = _scale(array)
    std = float((array / scale).std(ddof=1)) * scale if n >= 2 else None
    reasons = {} if std is None or math.isfinite(std) else {"std": TOO_LARGE}
    return Summary(
        n=n,
        n_missing=len(raw) - n,
        mean=_mean(array),
        std=None if reasons else std,
        min=float(array.min()),
        max=float(array.max()),
        p50=pct["p50"],
        p90=pct["p90"],
        p99=pct["p99"],
        ci_low=low,
        ci_high=high,
        reasons=reasons,
    )
