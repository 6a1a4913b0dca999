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
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import islice
from typing import TYPE_CHECKING, Any

from assay.core.config import AssayConfig
from assay.core.extras import ModelUnavailable
from assay.core.result import MetricResult
from assay.core.sample import Sample
from assay.engine.resources import Resources
from assay.engine.work import KindWork
from assay.evaluation.calibration_apply import Calibrations
from assay.evaluation.chunks import Executor, score_chunks
from assay.evaluation.scale import resolve_executor
from assay.evaluation.tally import MetricSummary, RunTally, applied_threshold, passes
from assay.inputs.records import (
    InputError,
    InputErrors,
    samples_from_dataframe,
    samples_from_records,
)
from assay.metrics.base import Metric
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


@dataclass
class Evaluation:
    """Everything one run produced: per-sample results, timings, input problems.

    A streamed run (``evaluate(..., keep=False)``) keeps no samples or results: its
    ``tally`` holds what the summary, the labels, the error causes and the groups it was
    asked for need (`assay.evaluation.tally`)."""

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
    #: the counts over every sample; for kept results, made from them when first asked
    tally: RunTally | None = None
    #: whether ``samples`` and ``results`` hold every sample (False for a streamed run)
    kept: bool = True
    #: the run's model work by kind (`assay.engine.work.ModelWork.since`: items answered
    #: and seconds); empty with the Ray executor (its workers' models are not counted here)
    model_work: dict[str, KindWork] = field(default_factory=dict)

    @property
    def n_samples(self) -> int:
        return len(self.results) if self.kept else self.whole().samples

    def whole(self) -> RunTally:
        """The tally over every sample (made again when results were added since)."""
        tally = self.tally
        if self.kept and (tally is None or tally.samples != len(self.results)):
            tally = self.tally = self._tally_of(range(len(self.results)))
        if tally is None:
            raise ValueError("this run kept no results and has no tally")
        return tally

    def _tally_of(self, indices: Iterable[int], keys: Sequence[str] = ()) -> RunTally:
        if not self.kept:
            raise ValueError(
                "a streamed run keeps no samples: group it by giving group_by to evaluate"
            )
        tally = RunTally(self.metrics, self.config, keys)
        return tally.add_all((self.samples[i], self.results[i]) for i in indices)

    def values(self, name: str, indices: Iterable[int] | None = None) -> list[float | None]:
        rows = self.results if indices is None else [self.results[i] for i in indices]
        return [row[name].value if name in row else None for row in rows]

    def summary(self, indices: Sequence[int] | None = None) -> list[MetricSummary]:
        """One `MetricSummary` per metric, over all samples or the given ones (the one
        over all samples is kept while no sample is added: the report and the gates share
        it, and its bootstrap intervals cost about 8 µs a value)."""
        if indices is not None:
            return self._tally_of(indices).summaries(self.seconds_by_metric)
        tally = self.whole()
        key = (id(tally), tally.samples, tuple(self.seconds_by_metric.items()))
        kept = self.__dict__.get("_summary")
        if kept is None or kept[0] != key:
            kept = self.__dict__["_summary"] = (key, tally.summaries(self.seconds_by_metric))
        return list(kept[1])

    def groups(self, keys: Sequence[str]) -> dict[tuple[str, ...], list[int]]:
        """Sample indices grouped by the values of tag keys (missing tags group as '-')."""
        grouped: dict[tuple[str, ...], list[int]] = defaultdict(list)
        for i, sample in enumerate(self.samples):
            grouped[tuple(sample.tags.get(k, "-") for k in keys)].append(i)
        return dict(sorted(grouped.items()))

    def group_tallies(self, keys: Sequence[str]) -> dict[tuple[str, ...], RunTally]:
        """The tally of each group of samples sharing the values of tag keys (missing
        tags group as '-'), sorted by those values."""
        tally = self.whole()
        if tuple(keys) == tally.group_keys:
            return tally.groups()
        return self._tally_of(range(len(self.results)), keys).groups()

    def label_counts(self, indices: Sequence[int] | None = None) -> dict[str, dict[str, int]]:
        """Counts of categorical labels (``details['label']``) per metric, e.g. CORRECT/WRONG,
        over all samples or the given ones."""
        tally = self.whole() if indices is None else self._tally_of(indices)
        return tally.label_counts()

    def row(self, index: int) -> dict[str, Any]:
        """Flat output row: id, tags, every metric's value and components by name."""
        return flat_row(self.samples[index], self.results[index])


