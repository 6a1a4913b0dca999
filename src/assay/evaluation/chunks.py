"""One chunk of samples scored by every metric: the asks of all planning metrics answered
together, then each metric's results (`score_chunk`). The one scoring path of every
executor: this process, and the Ray actors of `assay.evaluation.scale.ray_executor`
(an `Executor` scores chunks elsewhere and yields each `ScoredChunk` as it finishes).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from assay.core.config import AssayConfig
from assay.core.result import MetricResult
from assay.core.sample import Sample, limit_problems
from assay.engine import Answers, answered, execute
from assay.engine.resources import Resources
from assay.metrics.base import Metric, limits_checked

__all__ = ["Executor", "ScoredChunk", "score_chunk", "score_chunks"]

#: one scored chunk: the index of its first sample, each sample's results by metric
#: name, and the seconds each metric (and the chunk's asks, under "asks") took on it
ScoredChunk = tuple[int, list[dict[str, MetricResult]], dict[str, float]]


class Executor(Protocol):
    """Scores a run's chunks somewhere other than this process."""

    def scored(
        self,
        samples: Sequence[Sample],
        metrics: Sequence[Metric],
        config: AssayConfig,
        chunk_size: int,
    ) -> Iterator[ScoredChunk]:
        """Every chunk of ``chunk_size`` samples scored by every metric, each yielded as
        soon as it is done (in any order); each sample exactly once."""
        ...

    def judge_usage(self) -> dict[str, Any] | None:
        """The judge's usage over the last run (calls, tokens, cost), or None."""
        ...


def _chunk_answers(
    planners: Sequence[Metric], chunk: Sequence[Sample], res: Resources
) -> Answers | None:
    """The answers to every ask the metrics plan for the chunk, asked at once (deduplicated
    across metrics, concurrent, follow-ups in further rounds); the metrics then reduce
    them without a call of their own (embeddings: one per distinct text of the chunk,
    in one batch). A sample with a field past an input limit asks nothing: its metrics
    fail. Without a judge the judged metrics plan their local estimators' asks. None
    without metrics that plan."""
    if not planners:
        return None
    cfg = res.config
    return execute(planners, [s for s in chunk if not limit_problems(s, cfg)], res)


def _planners(metrics: Sequence[Metric]) -> list[Metric]:
    return [m for m in metrics if type(m).plan is not Metric.plan]


def _ask(
    planners: Sequence[Metric], chunk: Sequence[Sample], res: Resources, seconds: dict[str, float]
) -> Answers | None:
    """The chunk's answers (`_chunk_answers`), their time added to ``seconds["asks"]``."""
    t0 = time.perf_counter()
    asked = _chunk_answers(planners, chunk, res)
    if asked is not None:
        seconds["asks"] = seconds.get("asks", 0.0) + time.perf_counter() - t0
    return asked


def _reduce(
    metrics: Sequence[Metric],
    chunk: Sequence[Sample],
    asked: Answers | None,
    res: Resources,
    seconds: dict[str, float],
) -> list[dict[str, MetricResult]]:
    """Each metric's results on the chunk, from its answers; a metric whose model cannot
    load fails every sample of the chunk."""
    rows: list[dict[str, MetricResult]] = [{} for _ in chunk]
    with limits_checked(chunk, res.config), answered(asked):
        for metric in metrics:
            t0 = time.perf_counter()
            try:
                scored = metric.score_batch(chunk, res)
            except Exception as exc:  # a model that cannot load fails every sample
                scored = [metric.failed(exc) for _ in chunk]
            seconds[metric.name] = seconds.get(metric.name, 0.0) + time.perf_counter() - t0
            for row, result in zip(rows, scored, strict=True):
                row[metric.name] = result
    return rows


def score_chunk(
    metrics: Sequence[Metric],
    chunk: Sequence[Sample],
    res: Resources,
    seconds: dict[str, float],
) -> list[dict[str, MetricResult]]:
    """Every metric's result for each sample of ``chunk``: the asks of the metrics that
    plan are answered first, at once (`_chunk_answers`), then each metric scores the
    chunk; the time each metric (and the asks) took is added to ``seconds``. A metric
    whose model cannot load fails every sample of the chunk. The one scoring path of
    both executors (the Ray actors run it on their chunks)."""
    return _reduce(metrics, chunk, _ask(_planners(metrics), chunk, res, seconds), res, seconds)


def score_chunks(
    metrics: Sequence[Metric],
    chunks: Iterable[Sequence[Sample]],
    res: Resources,
    seconds: dict[str, float],
    *,
    ahead: bool = False,
) -> Iterator[tuple[Sequence[Sample], list[dict[str, MetricResult]]]]:
    """`score_chunk` over each chunk in turn, each chunk yielded with its rows when done
    (the chunks may come from a reader that reads them as they are asked for).

    ``ahead``: the asks of the next chunk are answered in a second thread while this one
    reduces the current chunk and its consumer writes it. On a GPU the models' work then
    runs while the CPU reduces and writes (the asking thread mostly waits on the device,
    without the GIL); the CPU path leaves it off, where the two would share the cores.
    The values are the same either way.
    """
    if not ahead:
        for chunk in chunks:
            yield chunk, score_chunk(metrics, chunk, res, seconds)
        return
    planners = _planners(metrics)
    pending = iter(chunks)
    current = next(pending, None)
    if current is None:
        return
    with ThreadPoolExecutor(1, thread_name_prefix="assay-asks") as pool:
        asking = pool.submit(_ask, planners, current, res, seconds)
        while current is not None:
            following = next(pending, None)
            asked = asking.result()
            if following is not None:
                asking = pool.submit(_ask, planners, following, res, seconds)
            yield current, _reduce(metrics, current, asked, res, seconds)
            current = following
