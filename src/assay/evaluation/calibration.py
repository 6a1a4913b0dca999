"""``assay calibrate``: fit a metric to a team's labels, with out-of-fold evidence.

Given a metric's scored results on labelled samples (a label is the value a person would
give the metric, in its own direction: 1 = faithful for ``faithfulness``, 1 = toxic for
``toxicity_score``; 0/1, or graded in [0, 1]), `fit_calibration`:

1. reads each result's features (`assay.evaluation.calibration_features`: the value and
   the offline evidence in its ``details``, the default's score first);
2. fits ``p = sigmoid(b + w · x)`` by penalised logistic regression whose PRIOR is the
   default method (weight 1 on ``logit(score)``, intercept ``-logit(threshold)``, 0 on
   every other feature) with the strength of `PRIOR_LABELS` = 100 labels
   (`assay.evaluation.calibration_fit`): 50 labels move it a third of the way to the
   data's own fit, 500 five sixths;
3. also fits the default's score alone (``score``: a monotone map, so the default's
   ranking), and for ``toxicity_score`` refits the toxicity head on its embeddings, the
   shipped weights as the prior (`assay.evaluation.calibration_head`); keeps ``score``
   (the default's ranking) unless another is better than the default out of fold with
   the paired 95 % interval of the difference above 0, or from 100 labels no lower
   than -0.01 (`improves`,
   `choose_candidate`; ``method="auto"``;
   every candidate's out-of-fold agreement is in the file);
4. reports agreement with the labels on the SAME items before (the default's score) and
   after (each item's calibrated probability from the model fitted on the other k-1
   folds, never in-sample): AUROC for binary labels, Spearman for graded ones, averaged
   over the folds (`per_fold`), with 95 % percentile-bootstrap intervals and the paired
   bootstrap interval of the difference (and the pooled values),
   and balanced accuracy (the default at its threshold; the calibration at the
   threshold chosen on the out-of-fold probabilities, itself cross-validated);
5. returns the calibration file's content (`assay.evaluation.calibration_file`).

It refuses (`CalibrationRefused`, one line) when either class has fewer than
`MIN_PER_CLASS` = 20 labels (a graded label counts as 1 at ≥ 0.5).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from assay.core.agreement_stats import (
    auroc,
    balanced_accuracy,
    best_threshold,
    bootstrap_interval,
    cross_validated_threshold,
    spearman,
)
from assay.core.labels import metric_verdict
from assay.core.result import MetricResult
from assay.core.version import __version__
from assay.evaluation.calibration_features import (
    DEFAULT_SCORE,
    MissingEvidence,
    default_score,
    features_of,
)
from assay.evaluation.calibration_file import (
    EVIDENCE_METHOD,
    FILE_VERSION,
    HEAD_METHOD,
    SCORE_METHOD,
)
from assay.evaluation.calibration_fit import (
    PRIOR_LABELS,
    LogisticFit,
    fit_increasing,
    fit_logistic,
    logit,
    pseudo_label_penalty,
    stratified_folds,
)
from assay.evaluation.calibration_head import HeadPrior

__all__ = [
    "LOSS_TOLERANCE",
    "MIN_PER_CLASS",
    "TOLERANT_FROM",
    "CalibrationRefused",
    "Evidence",
    "evidence_of",
    "fit_calibration",
    "improves",
    "out_of_fold_probabilities",
    "prior_threshold",
]

#: the fewest labels of each class a calibration accepts
MIN_PER_CLASS = 20
#: bootstrap resamples of the reported intervals
RESAMPLES = 1000


class CalibrationRefused(ValueError):
    """The labels cannot support a calibration (too few of a class, one class only)."""


@dataclass(frozen=True)
class Evidence:
    """The labelled results a calibration fits on: ``features`` (samples × names),
    the default's ``scores``, the ``labels``, the ``indices`` of the results they came
    from, the result ``methods`` seen and the ``skipped`` results by reason."""

    names: tuple[str, ...]
    features: np.ndarray
    scores: np.ndarray
    labels: np.ndarray
    indices: np.ndarray
    methods: tuple[str, ...]
    skipped: dict[str, int]


def evidence_of(results: Sequence[MetricResult], labels: Sequence[float | None]) -> Evidence:
    """The features of every result that has a label and readable evidence. The feature
    names are those most results share (a result with other names, e.g. scored by another
    method, is skipped and counted by reason, as is one without a label or evidence)."""
    if len(results) != len(labels):
        raise ValueError(f"{len(results)} results but {len(labels)} labels")
    rows: list[tuple[int, dict[str, float], float]] = []
    skipped: Counter[str] = Counter()
    for index, (result, label) in enumerate(zip(results, labels, strict=True)):
        if label is None:
            skipped["no label"] += 1
            continue
        try:
            rows.append((index, features_of(result), default_score(result)))
        except MissingEvidence as exc:
            skipped[str(exc)] += 1
    shapes = Counter(tuple(features) for _, features, _ in rows)
    names = shapes.most_common(1)[0][0] if shapes else (DEFAULT_SCORE,)
    kept = [row for row in rows if tuple(row[1]) == names]
    if len(kept) < len(rows):
        skipped["other evidence (another method scored it)"] += len(rows) - len(kept)
    return Evidence(
        names=names,
        features=np.array([[f[n] for n in names] for _, f, _ in kept], dtype=np.float64).reshape(
            len(kept), len(names)
        ),
        scores=np.array([s for _, _, s in kept], dtype=np.float64),
        labels=np.array([float(labels[i]) for i, _, _ in kept], dtype=np.float64),  # type: ignore[arg-type]
        indices=np.array([i for i, _, _ in kept], dtype=np.int64),
        methods=tuple(sorted({results[i].method for i, _, _ in kept})),
        skipped=dict(skipped),
    )


def check_labels(
    labels: np.ndarray, metric: str, min_per_class: int = MIN_PER_CLASS
) -> dict[str, int]:
    """The labels per class (``"0"``, ``"1"``; a graded label is 1 at ≥ 0.5); raises
    `CalibrationRefused` with fewer than ``min_per_class`` of either."""
    ones = int(np.sum(labels >= 0.5))
    counts = {"0": len(labels) - ones, "1": ones}
    if ones == 0 or ones == len(labels):
        raise CalibrationRefused(
            f"cannot calibrate {metric}: all {len(labels)} usable labels are of one class "
            f"({counts['0']} of 0, {counts['1']} of 1)"
        )
    if min(counts.values()) < min_per_class:
        raise CalibrationRefused(
            f"cannot calibrate {metric}: it needs at least {min_per_class} labels of each "
            f"class, got {counts['0']} of 0 and {counts['1']} of 1"
        )
    return counts


def prior_threshold(results: Sequence[MetricResult], configured: float | None) -> float:
    """The threshold the default applies to its score (`default_score`), 0..1: the
    result's own (``details["threshold"]``, the agreement head's; else
    ``details["decision_threshold"]``, the toxicity models'), else the configured one,
    else 0.5."""
    for result in results:
        for key in ("threshold", "decision_threshold"):
            value = result.details.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool):
                return float(value)
    return float(configured) if configured is not None else 0.5


def out_of_fold_probabilities(
    features: np.ndarray,
    labels: np.ndarray,
    prior: np.ndarray,
    folds: np.ndarray,
    labels_worth: float = PRIOR_LABELS,
    weight_ridge: float = 0.0,
    increasing: bool = False,
) -> np.ndarray:
    """Each sample's calibrated probability from the model fitted (penalty from the
    training folds' features, `pseudo_label_penalty`) on the samples of the other folds;
    ``increasing``: the one feature's weight held positive (`fit_increasing`)."""
    out = np.empty(len(labels), dtype=np.float64)
    for fold in np.unique(folds):
        held = folds == fold
        train = features[~held]
        penalty = pseudo_label_penalty(train, labels_worth, weight_ridge)
        fit = _fit(train, labels[~held], prior, penalty, increasing)
        out[held] = fit.probabilities(features[held])
    return out


