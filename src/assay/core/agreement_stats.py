"""Agreement between a metric and people's labels, and between raters (pure numpy).

Every two-column function takes the values of the same samples side by side and leaves
out a pair where either side is ``None`` or NaN ("missing is not zero"). A statistic
that is undefined on what is left (one class only, a constant column, no pairs) is
``None``, never NaN. Labels for the binary statistics are 0/1 (``bool`` accepted); a
label that is neither is a ValueError naming it.

- ``auroc``: the probability that a random positive scores above a random negative,
  ties counted one half (Mann-Whitney): ``(R+ - n+ (n+ + 1) / 2) / (n+ n-)`` where ``R+``
  is the sum of the positives' average ranks. Range [0, 1], higher agrees more, 0.5 is
  chance. The scores must be oriented so that a high score means label 1.
- ``balanced_accuracy``: ``(TPR + TNR) / 2`` of 0/1 predictions, [0, 1], higher agrees
  more, 0.5 is chance whatever the class balance.
- ``spearman``: Pearson's correlation of the average ranks, [-1, 1], higher agrees more.
- ``kendall_tau_b``: ``(P - Q) / sqrt((n0 - n1) (n0 - n2))`` with P concordant and Q
  discordant pairs, ``n0 = n (n - 1) / 2``, ``n1``/``n2`` the pairs tied in x/in y;
  [-1, 1], higher agrees more.
- ``cohen_kappa``: two raters, nominal: ``(po - pe) / (1 - pe)``, ``po`` the observed
  agreement and ``pe`` the agreement expected from each rater's category shares;
  [-1, 1], 1 perfect, 0 chance.
- ``fleiss_kappa``: several raters, nominal, rows = items and columns = raters. With
  ``n_i`` ratings of item i, ``n_ij`` of them in category j and N the items kept:
  ``P_i = sum_j n_ij (n_ij - 1) / (n_i (n_i - 1))``, ``P = mean_i P_i``,
  ``p_j = sum_i n_ij / sum_i n_i``, ``Pe = sum_j p_j**2``, ``kappa = (P - Pe) / (1 - Pe)``.
  Items with fewer than 2 ratings are skipped; with the same number of raters on every
  item this is Fleiss (1971); [-1, 1] (its lower bound depends on the raters), 1 perfect.
- ``krippendorff_alpha``: rows = items, columns = raters, ``None`` = not rated.
  ``alpha = 1 - (n - 1) * sum_u [sum_{i != j in u} d(v_i, v_j) / (m_u - 1)]
  / sum_{i != j over all n pairable values} d(v_i, v_j)``, with ``m_u >= 2`` the values
  of item u, n their total and ``d`` 0/1 (nominal) or ``(v_i - v_j)**2`` (interval)
  (Krippendorff 2011, "Computing Krippendorff's alpha-reliability"). 1 perfect, 0 chance,
  below 0 systematic disagreement.
- ``bootstrap_interval``: the percentile bootstrap of any of these, resampling rows (the
  samples) jointly so that the pairs stay paired.
- ``best_threshold`` / ``cross_validated_threshold``: the threshold on a score that
  maximises balanced accuracy, and a stratified k-fold estimate of how well a threshold
  chosen that way does on samples it was not chosen on.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np

__all__ = [
    "CrossValidatedThreshold",
    "auroc",
    "balanced_accuracy",
    "best_threshold",
    "bootstrap_interval",
    "cohen_kappa",
    "cross_validated_threshold",
    "fleiss_kappa",
    "kendall_tau_b",
    "krippendorff_alpha",
    "rank_average",
    "spearman",
]


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _pairs(x: Sequence[Any], y: Sequence[Any]) -> tuple[Sequence[Any], Sequence[Any]]:
    """The pairs where neither side is None or NaN."""
    if len(x) != len(y):
        raise ValueError(f"the two columns differ in length: {len(x)} and {len(y)}")
    if _is_float_array(x) and _is_float_array(y):  # a bootstrap resample: no None
        both = ~(np.isnan(x) | np.isnan(y))  # type: ignore[arg-type]
        return x[both], y[both]  # type: ignore[call-overload]
    kept = [(a, b) for a, b in zip(x, y, strict=True) if not _missing(a) and not _missing(b)]
    return [a for a, _ in kept], [b for _, b in kept]


def _is_float_array(values: object) -> bool:
    return isinstance(values, np.ndarray) and values.dtype == np.float64


def _numbers(values: Sequence[Any], what: str) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.size and not np.all(np.isfinite(array)):
        raise ValueError(f"{what} must be finite numbers")
    return array


def _binary(values: Sequence[Any], what: str) -> np.ndarray:
    array = _numbers(values, what)
    bad = array[(array != 0.0) & (array != 1.0)]
    if bad.size:
        raise ValueError(f"{what} must be 0 or 1 (or true/false). Got {bad[0]:g}.")
    return array


def rank_average(values: np.ndarray) -> np.ndarray:
    """1-based ranks of ``values``, tied values sharing the mean of their ranks.

    >>> rank_average(np.array([10.0, 20.0, 10.0, 30.0])).tolist()
    [1.5, 3.0, 1.5, 4.0]
    """
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    ends = np.r_[starts[1:], ordered.size]  # exclusive
    # the tie group at sorted positions [start, end) holds ranks start+1 .. end
    group_rank = (starts + 1 + ends) / 2.0
    ranks = np.empty(values.size, dtype=np.float64)
    ranks[order] = np.repeat(group_rank, ends - starts)
    return ranks


def auroc(labels: Sequence[float], scores: Sequence[float]) -> float | None:
    """Area under the ROC curve of ``scores`` for 0/1 ``labels``; ties count one half.

    Range [0, 1], higher = the scores order the labels better, 0.5 = chance. None when
    the kept pairs hold only one class.
    """
    kept_labels, kept_scores = _pairs(labels, scores)
    y = _binary(kept_labels, "labels")
    s = _numbers(kept_scores, "scores")
    positives = int(y.sum())
    negatives = y.size - positives
    if positives == 0 or negatives == 0:
        return None
    rank_sum = float(rank_average(s)[y == 1.0].sum())
    return (rank_sum - positives * (positives + 1) / 2.0) / (positives * negatives)


def balanced_accuracy(labels: Sequence[float], predicted: Sequence[float]) -> float | None:
    """``(TPR + TNR) / 2`` of 0/1 predictions against 0/1 labels.

    Range [0, 1], higher agrees more, 0.5 = chance (a constant prediction). None when the
    kept labels hold only one class (one of the two rates is undefined).
    """
    kept_labels, kept_predicted = _pairs(labels, predicted)
    y = _binary(kept_labels, "labels")
    p = _binary(kept_predicted, "predictions")
    positives = y == 1.0
    if positives.all() or not positives.any():
        return None
    sensitivity = float((p[positives] == 1.0).mean())
    specificity = float((p[~positives] == 0.0).mean())
    return (sensitivity + specificity) / 2.0


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rank correlation (average ranks for ties), in [-1, 1].

    None when fewer than 2 pairs are kept or either side is constant.
    """
    kept_x, kept_y = _pairs(x, y)
    if len(kept_x) < 2:
        return None
    rx = rank_average(_numbers(kept_x, "x"))
    ry = rank_average(_numbers(kept_y, "y"))
    dx, dy = rx - rx.mean(), ry - ry.mean()
    denominator = math.sqrt(float(dx @ dx) * float(dy @ dy))
    if denominator == 0.0:
        return None
    return max(-1.0, min(1.0, float(dx @ dy) / denominator))


