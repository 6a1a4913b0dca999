"""`RayExecutor`: a run's chunks scored by Ray actors, on one machine or a cluster.

The driver (the process that called `assay.evaluate`) connects to Ray (``address``:
None starts a local instance for the run and stops it afterwards; ``"auto"`` or
``"ray://host:10001"`` joins a running cluster, which keeps running), starts
``workers`` scoring actors (`Scorer`, one CPU each unless told otherwise, a GPU share
on ``device`` auto/cuda when the cluster has GPUs) and one `JudgeBudget` actor when a
judge is configured. Each actor builds its own `Resources` from the run's configuration
and keeps them for the run, so each model loads once per actor; it scores whole chunks
with the runner's `score_chunk` (the same code as a local run), and each chunk comes
back to the driver's sinks as soon as it is done.

Reading (`RayExecutor.read_samples`, used by ``assay evaluate --executor ray``): the
dataset, a local file or a URL that pyarrow reads, is parsed by Ray tasks, one per piece
(`assay.inputs.locations`: byte ranges of JSONL, runs of Parquet row groups, a whole CSV or JSON
file), with the same readers as a local run; the driver gets the samples in file order
and the errors with their global line or row numbers, before any scoring starts.

Failures: every actor has at most two chunks queued. When an actor dies (its process
killed, its node lost, out of memory) the chunks it held are queued again for a new
actor, at most ``max_retries`` times each; the budget takes back the dead actor's judge
slots; each retry is reported as an `AssayWarning`. A chunk that kills its actor every
time fails the run with `WorkerLost`. An error raised by the scoring code itself (not
a metric's: those are per-sample results) stops the run at once.
"""

from __future__ import annotations

import logging
import os
import uuid
import warnings
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from assay.core.config import AssayConfig, AssayWarning
from assay.core.extras import ModelUnavailable, needs_extra
from assay.core.result import MetricResult
from assay.core.sample import Sample
from assay.engine.resources import Resources
from assay.evaluation.chunks import ScoredChunk, score_chunk
from assay.evaluation.scale.budget import BudgetSlots, JudgeBudget
from assay.inputs.locations import is_local, read_location, read_piece
from assay.inputs.read import read_samples
from assay.judge.aio import run_sync
from assay.judge.panel import JudgePanel, panel_agreement
from assay.judge.usage import summed_usage
from assay.metrics.base import Metric

if TYPE_CHECKING:
    from assay.inputs.records import InputError

__all__ = ["RayExecutor", "Scorer", "WorkerLost", "merge_usage"]

#: chunks queued on one actor at once: one being scored, one waiting (no idle gap)
_QUEUED_PER_WORKER = 2


class WorkerLost(RuntimeError):
    """A chunk's actor died on every attempt; the message names the samples."""


class Scorer:
    """A scoring actor: the run's metrics and `Resources`, kept for the whole run.

    Args:
        metrics: the run's metric objects.
        config: the run's configuration.
        holder: this actor's name at the judge budget.
        budget: the `JudgeBudget` actor, or None (no judge).
    """

    def __init__(
        self, metrics: Sequence[Metric], config: AssayConfig, holder: str, budget: Any
    ) -> None:
        self.metrics = list(metrics)
        self.res = Resources(config)
        self.holder = holder
        self.slots: BudgetSlots | None = None  # this actor's view of the judge budget
        self._reported: dict[str, int] = {}  # a panel's values reported, per metric
        if budget is not None and config.judge_configured:
            judge = self.res.judge
            if judge is not None:
                self.slots = judge.budget = BudgetSlots(budget, holder)

    def where(self) -> tuple[int, str]:
        """This actor's process id and node address."""
        import ray

        return os.getpid(), ray.util.get_node_ip_address()

    def score(
        self, samples: list[Sample]
    ) -> tuple[list[dict[str, MetricResult]], dict[str, float], dict[str, Any] | None]:
        """The chunk's results, the seconds per metric, and this actor's judge usage so
        far (reported with every chunk, so an actor that dies later still counts)."""
        seconds: dict[str, float] = {}
        rows = score_chunk(self.metrics, samples, self.res, seconds)
        if self.slots is not None:  # the chunk's slots back at the budget before it returns
            run_sync(self.slots.settle())
        usage = self.res.judge_usage()
        panel = self.res.__dict__.get("judge")
        if usage is not None and isinstance(panel, JudgePanel):
            # the judges' values since the last report, for the run's panel agreement
            ratings = panel.ratings()
            usage["new_ratings"] = {m: r[self._reported.get(m, 0) :] for m, r in ratings.items()}
            self._reported = {m: len(r) for m, r in ratings.items()}
        return rows, seconds, usage