def _interval(
    statistic: Callable[..., float | None], *columns: Sequence[Any], resamples: int
) -> list[float] | None:
    """The 95 % percentile-bootstrap interval, rounded; None with ``resamples`` 0."""
    if resamples == 0:
        return None
    found = bootstrap_interval(statistic, *columns, resamples=resamples, seed=0)
    return None if found is None else [round(found[0], 4), round(found[1], 4)]


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def per_fold(
    statistic: Callable[..., float | None],
) -> Callable[..., float | None]:
    """``statistic`` taken on each fold's held-out items and averaged over the folds
    (a fold where it is undefined, e.g. one class only, is left out): called as
    ``(labels, scores, folds)``. Each fold's scores come from one model, so a monotone
    recalibration ranks as the default does within every fold, and the mean over folds
    compares before and after on the same items without mixing the folds' scales."""

    def averaged(
        labels: Sequence[float], scores: Sequence[float], folds: Sequence[int]
    ) -> float | None:
        y, s, f = (np.asarray(c, dtype=np.float64) for c in (labels, scores, folds))
        values = [statistic(y[f == k], s[f == k]) for k in np.unique(f)]
        kept = [v for v in values if v is not None]
        return float(np.mean(kept)) if kept else None

    return averaged


def agreement_before_after(
    labels: np.ndarray,
    before: np.ndarray,
    after: np.ndarray,
    fold_of: np.ndarray,
    *,
    binary: bool,
    threshold: float,
    higher_is_better: bool,
    seed: int,
    resamples: int = RESAMPLES,
) -> dict[str, Any]:
    """Agreement with the labels of the default's scores (``before``) and of the
    out-of-fold calibrated probabilities (``after``) on the same items: AUROC (binary
    labels) or Spearman (graded), as the mean over the folds of its value on each
    fold's held-out items (`per_fold`), each with its 95 % bootstrap interval (items
    resampled, keeping their folds) and the paired interval of after − before; the
    same statistic over all items pooled (``pooled``); balanced accuracy of the default
    at ``threshold`` and of the calibration at a threshold chosen on the out-of-fold
    probabilities (cross-validated, `cross_validated_threshold`)."""
    y, b, a, f = labels.tolist(), before.tolist(), after.tolist(), fold_of.tolist()
    plain: Callable[..., float | None] = auroc if binary else spearman
    statistic = per_fold(plain)

    def difference(ys: Any, xa: Any, xb: Any, fs: Any) -> float | None:
        va, vb = statistic(ys, xa, fs), statistic(ys, xb, fs)
        return None if va is None or vb is None else va - vb

    hard = (labels >= 0.5).astype(np.float64)
    above = metric_verdict(before, threshold, higher_is_better)
    folds = int(fold_of.max()) + 1
    chosen = cross_validated_threshold(
        hard.tolist(), a, folds=folds, seed=seed, higher_is_better=higher_is_better
    )
    return {
        "statistic": "auroc" if binary else "spearman",
        "averaged": "mean over the folds of the statistic on each fold's held-out items",
        "n": len(y),
        "before": {
            "value": _round(statistic(y, b, f)),
            "interval": _interval(statistic, y, b, f, resamples=resamples),
        },
        "after": {
            "value": _round(statistic(y, a, f)),
            "interval": _interval(statistic, y, a, f, resamples=resamples),
        },
        "difference": {
            "value": _round(difference(y, a, b, f)),
            "interval": _interval(difference, y, a, b, f, resamples=resamples),
        },
        "pooled": {"before": _round(plain(y, b)), "after": _round(plain(y, a))},
        "balanced_accuracy": {
            "before": _round(balanced_accuracy(hard.tolist(), above.astype(float).tolist())),
            "before_threshold": round(threshold, 6),
            "after": _round(chosen.out_of_fold_balanced_accuracy),
        },
    }