# rows of the pair matrix compared at once in kendall_tau_b (bounds its memory to
# _KENDALL_BLOCK * n values)
_KENDALL_BLOCK = 512


def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Kendall's tau-b, in [-1, 1]; None when fewer than 2 pairs or either side is constant.

    Counts every pair (O(n^2) time in blocks of rows; about a second for 10,000 samples).
    """
    kept_x, kept_y = _pairs(x, y)
    n = len(kept_x)
    if n < 2:
        return None
    xs = _numbers(kept_x, "x")
    ys = _numbers(kept_y, "y")
    concordance = 0.0  # P - Q over ordered pairs i != j (each unordered pair twice)
    untied_x = 0.0  # ordered pairs not tied in x
    untied_y = 0.0
    for start in range(0, n, _KENDALL_BLOCK):
        sx = np.sign(xs[start : start + _KENDALL_BLOCK, None] - xs[None, :])
        sy = np.sign(ys[start : start + _KENDALL_BLOCK, None] - ys[None, :])
        concordance += float((sx * sy).sum())
        untied_x += float(np.count_nonzero(sx))
        untied_y += float(np.count_nonzero(sy))
    if untied_x == 0.0 or untied_y == 0.0:
        return None
    # n0 - n1 = unordered pairs not tied in x = untied_x / 2; the halves cancel
    return max(-1.0, min(1.0, concordance / math.sqrt(untied_x * untied_y)))


def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable]) -> float | None:
    """Cohen's kappa of two raters' nominal categories, ``(po - pe) / (1 - pe)``.

    Range [-1, 1], 1 = perfect agreement, 0 = what the raters' category shares give by
    chance. None with no pairs, or when both raters use one and the same category
    (``pe = 1``).
    """
    kept_a, kept_b = _pairs(a, b)
    n = len(kept_a)
    if n == 0:
        return None
    observed = sum(1 for left, right in zip(kept_a, kept_b, strict=True) if left == right) / n
    shares_a, shares_b = Counter(kept_a), Counter(kept_b)
    expected = sum(count * shares_b.get(category, 0) for category, count in shares_a.items())
    expected /= n * n
    if expected >= 1.0:
        return None
    return (observed - expected) / (1.0 - expected)


def fleiss_kappa(ratings: Sequence[Sequence[Hashable | None]]) -> float | None:
    """Fleiss' kappa: rows = items, columns = raters, None = the rater did not rate it.

    Items with fewer than 2 ratings are skipped; the formula is in the module docstring
    (each item's agreement is over its own raters, so items may have different numbers
    of raters). Range [-1, 1], 1 = perfect. None with no item left or one category used
    throughout (``Pe = 1``).
    """
    agreements: list[float] = []
    totals: Counter[Hashable] = Counter()
    for row in ratings:
        given = [value for value in row if not _missing(value)]
        m = len(given)
        if m < 2:
            continue
        counts = Counter(given)
        agreements.append(sum(c * (c - 1) for c in counts.values()) / (m * (m - 1)))
        totals.update(counts)
    if not agreements:
        return None
    all_ratings = sum(totals.values())
    expected = sum((count / all_ratings) ** 2 for count in totals.values())
    if expected >= 1.0:
        return None
    return (float(np.mean(agreements)) - expected) / (1.0 - expected)


def krippendorff_alpha(
    ratings: Sequence[Sequence[float | None]],
    level: Literal["nominal", "interval"] = "interval",
) -> float | None:
    """Krippendorff's alpha: rows = items, columns = raters, None = not rated.

    ``level`` is the distance between two values: ``nominal`` (0 if equal, else 1) or
    ``interval`` (their squared difference). Only items with at least 2 values count
    (pairable values). Range: 1 = perfect, 0 = chance, below 0 = systematic
    disagreement. None with fewer than 2 pairable values, or when every pairable value
    is the same (no expected disagreement).
    """
    if level not in ("nominal", "interval"):
        raise ValueError(f"level must be 'nominal' or 'interval'. Got {level!r}.")
    units = [[value for value in row if not _missing(value)] for row in ratings]
    units = [unit for unit in units if len(unit) >= 2]
    if not units:
        return None
    observed = 0.0  # sum_u (disagreement over ordered pairs of u) / (m_u - 1)
    pooled: list[Any] = []
    for unit in units:
        observed += _pair_disagreement(unit, level) / (len(unit) - 1)
        pooled.extend(unit)
    expected = _pair_disagreement(pooled, level)
    if expected == 0.0:
        return None
    return 1.0 - (len(pooled) - 1) * observed / expected


def _pair_disagreement(values: Sequence[Any], level: str) -> float:
    """Sum of the distance over the ordered pairs (i != j) of ``values``."""
    m = len(values)
    if level == "nominal":
        # pairs in different categories: m^2 - sum_c m_c^2
        return float(m * m - sum(c * c for c in Counter(values).values()))
    array = _numbers(values, "interval ratings")
    centred = array - array.mean()
    # sum_{i,j} (v_i - v_j)^2 = 2 m sum (v - mean)^2
    return float(2 * m * (centred @ centred))


def bootstrap_interval(
    statistic: Callable[..., float | None],
    *columns: Sequence[Any],
    resamples: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> tuple[float, float] | None:
    """Percentile-bootstrap interval of ``statistic(*columns)``, rows resampled jointly.

    Each resample draws n row indices with replacement from
    ``numpy.random.default_rng(seed)`` and applies the statistic to every column at those
    rows (so paired values stay paired), each column as a numpy array (floats with None
    as NaN, or objects where it holds categories). Resamples where the statistic is None (e.g. one
    class drawn) are dropped; the interval is the ``(1 - level) / 2`` and
    ``(1 + level) / 2`` percentiles (linear interpolation) of the rest. None with no rows
    or no resample giving a value. It assumes independent samples and is too narrow for
    very small n (< ~10).
    """
    if not columns:
        raise ValueError("bootstrap_interval needs at least one column")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1). Got {level}.")
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1. Got {resamples}.")
    n = len(columns[0])
    if any(len(column) != n for column in columns):
        raise ValueError(f"the columns differ in length: {[len(c) for c in columns]}")
    if n == 0:
        return None
    arrays = [_column(column) for column in columns]
    rng = np.random.default_rng(seed)
    values: list[float] = []
    for _ in range(resamples):
        rows = rng.integers(0, n, size=n)
        value = statistic(*(array[rows] for array in arrays))
        if value is not None:
            values.append(value)
    if not values:
        return None
    tail = (1.0 - level) / 2.0
    low, high = np.percentile(values, [100.0 * tail, 100.0 * (1.0 - tail)], method="linear")
    return float(low), float(high)


def _column(values: Sequence[Any]) -> np.ndarray:
    """A column as a float array (None as NaN) when it holds numbers only, else as an
    object array (categories)."""
    if all(isinstance(v, (int, float, np.number)) or v is None for v in values):
        return np.asarray([np.nan if v is None else v for v in values], dtype=np.float64)
    return np.asarray(values, dtype=object)


def _threshold_curve(y: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Candidate thresholds (midpoints between consecutive distinct scores) and the
    balanced accuracy of predicting 1 at or above each."""
    distinct = np.unique(s)
    if distinct.size < 2:
        return distinct, np.array([0.5])
    cuts = (distinct[:-1] + distinct[1:]) / 2.0
    positives = float(y.sum())
    negatives = float(y.size - positives)
    order = np.argsort(s, kind="stable")
    ys = y[order]
    # samples strictly below cut k are those with score <= distinct[k]
    below = np.searchsorted(s[order], distinct[:-1], side="right")
    positives_below = np.r_[0.0, np.cumsum(ys)][below]
    negatives_below = below - positives_below
    sensitivity = (positives - positives_below) / positives
    specificity = negatives_below / negatives
    return cuts, (sensitivity + specificity) / 2.0


