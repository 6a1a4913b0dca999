"""The logistic fit behind ``assay calibrate``: penalised toward a prior, by Newton steps.

The model of a calibration is a logistic regression on a metric's features ``x``::

    p = sigmoid(b + w · x)           (p: probability that a person labels the sample 1,
                                      in the metric's own direction; range 0..1)

Its weights ``θ = (b, w)`` minimise the penalised cross-entropy (labels ``y`` in [0, 1]:
a graded label is a soft target)::

    L(θ) = -Σ_i [y_i log p_i + (1 - y_i) log(1 - p_i)] + ½ (θ - θ0)ᵀ P (θ - θ0)

where ``θ0`` are the PRIOR weights (the default method's own mapping, see
`assay.evaluation.calibration_features`) and ``P`` the penalty matrix. `fit_logistic`
solves it by Newton's method (iteratively reweighted least squares): the gradient is
``Xᵀ(p - y) + P(θ - θ0)`` and the Hessian ``Xᵀ diag(p(1-p)) X + P``, positive definite
when ``P`` is, so the minimum is unique. With no labels the minimum is ``θ0`` exactly.

`pseudo_label_penalty` makes ``P`` worth ``n0`` labels: the Fisher information of ``n0``
labels at p = ½ whose features are distributed as the labelled data's,
``P = (n0 / 4) · mean_i(x̃_i x̃_iᵀ)`` with ``x̃ = (1, x)`` (plus a small ridge so that
directions the data never varies stay at the prior). Its scale follows the features' own,
so the prior is as strong whatever a feature's units. With ``n0 = PRIOR_LABELS = 100``,
50 labels move the fit a third of the way from the prior to the data's own fit (in the
quadratic approximation, n / (n + n0)), and 500 labels five sixths of the way.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "PRIOR_LABELS",
    "LogisticFit",
    "fit_increasing",
    "fit_logistic",
    "logit",
    "pseudo_label_penalty",
    "sigmoid",
    "stratified_folds",
]

#: the least weight a calibration of the default's score alone keeps on that score:
#: strictly increasing in it, so the default's ranking (its AUROC) is kept exactly
MIN_SCORE_WEIGHT = 1e-3
#: how many labels the prior is worth (the penalty's strength in pseudo-labels)
PRIOR_LABELS = 100.0
#: the ridge added to the penalty, relative to its mean diagonal: keeps it positive definite
_RIDGE = 1e-3
#: values are clipped to [EPSILON, 1 - EPSILON] before a logit
EPSILON = 1e-4


def sigmoid(z: np.ndarray) -> np.ndarray:
    """``1 / (1 + exp(-z))``, computed without overflow; range 0..1."""
    z = np.asarray(z, dtype=np.float64)
    out = np.empty_like(z)
    positive = z >= 0
    out[positive] = 1.0 / (1.0 + np.exp(-z[positive]))
    e = np.exp(z[~positive])
    out[~positive] = e / (1.0 + e)
    return out


def logit(p: np.ndarray | float) -> np.ndarray:
    """``log(p / (1 - p))`` of ``p`` clipped to [EPSILON, 1 - EPSILON] (so 0 and 1 are
    finite: ±9.21)."""
    q = np.clip(np.asarray(p, dtype=np.float64), EPSILON, 1.0 - EPSILON)
    return np.log(q / (1.0 - q))


@dataclass(frozen=True)
class LogisticFit:
    """A fitted model: ``intercept`` b, ``weights`` w (one per feature), the Newton
    ``iterations`` it took and whether the step fell under the tolerance (``converged``)."""

    intercept: float
    weights: np.ndarray
    iterations: int
    converged: bool

    def logits(self, features: np.ndarray) -> np.ndarray:
        """``b + w · x`` per row of ``features``."""
        return self.intercept + np.asarray(features, dtype=np.float64) @ self.weights

    def probabilities(self, features: np.ndarray) -> np.ndarray:
        """``sigmoid(b + w · x)`` per row: the calibrated probability, 0..1."""
        return sigmoid(self.logits(features))


def _with_intercept(features: np.ndarray) -> np.ndarray:
    x = np.asarray(features, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"features must be a 2-D array (samples × features), got {x.shape}")
    return np.hstack([np.ones((x.shape[0], 1)), x])


def pseudo_label_penalty(
    features: np.ndarray, labels_worth: float = PRIOR_LABELS, weight_ridge: float = 0.0
) -> np.ndarray:
    """The penalty matrix ``P = (n0 / 4) · mean(x̃ x̃ᵀ) + ridge`` over the rows of
    ``features`` (``x̃ = (1, x)``; ``n0 = labels_worth``): the Fisher information of
    ``n0`` labels at p = ½, so the prior counts as ``n0`` labels. The ridge is
    ``1e-3 ×`` the mean diagonal (at least 1e-6), on every coordinate, plus
    ``weight_ridge`` on the weights (not the intercept): a model's own L2 penalty
    ``λ = 1/C`` when its shipped weights are the prior (the toxicity head's)."""
    x = _with_intercept(features)
    if x.shape[0] == 0:
        raise ValueError("the penalty needs the features of at least one sample")
    moment = x.T @ x / x.shape[0]
    ridge = max(_RIDGE * float(np.mean(np.diag(moment))), 1e-6)
    penalty = labels_worth / 4.0 * moment + ridge * np.eye(x.shape[1])
    penalty[1:, 1:] += weight_ridge * np.eye(x.shape[1] - 1)
    return penalty


def fit_logistic(
    features: np.ndarray,
    labels: np.ndarray,
    prior: np.ndarray,
    penalty: np.ndarray | float,
    *,
    max_iterations: int = 100,
    tolerance: float = 1e-9,
) -> LogisticFit:
    """The weights minimising the penalised cross-entropy of this module's docstring.

    Args:
        features: samples × features (no intercept column: it is added).
        labels: one target per sample in [0, 1].
        prior: ``θ0 = (intercept, weights...)``, length features + 1.
        penalty: ``P``, a (features + 1)² positive-definite matrix, or a number λ for
            ``λ I`` (every coordinate, the intercept included).
        max_iterations, tolerance: Newton stops when the largest step is under
            ``tolerance`` (or after ``max_iterations``; ``converged`` then says False).
    """
    x = _with_intercept(features)
    y = np.asarray(labels, dtype=np.float64)
    theta0 = np.asarray(prior, dtype=np.float64)
    d = x.shape[1]
    if y.shape != (x.shape[0],):
        raise ValueError(f"{x.shape[0]} samples but {y.shape} labels")
    if np.any((y < 0) | (y > 1)) or not np.all(np.isfinite(y)):
        raise ValueError("labels must lie in [0, 1]")
    if theta0.shape != (d,):
        raise ValueError(f"the prior needs {d} weights (intercept first), got {theta0.shape}")
    p_matrix = np.eye(d) * float(penalty) if np.isscalar(penalty) else np.asarray(penalty)
    if p_matrix.shape != (d, d):
        raise ValueError(f"the penalty must be {d}×{d}, got {p_matrix.shape}")
    theta = theta0.copy()
    converged = False
    iteration = 0
    while iteration < max_iterations:
        iteration += 1
        p = sigmoid(x @ theta)
        gradient = x.T @ (p - y) + p_matrix @ (theta - theta0)
        hessian = (x.T * (p * (1.0 - p))) @ x + p_matrix
        step = np.linalg.solve(hessian, gradient)
        if float(np.max(np.abs(step))) < tolerance:  # at the optimum: a full step is safe
            theta -= step
            converged = True
            break
        theta -= _damped(step, x, y, theta, theta0, p_matrix)
    return LogisticFit(float(theta[0]), theta[1:].copy(), iteration, converged)


def fit_increasing(
    features: np.ndarray,
    labels: np.ndarray,
    prior: np.ndarray,
    penalty: np.ndarray,
    *,
    floor: float = MIN_SCORE_WEIGHT,
) -> LogisticFit:
    """`fit_logistic` on one feature (the default's score) with its weight held at
    ``floor`` or above, so the fit is increasing in the score and keeps its ranking.

    Where the labels run against the score the unconstrained weight falls below
    ``floor``; the objective being convex, the constrained optimum then lies on
    ``w = floor``, and only the intercept is refit there (a one-dimensional Newton
    search; the penalty's cross term moves the intercept's prior to
    ``b0 - P01 (floor - w0) / P00``). A negative weight would turn the metric upside
    down: labels that agree with the values reversed are the labels' direction to fix
    (``assay agreement`` says so), not something to calibrate away."""
    fit = fit_logistic(features, labels, prior, penalty)
    if fit.weights.shape != (1,) or fit.weights[0] >= floor:
        return fit
    x = np.asarray(features, dtype=np.float64)[:, 0]
    y = np.asarray(labels, dtype=np.float64)
    p_matrix = np.asarray(penalty, dtype=np.float64)
    b0 = float(prior[0]) - float(p_matrix[0, 1]) * (floor - float(prior[1])) / p_matrix[0, 0]
    b, converged, iteration = fit.intercept, False, 0
    while iteration < 100:
        iteration += 1
        p = sigmoid(b + floor * x)
        gradient = float(np.sum(p - y)) + p_matrix[0, 0] * (b - b0)
        curvature = float(np.sum(p * (1.0 - p))) + p_matrix[0, 0]
        step = float(np.clip(gradient / curvature, -5.0, 5.0))
        b -= step
        if abs(step) < 1e-9:
            converged = True
            break
    return LogisticFit(b, np.array([floor]), fit.iterations + iteration, converged)


def _objective(
    x: np.ndarray, y: np.ndarray, theta: np.ndarray, theta0: np.ndarray, penalty: np.ndarray
) -> float:
    z = x @ theta
    # -[y log p + (1-y) log(1-p)] = log(1 + e^z) - y z, stable for large |z|
    loss = float(np.sum(np.logaddexp(0.0, z) - y * z))
    delta = theta - theta0
    return loss + 0.5 * float(delta @ penalty @ delta)


def _damped(
    step: np.ndarray,
    x: np.ndarray,
    y: np.ndarray,
    theta: np.ndarray,
    theta0: np.ndarray,
    penalty: np.ndarray,
) -> np.ndarray:
    """The Newton step, halved until the objective does not rise beyond rounding (at
    most 30 times): separable data far from the prior can overshoot a full step."""
    before = _objective(x, y, theta, theta0, penalty)
    slack = 1e-12 * max(1.0, abs(before))  # rounding, not a rise
    scale = 1.0
    for _ in range(30):
        if _objective(x, y, theta - scale * step, theta0, penalty) <= before + slack:
            return scale * step
        scale /= 2.0
    return scale * step


def stratified_folds(labels: np.ndarray, k: int, seed: int) -> np.ndarray:
    """A fold number in 0..k-1 for each sample: the samples of each class (label ≥ ½ or
    not) shuffled with ``numpy.random.default_rng(seed)`` and dealt round-robin, so every
    fold holds about 1/k of each class."""
    if k < 2:
        raise ValueError(f"cross-validation needs at least 2 folds, got {k}")
    y = np.asarray(labels, dtype=np.float64) >= 0.5
    rng = np.random.default_rng(seed)
    folds = np.empty(len(y), dtype=np.int64)
    offset = 0
    for positive in (False, True):
        members = rng.permutation(np.flatnonzero(y == positive))
        folds[members] = (np.arange(len(members)) + offset) % k
        offset += len(members)
    return folds
