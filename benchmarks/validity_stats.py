"""Rows of the validity report and the statistics behind them: Spearman and AUROC with
95% bootstrap intervals, N/A values left out and counted."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.stats import pearsonr, spearmanr

BOOTSTRAP = 1000


@dataclass
class Row:
    """One number of the report."""

    check: str
    dataset: str
    metric: str
    model: str
    statistic: str
    value: float | None
    ci95: tuple[float, float] | None = None
    n: int = 0
    na: int = 0
    seconds: float = 0.0
    note: str = ""
    compared: str = ""  # what the human labels separate, e.g. "correct vs incorrect answers"
    #: scored by models fitted on the other folds only (a model trained on this data set)
    cross_validated: bool = False
    #: the data sets the scoring model was fitted on, when this row's data set was left out
    #: of its training (leave-one-source-out); empty otherwise
    fitted_on: str = ""


def scored_left_out(rows: list[Row], fitted_on: str) -> list[Row]:
    """``rows`` marked as scored by an estimator fitted on ``fitted_on`` (``"nothing"``
    for one fitted on nothing), not on the rows' data set: numbers left out of its
    training, the evidence that chooses a default (docs/validity.md)."""
    for row in rows:
        row.fitted_on = fitted_on
    return rows


def _bootstrap_ci(
    x: np.ndarray, y: np.ndarray, stat: Callable[[np.ndarray, np.ndarray], float], seed: int
) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    draws = [stat(x[idx], y[idx]) for idx in rng.integers(len(x), size=(BOOTSTRAP, len(x)))]
    low, high = np.percentile(draws, [2.5, 97.5])
    return float(low), float(high)


def _scored_pairs(
    check_: str,
    dataset: str,
    metric: str,
    model: str,
    values: np.ndarray,
    gold: np.ndarray,
    seconds: float,
    note: str,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, object]]:
    """Values and gold where the metric gave a value (NaN = N/A left out), the mask, and the
    fields every row of this check shares (its N/A count included)."""
    ok = ~np.isnan(values)
    common: dict[str, object] = {
        "check": check_,
        "dataset": dataset,
        "metric": metric,
        "model": model,
        "n": int(ok.sum()),
        "na": int((~ok).sum()),
        "seconds": seconds,
        "note": note,
    }
    return values[ok], gold[ok], ok, common


def spearman_row(
    check_: str,
    dataset: str,
    metric: str,
    model: str,
    values: np.ndarray,
    gold: np.ndarray,
    seconds: float,
    seed: int,
    note: str = "",
) -> list[Row]:
    """Spearman (with a 95% bootstrap interval) and Pearson of values against gold."""
    x, y, _, common = _scored_pairs(check_, dataset, metric, model, values, gold, seconds, note)

    def rho(a: np.ndarray, b: np.ndarray) -> float:
        return float(spearmanr(a, b).statistic)

    return [
        Row(statistic="spearman", value=rho(x, y), ci95=_bootstrap_ci(x, y, rho, seed), **common),
        Row(statistic="pearson", value=float(pearsonr(x, y).statistic), **common),
    ]


def auroc_rows(
    check_: str,
    dataset: str,
    metric: str,
    model: str,
    scores: np.ndarray,
    labels: np.ndarray,
    seconds: float,
    seed: int,
    groups: np.ndarray | None = None,
    note: str = "",
) -> list[Row]:
    """AUROC of scores for label 1 vs 0 (95% bootstrap interval); with ``groups``, also the
    share of (positive, negative) pairs of the same group (e.g. one question) that the
    scores order correctly, ties counting half."""
    from sklearn.metrics import roc_auc_score

    x, y, ok, common = _scored_pairs(check_, dataset, metric, model, scores, labels, seconds, note)

    def auc(a: np.ndarray, b: np.ndarray) -> float:
        return float(roc_auc_score(b, a)) if len(set(b.tolist())) == 2 else 0.5

    rows = [Row(statistic="auroc", value=auc(x, y), ci95=_bootstrap_ci(x, y, auc, seed), **common)]
    if groups is not None:  # each positive vs each negative of the same group
        g = groups[ok]
        pairs, wins = 0, 0.0
        for k in np.unique(g):
            xk, yk = x[g == k], y[g == k]
            n_pairs = int(yk.sum()) * int((1 - yk).sum())
            if n_pairs:
                pairs += n_pairs
                wins += auc(xk, yk) * n_pairs
        rows.append(Row(statistic="auroc_within_group", value=wins / pairs, **common))
    return rows
