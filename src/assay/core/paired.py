"""Paired comparison of two sides' values on the same samples (pure numpy).

`assay compare`, the dashboard's compare page (`assay.store.compare`) and a run of
several targets (`assay run --target A --target B`) share these statistics, so the same
values give the same figures everywhere:

- the difference is B − A, per pair, and its mean;
- the 95 % interval is the percentile bootstrap of the mean paired difference:
  `n_resamples` resamples of the pairs with replacement (``numpy.random.default_rng(seed)``,
  2,000 and seed 0 by default), the 2.5th and 97.5th percentiles of their means;
- the p-value is the two-sided sign-flip (paired randomisation) test: under the null
  hypothesis each paired difference is as likely to have the opposite sign, and p is the
  share of sign arrangements whose mean difference is at least as far from 0 as the one
  observed. Up to `EXACT_UP_TO` pairs every one of the 2^n arrangements is counted (the
  exact p-value, as ``scipy.stats.permutation_test(..., permutation_type="samples")``
  gives it); beyond, `n_resamples` random arrangements plus the observed one (the Monte
  Carlo estimate, ``(1 + hits) / (n_resamples + 1)``).
- wins, ties and losses count the pairs where B is above, level with or below A; two
  values are level when they differ by at most `TIE_TOLERANCE` times the larger of 1 and
  their magnitudes (float noise, not a real difference). Which of above and below is a win
  depends on the metric's polarity (`wins_ties_losses`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

__all__ = [
    "EXACT_UP_TO",
    "TIE_TOLERANCE",
    "PairedFigures",
    "Resampler",
    "paired_difference",
    "paired_figures",
    "sign_flip_p",
    "wins_ties_losses",
]

#: pairs up to which the sign-flip p-value counts all 2^n sign arrangements (4,096)
EXACT_UP_TO = 12
#: relative tolerance within which two values tie (see the module's docstring)
TIE_TOLERANCE = 1e-9


class Resampler:
    """Seeded bootstrap counts and random sign flips, made once per number of pairs and
    reused across the metrics of one comparison (the same pairs get the same resamples)."""

    def __init__(self, n_resamples: int = 2000, seed: int = 0) -> None:
        if n_resamples < 1:
            raise ValueError(f"n_resamples must be at least 1. Got {n_resamples}.")
        self.n_resamples = n_resamples
        self.seed = seed
        self._cache: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def matrices(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(bootstrap counts, ±1 signs), each n_resamples × n: how often each pair is
        drawn into each resample (so a resample's mean is one row's dot product with the
        differences: one matrix product per metric instead of a gather), and one random
        bit per sign."""
        if n not in self._cache:
            rng = np.random.default_rng(self.seed)
            size = self.n_resamples * n
            idx = rng.integers(0, n, size=(self.n_resamples, n), dtype=np.int32)
            idx += np.arange(0, size, n, dtype=np.int32)[:, None]  # row r counts in r*n..
            counts = np.bincount(idx.ravel(), minlength=size).astype(np.float64)
            bits = np.unpackbits(np.frombuffer(rng.bytes((size + 7) // 8), np.uint8), count=size)
            signs = bits.reshape(self.n_resamples, n).astype(np.float64)
            signs *= 2.0
            signs -= 1.0
            self._cache[n] = (counts.reshape(self.n_resamples, n), signs)
        return self._cache[n]


def _all_signs(n: int) -> np.ndarray:
    """Every ±1 arrangement of n signs: a 2^n × n matrix (row r: the bits of r)."""
    bits = (np.arange(2**n, dtype=np.int64)[:, None] >> np.arange(n, dtype=np.int64)) & 1
    return bits.astype(np.float64) * 2.0 - 1.0


def sign_flip_p(differences: Sequence[float], resampler: Resampler | None = None) -> float:
    """The two-sided sign-flip p-value of the mean of ``differences`` (see the module's
    docstring): exact up to `EXACT_UP_TO` differences, else a Monte Carlo estimate.

    >>> sign_flip_p([1.0, 1.0, 1.0])  # 2 of the 8 arrangements reach |mean| 1
    0.25
    """
    d = np.asarray(differences, dtype=float)
    if d.size == 0:
        raise ValueError("sign_flip_p needs at least one difference")
    observed = abs(float(d.mean()))
    # float noise in a sum must not drop an arrangement that reaches the observed mean
    reach = observed - 1e-12 * max(1.0, observed)
    if d.size <= EXACT_UP_TO:
        flipped = np.abs(_all_signs(d.size) @ d) / d.size
        return float(np.count_nonzero(flipped >= reach)) / flipped.size
    resampler = resampler or Resampler()
    _, signs = resampler.matrices(d.size)
    # einsum, not BLAS: OpenBLAS's threads wait on each other on a busy machine (a gemv
    # of 2000 x 1000 took 8-16 ms there against 1.3 ms in einsum's one loop)
    flipped = np.abs(np.einsum("ij,j->i", signs, d)) / d.size
    # +1 in numerator and denominator: the observed arrangement is one of the permutations
    return (1 + int(np.count_nonzero(flipped >= reach))) / (resampler.n_resamples + 1)


def paired_difference(
    a: Sequence[float],
    b: Sequence[float],
    *,
    n_resamples: int = 2000,
    seed: int = 0,
    resampler: Resampler | None = None,
) -> tuple[float, float, float, float]:
    """Mean of b−a, its bootstrap 95% CI, and the sign-flip p-value: (mean, low, high, p)."""
    d = np.asarray(b, dtype=float) - np.asarray(a, dtype=float)
    if d.size == 0:
        raise ValueError("paired_difference needs at least one pair")
    resampler = resampler or Resampler(n_resamples, seed)
    counts, _ = resampler.matrices(d.size)
    observed = float(d.mean())
    means = np.einsum("ij,j->i", counts, d) / d.size
    low, high = np.percentile(means, [2.5, 97.5])
    return observed, float(low), float(high), sign_flip_p(d, resampler)


def _level(a: float, b: float) -> bool:
    return abs(b - a) <= TIE_TOLERANCE * max(1.0, abs(a), abs(b))


@dataclass(frozen=True)
class PairedFigures:
    """One metric's paired comparison of side B against side A.

    ``above``, ``level`` and ``below`` count the pairs where B is above, level with or
    below A; ``left_out`` the samples that are N/A on at least one side (not paired).
    The difference, interval and p-value are None with fewer than two pairs."""

    n_pairs: int
    left_out: int
    diff: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    above: int
    level: int
    below: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def paired_figures(
    a: Mapping[str, float | None],
    b: Mapping[str, float | None],
    *,
    samples: Collection[str] | None = None,
    resampler: Resampler | None = None,
) -> PairedFigures:
    """The paired figures of values keyed by sample (None values are N/A): pairs are the
    keys with a value on both sides, in sorted key order (the bootstrap's draws follow
    it); ``samples`` (default: the keys of either side) are the samples counted as left
    out when not paired."""
    pairs = [
        (key, x, y)
        for key in sorted(set(a) & set(b))
        if (x := a[key]) is not None and (y := b[key]) is not None
    ]
    universe = set(samples) if samples is not None else set(a) | set(b)
    left_out = len(universe - {key for key, _, _ in pairs})
    above = level = below = 0
    for _, x, y in pairs:
        if _level(x, y):
            level += 1
        elif y > x:
            above += 1
        else:
            below += 1
    diff = low = high = p = None
    if len(pairs) >= 2:
        diff, low, high, p = paired_difference(
            [x for _, x, _ in pairs], [y for _, _, y in pairs], resampler=resampler
        )
    return PairedFigures(len(pairs), left_out, diff, low, high, p, above, level, below)


def wins_ties_losses(figures: PairedFigures, higher_is_better: bool) -> tuple[int, int, int]:
    """B's wins, ties and losses against A: above A is a win when higher is better."""
    if higher_is_better:
        return figures.above, figures.level, figures.below
    return figures.below, figures.level, figures.above
