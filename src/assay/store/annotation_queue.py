"""The annotation queue's query: which of a run's stored samples a person labels next,
for one metric and one annotator.

The queue holds the run's samples that have a finite stored value for the metric (a
sample the metric scored N/A or failed on is left out and counted: a label there could
not be compared with the metric), each with its sample key (`TestResult.sample_key`, the
key labels are kept under; for a row stored before revision 0010, the key of the sample
rebuilt from it: `Store.run_sample_keys`). Samples the annotator already labelled for the
metric (under any run: labels follow the sample key) are left out. Three orders:

- ``uncertain`` (the default): values nearest the metric's threshold first, by
  ``|value - threshold|`` (ascending; ties by sample index). The threshold of a sample
  (`QueueThreshold.of`) is the one the run applied: the run's ``thresholds`` (set by the
  user), else the sample's own ``details["pass_threshold"]``, else the run's setting or
  the metric's default (`metric_threshold`); a metric with none of these is ordered
  around its estimator's ``details["decision_threshold"]`` (toxicity), else the middle of
  its range (the run's median when its range is unbounded), and the plan says so.
- ``disagreement``: where the metric's methods disagree most first, by `method_spread`
  (descending); samples without that evidence follow in ``uncertain`` order. When no
  sample of the run carries it, the whole queue is ``uncertain`` and the plan says why.
- ``random``: a shuffle seeded by ``seed`` (the same seed gives the same order).

Samples the person skipped (``skipped``: sample indices, kept by the page) go to the end,
in the order they were in, so they come back once the rest is done.
"""

from __future__ import annotations

import math
import random
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from sqlalchemy import ColumnElement, case, func, select

from assay.store.db import Store
from assay.store.labels import StoredLabel
from assay.store.models import Run, ScoringDetail, TestResult

__all__ = [
    "QueueOrder",
    "QueuePlan",
    "QueueRow",
    "QueueThreshold",
    "annotation_queue",
    "annotator_labels",
    "method_spread",
    "metric_threshold",
    "order_rows",
    "queue_rows",
    "queue_threshold",
    "run_facts",
]


class QueueOrder(StrEnum):
    """The order in which a queue shows its samples (see the module docstring)."""

    UNCERTAIN = "uncertain"
    DISAGREEMENT = "disagreement"
    RANDOM = "random"


#: the evidence keys of two methods' scores of one sample, whose difference is their
#: disagreement (faithfulness with ``support_estimator = "graded+entailment"``)
METHOD_PAIRS = (("graded_support", "entailment_support"),)
#: the evidence key holding several models' probabilities (toxicity's mean of two models)
METHOD_PROBABILITIES = "probabilities"


@dataclass(frozen=True)
class QueueRow:
    """One stored sample of the run as the queue orders it: its index and key, the
    metric's value and the method that gave it, the sample's own pass threshold and its
    estimator's decision threshold (None: not in its evidence) and `method_spread` of
    its evidence (None: no such evidence)."""

    index: int
    sample_key: str
    sample_id: str | None
    value: float
    method: str | None = None
    pass_threshold: float | None = None
    decision_threshold: float | None = None
    spread: float | None = None


@dataclass(frozen=True)
class QueueThreshold:
    """The threshold a run applied to a metric (`queue_threshold`): ``value`` (None:
    none applied), ``source`` (where it came from, in words), ``explicit`` (the user set
    it: it wins over a sample's own) and ``fallback`` (what a sample with no threshold of
    its own is ordered around when ``value`` is None, with ``fallback_source``)."""

    value: float | None
    source: str
    explicit: bool = False
    fallback: float | None = None
    fallback_source: str | None = None

    def of(self, row: QueueRow) -> float | None:
        """The threshold of one sample (see the module docstring)."""
        return self.source_of(row)[0]

    def source_of(self, row: QueueRow) -> tuple[float | None, str]:
        """The threshold of one sample and where it came from, in words."""
        if self.explicit:
            return self.value, self.source
        for own, source in (
            (row.pass_threshold, "the sample's pass_threshold"),
            (self.value, self.source),
            (row.decision_threshold, "the estimator's decision_threshold"),
            (self.fallback, self.fallback_source or ""),
        ):
            if own is not None:
                return own, source
        return None, self.source

    def used(self, rows: Iterable[QueueRow]) -> list[dict[str, Any]]:
        """The thresholds the samples of ``rows`` are judged at: each distinct (value,
        source) with its count of samples, the most common first."""
        counts = Counter(self.source_of(row) for row in rows)
        return [
            {"value": value, "source": source, "samples": n}
            for (value, source), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0][1]))
        ]


