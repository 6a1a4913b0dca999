"""How well a metric agrees with people's labels, per method that can score it.

`agreement_report` scores the labelled samples once per METHOD (each offline estimator
the metric can run, `METHOD_SETTINGS`, and the judge when one is configured: the panel
and each of its judges alone) and compares each method's values with the labels. A label
is in the metric's own direction (1 = faithful for ``faithfulness``, 1 = toxic for
``toxicity_score``; `assay.core.labels`), so a high value should go with a high label
whatever the metric's polarity, and AUROC is taken of the value as it is.

Binary labels (every label 0 or 1):
- ``auroc`` (the main statistic) with its 95 % bootstrap interval;
- ``balanced_accuracy_at_threshold``: at the metric's configured threshold (the gate:
  label 1 predicted at ``value >= threshold`` for a higher-is-better metric, at
  ``value > threshold`` for a lower-is-better one, which passes at or below it); None
  when the metric has no threshold (``--threshold`` gives one);
- ``cross_validated``: the threshold that maximises balanced accuracy on all the labels
  (the one to use), and its 5-fold stratified OUT-OF-FOLD balanced accuracy with a
  bootstrap interval over the out-of-fold predictions (which leaves out the variance of
  choosing the thresholds): never the in-sample accuracy;
- ``cohen_kappa`` of the predicted and given labels, at the configured threshold, else
  of the out-of-fold predictions (``kappa_basis`` says which).

Graded labels (any other values in [0, 1], e.g. a 1-5 rating): ``spearman`` (the main
statistic) with its interval, ``kendall_tau_b``, and ``cohen_kappa`` of the label and the
value each rounded to the nearest point of the scale (of ``--label-scale``, else the
label values seen; none for a metric whose values are not in [0, 1]).

A sample without a label for the metric is left out; a labelled sample whose value is
None (N/A) or an error is counted (``n_not_applicable``, ``n_errors``) and left out.
The best method has the highest main statistic, ties going to fewer judge requests.

JSON (`AgreementReport.to_dict`, ``assay agreement --format json``)::

    {"samples": int,                       # samples read
     "metrics": [{
        "metric": str, "higher_is_better": bool, "threshold": float | null,
        "label_kind": "binary" | "graded", "labelled": int,
        "label_counts": {"0": int, "1": int} | null,       # binary labels only
        "scale_points": [float] | null,                     # graded labels only
        "main_statistic": "auroc" | "spearman",
        "best_method": str | null, "notes": [str],
        "methods": [{
            "method": str,                 # configured, graded, entailment, llm, llm:<judge>...
            "settings": {str: str},        # the settings that select it
            "ran": {str: int},             # what each result says ran: method (estimator)
            "n": int, "n_not_applicable": int, "n_errors": int, "first_error": str | null,
            "judge_requests": int,         # sent, batched or answered by the cache
            "seconds": float,              # its scoring run's (shared by the metrics in it)
            "auroc": float | null, "auroc_interval": [low, high] | null,
            "balanced_accuracy_at_threshold": float | null,
            "cross_validated": {"threshold", "out_of_fold_balanced_accuracy", "folds",
                                "fold_thresholds"} | null,
            "out_of_fold_interval": [low, high] | null,
            "spearman": float | null, "spearman_interval": [low, high] | null,
            "kendall_tau_b": float | null,
            "cohen_kappa": float | null, "kappa_basis": "threshold" | "out_of_fold" |
                                                        "scale points" | null,
            "reasons": {statistic: why it is null}}]}]}
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from assay.core.agreement_stats import (
    auroc,
    balanced_accuracy,
    bootstrap_interval,
    cohen_kappa,
    cross_validated_threshold,
    kendall_tau_b,
    spearman,
)
from assay.core.config import AssayConfig
from assay.core.labels import LabelScale, is_binary, metric_verdict, sample_label
from assay.core.result import MetricResult
from assay.core.sample import Sample
from assay.evaluation.agreement_methods import (
    CONFIGURED,
    METHOD_SETTINGS,
    Method,
    methods_for,
    without_judge,
)
from assay.evaluation.runner import evaluate
from assay.metrics.registry import metric_class

__all__ = [
    "CONFIGURED",
    "METHOD_SETTINGS",
    "MIN_PER_CLASS",
    "AgreementError",
    "AgreementReport",
    "Method",
    "MethodAgreement",
    "MetricAgreement",
    "agreement_report",
    "methods_for",
    "without_judge",
]

#: fewer labels than this in a class (or graded labels in all) make wide intervals
MIN_PER_CLASS = 20
#: folds of the cross-validated threshold
FOLDS = 5


class AgreementError(ValueError):
    """The report cannot be made: an unknown metric, or no label for a metric."""


@dataclass
class MethodAgreement:
    """One method's agreement with the labels of one metric (see the module docstring)."""

    method: str
    settings: dict[str, str]
    ran: dict[str, int]
    n: int
    n_not_applicable: int
    n_errors: int
    first_error: str | None
    judge_requests: int
    seconds: float
    auroc: float | None = None
    auroc_interval: tuple[float, float] | None = None
    balanced_accuracy_at_threshold: float | None = None
    cross_validated: dict[str, Any] | None = None
    out_of_fold_interval: tuple[float, float] | None = None
    spearman: float | None = None
    spearman_interval: tuple[float, float] | None = None
    kendall_tau_b: float | None = None
    cohen_kappa: float | None = None
    kappa_basis: str | None = None
    reasons: dict[str, str] = field(default_factory=dict)

    def main(self, statistic: str) -> float | None:
        """The value of the main statistic, ``auroc`` or ``spearman``."""
        return self.auroc if statistic == "auroc" else self.spearman

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class MetricAgreement:
    """Every method's agreement with one metric's labels, and the best of them."""

    metric: str
    higher_is_better: bool
    threshold: float | None
    label_kind: str
    labelled: int
    label_counts: dict[str, int] | None
    scale_points: list[float] | None
    main_statistic: str
    methods: list[MethodAgreement]
    best_method: str | None
    notes: list[str]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["methods"] = [m.to_dict() for m in self.methods]
        return data


