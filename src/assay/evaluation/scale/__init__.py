"""Scoring beyond one process: executors that score a run's chunks elsewhere.

`assay.evaluate(..., executor=...)` and ``assay evaluate --executor`` pick where the
chunks of samples are scored: ``local`` (this process, the default) or ``ray``
(`RayExecutor`: actors on a Ray instance started for the run, or on an existing cluster
with ``address``). Every executor runs the runner's one scoring path
(`assay.evaluation.chunks.score_chunk`) on its chunks and hands them back as they finish; the
driver computes the summary, confidence intervals and gates over all results exactly
as for a local run.

- `budget`: the judge budget one cluster shares (request slots and Retry-After pauses).
- `ray_executor`: `RayExecutor` and its scoring actors; Ray is imported when a run
  starts, never on ``import assay`` (a missing extra names ``pip install
  "assay-eval[ray]"``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from assay.evaluation.chunks import Executor

if TYPE_CHECKING:
    from assay.evaluation.scale.ray_executor import RayExecutor

__all__ = ["EXECUTORS", "RayExecutor", "resolve_executor"]

#: the executors by name (``--executor``)
EXECUTORS: tuple[str, ...] = ("local", "ray")


def resolve_executor(executor: str | Executor) -> Executor:
    """The executor ``executor`` names (``ray``: a `RayExecutor` with its defaults), or
    ``executor`` itself. Raises ValueError for an unknown name."""
    if not isinstance(executor, str):
        return executor
    if executor == "ray":
        from assay.evaluation.scale.ray_executor import RayExecutor

        return RayExecutor()
    raise ValueError(f"unknown executor {executor!r}; executors: {', '.join(EXECUTORS)}")


def __getattr__(name: str) -> Any:
    if name == "RayExecutor":
        from assay.evaluation.scale.ray_executor import RayExecutor

        return RayExecutor
    raise AttributeError(f"module 'assay.evaluation.scale' has no attribute {name!r}")
