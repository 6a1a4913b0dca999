"""Shared by the judged-metric tests (test_judged_formulas.py, test_judged_metrics.py,
test_judged_local.py): the Canberra sample and its contexts, the ``server`` fixture (a
JudgeServer on 127.0.0.1), ``judged`` resources with a judge on it (or none), and the
fixed replies ``by_task``, ``grounding`` and ``reference``. The test modules load it with
``pytest_plugins`` (for the fixture) and import the rest."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from assay.core.config import AssayConfig
from assay.core.sample import Sample
from assay.engine.resources import Resources
from assay.judge.client import JudgeClient
from judge_server import JudgeServer

CONTEXTS = [
    "Canberra is the capital city of Australia. It was selected in 1908 as a compromise.",
    "Sydney is the largest city in Australia and is known for its Opera House.",
    "Kangaroos are marsupials found across Australia.",
]
SAMPLE = Sample(
    question="What is the capital of Australia?",
    answer="The capital of Australia is Canberra. It was chosen in 1908.",
    contexts=CONTEXTS,
    ground_truth="Canberra is the capital of Australia.",
)


@pytest.fixture
def server() -> Iterator[JudgeServer]:
    with JudgeServer() as srv:
        yield srv


def judged(
    resources: Resources,
    tmp_path: Path,
    server: JudgeServer | None,
    support_estimator: str = "graded",
    **client: Any,
) -> Resources:
    """Resources sharing the session's models, with a judge on ``server`` (or none)."""
    res = Resources(
        AssayConfig(
            cache_dir=str(tmp_path),
            judge_model=None,
            judge_base_url=None,
            judge_api_key=None,
            support_estimator=support_estimator,
        )
    )
    res.__dict__["embedder"] = resources.embedder
    if server is None:
        res.__dict__["judge"] = None
    else:
        options: dict[str, Any] = {"backoff_base": 0.01, "backoff_max": 0.05}
        options.update(client)
        cache = options.pop("cache", None)
        res.__dict__["judge"] = JudgeClient("test-judge", server.url, cache=cache, **options)
    return res


def by_task(replies: dict[str, Any]):
    """A server script answering each task with a fixed reply (others: default)."""

    def script(task: str, blocks: dict[str, Any], body: dict[str, Any]) -> Any:
        return replies.get(task)

    return script


def grounding(
    faithfulness: Any = 0.9, hallucination: Any = 0.1, contextual_relevance: Any = 0.9
) -> dict[str, Any]:
    """A `grounding_rubrics` reply (the judge specification's three rubrics in one reply)."""
    scores = {
        "faithfulness": faithfulness,
        "hallucination": hallucination,
        "contextual_relevance": contextual_relevance,
    }
    return {k: {"score": v, "reason": k} if v is not None else None for k, v in scores.items()}


def reference(steps: tuple[int, int, int] = (80, 80, 80), label: str = "CORRECT") -> dict:
    """A `reference_verdicts` reply (G-Eval steps and the classification in one reply)."""
    c, p, s = steps
    return {
        "factual_accuracy": {
            "step1_correctness": {"score": c, "reasoning": "r1"},
            "step2_completeness": {"score": p, "reasoning": "r2"},
            "step3_consistency": {"score": s, "reasoning": "r3"},
            "final_score": 0,  # ignored: the weighted value is computed here
            "overall_reasoning": "summary",
            "confidence": 90,
        },
        "classification": {"label": label, "reason": "compared"},
    }
