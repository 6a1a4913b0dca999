"""Shared by the engine tests (test_engine.py, test_engine_offline.py,
test_engine_offline_json.py; test_structured.py and test_conversation_metrics.py use
``offline``): the four Canberra samples and the calls each judged metric pays on them,
``offline`` resources (no judge) whose embedder counts its calls (``CountingEmbedder``),
and ``assert_as_scored_alone``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from assay.core.config import AssayConfig
from assay.core.sample import Sample
from assay.engine.resources import Resources
from assay.metrics.base import Metric
from assay.models.embedders import Embedder

CONTEXTS = [
    "Canberra is the capital city of Australia. It was selected in 1908 as a compromise.",
    "Sydney is the largest city in Australia and is known for its Opera House.",
]
FIRST = Sample(
    id="first",
    question="What is the capital of Australia?",
    answer="The capital of Australia is Canberra. It was chosen in 1908.",
    contexts=CONTEXTS,
    ground_truth="Canberra is the capital of Australia.",
)
SECOND = FIRST.model_copy(
    update={"id": "second", "query": "Which city is the largest?", "response": "Sydney."}
)
SAME_AS_FIRST = FIRST.model_copy(update={"id": "same"})  # every ask equals FIRST's
# a declining answer: no classification ask (its reference verdicts ask comes from
# factual accuracy alone)
DECLINES = FIRST.model_copy(update={"id": "declines", "response": "I don't know."})
SAMPLES = [FIRST, SECOND, SAME_AS_FIRST, DECLINES]

#: calls each judged metric pays on SAMPLES, by hand: 3 distinct samples per ask, except
#: classification (DECLINES asks nothing); composites ask their parts' questions
CALLS = {
    "judged_relevance": 3,
    "faithfulness": 3,
    "hallucination": 3,
    "contextual_relevance": 3,
    "answer_correctness": 6,
    "ragas_faithfulness": 3,
    "ragas_context_precision": 3,
    "ragas_context_recall": 3,
    "ragas_answer_relevance": 3,
    "ragas_score": 6,
    "factual_accuracy": 3,
    "answer_classification": 2,
}


class CountingEmbedder:
    """The session's real embedder, counting the calls of ``embed`` and the texts sent."""

    def __init__(self, inner: Embedder) -> None:
        self.inner, self.calls, self.texts = inner, 0, []  # type: ignore[var-annotated]
        self.name = inner.name

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        self.texts.extend(texts)
        return self.inner.embed(texts)


def offline(resources: Resources) -> tuple[Resources, CountingEmbedder]:
    res = Resources(AssayConfig(judge_model=None, judge_base_url=None, judge_api_key=None))
    counting = CountingEmbedder(resources.embedder)
    res.__dict__["embedder"] = counting
    return res, counting


def assert_as_scored_alone(
    run: Any,
    metrics: Sequence[Metric],
    samples: Sequence[Sample],
    res: Resources,
    tolerance: float | None = None,
) -> None:
    """Each metric's values in ``run`` are those of the metric scored on its own (it then
    executes its own plan): equal, or within ``tolerance``."""
    for metric in metrics:
        alone = [r.value for r in metric.score_batch(samples, res)]
        expected = alone if tolerance is None else pytest.approx(alone, abs=tolerance)
        assert run.values(metric.name) == expected, metric.name
