"""One chunk of samples scored by every metric: the asks of all planning metrics answered
together, then each metric's results (`score_chunk`). The one scoring path of every
executor: this process, and the Ray actors of `assay.evaluation.scale.ray_executor`
(an `Executor` scores chunks elsewhere and yields each `ScoredChunk` as it finishes).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from assay.core.config import AssayConfig
from assay.core.result import MetricResult
from assay.core.sample import Sample, limit_problems
from assay.engine import Answers, answered, execute
from assay.engine.resources import Resources
from assay.metrics.base import Metric, limits_checked

__all__ = ["Executor", "ScoredChunk", "score_chunk"]

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
    planners = [m for m in metrics if type(m).plan is not Metric.plan]
    rows: list[dict[str, MetricResult]] = [{} for _ in chunk]
    with limits_checked(chunk, res.config):  # each sample's input limits measured once
        t0 = time.perf_counter()
        asked = _chunk_answers(planners, chunk, res)
        if asked is not None:
            seconds["asks"] = seconds.get("asks", 0.0) + time.perf_counter() - t0
        with answered(asked):
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