def best_threshold(
    labels: Sequence[float], scores: Sequence[float], *, higher_is_better: bool = True
) -> tuple[float, float]:
    """The threshold that maximises balanced accuracy on these samples, and that accuracy.

    The scores are oriented so that a high score means label 1; a sample is predicted 1
    when its score is ``>= threshold`` (``higher_is_better``, the gate of a
    higher-is-better metric) or ``> threshold`` (a lower-is-better metric, which passes
    at or below it and so predicts label 1 above it). Candidates are the midpoints
    between consecutive distinct scores, so both rules split the samples alike; among
    equally good candidates the middle one is taken. With a single distinct score the
    threshold is that score and the accuracy 0.5. This accuracy is IN-SAMPLE (the
    threshold was chosen on the same samples): use `cross_validated_threshold` to
    estimate how it does on new ones. Raises ValueError unless both classes are present.
    """
    kept_labels, kept_scores = _pairs(labels, scores)
    y = _binary(kept_labels, "labels")
    s = _numbers(kept_scores, "scores")
    if y.size == 0 or y.all() or not y.any():
        raise ValueError("choosing a threshold needs labels of both classes")
    cuts, accuracy = _threshold_curve(y, s)
    best = np.flatnonzero(accuracy >= accuracy.max() - 1e-12)
    threshold = float(cuts[int(best[(best.size - 1) // 2])])
    predicted = _predict(s, threshold, higher_is_better)
    accuracy_there = balanced_accuracy(y.tolist(), predicted.tolist())
    assert accuracy_there is not None  # both classes are present
    return threshold, accuracy_there


@dataclass(frozen=True)
class CrossValidatedThreshold:
    """A balanced-accuracy threshold and its out-of-fold estimate.

    ``threshold`` is chosen on all the samples (the one to use); ``out_of_fold_balanced_
    accuracy`` is the balanced accuracy of the pooled out-of-fold predictions, each
    sample predicted with the threshold chosen on the other folds (its estimate on new
    samples); ``fold_thresholds`` are those per-fold thresholds and
    ``out_of_fold_predicted`` the 0/1 predictions, in the order of the kept samples
    (pairs with a missing side left out), for a bootstrap interval.
    """

    threshold: float
    out_of_fold_balanced_accuracy: float
    folds: int
    fold_thresholds: tuple[float, ...]
    labels: tuple[float, ...]
    out_of_fold_predicted: tuple[float, ...]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        del data["labels"], data["out_of_fold_predicted"]
        return data


def _predict(scores: np.ndarray, threshold: float, higher_is_better: bool) -> np.ndarray:
    above = scores >= threshold if higher_is_better else scores > threshold
    return above.astype(np.float64)


def cross_validated_threshold(
    labels: Sequence[float],
    scores: Sequence[float],
    *,
    folds: int = 5,
    seed: int = 0,
    higher_is_better: bool = True,
) -> CrossValidatedThreshold:
    """Stratified k-fold estimate of the balanced accuracy of a chosen threshold.

    Each class's samples are shuffled (``numpy.random.default_rng(seed)``) and dealt to
    the folds in turn; for each fold, `best_threshold` on the other folds predicts the
    held-out fold. ``folds`` is lowered to the size of the smaller class when that is
    smaller. Raises ValueError with fewer than 2 samples of either class.
    """
    if folds < 2:
        raise ValueError(f"folds must be at least 2. Got {folds}.")
    kept_labels, kept_scores = _pairs(labels, scores)
    y = _binary(kept_labels, "labels")
    s = _numbers(kept_scores, "scores")
    smaller = int(min(y.sum(), y.size - y.sum()))
    if smaller < 2:
        raise ValueError(
            "cross-validating a threshold needs at least 2 labels of each class. "
            f"Got {int(y.sum())} of 1 and {int(y.size - y.sum())} of 0."
        )
    folds = min(folds, smaller)
    rng = np.random.default_rng(seed)
    fold_of = np.empty(y.size, dtype=np.int64)
    for label in (0.0, 1.0):
        members = rng.permutation(np.flatnonzero(y == label))
        fold_of[members] = np.arange(members.size) % folds
    predicted = np.empty(y.size, dtype=np.float64)
    thresholds: list[float] = []
    for fold in range(folds):
        held_out = fold_of == fold
        threshold, _ = best_threshold(y[~held_out], s[~held_out], higher_is_better=higher_is_better)
        thresholds.append(threshold)
        predicted[held_out] = _predict(s[held_out], threshold, higher_is_better)
    out_of_fold = balanced_accuracy(y.tolist(), predicted.tolist())
    assert out_of_fold is not None  # both classes are present
    threshold, _ = best_threshold(y, s, higher_is_better=higher_is_better)
    return CrossValidatedThreshold(
        threshold=threshold,
        out_of_fold_balanced_accuracy=out_of_fold,
        folds=folds,
        fold_thresholds=tuple(thresholds),
        labels=tuple(y.tolist()),
        out_of_fold_predicted=tuple(predicted.tolist()),
    )