@dataclass
class QueuePlan:
    """What `annotation_queue` found: the sample indices in the order to show them (the
    annotator's labelled ones left out, skipped ones last) and how that order was made.

    Attributes:
        order: the order asked for; ``order_used`` the one that ran (``uncertain`` when
            ``disagreement`` found no evidence) and ``note`` why, when they differ.
        threshold: the threshold ``uncertain`` ordered around (`QueueThreshold`), and
            ``thresholds_used`` the thresholds the queue's samples were ordered around
            (`QueueThreshold.used`: a sample's own threshold can differ from the run's).
        indices: sample indices still to label, in order.
        total: samples in the queue (those with a finite value); ``labelled`` of those
            the annotator has labelled; ``no_value`` rows of the run left out for a None
            value or an error.
    """

    order: QueueOrder
    order_used: QueueOrder
    note: str | None
    threshold: QueueThreshold
    indices: list[int] = field(default_factory=list)
    thresholds_used: list[dict[str, Any]] = field(default_factory=list)
    total: int = 0
    labelled: int = 0
    no_value: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "order": self.order.value,
            "order_used": self.order_used.value,
            "note": self.note,
            "threshold": self.threshold.value,
            "threshold_source": self.threshold.source,
            "fallback_threshold": self.threshold.fallback,
            "fallback_source": self.threshold.fallback_source,
            "thresholds_used": self.thresholds_used,
            "remaining": len(self.indices),
            "total": self.total,
            "labelled": self.labelled,
            "no_value": self.no_value,
        }


