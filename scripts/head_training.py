"""What the training scripts of the shipped heads share: grouped folds, a logistic head
with the L2 penalty chosen by grouped cross-validation, calibration at an even class prior
(isotonic or sigmoid), and the balanced-accuracy threshold.

Used by ``train_toxicity_head.py``, ``train_support_head.py`` and
``train_agreement_head.py`` (run from the repository
root: ``python scripts/train_….py``; needs scikit-learn, i.e. the ``models`` extra).
Deterministic: fixed fold seeds and lbfgs give the same result on every CPU run.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedGroupKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from assay.core.config import AssayConfig
from assay.engine.resources import Resources

T_975_DF4 = 2.776  # Student t quantile for a 95 % interval over 5 folds
#: the feature heads' L2 penalties tried, folds, inner folds and fold seed
C_GRID = (0.01, 0.03, 0.1, 0.3, 1.0)
FOLDS = 5
INNER_FOLDS = 3
FOLD_SEED = 0
#: the development data, beside the repository (``../shared/data``)
DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"


def balanced_weights(y: np.ndarray) -> np.ndarray:
    """Sample weights giving both classes the same total weight."""
    w = np.where(y == 1, 0.5 / max(y.mean(), 1e-12), 0.5 / max(1 - y.mean(), 1e-12))
    return w / w.mean()


def fit_head(x: np.ndarray, y: np.ndarray, c: float, standardise: bool = False) -> Any:
    """A class-balanced logistic regression with penalty ``C``; ``standardise``: on
    features scaled to mean 0 and variance 1 (a pipeline with a StandardScaler)."""
    logistic = LogisticRegression(C=c, class_weight="balanced", max_iter=5000)
    if standardise:
        return make_pipeline(StandardScaler(), logistic).fit(x, y)
    return logistic.fit(x, y)


def folds(y: np.ndarray, groups: np.ndarray, n: int, seed: int) -> list[tuple]:
    """``n`` stratified folds that never split a group."""
    splitter = StratifiedGroupKFold(n_splits=n, shuffle=True, random_state=seed)
    return list(splitter.split(np.zeros(len(y)), y, groups))


def out_of_fold_logits(
    x: np.ndarray,
    y: np.ndarray,
    groups: np.ndarray,
    c: float,
    n: int,
    seed: int,
    standardise: bool = False,
) -> np.ndarray:
    """Each item's logit from the head fitted on the other folds."""
    logits = np.zeros(len(y))
    for train, test in folds(y, groups, n, seed):
        logits[test] = fit_head(x[train], y[train], c, standardise).decision_function(x[test])
    return logits


def choose_c(
    x: np.ndarray,
    y: np.ndarray,
    groups: np.ndarray,
    n: int,
    grid: Sequence[float],
    seed: int,
    standardise: bool = False,
) -> tuple[float, dict]:
    """The C with the best grouped-CV AUROC (ties: the smaller C), every C's AUROC, and
    the chosen C's out-of-fold logits."""
    scores, oof = {}, {}
    for c in grid:
        oof[c] = out_of_fold_logits(x, y, groups, c, n, seed, standardise)
        scores[c] = roc_auc_score(y, oof[c])
    best = max(grid, key=lambda c: (round(scores[c], 4), -c))
    return best, {"auroc_by_C": scores, "oof_logits": oof[best]}


def fit_calibration(logits: np.ndarray, y: np.ndarray) -> IsotonicRegression:
    """Isotonic map from logit to probability, both classes weighted equally."""
    iso = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip")
    return iso.fit(logits, y, sample_weight=balanced_weights(y))


def fit_sigmoid(logits: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Platt scaling at an even class prior: ``(a, c)`` of ``p = 1 / (1 + exp(-(a z + c)))``
    fitted by (nearly unpenalised) logistic regression on the logits. Strictly monotone, so
    it keeps the ranking (and AUROC) of the logits, unlike an isotonic map's flat steps."""
    platt = LogisticRegression(C=1e6, max_iter=5000)
    platt.fit(logits.reshape(-1, 1), y, sample_weight=balanced_weights(y))
    return float(platt.coef_[0, 0]), float(platt.intercept_[0])


def sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-z))


def interval(values: list[float]) -> str:
    """Mean ± the 95 % t half-width over 5 folds, and the folds."""
    arr = np.array(values)
    half = T_975_DF4 * arr.std(ddof=1) / np.sqrt(len(arr))
    return f"{arr.mean():.3f} ± {half:.3f} (folds {', '.join(f'{v:.3f}' for v in arr)})"


def best_threshold(probs: np.ndarray, y: np.ndarray, weights: np.ndarray | None = None) -> float:
    """The probability cut that maximises balanced accuracy, each item counted with its
    ``weights`` (default 1; ties: the lowest cut)."""
    w = np.ones(len(y)) if weights is None else np.asarray(weights, dtype=float)
    pos, neg = w * (y == 1), w * (y == 0)
    best, best_score = 0.5, -1.0
    for cut in np.unique(probs):
        hit = probs >= cut
        score = 0.5 * (pos[hit].sum() / pos.sum() + neg[~hit].sum() / neg.sum())
        if score > best_score + 1e-12:
            best, best_score = float(cut), score
    return best


