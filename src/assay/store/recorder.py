"""`RunRecorder`: writes each finished sample of a run into the store as it is produced.

Used as the runner's ``on_sample`` callback by ``assay evaluate --store`` and by the
pytest plugin, so an interrupted run keeps everything computed so far and
``--resume RUN_ID`` continues it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from assay.core.config import AssayConfig
from assay.core.result import MetricResult
from assay.core.sample import Sample
from assay.evaluation.tally import applied_threshold, passes
from assay.metrics.base import Metric
from assay.metrics.registry import metric_class
from assay.store.db import Store
from assay.store.models import UNGATED
from assay.text.quality import quality_checks

__all__ = ["RunRecorder", "sample_status"]


def sample_status(
    metrics: Sequence[Metric], results: dict[str, MetricResult], config: AssayConfig
) -> str:
    """``error`` if a metric failed to compute, ``failed`` if a value misses its threshold,
    ``passed`` if at least one value met its threshold and none missed, else `UNGATED`:
    metrics without a threshold, and None values, do not decide."""
    if any(r.error for r in results.values()):
        return "error"
    decided = False
    for metric in metrics:
        result = results.get(metric.name)
        if result is None or result.value is None:
            continue
        threshold = applied_threshold(metric, result, config)
        if threshold is not None:
            if not passes(metric, result.value, threshold):
                return "failed"
            decided = True
    return "passed" if decided else UNGATED


def call_status(sample: Sample) -> str | None:
    """The stored status of a sample whose target call failed (``assay run``): ``skipped``
    for a timeout (the chatbot hub counts skipped tests as timeouts), ``error`` for an
    error; None otherwise."""
    call = sample.target_call
    if call is None or call.status == "ok":
        return None
    return "skipped" if call.status == "timeout" else "error"


class RunRecorder:
    """Callable ``(index, sample, results)`` that stores one sample of a run."""

    def __init__(
        self,
        store: Store,
        run_id: str,
        metrics: Sequence[Metric],
        config: AssayConfig,
        index_map: Sequence[int] | None = None,
        replace: bool = False,
    ) -> None:
        self.store = store
        self.run_id = run_id
        self.metrics = list(metrics)
        self.config = config
        self.index_map = list(index_map) if index_map is not None else None
        # a resumed run scores errored samples again: their old rows are replaced
        self.replace = replace
        self.written = 0

    def __call__(self, index: int, sample: Sample, results: dict[str, MetricResult]) -> None:
        self.store.record(**self.row(index, sample, results))
        self.written += 1

    def row(self, index: int, sample: Sample, results: dict[str, MetricResult]) -> dict[str, Any]:
        """The arguments of `Store.record` for one sample (for `Store.record_many`)."""
        return {
            "run_id": self.run_id,
            "sample_index": self.index_map[index] if self.index_map is not None else index,
            "sample": sample,
            "results": results,
            "status": call_status(sample) or sample_status(self.metrics, results, self.config),
            "quality": self.quality_of(sample),
            "validation": self.validation_of(sample, results),
            "replace": self.replace,
        }

    def quality_of(self, sample: Sample) -> dict[str, bool] | None:
        if sample.response is None:
            return None
        return quality_checks(
            sample.response, self.config.min_response_length, self.config.max_response_length
        )

    def validation_of(
        self, sample: Sample, results: dict[str, MetricResult]
    ) -> dict[str, Any] | None:
        similarity = results.get("semantic_similarity")
        if similarity is None or similarity.value is None:
            return None
        threshold = applied_threshold(metric_class("semantic_similarity"), similarity, self.config)
        threshold = self.config.semantic_similarity_threshold if threshold is None else threshold
        return {
            "query": sample.query,
            "response": sample.response,
            "expected": sample.expected,
            "similarity_score": similarity.value,
            "threshold": threshold,
            "is_relevant": similarity.value >= threshold,
        }
