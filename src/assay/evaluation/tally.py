"""`RunTally`: what a run's report needs, counted sample by sample, so that a run can
forget each sample once it is scored and written (a streaming run holds this and nothing
per sample but 8 bytes a value).

Per metric it keeps the values in sample order as a float array (the mean, median,
percentiles and bootstrap interval are computed from it exactly as from the list of
results) and running counts: N/A, errors, out-of-domain values, partial composites,
passes, methods. For
the run it keeps the label counts, the error causes and, for ``--group-by``, one tally
per group. Fed the same rows in the same order, its summaries equal those computed from
the kept results.
"""

from __future__ import annotations

import re
from array import array
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from assay.core.config import AssayConfig
from assay.core.result import MetricResult
from assay.core.stats import bootstrap_ci, mean, percentile
from assay.metrics.base import PASS_THRESHOLD, Metric

if TYPE_CHECKING:
    from assay.core.sample import Sample

__all__ = [
    "ErrorCause",
    "MetricSummary",
    "MetricTally",
    "RunTally",
    "applied_threshold",
    "partial_parts",
    "passes",
]

#: two error messages share a cause when they differ only in these (numbers)
_NUMBER = re.compile(r"\d[\d,.]*")


def passes(metric: Metric | type[Metric], value: float, threshold: float) -> bool:
    """Pass rule: at or above the threshold for higher-better metrics, at or below otherwise."""
    return value >= threshold if metric.higher_is_better else value <= threshold


def applied_threshold(
    metric: Metric | type[Metric], result: MetricResult, config: AssayConfig
) -> float | None:
    """The pass threshold that judges one result, in this order: a threshold the user set
    for this metric (``thresholds`` in config or ``--threshold``), then the metric's
    per-sample threshold (``details["pass_threshold"]``, e.g. the Arabic similarity
    threshold), then the configured or default threshold; None when the metric has none
    (a metric a suite brings in ungated, `Metric.ungated`, has one only when asked for)."""
    if metric.name in config.thresholds:
        return config.thresholds[metric.name]
    per_sample = result.details.get(PASS_THRESHOLD)
    if per_sample is not None and metric.gated:
        return float(per_sample)
    return config.threshold_for(metric)


def partial_parts(components: dict[str, Any], missing: dict[str, Any]) -> str:
    """ "k of n": the parts a composite's value was built from, of all its parts (its
    ``components``, or the missing ones alone when it lists none)."""
    total = len(components) or len(missing)
    return f"{total - len(missing)} of {total}"


@dataclass(frozen=True)
class ErrorCause:
    """One cause of metric errors in a run: its message (as the first sample gave it), the
    samples it failed on, and each metric with the number of those samples it failed."""

    message: str
    samples: int
    metrics: dict[str, int]


@dataclass(frozen=True)
class MetricSummary:
    """Aggregate of one metric over a set of samples (None values skipped)."""

    name: str
    n: int
    n_na: int
    n_error: int
    #: values whose estimator read input unlike its training (``details["in_domain"]``
    #: false: a language or length the model was not trained on); worth a judge
    n_out_of_domain: int
    mean: float | None
    median: float | None
    ci_low: float | None
    ci_high: float | None
    p90: float | None
    p99: float | None
    threshold: float | None
    pass_rate: float | None
    seconds: float
    methods: dict[str, int]
    higher_is_better: bool
    unit: str
    #: values of a composite built from some of its parts (``details["unavailable"]``
    #: names the parts missing), and how many of them by "k of n" parts used
    n_partial: int = 0
    partial_parts: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class MetricTally:
    """One metric's values (sample order) and counts over the samples added so far."""

    __slots__ = (
        "judged",
        "methods",
        "metric",
        "n_error",
        "n_na",
        "n_out_of_domain",
        "partial",
        "passed",
        "reasons",
        "results",
        "values",
    )

    def __init__(self, metric: Metric) -> None:
        self.metric = metric
        self.values = array("d")
        self.results = 0
        self.n_na = 0
        self.n_error = 0
        self.n_out_of_domain = 0
        self.partial: Counter[str] = Counter()
        self.judged = 0  # results with a value and a threshold
        self.passed = 0
        self.methods: Counter[str] = Counter()
        # why results have no value, kept until one has (then the metric has a mean)
        self.reasons: Counter[str] | None = Counter()

    def add(self, result: MetricResult, config: AssayConfig) -> None:
        self.results += 1
        self.methods[result.method] += 1
        value = result.value
        details = result.details
        if value is None:
            if result.error is not None:
                self.n_error += 1
            else:
                self.n_na += 1
            if self.reasons is not None:
                self.reasons[result.error or result.reason or "no value"] += 1
            return
        self.values.append(value)
        self.reasons = None
        if result.error is not None:
            self.n_error += 1
        if isinstance(details, dict):
            if details.get("in_domain") is False:
                self.n_out_of_domain += 1
            missing = details.get("unavailable")
            if missing and isinstance(missing, dict):
                self.partial[partial_parts(result.components, missing)] += 1
        threshold = applied_threshold(self.metric, result, config)
        if threshold is not None:
            self.judged += 1
            if passes(self.metric, value, threshold):
                self.passed += 1

    def summary(self, config: AssayConfig, seconds: float) -> MetricSummary:
        values = np.frombuffer(self.values, dtype=np.float64) if self.values else []
        n = len(self.values)
        low, high = bootstrap_ci(values, seed=config.seed) if n >= 2 else (None, None)
        return MetricSummary(
            name=self.metric.name,
            n=n,
            n_na=self.n_na,
            n_error=self.n_error,
            n_out_of_domain=self.n_out_of_domain,
            mean=mean(values),
            median=percentile(values, 50) if n else None,
            ci_low=low,
            ci_high=high,
            p90=percentile(values, 90) if n else None,
            p99=percentile(values, 99) if n else None,
            threshold=config.threshold_for(self.metric),
            pass_rate=(self.passed / self.judged) if self.judged else None,
            seconds=seconds,
            methods=dict(self.methods),
            higher_is_better=self.metric.higher_is_better,
            unit=self.metric.unit,
            n_partial=sum(self.partial.values()),
            partial_parts=dict(sorted(self.partial.items())),
        )

    def why_none(self) -> str:
        """Why the metric has no value on any sample: the most common reason or error."""
        if not self.results:
            return f" ({self.metric.name} did not run)"
        if not self.reasons:
            return ""
        reason, count = self.reasons.most_common(1)[0]
        return f" (N/A on all {self.results} samples; {count} say: {reason})"