@dataclass
class AgreementReport:
    """The agreement of each metric asked for with the samples' labels."""

    samples: int
    metrics: list[MetricAgreement]

    def to_dict(self) -> dict[str, Any]:
        return {"samples": self.samples, "metrics": [m.to_dict() for m in self.metrics]}


@dataclass(frozen=True)
class _Scored:
    results: list[MetricResult | None]  # per labelled sample
    judge_requests: int
    seconds: float


def _judge_requests(usage: dict[str, Any] | None) -> int:
    """Requests a run without a cache would send: sent, batched and answered by the cache."""
    if not usage:
        return 0
    return sum(int(usage.get(key) or 0) for key in ("calls", "batch_calls", "cache_hits"))


def _score(
    samples: Sequence[Sample], metrics: Sequence[str], config: AssayConfig, method: Method
) -> dict[str, _Scored]:
    start = time.perf_counter()
    run = evaluate(
        list(samples), metrics=list(metrics), config=config.model_copy(update=method.overrides)
    )
    seconds = time.perf_counter() - start
    requests = _judge_requests(run.judge_usage)
    return {
        name: _Scored([row.get(name) for row in run.results], requests, seconds) for name in metrics
    }


def _points(labels: Sequence[float], scale: LabelScale | None) -> list[float]:
    """The scale's whole-number ratings normalised to [0, 1], else the labels seen."""
    if scale is not None and scale.low.is_integer() and scale.high.is_integer():
        span = scale.high - scale.low
        return [(k - scale.low) / span for k in range(int(scale.low), int(scale.high) + 1)]
    return sorted(set(labels))


def _nearest(value: float, points: Sequence[float]) -> float:
    return min(points, key=lambda point: abs(point - value))


def _predicted(values: Sequence[float], threshold: float, higher_is_better: bool) -> list[float]:
    return [float(metric_verdict(v, threshold, higher_is_better)) for v in values]


def _method_agreement(
    method: Method,
    scored: _Scored,
    labels: list[float],
    binary: bool,
    points: list[float] | None,
    threshold: float | None,
    higher_is_better: bool,
    seed: int,
) -> MethodAgreement:
    kept_labels: list[float] = []
    values: list[float] = []
    not_applicable = errors = 0
    first_error: str | None = None
    ran: Counter[str] = Counter()
    for label, result in zip(labels, scored.results, strict=True):
        if result is None or result.error:
            errors += 1
            first_error = first_error or (result.error if result else "no result")
            continue
        if result.value is None or math.isnan(result.value):
            not_applicable += 1
            continue
        estimator = result.details.get("estimator") or result.details.get("classifier")
        ran[f"{result.method} ({estimator})" if estimator else result.method] += 1
        kept_labels.append(label)
        values.append(result.value)
    out = MethodAgreement(
        method=method.label,
        settings=method.shown,
        ran=dict(ran),
        n=len(values),
        n_not_applicable=not_applicable,
        n_errors=errors,
        first_error=first_error,
        judge_requests=scored.judge_requests,
        seconds=round(scored.seconds, 3),
    )
    if binary:
        _binary_statistics(out, kept_labels, values, threshold, higher_is_better, seed)
    else:
        _graded_statistics(out, kept_labels, values, points, seed)
    return out


