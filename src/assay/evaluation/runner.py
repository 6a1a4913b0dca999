"""The runner: picks metrics, batches samples, shares models, reports and gates.

`evaluate` is the one entry point the CLI, the pytest plugin and the server call. It
scores samples chunk by chunk (each metric vectorises over a chunk,
`assay.evaluation.chunks.score_chunk`), hands every finished sample to ``on_sample`` at
once (so a sink can write it before the next chunk starts: nothing computed is lost on
interrupt), and records per-metric time. With
``executor="ray"`` (or an `assay.evaluation.scale.RayExecutor`) the chunks are scored by
`score_chunk` in Ray actors and come back as they finish; the summary is the same.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from assay.core.config import AssayConfig
from assay.core.extras import ModelUnavailable
from assay.core.result import MetricResult
from assay.core.sample import Sample
from assay.core.stats import bootstrap_ci, mean, percentile
from assay.engine.resources import Resources
from assay.evaluation.chunks import Executor, score_chunks
from assay.evaluation.scale import resolve_executor
from assay.inputs.records import (
    InputError,
    InputErrors,
    samples_from_dataframe,
    samples_from_records,
)
from assay.metrics.base import PASS_THRESHOLD, Metric
from assay.metrics.registry import resolve_metrics
from assay.models.embedders import runs_on_torch

if TYPE_CHECKING:
    from assay.inputs.targets import Target, TargetSettings

__all__ = [
    "Evaluation",
    "MetricSummary",
    "applied_threshold",
    "evaluate",
    "passes",
    "run",
]

SampleCallback = Callable[[int, Sample, dict[str, MetricResult]], None]


def passes(metric: Metric | type[Metric], value: float, threshold: float) -> bool:
    """Pass rule: at or above the threshold for higher-better metrics, at or below otherwise."""
    return value >= threshold if metric.higher_is_better else value <= threshold


def applied_threshold(
    metric: Metric | type[Metric], result: MetricResult, config: AssayConfig
) -> float | None:
    """The pass threshold that judges one result, in this order: a threshold the user set
    for this metric (``thresholds`` in config or ``--threshold``), then the metric's
    per-sample threshold (``details["pass_threshold"]``, e.g. the Arabic similarity
    threshold), then the configured or default threshold; None when the metric has none."""
    if metric.name in config.thresholds:
        return config.thresholds[metric.name]
    per_sample = result.details.get(PASS_THRESHOLD)
    if per_sample is not None:
        return float(per_sample)
    return config.threshold_for(metric)


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

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Evaluation:
    """Everything one run produced: per-sample results, timings, input problems."""

    samples: list[Sample]
    metrics: list[Metric]
    results: list[dict[str, MetricResult]]
    config: AssayConfig
    seconds_by_metric: dict[str, float] = field(default_factory=dict)
    input_errors: list[Any] = field(default_factory=list)
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    wall_seconds: float = 0.0
    judge_usage: dict[str, Any] | None = None

    def values(self, name: str, indices: Iterable[int] | None = None) -> list[float | None]:
        rows = self.results if indices is None else [self.results[i] for i in indices]
        return [row[name].value if name in row else None for row in rows]

    def summary(self, indices: Sequence[int] | None = None) -> list[MetricSummary]:
        """One `MetricSummary` per metric, over all samples or the given ones (the one over
        all samples is kept while no result is added: the report and the gates share it)."""
        if indices is None:
            kept = self.__dict__.get("_summary")
            if kept is not None and kept[0] is self.results and kept[1] == len(self.results):
                return list(kept[2])
            summaries = self._summarise(self.results)
            self.__dict__["_summary"] = (self.results, len(self.results), summaries)
            return list(summaries)
        return self._summarise([self.results[i] for i in indices])

    def _summarise(self, rows: list[dict[str, MetricResult]]) -> list[MetricSummary]:
        out = []
        for metric in self.metrics:
            results = [row[metric.name] for row in rows if metric.name in row]
            values = [r.value for r in results if r.value is not None]
            threshold = self.config.threshold_for(metric)
            passed = []
            for r in results:
                t = applied_threshold(metric, r, self.config)
                if r.value is not None and t is not None:
                    passed.append(passes(metric, r.value, t))
            low, high = (
                bootstrap_ci(values, seed=self.config.seed) if len(values) >= 2 else (None, None)
            )
            out.append(
                MetricSummary(
                    name=metric.name,
                    n=len(values),
                    n_na=sum(1 for r in results if r.value is None and r.error is None),
                    n_error=sum(1 for r in results if r.error is not None),
                    n_out_of_domain=sum(1 for r in results if _out_of_domain(r)),
                    mean=mean(values),
                    median=percentile(values, 50) if values else None,
                    ci_low=low,
                    ci_high=high,
                    p90=percentile(values, 90) if values else None,
                    p99=percentile(values, 99) if values else None,
                    threshold=threshold,
                    pass_rate=(sum(passed) / len(passed)) if passed else None,
                    seconds=self.seconds_by_metric.get(metric.name, 0.0),
                    methods=dict(Counter(r.method for r in results)),
                    higher_is_better=metric.higher_is_better,
                    unit=metric.unit,
                )
            )
        return out

    def groups(self, keys: Sequence[str]) -> dict[tuple[str, ...], list[int]]:
        """Sample indices grouped by the values of tag keys (missing tags group as '-')."""
        grouped: dict[tuple[str, ...], list[int]] = defaultdict(list)
        for i, sample in enumerate(self.samples):
            grouped[tuple(sample.tags.get(k, "-") for k in keys)].append(i)
        return dict(sorted(grouped.items()))

    def label_counts(self, indices: Sequence[int] | None = None) -> dict[str, dict[str, int]]:
        """Counts of categorical labels (``details['label']``) per metric, e.g. CORRECT/WRONG,
        over all samples or the given ones."""
        counts: dict[str, Counter[str]] = defaultdict(Counter)
        for row in self.results if indices is None else [self.results[i] for i in indices]:
            for name, result in row.items():
                label = result.details.get("label") if isinstance(result.details, dict) else None
                if isinstance(label, str):
                    counts[name][label] += 1
        return {name: dict(c) for name, c in counts.items()}

    def row(self, index: int) -> dict[str, Any]:
        """Flat output row: id, tags, every metric's value and components by name."""
        return flat_row(self.samples[index], self.results[index])