def flat_row(
    sample: Sample, results: dict[str, MetricResult], row: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The flat row of one scored sample: id, tags, how the target answered (``assay
    run``), every metric's value and components by name; added to ``row`` when given
    (`assay.outputs.sinks.output_row`'s, which holds the id and the sample's fields)."""
    if row is None:
        row = {"id": sample.id}
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


def _sample_stream(data: Iterable[Any], max_json_depth: int) -> Iterator[Sample]:
    """Samples as given, one at a time; dicts validated, an invalid one (or one nesting
    deeper than ``max_json_depth``) raising `InputErrors` that names its position (item N,
    1-based) and field."""
    if isinstance(data, Sample | dict | str | bytes):
        raise InputErrors(
            [InputError("<data>", None, None, "expected a list of samples or dicts, not one")]
        )
    for position, item in enumerate(data, start=1):
        if isinstance(item, Sample):
            yield item
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
        yield from found


def _as_samples(data: Iterable[Any], max_json_depth: int) -> list[Sample]:
    """`_sample_stream` as a list."""
    return list(_sample_stream(data, max_json_depth))


def _chunked(samples: Iterable[Sample], size: int) -> Iterator[list[Sample]]:
    """Lists of ``size`` samples (the last one shorter), read as they are asked for."""
    stream = iter(samples)
    while chunk := list(islice(stream, size)):
        yield chunk


def evaluate(
    data: Sequence[Sample] | Sequence[dict[str, Any]] | Any,
    metrics: Sequence[str | Metric] | None = None,
    suites: Sequence[str] | None = None,
    config: AssayConfig | None = None,
    resources: Resources | None = None,
    on_sample: SampleCallback | None = None,
    progress: Callable[[int], None] | None = None,
    executor: str | Executor | None = None,
    *,
    keep: bool = True,
    group_by: Sequence[str] = (),
    calibrations: Calibrations | None = None,
) -> Evaluation:
    """Score every sample with every selected metric.

    Args:
        data: samples, dicts with Sample fields (the specifications' names accepted), or a pandas
            DataFrame with one sample per row (an invalid row raises `InputErrors`). Any
            iterable: with ``keep=False`` it is read chunk by chunk as the run goes.
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
        keep: keep every sample and result in the `Evaluation` (default). ``False``
            streams the run: each chunk is read, scored, handed to ``on_sample`` and
            forgotten, and the evaluation keeps only its `RunTally` (the summary, labels,
            error causes and the groups of ``group_by``), so memory does not grow with
            the data. Local executor only.
        group_by: tag keys whose groups the tally counts as it goes (a streamed run can
            only be grouped by these).
        calibrations: calibration files applied to their metrics' results as each chunk
            is scored (`assay.evaluation.calibration_apply`); default: those of the
            ``calibration`` setting (a file for a metric not scored is ignored with a
            note).
    """
    res = resources or Resources(config)
    cfg = res.config
    if hasattr(data, "columns") and hasattr(data, "to_dict"):  # a pandas DataFrame
        data, _ = samples_from_dataframe(data, strict=True, max_json_depth=cfg.max_json_depth)
    names = [m for m in metrics or [] if isinstance(m, str)]
    chosen = resolve_metrics(names, list(suites) if suites else None) if (names or suites) else []
    chosen.extend(m for m in metrics or [] if isinstance(m, Metric))
    if not chosen:
        chosen = resolve_metrics(None, ["base"])
    seen: set[str] = set()
    unique = [m for m in chosen if not (m.name in seen or seen.add(m.name))]
    if calibrations is None:
        calibrations = Calibrations.for_run(cfg.calibration, [m.name for m in unique])
    scaled = _scaled(executor)
    if not keep and scaled is not None:
        raise ValueError("a streamed run (keep=False) is scored by the local executor only")
    if scaled is None:  # loaded while the samples (or the first chunk) are read
        res.load_in_background(m.needs for m in unique)
    stream = _sample_stream(data, cfg.max_json_depth)
    samples = list(stream) if keep else []
    tally = RunTally(unique, cfg, group_by)
    evaluation = Evaluation(
        samples=samples, metrics=unique, results=[], config=cfg, tally=tally, kept=keep
    )
    seconds: dict[str, float] = defaultdict(float)
    work_before = res.model_work.totals()
    started = time.perf_counter()
    chunk_size = cfg.chunk_size
    if scaled is not None:
        # chunks come back as they finish, in any order: each is handed on at once
        slots: list[dict[str, MetricResult] | None] = [None] * len(samples)
        for start, rows, chunk_seconds in scaled.scored(samples, unique, cfg, chunk_size):
            for name, spent in chunk_seconds.items():
                seconds[name] += spent
            _calibrate(calibrations, samples[start : start + len(rows)], rows, res, seconds)
            for offset, row in enumerate(rows):
                slots[start + offset] = row
                if on_sample is not None:
                    on_sample(start + offset, samples[start + offset], row)
            if progress is not None:
                progress(len(rows))
        evaluation.results = [row if row is not None else {} for row in slots]
        tally.add_all(zip(samples, evaluation.results, strict=True))  # in sample order
        evaluation.judge_usage = scaled.judge_usage()
    else:
        chunks = _after_loading(_chunked(samples if keep else stream, chunk_size), res)
        ahead = _asks_ahead(unique, cfg)
        index = 0
        for chunk, rows in score_chunks(unique, chunks, res, seconds, ahead=ahead):
            _calibrate(calibrations, chunk, rows, res, seconds)
            for sample, row in zip(chunk, rows, strict=True):
                if keep:
                    evaluation.results.append(row)
                tally.add(sample, row)
                if on_sample is not None:
                    on_sample(index, sample, row)
                index += 1
            if progress is not None:
                progress(len(chunk))
        judge = getattr(res, "judge_usage", None)
        if callable(judge):
            evaluation.judge_usage = judge()
    evaluation.seconds_by_metric = dict(seconds)
    evaluation.wall_seconds = time.perf_counter() - started
    evaluation.model_work = res.model_work.since(work_before)
    if resources is None:  # made for this run: its judge's connections closed with it
        res.close()
    return evaluation


def _calibrate(
    calibrations: Calibrations,
    chunk: Sequence[Sample],
    rows: list[dict[str, MetricResult]],
    res: Resources,
    seconds: dict[str, float],
) -> None:
    """The chunk's results of calibrated metrics replaced by their calibrated version,
    the time it took counted as the calibration's (``seconds["calibration"]``)."""
    if calibrations:
        t0 = time.perf_counter()
        calibrations.apply(chunk, rows, res)
        seconds["calibration"] += time.perf_counter() - t0


def _after_loading(chunks: Iterator[list[Sample]], res: Resources) -> Iterator[list[Sample]]:
    """``chunks``, the first once it is read and the models `Resources.load_in_background`
    loads are loaded (so no metric loads one a second time)."""
    first = next(chunks, None)
    res.wait_for_loading()
    if first is not None:
        yield first
        yield from chunks


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
    from assay.metrics.probes import mark_unreached

    res = resources or Resources(config)
    samples = _as_samples(data, res.config.max_json_depth)
    chosen = parse_target(target, **target_options) if isinstance(target, str) else target
    answered = mark_unreached(call_target(samples, chosen, settings), chosen)
    try:
        return evaluate(answered, metrics=metrics, suites=suites, resources=res)
    finally:
        if resources is None:  # made for this run: its judge's connections closed with it
            res.close()