def _ranges(features: np.ndarray, names: Sequence[str]) -> dict[str, dict[str, float]]:
    return {
        name: {
            "min": float(features[:, j].min()),
            "max": float(features[:, j].max()),
            "mean": float(features[:, j].mean()),
        }
        for j, name in enumerate(names)
    }


def _head_domain(embeddings: np.ndarray, logits: np.ndarray) -> dict[str, Any]:
    """The refit head's training domain: the embeddings' unit centroid, the lowest cosine
    of a training embedding to it, and the range of the refit logits."""
    centroid = embeddings.mean(axis=0)
    centroid = centroid / (np.linalg.norm(centroid) or 1.0)
    return {
        "centroid": [round(float(v), 6) for v in centroid],
        "min_cosine": float((embeddings @ centroid).min()),
        "logit": {"min": float(logits.min()), "max": float(logits.max())},
    }


def _fit(
    features: np.ndarray,
    labels: np.ndarray,
    prior: np.ndarray,
    penalty: np.ndarray,
    increasing: bool,
) -> LogisticFit:
    if increasing:
        return fit_increasing(features, labels, prior, penalty)
    return fit_logistic(features, labels, prior, penalty)


def _candidate(
    method: str,
    features: np.ndarray,
    labels: np.ndarray,
    prior: np.ndarray,
    folds: np.ndarray,
    labels_worth: float,
    weight_ridge: float = 0.0,
) -> tuple[np.ndarray, Any]:
    """The out-of-fold probabilities and the fit on every label, of one method (the
    default's score alone: increasing in it, `fit_increasing`)."""
    increasing = method == SCORE_METHOD
    oof = out_of_fold_probabilities(
        features, labels, prior, folds, labels_worth, weight_ridge, increasing
    )
    penalty = pseudo_label_penalty(features, labels_worth, weight_ridge)
    fit = _fit(features, labels, prior, penalty, increasing)
    if not fit.converged:
        raise CalibrationRefused(f"the {method} fit did not converge in 100 Newton steps")
    return oof, fit