class RunTally:
    """The counts of a run (or of one group of its samples), sample by sample.

    ``group_keys``: tag keys whose values group the samples (missing tags group as
    '-'); each group gets a tally of its own (`groups`).
    """

    def __init__(
        self, metrics: Sequence[Metric], config: AssayConfig, group_keys: Sequence[str] = ()
    ) -> None:
        self.config = config
        self.metrics = {m.name: MetricTally(m) for m in metrics}
        self.samples = 0
        #: per metric, the count of each categorical label (``details['label']``)
        self.labels: dict[str, Counter[str]] = {}
        self.group_keys = tuple(group_keys)
        self._groups: dict[tuple[str, ...], RunTally] = {}
        #: the tag keys the samples have (counted when grouping: the note on a group
        #: key no sample has lists them)
        self.tags_seen: set[str] = set()
        # normalised message -> [first message, samples, per-metric counts, last sample]
        self._causes: dict[str, list] = {}

    def add(self, sample: Sample, row: dict[str, MetricResult]) -> None:
        """Count one scored sample (its results by metric name)."""
        self._add_row(row)
        if self.group_keys:
            tags = sample.tags
            key = tuple(tags.get(k, "-") for k in self.group_keys)
            self.tags_seen.update(tags)
            group = self._groups.get(key)
            if group is None:
                group = self._groups[key] = RunTally(
                    [t.metric for t in self.metrics.values()], self.config
                )
            group._add_row(row)

    def _add_row(self, row: dict[str, MetricResult]) -> None:
        index = self.samples
        self.samples += 1
        config = self.config
        for name, result in row.items():
            details = result.details
            label = details.get("label") if isinstance(details, dict) else None
            if isinstance(label, str):
                counts = self.labels.get(name)
                if counts is None:
                    counts = self.labels[name] = Counter()
                counts[label] += 1
        for name, tally in self.metrics.items():
            result = row.get(name)
            if result is None:
                continue
            tally.add(result, config)
            if result.error:
                self._cause(result.error, name, index)

    def _cause(self, message: str, metric: str, index: int) -> None:
        key = _NUMBER.sub("#", message)
        cause = self._causes.get(key)
        if cause is None:
            cause = self._causes[key] = [message, 0, Counter(), -1]
        if cause[3] != index:
            cause[1] += 1
            cause[3] = index
        cause[2][metric] += 1

    def add_all(self, pairs: Iterable[tuple[Sample, dict[str, MetricResult]]]) -> RunTally:
        for sample, row in pairs:
            self.add(sample, row)
        return self

    def summaries(self, seconds_by_metric: dict[str, float]) -> list[MetricSummary]:
        """One `MetricSummary` per metric, in the run's order."""
        return [
            tally.summary(self.config, seconds_by_metric.get(name, 0.0))
            for name, tally in self.metrics.items()
        ]

    def label_counts(self) -> dict[str, dict[str, int]]:
        return {name: dict(counts) for name, counts in self.labels.items()}

    def errored(self, name: str) -> int:
        """Samples on which metric ``name`` errored."""
        return self.metrics[name].n_error

    def error_causes(self) -> list[ErrorCause]:
        """The metric errors grouped by cause (messages that differ only in numbers, such
        as "response has 150,000 characters" and "... 1,200,000 characters", are one),
        most samples first."""
        causes = [ErrorCause(m, n, dict(c)) for m, n, c, _ in self._causes.values()]
        return sorted(causes, key=lambda c: -c.samples)

    def groups(self) -> dict[tuple[str, ...], RunTally]:
        """The tally of each group of ``group_keys`` values, sorted by those values."""
        return dict(sorted(self._groups.items()))