def _out_of_domain(result: MetricResult) -> bool:
    """Whether a value came from an estimator outside its training domain."""
    details = result.details
    return (
        result.value is not None and isinstance(details, dict) and details.get("in_domain") is False
    )


def flat_row(sample: Sample, results: dict[str, MetricResult]) -> dict[str, Any]:
    row: dict[str, Any] = {"id": sample.id}
    for key, value in sample.tags.items():
        row[f"tag.{key}"] = value
    if sample.target_call is not None:  # assay run: how the target answered
        call = sample.target_call
        row["target.status"] = call.status
        row["target.http_status"] = call.http_status
        row["target.reason"] = call.reason
        row["duration"] = sample.duration
        row["first_token_time"] = sample.first_token_time
    for name, result in results.items():
        row[name] = result.value
        for component, value in result.components.items():
            row[f"{name}.{component}"] = value
    return row


def _as_samples(data: Iterable[Any], max_json_depth: int) -> list[Sample]:
    """Samples as given; dicts validated, an invalid one (or one nesting deeper than
    ``max_json_depth``) raising `InputErrors` that names its position (item N, 1-based)
    and field."""
    if isinstance(data, Sample | dict | str | bytes):
        raise InputErrors(
            [InputError("<data>", None, None, "expected a list of samples or dicts, not one")]
        )
    samples: list[Sample] = []
    for position, item in enumerate(data, start=1):
        if isinstance(item, Sample):
            samples.append(item)
            continue
        if not isinstance(item, dict):
            kind = "null" if item is None else type(item).__name__
            raise InputErrors(
                [
                    InputError(
                        "<data>", position, None, f"expected a Sample or a dict, got {kind}", "item"
                    )
                ]
            )
        found, _ = samples_from_records(
            [(position, item)], "<data>", strict=True, unit="item", max_json_depth=max_json_depth
        )
        samples.extend(found)
    return samples


