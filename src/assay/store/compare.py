"""Comparing two runs (or two tag values, e.g. method=local_search vs basic_search).

Per metric: the two means and their difference (B − A). Where samples pair up (the same
sample id in both selections) the difference is paired (`assay.core.paired`, the
statistics ``assay run`` with several targets prints): a percentile-bootstrap 95% CI of
the mean paired difference, a two-sided sign-flip randomisation p-value (exact up to 12
pairs), the pairs where B is above, level with or below A, and the samples left out of
the pairs (a sample of either selection that is N/A on one side or both). Without pairs,
the CI is a bootstrap of the difference of independent means and no p-value is given.
Where one side's results are calibrated (``assay evaluate --calibration``) and the other's
are not, the signature difference says so (`explained_differences`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from assay.core.paired import Resampler, paired_difference, paired_figures
from assay.core.result import signature_differences
from assay.core.stats import mean
from assay.store.selections import Selection, selection_signatures, selection_values

__all__ = ["Comparison", "Selection", "compare", "paired_difference", "unpaired_difference"]


@dataclass(frozen=True)
class Comparison:
    metric: str
    n_a: int
    n_b: int
    mean_a: float | None
    mean_b: float | None
    diff: float | None
    n_pairs: int
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    paired: bool
    #: pairs where B is above, level with or below A (`assay.core.paired`), and samples
    #: of either side that are N/A on one side or both (not paired)
    above: int = 0
    level: int = 0
    below: int = 0
    left_out: int = 0
    #: how the metric's result signatures differ between the sides (`assay.core.result`),
    #: one line per differing part; empty when they agree or were not stored
    signature_differences: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def unpaired_difference(
    a: Sequence[float], b: Sequence[float], *, n_resamples: int = 2000, seed: int = 0
) -> tuple[float, float, float]:
    """mean(b) − mean(a) and a bootstrap 95% CI resampling each side independently."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    rng = np.random.default_rng(seed)
    dx = x[rng.integers(0, x.size, size=(n_resamples, x.size))].mean(axis=1)
    dy = y[rng.integers(0, y.size, size=(n_resamples, y.size))].mean(axis=1)
    low, high = np.percentile(dy - dx, [2.5, 97.5])
    return float(y.mean() - x.mean()), float(low), float(high)


def _values(side: dict[str, float | None]) -> dict[str, float]:
    return {key: value for key, value in side.items() if value is not None}


#: what a difference in the ``calibration`` signature part means, added to its line
CALIBRATION_DIFFERS = (
    "one side's values are calibrated probabilities of a team's labels (assay calibrate), "
    "the other's are not: they are not on the same scale"
)


def explained_differences(differences: list[str]) -> list[str]:
    """``differences`` (`signature_differences`' lines) with the ``calibration`` line
    saying what it means when one side is calibrated and the other is not, or both are
    with different files."""
    out = []
    for line in differences:
        if line.startswith("calibration: "):
            both = "(none)" not in line
            line += (
                " (calibrated with different files: different labels or fits)"
                if both
                else f" ({CALIBRATION_DIFFERS})"
            )
        out.append(line)
    return out


def compare(
    session: Session, a: Selection, b: Selection, *, seed: int = 0, n_resamples: int = 2000
) -> list[Comparison]:
    """Per-metric comparison of selection B against selection A, with the parts in which
    the metric's signatures differ between them (a different model, judge, prompt,
    method, parameter or version: the difference may not be the system's). The values
    and signatures are read by `assay.store.selections`."""
    left, right = selection_values(session, a), selection_values(session, b)
    signatures = selection_signatures(session, a), selection_signatures(session, b)
    resampler = Resampler(n_resamples, seed)
    out = []
    for metric in sorted(set(left) | set(right)):
        # the samples of both sides (N/A ones too) count in the pairs' left out
        figures = paired_figures(left.get(metric, {}), right.get(metric, {}), resampler=resampler)
        va, vb = (_values(side.get(metric, {})) for side in (left, right))
        mean_a, mean_b = mean(va.values()), mean(vb.values())  # finite near 1.8e308 too
        low, high, p = figures.ci_low, figures.ci_high, figures.p_value
        diff = None if mean_a is None or mean_b is None else mean_b - mean_a
        paired = figures.n_pairs >= 2
        if paired:
            diff = figures.diff
        elif len(va) >= 2 and len(vb) >= 2:
            diff, low, high = unpaired_difference(
                list(va.values()), list(vb.values()), n_resamples=n_resamples, seed=seed
            )
        out.append(
            Comparison(
                metric=metric,
                n_a=len(va),
                n_b=len(vb),
                mean_a=mean_a,
                mean_b=mean_b,
                diff=diff,
                n_pairs=figures.n_pairs,
                ci_low=low,
                ci_high=high,
                p_value=p,
                paired=paired,
                above=figures.above,
                level=figures.level,
                below=figures.below,
                left_out=figures.left_out,
                signature_differences=explained_differences(
                    signature_differences(
                        signatures[0].get(metric, set()), signatures[1].get(metric, set())
                    )
                )
                if metric in signatures[0] and metric in signatures[1]
                else [],
            )
        )
    return out
