"""The execution engine: every judged metric pays exactly the distinct asks it plans (calls
counted at the HTTP test server), asks shared across metrics and samples are asked once,
follow-ups go round again, and a re-run on the judge cache makes no call; and every
metric touches only the models it declares. The offline model asks (no judge) are in
tests/test_engine_offline.py and tests/test_engine_offline_json.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from assay.core.config import AssayConfig
from assay.core.sample import Sample
from assay.engine import Answers, execute, judge_ask, planned
from assay.engine.resources import Resources
from assay.evaluation.runner import evaluate
from assay.judge.cache import JudgeCache
from assay.judge.client import JudgeClient
from assay.judge.prompts import ANSWER_QUESTIONS, RELEVANCE
from assay.metrics.base import Metric
from assay.metrics.registry import get_metric, list_metrics
from judge_server import JudgeServer

pytest.register_assert_rewrite("tests.engine_helpers")

from tests.engine_helpers import CALLS, FIRST, SAMPLES  # noqa: E402


@pytest.fixture
def server() -> Iterator[JudgeServer]:
    with JudgeServer() as srv:
        yield srv


def judged(resources: Resources, server: JudgeServer, cache: Path | None = None) -> Resources:
    res = Resources(AssayConfig(judge_model=None, judge_base_url=None, judge_api_key=None))
    res.__dict__["embedder"] = resources.embedder
    res.__dict__["judge"] = JudgeClient(
        "test-judge", server.url, cache=JudgeCache(cache) if cache else None
    )
    return res


def distinct_asks(metrics: list[Metric], answers: Answers, kind: str = "judge") -> int:
    return sum(a.kind == kind for a in planned(metrics, SAMPLES, answers).values())


def test_the_table_covers_every_judged_metric() -> None:
    assert set(CALLS) == {c.name for c in list_metrics("judged")}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_each_judged_metric_pays_exactly_its_planned_asks(
    resources: Resources, tmp_path: Path, server: JudgeServer, name: str
) -> None:
    metric = get_metric(name)
    cache = tmp_path / "judge.sqlite"
    plan = distinct_asks([metric], Answers("test-judge"))
    assert plan == CALLS[name]
    first = metric.score_batch(SAMPLES, judged(resources, server, cache))
    assert server.calls == plan
    assert all(r.method in ("llm", "pattern") and r.error is None for r in first), name
    # a re-run on the cache: no call, the same values
    again = metric.score_batch(SAMPLES, judged(resources, server, cache))
    assert server.calls == plan
    assert [r.value for r in again] == [r.value for r in first]
    # identical samples give identical results
    assert first[2].value == first[0].value


def test_the_runner_asks_each_question_of_a_chunk_once_across_metrics(
    resources: Resources, tmp_path: Path, server: JudgeServer
) -> None:
    metrics = [get_metric(n) for n in sorted(CALLS)]
    # the union, 5 asks per distinct sample: relevance, grounding (faithfulness,
    # hallucination, contextual relevance), rag_verdicts (the three RAGAS verdict
    # metrics), answer_questions, reference_verdicts (factual accuracy, classification);
    # the composites add none of their own: 5 x 3 = 15 (the 12 metrics alone pay 41)
    assert distinct_asks(metrics, Answers("test-judge")) == 15
    # and, in the first round, the 2 distinct questions to embed (answer relevance)
    assert distinct_asks(metrics, Answers("test-judge"), "embed") == 2
    assert sum(CALLS.values()) == 41
    cache = tmp_path / "judge.sqlite"
    res = judged(resources, server, cache)
    run = evaluate(SAMPLES, metrics=metrics, resources=res)
    assert server.calls == 15
    assert res.judge.usage.calls == 15 and res.judge.usage.memo_hits == 0
    assert server.calls_by_task() == {
        "relevance_rubric": 3,
        "grounding_rubrics": 3,
        "rag_verdicts": 3,
        "answer_questions": 3,
        "reference_verdicts": 3,
    }
    again = evaluate(SAMPLES, metrics=metrics, resources=judged(resources, server, cache))
    assert server.calls == 15  # the re-run is answered by the cache
    assert [run.values(n) for n in CALLS] == [again.values(n) for n in CALLS]


def test_a_follow_up_ask_goes_round_again(
    resources: Resources, tmp_path: Path, server: JudgeServer
) -> None:
    def script(task: str, blocks: dict[str, Any], body: dict[str, Any]) -> Any:
        if task == "answer_questions":
            return {"questions": []}  # no question: the direct rubric follows
        return (
            {"score": 0.75, "reason": "minor gaps"} if task == "answer_relevance_direct" else None
        )

    server.script = script
    metric = get_metric("ragas_answer_relevance")
    res = judged(resources, server)
    answers = Answers("test-judge")
    assert distinct_asks([metric], answers) == 3  # first round: the question generation
    answers = execute([metric], SAMPLES, res)
    assert server.calls_by_task() == {"answer_questions": 3, "answer_relevance_direct": 3}
    # 3 + 3 judge answers and the 2 distinct questions' vectors; nothing left to ask
    assert len(answers) == 8 and distinct_asks([metric], answers) == 0
    assert distinct_asks([metric], answers, "embed") == 0
    results = metric.score_batch(SAMPLES, res)
    assert [r.value for r in results] == [0.75] * 4
    assert server.calls == 6


def test_ask_keys_are_the_prompt_and_its_values() -> None:
    one = judge_ask(RELEVANCE, query="q", response="r")
    assert one.key == judge_ask(RELEVANCE, response="r", query="q").key
    assert one.key != judge_ask(RELEVANCE, query="q", response="other").key
    assert one.key != judge_ask(ANSWER_QUESTIONS, answer="r").key
    assert one.key.startswith(f"judge:{RELEVANCE.signature}:")
    with pytest.raises(KeyError):
        Answers("m").reply(one)  # reducing what the plan never declared fails loudly


# ---- declared resources (needs) are enforced ----------------------------------------------

#: Metric.needs value -> the Resources attribute that loads it
RESOURCE_OF = {
    "embedder": "embedder",
    "bertscore": "bertscorer",
    "spacy": "nlp",
    "toxicity": "toxicity",
    "profanity_check": "profanity_check",
    "support_head": "support_head",
    "agreement_head": "agreement_head",
    "entailment": "entailment",
    "judge": "judge",
}


class Guarded(Resources):
    """Resources that hand out only the declared models (those of ``shared``; no judge:
    the offline paths) and log, then refuse, every other one."""

    def __init__(self, shared: Resources, allowed: frozenset[str]) -> None:
        super().__init__(shared.config)
        self.shared, self.allowed, self.touched = shared, allowed, []


def _guard(need: str, attr: str) -> property:
    def get(self: Guarded) -> Any:
        if need not in self.allowed:
            self.touched.append(need)
            raise RuntimeError(f"undeclared resource {need!r}")
        return None if need == "judge" else getattr(self.shared, attr)

    return property(get)


for _need, _attr in RESOURCE_OF.items():
    setattr(Guarded, _attr, _guard(_need, _attr))


def test_the_guard_catches_an_undeclared_model(resources: Resources) -> None:
    metric = get_metric("faithfulness")
    res = Guarded(resources, metric.needs - {"embedder"})  # all it declares but one
    result = metric.score(FIRST, res)
    assert set(res.touched) == {"embedder"}  # (asked again when the batch is retried alone)
    assert result.error == "RuntimeError: undeclared resource 'embedder'"


@pytest.mark.parametrize(
    "name",
    [c.name for c in list_metrics()],
)
def test_a_metric_touches_only_the_models_it_declares(resources: Resources, name: str) -> None:
    from test_all_metrics import RICH

    metric = get_metric(name)
    assert metric.needs <= set(RESOURCE_OF), name
    res = Guarded(resources, metric.needs)
    metric.score(Sample.model_validate(RICH), res)
    assert res.touched == [], f"{name} touched {res.touched} but declares {sorted(metric.needs)}"