def evaluate(
    data: Sequence[Sample] | Sequence[dict[str, Any]] | Any,
    metrics: Sequence[str | Metric] | None = None,
    suites: Sequence[str] | None = None,
    config: AssayConfig | None = None,
    resources: Resources | None = None,
    on_sample: SampleCallback | None = None,
    progress: Callable[[int], None] | None = None,
    executor: str | Executor | None = None,
) -> Evaluation:
    """Score every sample with every selected metric.

    Args:
        data: samples, dicts with Sample fields (the specifications' names accepted), or a pandas
            DataFrame with one sample per row (an invalid row raises `InputErrors`).
        metrics: metric names or instances; with ``suites``, their union. Default: the
            ``base`` suite.
        suites: suite names (see ``assay metrics --suites``).
        config: run configuration (default: environment and project files).
        resources: shared models; made from ``config`` when not given.
        on_sample: called with (index, sample, results) as soon as a sample is done.
        progress: called with the number of samples just finished.
        executor: where the chunks are scored: ``"local"`` (default: this process),
            ``"ray"`` (a Ray instance started for the run) or an
            `assay.evaluation.scale.RayExecutor` (an existing cluster, workers, device). With
            Ray, ``on_sample`` is called in the order chunks finish; the results and the
            summary are in sample order;
            each worker builds its own models from ``config`` (``resources`` then only
            supplies the configuration).
    """
    res = resources or Resources(config)
    cfg = res.config
    if hasattr(data, "columns") and hasattr(data, "to_dict"):  # a pandas DataFrame
        data, _ = samples_from_dataframe(data, strict=True, max_json_depth=cfg.max_json_depth)
    samples = _as_samples(data, cfg.max_json_depth)
    names = [m for m in metrics or [] if isinstance(m, str)]
    chosen = resolve_metrics(names, list(suites) if suites else None) if (names or suites) else []
    chosen.extend(m for m in metrics or [] if isinstance(m, Metric))
    if not chosen:
        chosen = resolve_metrics(None, ["base"])
    seen: set[str] = set()
    unique = [m for m in chosen if not (m.name in seen or seen.add(m.name))]

    evaluation = Evaluation(samples=samples, metrics=unique, results=[], config=cfg)
    seconds: dict[str, float] = defaultdict(float)
    started = time.perf_counter()
    chunk_size = cfg.chunk_size
    scaled = _scaled(executor)
    if scaled is not None:
        # chunks come back as they finish, in any order: each is handed on at once
        slots: list[dict[str, MetricResult] | None] = [None] * len(samples)
        for start, rows, chunk_seconds in scaled.scored(samples, unique, cfg, chunk_size):
            for name, spent in chunk_seconds.items():
                seconds[name] += spent
            for offset, row in enumerate(rows):
                slots[start + offset] = row
                if on_sample is not None:
                    on_sample(start + offset, samples[start + offset], row)
            if progress is not None:
                progress(len(rows))
        evaluation.results = [row if row is not None else {} for row in slots]
        evaluation.judge_usage = scaled.judge_usage()
    else:
        starts = range(0, len(samples), chunk_size)
        chunks = (samples[start : start + chunk_size] for start in starts)
        ahead = _asks_ahead(unique, cfg)
        scored = score_chunks(unique, chunks, res, seconds, ahead=ahead)
        for start, rows in zip(starts, scored, strict=True):
            chunk = samples[start : start + chunk_size]
            for offset, row in enumerate(rows):
                evaluation.results.append(row)
                if on_sample is not None:
                    on_sample(start + offset, chunk[offset], row)
            if progress is not None:
                progress(len(chunk))
        judge = getattr(res, "judge_usage", None)
        if callable(judge):
            evaluation.judge_usage = judge()
    evaluation.seconds_by_metric = dict(seconds)
    evaluation.wall_seconds = time.perf_counter() - started
    return evaluation


def _asks_ahead(metrics: Sequence[Metric], config: AssayConfig) -> bool:
    """Whether the next chunk's asks run while this chunk reduces (`score_chunks`): for
    runs whose torch models (BERTScore, a sentence-transformers embedder) are on a CUDA
    device, without a judge (its client keeps one event loop). A run without torch
    models does not import torch to find out."""
    torch_needs = {"bertscore", *(["embedder"] if runs_on_torch(config.embedder) else [])}
    if (
        config.device == "cpu"
        or not any(m.needs & torch_needs for m in metrics)
        or any("judge" in m.needs for m in metrics)
    ):
        return False
    from assay.models.device import torch_device

    try:
        return torch_device(config.device) == "cuda"
    except (ModelUnavailable, ImportError):
        return False


def _scaled(executor: str | Executor | None) -> Executor | None:
    """The executor that scores the chunks elsewhere; None for this process."""
    if executor is None or executor == "local":
        return None
    return resolve_executor(executor)


def run(
    data: Sequence[Sample] | Sequence[dict[str, Any]] | Any,
    target: str | Target,
    metrics: Sequence[str | Metric] | None = None,
    suites: Sequence[str] | None = None,
    config: AssayConfig | None = None,
    resources: Resources | None = None,
    settings: TargetSettings | None = None,
    **target_options: Any,
) -> Evaluation:
    """Call the application under test for each sample, then score its answers
    (``assay run`` from Python).

    ``target``: ``openai:BASE_URL``, ``http(s)://URL`` or ``python:MODULE:FUNCTION``
    (`assay.inputs.targets.parse_target`, with ``target_options``: ``model``,
    ``key_env``, ``request``, ``response_path``, ``contexts_path``, ``headers``), or a
    target object; ``settings``: timeout, concurrency and retries (`TargetSettings`).
    The other arguments are `evaluate`'s. Raises `TargetError` for a target that cannot
    be called as given and `TargetUnreachable` when it cannot be reached.
    """
    from assay.inputs.targets import call_target, parse_target  # httpx: only for a run

    res = resources or Resources(config)
    samples = _as_samples(data, res.config.max_json_depth)
    chosen = parse_target(target, **target_options) if isinstance(target, str) else target
    answered = call_target(samples, chosen, settings)
    return evaluate(answered, metrics=metrics, suites=suites, resources=res)
