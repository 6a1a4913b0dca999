"""Scoring beyond one process: executors that score a run's chunks elsewhere.

`assay.evaluate(..., executor=...)` and ``assay evaluate --executor`` pick where the
chunks of samples are scored: ``local`` (this process, the default) or ``ray``
(`RayExecutor`: actors on a Ray instance started for the run, or on an existing cluster
with ``address``). Every executor runs the runner's one scoring path
(`assay.runner.score_chunk`) on its chunks and hands them back as they finish; the
driver computes the summary, confidence intervals and gates over all results exactly
as for a local run.

- `budget`: the judge budget one cluster shares (request slots and Retry-After pauses).
- `ray_executor`: `RayExecutor` and its scoring actors; Ray is imported when a run
  starts, never on ``import assay`` (a missing extra names ``pip install
  "assay-eval[ray]"``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from assay.config import AssayConfig
    from assay.metric import Metric
    from assay.result import MetricResult
    from assay.sample import Sample
    from assay.scale.ray_executor import RayExecutor

__all__ = ["EXECUTORS", "Executor", "RayExecutor", "ScoredChunk", "resolve_executor"]

#: the executors by name (``--executor``)
EXECUTORS: tuple[str, ...] = ("local", "ray")

#: one scored chunk: the index of its first sample, each sample's results by metric
#: name, and the seconds each metric (and the chunk's asks, under "asks") took on it
ScoredChunk = tuple[int, list[dict[str, "MetricResult"]], dict[str, float]]


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


def resolve_executor(executor: str | Executor) -> Executor:
    """The executor ``executor`` names (``ray``: a `RayExecutor` with its defaults), or
    ``executor`` itself. Raises ValueError for an unknown name."""
    if not isinstance(executor, str):
        return executor
    if executor == "ray":
        from assay.scale.ray_executor import RayExecutor

        return RayExecutor()
    raise ValueError(f"unknown executor {executor!r}; executors: {', '.join(EXECUTORS)}")


def __getattr__(name: str) -> Any:
    if name == "RayExecutor":
        from assay.scale.ray_executor import RayExecutor

        return RayExecutor
    raise AttributeError(f"module 'assay.scale' has no attribute {name!r}")