def training_setup(doc: str, out: Path) -> tuple[argparse.Namespace, Resources]:
    """The command line of a feature head's training script (``--data``: the dev data
    folder, ``--out``: the head file, default ``out``, ``--cache-dir``: embeddings) and
    the offline resources its features are computed with."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--out", type=Path, default=out)
    parser.add_argument("--cache-dir", type=Path, default=Path.home() / ".cache/assay-training")
    args = parser.parse_args()
    return args, Resources(AssayConfig(judge_model=None, cache_dir=str(args.cache_dir)))


def embedded(res: Resources, texts: Sequence[str]) -> dict[str, np.ndarray]:
    """The run embedder's vector of each of ``texts`` (an estimator's ``*_texts``), by text:
    what the engine's embed asks give the estimators in a run."""
    return dict(zip(texts, res.embedder.embed(texts), strict=True))


def cv_entry(
    label: str,
    y: np.ndarray,
    probs: np.ndarray,
    groups: np.ndarray,
    baseline: np.ndarray,
    baseline_name: str,
) -> dict[str, object]:
    """A data set's (or subset's) cross-validated AUROC with its grouped bootstrap
    interval, printed beside the baseline's AUROC on the same items, as the head file
    records it."""
    auroc = roc_auc_score(y, probs)
    ci = grouped_bootstrap_auroc(y, probs, groups)
    print(
        f"  {label}: head AUROC {auroc:.3f} ({ci[0]:.3f}-{ci[1]:.3f}), "
        f"{baseline_name} {roc_auc_score(y, baseline):.3f}, n={len(y)}"
    )
    return {"n": len(y), "auroc": round(auroc, 4), "ci95": [round(v, 4) for v in ci]}


def nested_cv_probabilities(
    x: np.ndarray,
    y: np.ndarray,
    groups: np.ndarray,
    grid: Sequence[float] = C_GRID,
    n: int = FOLDS,
    inner: int = INNER_FOLDS,
    seed: int = FOLD_SEED,
) -> tuple[np.ndarray, list[float]]:
    """Nested grouped CV of a standardised logistic head with sigmoid calibration: each
    item's calibrated probability from a head that never saw its group (C chosen and the
    sigmoid fitted on the training folds only), and the C chosen in each outer fold."""
    probs = np.zeros(len(y))
    chosen = []
    for train, test in folds(y, groups, n, seed):
        c, search = choose_c(x[train], y[train], groups[train], inner, grid, seed, True)
        head = fit_head(x[train], y[train], c, standardise=True)
        a, b = fit_sigmoid(search["oof_logits"], y[train])
        probs[test] = sigmoid(a * head.decision_function(x[test]) + b)
        chosen.append(c)
    return probs, chosen


def grouped_bootstrap_auroc(
    y: np.ndarray, scores: np.ndarray, groups: np.ndarray, resamples: int = 1000
) -> list[float]:
    """95 % interval of AUROC over resampled groups."""
    rng = np.random.default_rng(0)
    ids = np.unique(groups)
    members = {g: np.flatnonzero(groups == g) for g in ids}
    values = []
    for _ in range(resamples):
        rows = np.concatenate([members[g] for g in rng.choice(ids, len(ids))])
        if 0 < y[rows].sum() < len(rows):
            values.append(roc_auc_score(y[rows], scores[rows]))
    return [float(v) for v in np.percentile(values, [2.5, 97.5])]


def fit_and_save_head(
    out: Path,
    x: np.ndarray,
    y: np.ndarray,
    groups: np.ndarray,
    metadata: dict[str, Any],
    grid: Sequence[float] = C_GRID,
    n: int = FOLDS,
    seed: int = FOLD_SEED,
) -> dict[str, Any]:
    """Fit the shipped head and write its file (the format `assay.models.logistic_head`
    reads): C by grouped ``n``-fold CV on all items, the head fitted on all, the sigmoid on
    the out-of-fold logits, the default threshold maximising balanced accuracy on the
    out-of-fold probabilities. Prints C, the threshold and the weights; returns the
    metadata written (``metadata`` plus C, the CV scores by C and the threshold)."""
    c, search = choose_c(x, y, groups, n, grid, seed, True)
    head = fit_head(x, y, c, standardise=True)
    slope, intercept = fit_sigmoid(search["oof_logits"], y)
    threshold = best_threshold(sigmoid(slope * search["oof_logits"] + intercept), y)
    scaler, logistic = head[0], head[-1]
    written = {
        **metadata,
        "n_train": len(y),
        "n_positive": int(y.sum()),
        "C": c,
        "cv_auroc_by_C": {str(k): round(v, 4) for k, v in search["auroc_by_C"].items()},
        "threshold": threshold,
        "threshold_rule": f"max balanced accuracy on {n}-fold out-of-fold probabilities",
        "calibration": f"sigmoid (Platt) on {n}-fold out-of-fold logits, classes weighted equally",
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        out,
        mean=scaler.mean_.astype(np.float64),
        scale=scaler.scale_.astype(np.float64),
        weights=logistic.coef_[0].astype(np.float64),
        bias=np.float64(logistic.intercept_[0]),
        calibration=np.array([slope, intercept], dtype=np.float64),
        metadata=np.array(json.dumps(written, sort_keys=True)),
    )
    weights = zip(metadata["features"], logistic.coef_[0], strict=True)
    print(f"\nshipped head: C={c:g}, threshold {threshold:.3f}")
    print("weights:", ", ".join(f"{f} {w:+.2f}" for f, w in weights))
    print(f"wrote {out} ({out.stat().st_size} bytes)")
    return written