def _number(value: Any) -> float | None:
    """``value`` as a finite float; None for anything else (bools included)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def method_spread(details: Mapping[str, Any] | None) -> float | None:
    """How far a sample's methods disagree, from the evidence a metric stored.

    Formula: ``|a - b|`` for a pair of methods' scores in `METHOD_PAIRS` (faithfulness:
    ``graded_support`` and ``entailment_support``); else ``max(p) - min(p)`` over the
    models' probabilities in ``details["probabilities"]`` (toxicity's mean of two models)
    when there are at least two. Range 0..1 for scores in 0..1; higher means the methods
    disagree more. None when the evidence has neither.
    """
    if not details:
        return None
    for first, second in METHOD_PAIRS:
        a, b = _number(details.get(first)), _number(details.get(second))
        if a is not None and b is not None:
            return abs(a - b)
    parts = details.get(METHOD_PROBABILITIES)
    if isinstance(parts, Mapping):
        values = [v for v in (_number(p) for p in parts.values()) if v is not None]
        if len(values) >= 2:
            return max(values) - min(values)
    return None


#: `metric_threshold`'s source of a threshold the user set for the run
RUN_THRESHOLDS = "the run's thresholds"


def metric_threshold(run_config: Mapping[str, Any] | None, metric: str) -> tuple[float | None, str]:
    """The pass threshold the run applied to ``metric`` and where it came from: the
    run's ``thresholds`` (``--threshold``, a config's ``thresholds``), else the run's
    value of the metric's threshold setting, else the metric's default; (None, reason)
    when the metric has none. ``run_config`` is the configuration stored with the run
    (empty for runs stored without one: the defaults apply)."""
    from assay.metrics.registry import metric_class

    config = run_config or {}
    own = _number((config.get("thresholds") or {}).get(metric))
    if own is not None:
        return own, RUN_THRESHOLDS
    try:
        cls = metric_class(metric)
    except KeyError:
        return None, f"{metric!r} is not a registered metric: no threshold known"
    setting = cls.threshold_setting
    if setting and _number(config.get(setting)) is not None:
        return float(config[setting]), f"the run's {setting}"
    if cls.default_threshold is not None:
        return float(cls.default_threshold), "the metric's default threshold"
    return None, "the metric has no threshold"


#: the thresholds `queue_rows` reads from the evidence
_THRESHOLD_KEYS = ("pass_threshold", "decision_threshold")
#: the methods' scores it reads for `method_spread` (``spread=True``)
_SPREAD_KEYS = tuple(key for pair in METHOD_PAIRS for key in pair)


def _json_number(dialect: str, key: str) -> ColumnElement[Any]:
    """``details[key]`` when it is a JSON number, else NULL, read in SQL: no evidence is
    parsed in Python, and a text under the key (from another metric) is no error."""
    value = ScoringDetail.details[key].as_float()
    if dialect == "postgresql":
        kind: ColumnElement[Any] = func.json_typeof(ScoringDetail.details[key])
        return case((kind == "number", value), else_=None)
    kind = func.json_type(ScoringDetail.details, f'$."{key}"')
    return case((kind.in_(("integer", "real")), value), else_=None)


def queue_rows(
    store: Store, run_id: str, metric: str, *, index: int | None = None, spread: bool = False
) -> tuple[list[QueueRow], int]:
    """The run's samples (or the one at ``index``) with a finite value of ``metric``, by
    sample index, with their sample keys and thresholds (and with ``spread``, the
    methods' scores for `method_spread`); and the count of rows left out for no value
    (None or an error). Only that evidence is read from the stored details (numbers in
    SQL), not the whole evidence."""
    numbers = _THRESHOLD_KEYS + (_SPREAD_KEYS if spread else ())
    extra = (ScoringDetail.details[METHOD_PROBABILITIES],) if spread else ()
    stmt = (
        select(
            TestResult.sample_index,
            TestResult.sample_key,
            TestResult.sample_id,
            ScoringDetail.metric_value,
            ScoringDetail.method,
            *(_json_number(store.dialect, key) for key in numbers),
            *extra,
        )
        .join(ScoringDetail, ScoringDetail.test_result_id == TestResult.id)
        .where(TestResult.run_id == run_id, ScoringDetail.metric_name == metric)
        .order_by(TestResult.sample_index)
    )
    if index is not None:
        stmt = stmt.where(TestResult.sample_index == index)
    with store.session() as session:
        found = session.execute(stmt).all()
    rebuilt: dict[int, str] = {}
    if any(key is None for _, key, *_ in found):  # rows stored before revision 0010
        rebuilt = store.run_sample_keys(run_id)
    rows: list[QueueRow] = []
    no_value = 0
    for at, key, sample_id, stored, method, *evidence in found:
        value = _number(stored)
        if value is None:
            no_value += 1
            continue
        read = dict(zip(numbers + (METHOD_PROBABILITIES,) * spread, evidence, strict=True))
        rows.append(
            QueueRow(
                index=at,
                sample_key=key or rebuilt[at],
                sample_id=sample_id,
                value=value,
                method=method,
                pass_threshold=_number(read["pass_threshold"]),
                decision_threshold=_number(read["decision_threshold"]),
                spread=method_spread(read) if spread else None,
            )
        )
    return rows, no_value


def queue_threshold(
    run_config: Mapping[str, Any] | None, metric: str, values: list[float]
) -> QueueThreshold:
    """The threshold of ``metric`` in a run (`metric_threshold`) and, when it has none,
    the fallback: the middle of the metric's range, or the median of the run's
    ``values`` when its range is unbounded."""
    from assay.metrics.registry import metric_class

    value, source = metric_threshold(run_config, metric)
    if value is not None:
        return QueueThreshold(value, source, explicit=source == RUN_THRESHOLDS)
    try:
        low, high = metric_class(metric).value_range
    except KeyError:
        low, high = 0.0, 1.0
    if high is not None:
        return QueueThreshold(None, source, False, (low + high) / 2, "the middle of its range")
    if not values:
        return QueueThreshold(None, source)
    return QueueThreshold(None, source, False, statistics.median(values), "the run's median")


def order_rows(
    rows: list[QueueRow],
    order: QueueOrder,
    threshold: QueueThreshold,
    *,
    seed: int = 0,
) -> tuple[list[QueueRow], QueueOrder, str | None]:
    """``rows`` in ``order`` (see the module docstring); returns the rows, the order
    that ran and a note when it is not the one asked for, or leaves samples behind."""
    by_index = sorted(rows, key=lambda r: r.index)
    if order is QueueOrder.RANDOM:
        shuffled = list(by_index)
        random.Random(seed).shuffle(shuffled)
        return shuffled, order, None

    def distance(row: QueueRow) -> tuple[float, int]:
        centre = threshold.of(row)
        return (abs(row.value - centre) if centre is not None else 0.0), row.index

    uncertain = sorted(by_index, key=distance)
    if order is QueueOrder.UNCERTAIN:
        return uncertain, order, None
    with_evidence = [r for r in uncertain if r.spread is not None]
    if not with_evidence:
        note = (
            "no sample of this run carries two methods' scores for this metric (e.g. "
            "faithfulness's graded_support and entailment_support, or toxicity's "
            "probabilities): ordered by uncertainty instead"
        )
        return uncertain, QueueOrder.UNCERTAIN, note
    spread_first = sorted(with_evidence, key=lambda r: (-(r.spread or 0.0), r.index))
    rest = [r for r in uncertain if r.spread is None]
    note = (
        f"{len(rest)} samples without two methods' scores follow, by uncertainty" if rest else None
    )
    return spread_first + rest, order, note


def annotator_labels(
    labels: Iterable[StoredLabel], metric: str
) -> dict[tuple[str, str], StoredLabel]:
    """The labels that speak for ``metric``, one per (sample key, annotator): the
    annotator's latest label for the metric, else their latest label of the sample as a
    whole (``metric`` None: the one verdict a data file gave, which stands for every
    metric)."""
    chosen: dict[tuple[str, str], StoredLabel] = {}
    ranked = sorted(
        (label for label in labels if label.metric in (metric, None)),
        key=lambda label: (label.metric is not None, label.created_at, label.id),
    )
    for label in ranked:  # later (and metric-specific) labels replace earlier ones
        chosen[(label.sample_key, label.annotator)] = label
    return chosen


def run_facts(store: Store, run_id: str) -> dict[str, Any] | None:
    """What the queue and the agreement report say about a run: ``id``, ``name``,
    ``dataset``, its stored ``config`` (empty when stored without one) and ``metrics``
    (the names it declared and those with stored values, sorted); None: no such run."""
    with store.session() as session:
        run = session.get(Run, run_id)
        if run is None:
            return None
        scored = session.scalars(
            select(ScoringDetail.metric_name).where(ScoringDetail.run_id == run_id).distinct()
        )
        return {
            "id": run.id,
            "name": run.name,
            "dataset": run.dataset,
            "config": dict(run.config or {}),
            "metrics": sorted(set(run.metrics or []) | set(scored)),
        }


def annotation_queue(
    store: Store,
    run_id: str,
    metric: str,
    annotator: str,
    *,
    order: QueueOrder = QueueOrder.UNCERTAIN,
    seed: int = 0,
    skipped: Iterable[int] = (),
) -> QueuePlan | None:
    """The queue of ``run_id`` for ``metric`` and ``annotator`` (None: no such run)."""
    facts = run_facts(store, run_id)
    if facts is None:
        return None
    disagreement = order is QueueOrder.DISAGREEMENT
    rows, no_value = queue_rows(store, run_id, metric, spread=disagreement)
    threshold = queue_threshold(facts["config"], metric, [r.value for r in rows])
    labels = store.labels_for_keys({r.sample_key for r in rows})
    done = {key for key, who in annotator_labels(labels, metric) if who == annotator}
    todo = [r for r in rows if r.sample_key not in done]
    ordered, used, note = order_rows(todo, order, threshold, seed=seed)
    skip = set(skipped)
    indices = [r.index for r in ordered if r.index not in skip]
    indices += [r.index for r in ordered if r.index in skip]
    return QueuePlan(
        order=order,
        order_used=used,
        note=note,
        threshold=threshold,
        indices=indices,
        thresholds_used=threshold.used(todo),
        total=len(rows),
        labelled=len(rows) - len(todo),
        no_value=no_value,
    )