@dataclass
class RayExecutor:
    """Scores a run's chunks on Ray actors (see the module docstring).

    Args:
        address: None starts a local Ray instance for the run (or uses the one this
            process already started with ``ray.init``); ``"auto"`` joins the cluster
            this machine belongs to; ``"ray://host:10001"`` joins one through Ray Client.
        workers: scoring actors; None: as many as the cluster's CPUs allow
            (``cpus_per_worker`` each), never more than there are chunks.
        cpus_per_worker: CPUs each actor reserves (its models' thread count follows).
        gpus_per_worker: GPUs each actor reserves; None: with ``device`` auto or cuda,
            the cluster's GPUs shared out (at most one each), else none.
        max_retries: times a chunk is given to a new actor after its actor died.
        init_options: more ``ray.init`` arguments (e.g. ``num_cpus`` for a local
            instance, ``runtime_env`` for a cluster without Assay installed).
    """

    address: str | None = None
    workers: int | None = None
    cpus_per_worker: float = 1.0
    gpus_per_worker: float | None = None
    max_retries: int = 3
    init_options: dict[str, Any] = field(default_factory=dict)
    #: per actor started in the last run: name -> (process id, node address)
    started: dict[str, tuple[int, str]] = field(default_factory=dict, init=False)
    #: the judge budget's counters at the end of the last run (limit, peak, granted)
    budget_stats: dict[str, Any] | None = field(default=None, init=False)
    #: how the last `read_samples` read its dataset: "N Ray tasks" or why "the driver"
    read_by: str | None = field(default=None, init=False)
    _usage: dict[str, dict[str, Any]] = field(default_factory=dict, init=False, repr=False)
    #: a judge panel's values per metric, from every chunk scored (the actors send theirs)
    _ratings: dict[str, list[dict[str, Any]]] = field(default_factory=dict, init=False, repr=False)
    _ours: bool = field(default=False, init=False, repr=False)  # we started the instance

    def __post_init__(self) -> None:
        if self.workers is not None and self.workers < 1:
            raise ValueError(f"workers must be at least 1. Got {self.workers}.")
        if self.cpus_per_worker <= 0:
            raise ValueError(f"cpus_per_worker must be positive. Got {self.cpus_per_worker}.")
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be 0 or more. Got {self.max_retries}.")

    # ---- the run -------------------------------------------------------------------------
    def scored(
        self,
        samples: Sequence[Sample],
        metrics: Sequence[Metric],
        config: AssayConfig,
        chunk_size: int,
    ) -> Iterator[ScoredChunk]:
        with needs_extra("the Ray executor (--executor ray)"):
            import ray
        self.started, self._usage, self._ratings, self.budget_stats = {}, {}, {}, None
        chunks = deque(
            (start, list(samples[start : start + chunk_size]))
            for start in range(0, len(samples), chunk_size)
        )
        if not chunks:
            self.close()
            return
        self._open(ray)
        budget = None
        actors: dict[str, Any] = {}
        try:
            if config.judge_configured:
                budget = (
                    ray.remote(JudgeBudget)
                    .options(max_concurrency=100_000, num_cpus=0)
                    .remote(config.judge_concurrency, config.judge_rate_limit)
                )
            count, gpus = self._shape(ray, config, len(chunks))
            factory = ray.remote(Scorer).options(
                num_cpus=self.cpus_per_worker, num_gpus=gpus, max_restarts=0
            )
            metric_ref = ray.put(list(metrics))

            def spawn() -> str:
                holder = f"scorer-{uuid.uuid4().hex[:8]}"
                actors[holder] = factory.remote(metric_ref, config, holder, budget)
                return holder

            for _ in range(count):
                spawn()
            try:
                where = ray.get([actor.where.remote() for actor in actors.values()])
            except ray.exceptions.RayActorError as exc:  # e.g. Assay not installed there
                raise WorkerLost(f"a Ray worker could not start: {_first_line(exc)}") from exc
            self.started = dict(zip(actors, where, strict=True))
            yield from self._drive(ray, chunks, actors, spawn, budget)
            if budget is not None:
                self.budget_stats = ray.get(budget.stats.remote())
        finally:
            for actor in actors.values():
                ray.kill(actor)
            if budget is not None:
                ray.kill(budget)
            self.close()

    def _drive(
        self,
        ray: Any,
        chunks: deque[tuple[int, list[Sample]]],
        actors: dict[str, Any],
        spawn: Any,
        budget: Any,
    ) -> Iterator[ScoredChunk]:
        """Keep every actor fed, yield chunks as they finish, and requeue the chunks of
        an actor that died on a new one."""
        attempts: dict[int, int] = {}
        running: dict[Any, tuple[str, int, list[Sample]]] = {}  # ref -> holder, start, chunk
        queued: dict[str, int] = dict.fromkeys(actors, 0)
        while chunks or running:
            for holder in list(actors):
                while chunks and queued[holder] < _QUEUED_PER_WORKER:
                    start, chunk = chunks.popleft()
                    ref = actors[holder].score.remote(chunk)
                    running[ref] = (holder, start, chunk)
                    queued[holder] += 1
            (ref,), _ = ray.wait(list(running), num_returns=1)
            holder, start, chunk = running.pop(ref)
            if holder in queued:
                queued[holder] -= 1
            try:
                rows, seconds, usage = ray.get(ref)
            except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError) as exc:
                attempts[start] = attempts.get(start, 0) + 1
                span = f"samples {start + 1}-{start + len(chunk)}"
                if attempts[start] > self.max_retries:
                    raise WorkerLost(
                        f"the worker scoring {span} died {attempts[start]} times; "
                        f"giving up (last error: {_first_line(exc)})"
                    ) from exc
                if holder in actors:
                    self._replace(ray, holder, actors, queued, spawn, budget)
                pid, node = self.started.get(holder, (None, "?"))
                warnings.warn(
                    f"Ray worker {holder} (pid {pid} on {node}) died while scoring {span}; "
                    f"they are scored again on another worker (retry {attempts[start]} of "
                    f"{self.max_retries})",
                    AssayWarning,
                    stacklevel=2,
                )
                chunks.appendleft((start, chunk))
                continue
            if holder not in self.started and holder in actors:  # a replacement's first
                self.started[holder] = ray.get(actors[holder].where.remote())
            if usage is not None:
                for metric, values in usage.pop("new_ratings", {}).items():
                    self._ratings.setdefault(metric, []).extend(values)
                self._usage[holder] = usage
            yield start, rows, seconds

    def _replace(
        self,
        ray: Any,
        holder: str,
        actors: dict[str, Any],
        queued: dict[str, int],
        spawn: Any,
        budget: Any,
    ) -> None:
        """Drop the dead actor ``holder`` (its judge slots go back) and start another."""
        dead = actors.pop(holder)
        queued.pop(holder, None)
        ray.kill(dead)
        if budget is not None:
            ray.get(budget.forget.remote(holder))
        queued[spawn()] = 0

    def _open(self, ray: Any) -> None:
        """Connect to Ray unless this process already is; a local instance started here
        is stopped by `close` (at the end of `scored`)."""
        if ray.is_initialized():
            return
        options: dict[str, Any] = {
            "include_dashboard": False,
            "log_to_driver": False,
            "logging_level": logging.WARNING,
        }
        options.update(self.init_options)
        ray.init(address=self.address, **options)
        self._ours = self.address is None

    def close(self) -> None:
        """Stop the local Ray instance this executor started, if any (a cluster it
        joined keeps running). `scored` calls it when it ends; call it after a
        `read_samples` that is not followed by a run."""
        if self._ours:
            import ray

            ray.shutdown()
            self._ours = False

    # ---- reading -------------------------------------------------------------------------
    def read_samples(
        self,
        location: str | Path,
        strict: bool = False,
        *,
        max_json_depth: int | None = None,
        input_format: str | None = None,
        piece_bytes: int | None = None,
    ) -> tuple[list[Sample], list[InputError]]:
        """The dataset at ``location`` (a path or a URL pyarrow reads) parsed by Ray tasks,
        piece by piece (`assay.inputs.locations.read_location`): the samples in file order and
        the errors, exactly as `assay.inputs.read.read_samples` gives them. A local file is read
        by tasks on this machine's node; a URL by tasks anywhere in the cluster. Through
        Ray Client (``ray://``) the cluster cannot see this machine's files, so a local
        file is read here, with a warning; an OTLP export is read here too. Leaves Ray
        connected for the run (`close` when none follows). ``piece_bytes``: see
        `read_location`. `read_by` says which way it went."""
        with needs_extra("the Ray executor (--executor ray)"):
            import ray
        self._open(ray)
        self.read_by = None
        if is_local(location) and ray.util.client.ray.is_connected():
            warnings.warn(
                f"{location} is read by the driver: through Ray Client (ray://) the workers "
                "cannot read this machine's files; give a URL they can read (s3://, gs://, "
                "hdfs://) to read it on the cluster",
                AssayWarning,
                stacklevel=2,
            )
            self.read_by = "the driver (Ray Client cannot read local files)"
            return read_samples(
                location, strict, max_json_depth=max_json_depth, input_format=input_format
            )
        options: dict[str, Any] = {"num_cpus": 1, "max_retries": self.max_retries}
        if is_local(location):  # only this node has the file
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            here = ray.get_runtime_context().get_node_id()
            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(here, soft=False)
        task = ray.remote(read_piece).options(**options)

        def run(pieces: Sequence[Any]) -> list[Any]:
            self.read_by = f"{len(pieces)} Ray task{'s' if len(pieces) > 1 else ''}"
            return ray.get([task.remote(piece) for piece in pieces])

        if is_local(location):
            workers = _node_cpus(ray)
        else:
            workers = int(ray.cluster_resources().get("CPU", 1))
        found = read_location(
            location,
            strict,
            max_json_depth=max_json_depth,
            input_format=input_format,
            run=run,
            piece_bytes=piece_bytes,
            workers=workers,
        )
        self.read_by = self.read_by or "the driver (an OTLP export: read_otlp)"
        return found

    def _shape(self, ray: Any, config: AssayConfig, n_chunks: int) -> tuple[int, float]:
        """(actors, GPUs per actor) for this cluster and run."""
        resources = ray.cluster_resources()
        cpus = float(resources.get("CPU", 0))
        count = self.workers or max(1, int(cpus // self.cpus_per_worker))
        count = max(1, min(count, n_chunks))
        gpus = self.gpus_per_worker
        cluster_gpus = float(resources.get("GPU", 0))
        device = getattr(config, "device", "cpu")
        if device == "cuda" and cluster_gpus == 0:
            raise ModelUnavailable(
                "device cuda was asked for, but the Ray cluster has no GPU; use --device "
                "auto or cpu"
            )
        if gpus is None:
            gpus = min(1.0, cluster_gpus / count) if device in {"auto", "cuda"} else 0.0
        return count, gpus

    def judge_usage(self) -> dict[str, Any] | None:
        """The judge usage of the last run, summed over its actors (`merge_usage`)."""
        return merge_usage(list(self._usage.values()), self._ratings)


def _node_cpus(ray: Any) -> int:
    """The CPUs of the node this process runs on."""
    here = ray.get_runtime_context().get_node_id()
    node = next((n for n in ray.nodes() if n.get("NodeID") == here), {})
    return max(1, int(node.get("Resources", {}).get("CPU", 1)))


def _first_line(error: BaseException) -> str:
    """The error's type and the first line of its message (Ray's carry a traceback)."""
    lines = [line for line in str(error).splitlines() if line.strip()]
    return f"{type(error).__name__}: {lines[0][:300]}" if lines else type(error).__name__


def merge_usage(
    usages: Sequence[dict[str, Any]],
    ratings: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
) -> dict[str, Any] | None:
    """One judge usage (as `JudgeUsage.to_dict` gives it) for several clients: counters
    and tokens summed, the slowest call's latency, the mean over every answered call,
    cost summed when every client has one; None for none. A judge panel's usages
    (`assay.judge.panel.PanelUsage`) also give each judge's own merged (``judges``), the
    rule (``panel``) and the judges' agreement (``agreement``) over ``ratings``, the
    panel's values of every sample the actors scored."""
    if not usages:
        return None
    out = summed_usage(usages)
    panels = [u for u in usages if "judges" in u]
    if panels:
        labels = list(dict.fromkeys(label for u in panels for label in u["judges"]))
        out["judges"] = {
            label: summed_usage([u["judges"][label] for u in panels if label in u["judges"]])
            for label in labels
        }
        out["panel"] = panels[0].get("panel")
        out["agreement"] = panel_agreement(ratings or {}, labels)
    return out