def _binary_statistics(
    out: MethodAgreement,
    labels: list[float],
    values: list[float],
    threshold: float | None,
    higher_is_better: bool,
    seed: int,
) -> None:
    out.auroc = auroc(labels, values)
    if out.auroc is None:
        out.reasons["auroc"] = "the scored labels hold one class only"
    else:
        out.auroc_interval = bootstrap_interval(auroc, labels, values, seed=seed)
    if threshold is None:
        out.reasons["balanced_accuracy_at_threshold"] = (
            "the metric has no threshold: give one (--threshold METRIC=VALUE)"
        )
    else:
        predicted = _predicted(values, threshold, higher_is_better)
        out.balanced_accuracy_at_threshold = balanced_accuracy(labels, predicted)
        out.cohen_kappa, out.kappa_basis = cohen_kappa(labels, predicted), "threshold"
    try:
        cv = cross_validated_threshold(
            labels, values, folds=FOLDS, seed=seed, higher_is_better=higher_is_better
        )
    except ValueError as exc:
        out.reasons["cross_validated"] = str(exc)
        return
    out.cross_validated = cv.to_dict()
    out.out_of_fold_interval = bootstrap_interval(
        balanced_accuracy, cv.labels, cv.out_of_fold_predicted, seed=seed
    )
    if threshold is None:
        out.cohen_kappa = cohen_kappa(cv.labels, cv.out_of_fold_predicted)
        out.kappa_basis = "out_of_fold"


def _graded_statistics(
    out: MethodAgreement,
    labels: list[float],
    values: list[float],
    points: list[float] | None,
    seed: int,
) -> None:
    out.spearman = spearman(labels, values)
    if out.spearman is None:
        out.reasons["spearman"] = "fewer than 2 scored labels, or a constant column"
    else:
        out.spearman_interval = bootstrap_interval(spearman, labels, values, seed=seed)
    out.kendall_tau_b = kendall_tau_b(labels, values)
    if points is None:
        out.reasons["cohen_kappa"] = "the metric's values are not on the labels' [0, 1] scale"
        return
    rounded_labels = [_nearest(v, points) for v in labels]
    rounded_values = [_nearest(v, points) for v in values]
    out.cohen_kappa = cohen_kappa(rounded_labels, rounded_values)
    out.kappa_basis = "scale points"


def _best(methods: list[MethodAgreement], statistic: str) -> MethodAgreement | None:
    ranked = [m for m in methods if m.main(statistic) is not None]
    if not ranked:
        return None
    return min(ranked, key=lambda m: (-round(m.main(statistic) or 0.0, 12), m.judge_requests))


def _notes(
    agreement: MetricAgreement,
    best: MethodAgreement | None,
    counts: Counter[float],
    scale: LabelScale | None,
) -> list[str]:
    notes: list[str] = []
    statistic = agreement.main_statistic
    if agreement.label_kind == "binary" and min(counts[0.0], counts[1.0]) == 0:
        notes.append(
            f"every label is {max(counts, key=counts.__getitem__):g}: AUROC, balanced accuracy "
            "and a threshold need labels of both classes"
        )
        return notes
    if agreement.label_kind == "binary":
        for cls in (0.0, 1.0):
            if counts[cls] < MIN_PER_CLASS:
                notes.append(
                    f"only {counts[cls]} labels of class {cls:g} (fewer than {MIN_PER_CLASS}): "
                    "the intervals are wide"
                )
    elif agreement.labelled < MIN_PER_CLASS:
        notes.append(
            f"only {agreement.labelled} labels (fewer than {MIN_PER_CLASS}): the intervals are wide"
        )
    halves = counts[0.5]
    if (
        scale is None
        and agreement.label_kind == "graded"
        and halves + counts[0.0] + counts[1.0] == sum(counts.values())
    ):
        notes.append(
            f"{halves} labels are 0.5 and the others 0 or 1 (two annotators who disagree "
            "average to 0.5): the labels are read as graded; settle or drop those samples "
            "for AUROC and a threshold"
        )
    if best is None:
        notes.append(f"no method gave the {statistic}: see each method's reasons")
        return notes
    interval = best.auroc_interval if statistic == "auroc" else best.spearman_interval
    shown = f"{statistic} {best.main(statistic):.3f}"
    if interval is not None:
        shown += f" (95% CI {interval[0]:.3f}-{interval[1]:.3f})"
    notes.append(f"best method: {best.method}, {shown}")
    chance = 0.5 if statistic == "auroc" else 0.0
    if interval is not None and interval[1] < chance:
        hint = (
            "" if agreement.higher_is_better else ": if your 1 means a good answer, give 1 - label"
        )
        notes.append(
            f"{best.method} agrees with the labels reversed ({statistic} under {chance:g}): a "
            f"label is read in the metric's own direction (1 = a high {agreement.metric}){hint}"
        )
    others = [m for m in agreement.methods if m is not best and m.main(statistic) is not None]
    if interval is not None and others:
        runner_up = max(others, key=lambda m: m.main(statistic) or 0.0)
        if (runner_up.main(statistic) or 0.0) >= interval[0]:
            notes.append(
                f"{runner_up.method} ({runner_up.main(statistic):.3f}) lies inside that "
                "interval: these labels do not tell the two apart"
            )
    return notes