#: how far below the default a kept calibration may plausibly fall, from
#: `TOLERANT_FROM` labels on: the lower end of the paired 95 % interval of its
#: out-of-fold difference may reach -0.01 (the most the issue lets a calibration lose)
LOSS_TOLERANCE = 0.01
#: below this many labels a candidate must be better with the whole interval above 0:
#: on the dev data's learning curves, with 25-50 labels the tolerant rule let 2 of 10
#: TruthfulQA draws fall 0.017 below the default; from 100 on no draw of any source did
TOLERANT_FROM = 100


def improves(difference: dict[str, Any], labels: int) -> bool:
    """Whether a candidate's out-of-fold ``difference`` from the default (its ``value``
    and paired 95 % bootstrap ``interval``), measured on ``labels`` labels, earns its
    place: better on these labels (value above 0) and, within the interval, never
    worse (under `TOLERANT_FROM` labels) or at most `LOSS_TOLERANCE` worse (from it)."""
    value, interval = difference.get("value"), difference.get("interval")
    if value is None or interval is None or value <= 0.0:
        return False
    if labels < TOLERANT_FROM:
        return interval[0] > 0.0
    return interval[0] >= -LOSS_TOLERANCE


def choose_candidate(candidates: dict[str, dict[str, Any]]) -> str:
    """The candidate a calibration keeps: the default's score alone (``score``, which
    keeps the default's ranking) unless another `improves` on the default out of fold
    (better, the paired 95 % interval of the difference above 0, or from 100 labels no
    lower than -0.01); among those, the one with the best out-of-fold agreement.
    Without ``score`` among them (``--method``), the best. Few labels give wide
    intervals, so they rarely replace the default's ranking."""
    if SCORE_METHOD not in candidates:
        return max(candidates, key=lambda k: candidates[k]["after"]["value"] or -np.inf)
    better = [
        k for k, c in candidates.items() if k != SCORE_METHOD and improves(c["difference"], c["n"])
    ]
    if not better:
        return SCORE_METHOD
    return max(better, key=lambda k: candidates[k]["after"]["value"] or -np.inf)