def agreement_report(
    samples: Sequence[Sample],
    metrics: Sequence[str],
    config: AssayConfig,
    *,
    methods: bool = True,
    scale: LabelScale | None = None,
) -> AgreementReport:
    """The agreement of each metric with the samples' labels, per method.

    Args:
        samples: the samples, labelled (``label`` or ``labels[metric]``).
        metrics: metric names.
        config: the run's configuration (its thresholds, judge and ``seed``, the seed of
            the bootstrap and the folds).
        methods: every method that can score each metric (`methods_for`); False: the
            metric as configured only (one scoring run).
        scale: the labels' declared scale (``--label-scale``), whose points round graded
            labels and values for Cohen's kappa.

    Raises:
        AgreementError: an unknown metric, or a metric no sample has a label for.
    """
    names = list(dict.fromkeys(metrics))
    for name in names:
        try:
            metric_class(name)
        except KeyError as exc:
            raise AgreementError(str(exc.args[0] if exc.args else exc)) from None
    labelled: dict[str, dict[int, float]] = {}
    for name in names:
        labelled[name] = {
            i: label
            for i, sample in enumerate(samples)
            if (label := sample_label(sample, name)) is not None
        }
        if not labelled[name]:
            raise AgreementError(
                f"no sample has a label for {name}: give each a 'label' (or human_label, "
                f"human_score, rating), a 'labels' object with {name!r}, or --label-field"
            )
    plans = {name: methods_for(name, config, every=methods) for name in names}
    scored = _score_all(samples, labelled, plans, config)
    return AgreementReport(
        samples=len(samples),
        metrics=[
            _metric_agreement(name, labelled[name], plans[name], scored, config, scale)
            for name in names
        ],
    )


def _score_all(
    samples: Sequence[Sample],
    labelled: dict[str, dict[int, float]],
    plans: dict[str, list[Method]],
    config: AssayConfig,
) -> dict[tuple[str, str], _Scored]:
    """Each (metric, method)'s results on the metric's labelled samples. Offline methods
    with the same settings score their metrics in one run (on the samples any of them
    labels); a judged method scores its metric alone, so its judge requests are its own."""
    groups: dict[str, tuple[Method, list[tuple[str, str]]]] = {}
    for name, plan in plans.items():
        for method in plan:
            key = (
                f"{name}\0{method.label}"
                if method.judged
                else repr(sorted(method.overrides.items()))
            )
            groups.setdefault(key, (method, []))[1].append((name, method.label))
    scored: dict[tuple[str, str], _Scored] = {}
    for method, members in groups.values():
        names = list(dict.fromkeys(name for name, _ in members))
        rows = sorted({i for name in names for i in labelled[name]})
        by_metric = _score([samples[i] for i in rows], names, config, method)
        position = {row: k for k, row in enumerate(rows)}
        for name, label in members:
            whole = by_metric[name]
            results = [whole.results[position[i]] for i in labelled[name]]
            scored[(name, label)] = _Scored(results, whole.judge_requests, whole.seconds)
    return scored


def _metric_agreement(
    name: str,
    labelled: dict[int, float],
    plan: list[Method],
    scored: dict[tuple[str, str], _Scored],
    config: AssayConfig,
    scale: LabelScale | None,
) -> MetricAgreement:
    cls = metric_class(name)
    labels = list(labelled.values())
    binary = is_binary(labels)
    counts = Counter(labels)
    on_label_scale = tuple(cls.value_range) == (0.0, 1.0)
    points = None if binary or not on_label_scale else _points(labels, scale)
    threshold = config.threshold_for(cls)
    statistic = "auroc" if binary else "spearman"
    results = [
        _method_agreement(
            method,
            scored[(name, method.label)],
            labels,
            binary,
            points,
            threshold,
            cls.higher_is_better,
            config.seed,
        )
        for method in plan
    ]
    best = _best(results, statistic)
    agreement = MetricAgreement(
        metric=name,
        higher_is_better=cls.higher_is_better,
        threshold=threshold,
        label_kind="binary" if binary else "graded",
        labelled=len(labels),
        label_counts={"0": counts[0.0], "1": counts[1.0]} if binary else None,
        scale_points=points,
        main_statistic=statistic,
        methods=results,
        best_method=best.method if best else None,
        notes=[],
    )
    agreement.notes = _notes(agreement, best, counts, scale)
    return agreement