def fit_calibration(
    metric: Any,
    results: Sequence[MetricResult],
    labels: Sequence[float | None],
    *,
    configured_threshold: float | None = None,
    folds: int = 5,
    seed: int = 0,
    method: str = "auto",
    head_features: Callable[[np.ndarray], tuple[np.ndarray, HeadPrior]] | None = None,
    label_source: dict[str, Any] | None = None,
    labels_worth: float = PRIOR_LABELS,
    min_per_class: int = MIN_PER_CLASS,
    resamples: int = RESAMPLES,
) -> dict[str, Any]:
    """The calibration file's content for ``metric`` (a `Metric` instance or class) fitted
    to ``labels`` (one per result, None for unlabelled; in [0, 1]).

    ``method``: ``score`` (the default's score alone: a monotone recalibration, its
    ranking unchanged), ``evidence`` (every feature of `calibration_features`), ``head``
    (the toxicity head refit; ``toxicity_score`` only) or ``auto`` (score and evidence,
    and the head for ``toxicity_score`` when ``head_features`` is given: the one with
    the default's ranking is replaced only by a fit that `improves` on it out of fold,
    `choose_candidate`).
    ``head_features(indices)``: the embeddings of those results' samples and the shipped
    head as a prior (`HeadPrior`). Raises `CalibrationRefused` on labels that
    cannot support a fit (fewer than ``min_per_class`` of a class: the learning-curve
    benchmark lowers it to study 25 labels; ``assay calibrate`` keeps 20). ``resamples``:
    of each bootstrap interval (0: none, and then ``score`` is kept in ``auto``).
    """
    name = metric.name
    evidence = evidence_of(results, labels)
    counts = check_labels(evidence.labels, name, min_per_class)
    y = evidence.labels
    binary = bool(np.all((y == 0.0) | (y == 1.0)))
    threshold = prior_threshold(results, configured_threshold)
    fold_of = stratified_folds(y, folds, seed)
    higher = bool(metric.higher_is_better)
    candidates: dict[str, dict[str, Any]] = {}
    fits: dict[str, tuple[np.ndarray, Any, dict[str, Any]]] = {}
    if method in ("auto", "score", "evidence"):
        prior = np.zeros(len(evidence.names) + 1)
        prior[0], prior[1] = 0.0 - float(logit(threshold)), 1.0  # 0.0 -: never -0.0
        kinds = {"score": SCORE_METHOD, "evidence": EVIDENCE_METHOD}
        chosen_kinds = [kinds[method]] if method in kinds else list(kinds.values())
        for kind in chosen_kinds:
            columns = 1 if kind == SCORE_METHOD else len(evidence.names)
            if kind == EVIDENCE_METHOD and columns == 1 and method == "auto":
                continue  # the evidence is the score alone: the same fit
            features, names = evidence.features[:, :columns], evidence.names[:columns]
            oof, fit = _candidate(kind, features, y, prior[: columns + 1], fold_of, labels_worth)
            fits[kind] = (
                oof,
                fit,
                {
                    "features": list(names),
                    "prior": {
                        "intercept": float(prior[0]),
                        "weights": prior[1 : columns + 1].tolist(),
                    },
                    "training_ranges": _ranges(features, names),
                },
            )
    if method == "head" or (method == "auto" and head_features is not None):
        if name != "toxicity_score" or head_features is None:
            raise CalibrationRefused(f"the head refit calibrates toxicity_score only, not {name}")
        embeddings, head = head_features(evidence.indices)
        prior = head.weights
        oof, fit = _candidate(
            HEAD_METHOD, embeddings, y, prior, fold_of, labels_worth, head.weight_ridge
        )
        fits[HEAD_METHOD] = (
            oof,
            fit,
            {
                "features": [f"embedding[{j}]" for j in range(embeddings.shape[1])],
                "prior": {
                    "intercept": float(prior[0]),
                    "weights": prior[1:].tolist(),
                    "model": head.name,
                    "weight_ridge": head.weight_ridge,
                },
                "training_ranges": _head_domain(embeddings, fit.logits(embeddings)),
            },
        )
    if not fits:
        raise ValueError(f"unknown calibration method {method!r}: auto, score, evidence or head")
    for kind, (oof, _, _) in fits.items():
        candidates[kind] = agreement_before_after(
            y,
            evidence.scores,
            oof,
            fold_of,
            binary=binary,
            threshold=threshold,
            higher_is_better=higher,
            seed=seed,
            resamples=resamples,
        )
    chosen = choose_candidate(candidates)
    oof, fit, parts = fits[chosen]
    hard = (y >= 0.5).astype(np.float64)
    new_threshold, _ = best_threshold(hard.tolist(), oof.tolist(), higher_is_better=higher)
    return {
        "version": FILE_VERSION,
        "kind": "assay-calibration",
        "metric": name,
        "method": chosen,
        "calibrated_methods": list(evidence.methods),
        "higher_is_better": higher,
        "features": parts["features"],
        "weights": {"intercept": fit.intercept, "weights": fit.weights.tolist()},
        "prior": {
            **parts["prior"],
            "labels_worth": labels_worth,
            "description": (
                "the default method: weight 1 on the logit of its score and the logit of "
                f"its threshold {threshold:g} as the intercept"
                if chosen != HEAD_METHOD
                else "the shipped toxicity head's logistic weights on the embeddings, with "
                "its own L2 penalty (weight_ridge) on the weights"
            )
            + f"; the penalty is worth {labels_worth:g} labels (Fisher information at p=0.5)",
        },
        "threshold": round(float(new_threshold), 6),
        "threshold_rule": "max balanced accuracy on the out-of-fold calibrated probabilities",
        "labels": {
            "n": len(y),
            "per_class": counts,
            "kind": "binary" if binary else "graded",
            "skipped": evidence.skipped,
            "source": label_source or {},
        },
        "out_of_fold": {"folds": int(fold_of.max()) + 1, "seed": seed, **candidates[chosen]},
        "candidates": {
            k: {**v["after"], "difference": v["difference"]} for k, v in candidates.items()
        },
        "training_ranges": parts["training_ranges"],
        "assay_version": __version__,
    }
