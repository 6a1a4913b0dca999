"""The execution engine: every judged metric pays exactly the distinct asks it plans (calls
counted at the HTTP test server), asks shared across metrics and samples are asked once,
follow-ups go round again, and a re-run on the judge cache makes no call."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from assay.core.config import AssayConfig
from assay.core.extras import ModelUnavailable
from assay.core.sample import Sample
from assay.engine import Answers, answered, embed_ask, execute, judge_ask, planned
from assay.engine.resources import Resources
from assay.evaluation.runner import evaluate
from assay.judge.cache import JudgeCache
from assay.judge.client import JudgeClient
from assay.judge.prompts import ANSWER_QUESTIONS, RELEVANCE
from assay.metrics.base import Metric
from assay.metrics.registry import get_metric, list_metrics, resolve_metrics
from assay.models.cache import EmbeddingCache
from assay.models.embedders import Embedder
from judge_server import JudgeServer

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


# ---- offline: model asks without a judge ---------------------------------------------------


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


EMBEDDED = [
    Sample(id="a", query="Who wrote Hamlet?", response="Shakespeare.", expected="Shakespeare"),
    Sample(
        id="b",
        query="Who wrote Hamlet?",
        response="It was Marlowe.",
        expected="Shakespeare",
        previous_responses=["Shakespeare.", "  "],
    ),
    Sample(id="c", response="Shakespeare.", expected="William Shakespeare", known_facts=["x"]),
]
#: the distinct texts the semantic suite compares on EMBEDDED, by hand: responses,
#: references, the two questions' one text, b's earlier response (a's), c's fact
EMBEDDED_TEXTS = {
    "Shakespeare.",
    "It was Marlowe.",
    "Shakespeare",
    "William Shakespeare",
    "Who wrote Hamlet?",
    "x",
}


def test_offline_the_semantic_suite_embeds_each_distinct_text_once(
    resources: Resources,
) -> None:
    metrics = [m for m in resolve_metrics(None, ["semantic"]) if m.needs == {"embedder"}]
    assert len(metrics) == 8
    res, counting = offline(resources)
    todo = planned(metrics, EMBEDDED, Answers())
    assert {a.values["text"] for a in todo.values()} == EMBEDDED_TEXTS
    assert {a.kind for a in todo.values()} == {"embed"}
    run = evaluate(EMBEDDED, metrics=metrics, resources=res)
    # one call for the chunk, each distinct text once
    assert counting.calls == 1 and sorted(counting.texts) == sorted(EMBEDDED_TEXTS)
    assert "judge" not in res.__dict__  # no metric declares a judge: none was looked up
    # the values are those of each metric scored on its own (it executes its own plan)
    assert_as_scored_alone(run, metrics, EMBEDDED, resources)


def test_offline_a_second_metric_on_the_same_texts_embeds_nothing(
    resources: Resources,
) -> None:
    res, counting = offline(resources)
    first, second = get_metric("semantic_similarity"), get_metric("top_k_accuracy")
    answers = execute([first], EMBEDDED, res)
    assert answers.model is None and answers.embedder == resources.embedder.name
    assert counting.calls == 1
    assert sorted(counting.texts) == sorted(
        {"Shakespeare.", "It was Marlowe.", "Shakespeare", "William Shakespeare"}
    )
    with answered(answers):
        assert execute([second], EMBEDDED, res) is answers  # nothing left to ask
        scored = second.score_batch(EMBEDDED, res)
    assert counting.calls == 1
    # top_k's proxy: cos(response, expected) >= 0.8 -> 1.0, else cos / 0.8
    for sample, result in zip(EMBEDDED, scored, strict=True):
        a, b = resources.embedder.embed([sample.response, sample.expected])
        cos = float(np.clip(a @ b, 0.0, 1.0))
        assert result.value == pytest.approx(1.0 if cos >= 0.8 else cos / 0.8, abs=1e-6)


def test_offline_answers_of_other_resources_are_not_reused(resources: Resources) -> None:
    res, counting = offline(resources)
    other, _ = offline(resources)
    metric = get_metric("semantic_similarity")
    with answered(execute([metric], EMBEDDED, other)):
        answers = execute([metric], EMBEDDED, res)
    assert answers.resources is res and counting.calls == 1


def test_offline_judged_metrics_embed_their_planned_texts_once(resources: Resources) -> None:
    metrics = [get_metric(n) for n in sorted(CALLS)]
    res, counting = offline(resources)
    todo = planned(metrics, SAMPLES, Answers(None, res))
    # no judge: the estimators' asks; the graded support parses the answers and their
    # contexts (its anchors), the reference agreement question, answer and reference (its
    # anchor conflicts: factual_accuracy, answer_classification)
    parsed = {a.values["text"] for a in todo.values() if a.kind == "parse"}
    fields = [(s.query, s.response, s.expected, *(s.contexts or [])) for s in SAMPLES]
    assert parsed == {t for texts in fields for t in texts if t and t.strip()}
    run = evaluate(SAMPLES, metrics=metrics, resources=res)
    assert counting.calls == 1
    embedded = [a.values["text"] for a in todo.values() if a.kind == "embed"]
    assert sorted(counting.texts) == sorted(embedded)
    assert all(r.error is None for row in run.results for r in row.values())
    assert {r.method for row in run.results for r in row.values()} == {"local", "pattern"}


RAG_CONTEXTS = ["Hamlet is a tragedy by William Shakespeare.", "Marlowe wrote Doctor Faustus."]
RAG = [
    Sample(
        id="r1",
        query="Who wrote Hamlet?",
        response="Shakespeare wrote Hamlet.",
        contexts=[RAG_CONTEXTS[0], "  ", RAG_CONTEXTS[1]],
        gold_context="William Shakespeare wrote Hamlet around 1600.",
    ),
    Sample(
        id="r2",
        query="Who wrote Hamlet?",
        response="It was Marlowe.",
        contexts=[RAG_CONTEXTS[0]],
        expected_sources=["The tragedy Hamlet, by Shakespeare."],
    ),
]
#: the distinct texts the rag family's embedding metrics compare on RAG, by hand: the
#: non-blank contexts (all in the top 5), the one question, both responses (context
#: relevance and coverage), r1's gold context, r2's expected source (the ranked metrics
#: of r2 compare the documents with it, not with the question); r1's blank document none
RAG_TEXTS = {
    *RAG_CONTEXTS,
    "Who wrote Hamlet?",
    "Shakespeare wrote Hamlet.",
    "It was Marlowe.",
    "William Shakespeare wrote Hamlet around 1600.",
    "The tragedy Hamlet, by Shakespeare.",
}


class CountingPipeline:
    """The session's real spaCy pipeline, counting the calls of ``pipe`` and the texts,
    and the texts its entity recogniser is run on afterwards (``entity_texts``)."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.calls, self.texts = inner, 0, []  # type: ignore[var-annotated]
        self.pipe_names, self.meta, self.vocab = inner.pipe_names, inner.meta, inner.vocab
        self.entity_texts: list[str] = []
        self.entity_batches = 0  # the entity recogniser's ``pipe`` calls

    def pipe(
        self, texts: Iterable[str], batch_size: int = 64, disable: Sequence[str] = ()
    ) -> Iterator[Any]:
        texts = list(texts)
        self.calls += 1
        self.texts.extend(texts)
        return self.inner.pipe(texts, batch_size=batch_size, disable=list(disable))

    def get_pipe(self, name: str) -> Any:
        component = self.inner.get_pipe(name)
        return CountingRecogniser(component, self) if name == "ner" else component


class CountingRecogniser:
    """The real entity recogniser, noting the texts it is run on and its batches."""

    def __init__(self, inner: Any, pipeline: CountingPipeline) -> None:
        self.inner, self.pipeline = inner, pipeline

    def pipe(self, docs: Iterable[Any], batch_size: int = 64) -> Iterator[Any]:
        docs = list(docs)
        self.pipeline.entity_texts.extend(doc.text for doc in docs)
        self.pipeline.entity_batches += 1
        return self.inner.pipe(docs, batch_size=batch_size)


def test_offline_spacy_parses_each_distinct_text_once(resources: Resources) -> None:
    res, counting = offline(resources)
    # cosines under another name: the support head does not fit them, so faithfulness and
    # hallucination score the graded support, which checks spaCy's anchors
    counting.name = "another-embedder"
    nlp = res.__dict__["nlp"] = CountingPipeline(resources.nlp)
    res.__dict__["cache"] = EmbeddingCache(None)  # no parse of an earlier test read back
    names = ["faithfulness", "hallucination", "anchor_hallucination", "factual_accuracy"]
    metrics = [get_metric(n) for n in names]
    samples = [s.model_copy(update={"expected": "William Shakespeare"}) for s in RAG]
    run = evaluate(samples, metrics=metrics, resources=res)
    # one pass for the chunk: responses and non-blank passages (anchors and evidence),
    # the question and the reference (the reference agreement's conflicts), each once
    assert nlp.calls == 1
    assert sorted(nlp.texts) == sorted(
        {*RAG_CONTEXTS, "Who wrote Hamlet?", "William Shakespeare"} | {s.response for s in samples}
    )
    # entities are recognised afterwards, once, in the texts whose anchors are read: the
    # responses and the reference; the passages and the question are evidence only
    assert sorted(nlp.entity_texts) == sorted(
        {"William Shakespeare"} | {s.response for s in samples if s.response}
    )
    # in two batches: the responses (the anchors' readers), then the reference
    assert nlp.entity_batches == 2
    for row in run.results:
        assert row["faithfulness"].details["estimator"] == "sentence_support+entailment"
        assert row["faithfulness"].details["anchors"] is not None  # checked
    assert_as_scored_alone(run, metrics, samples, res)


def test_offline_the_rag_suite_embeds_each_distinct_text_once(resources: Resources) -> None:
    metrics = resolve_metrics(None, ["rag"])
    family = [m for m in metrics if m.family == "rag" and m.needs == {"embedder"}]
    assert len(family) == 7
    todo = planned(family, RAG, Answers())
    assert {a.values["text"] for a in todo.values()} == RAG_TEXTS
    res, counting = offline(resources)
    # with the judged metrics' estimators (the graded support parses answers and contexts;
    # by default it is averaged with the entailment model's, which entail asks feed)
    everything = planned(metrics, RAG, Answers(None, res))
    assert {a.kind for a in everything.values()} == {"embed", "parse", "entail"}
    run = evaluate(RAG, metrics=metrics, resources=res)
    # one call for the chunk, each distinct text of every metric once
    assert counting.calls == 1
    embedded = [a.values["text"] for a in everything.values() if a.kind == "embed"]
    assert sorted(counting.texts) == sorted(embedded)
    assert all(r.error is None for row in run.results for r in row.values())
    # the values are those of each rag metric scored on its own
    assert_as_scored_alone(run, family, RAG, resources, tolerance=1e-6)


def test_offline_a_rag_metric_after_a_judged_one_embeds_nothing_new(
    resources: Resources,
) -> None:
    res, counting = offline(resources)
    sample = RAG[0]
    answers = execute([get_metric("contextual_relevance")], [sample], res)
    assert counting.calls == 1
    with answered(answers):
        # the estimator compared the question with each context: nothing left to embed
        result = get_metric("reranker_score").score(sample, res)
    assert counting.calls == 1
    # mean of clamp(cos(query, document)) over the two non-blank documents
    q, *docs = resources.embedder.embed([sample.query, *RAG_CONTEXTS])
    sims = [min(1.0, max(0.0, float(q @ d))) for d in docs]
    assert result.value == pytest.approx(sum(sims) / 2, abs=1e-6)
    assert result.details["similarities"] == pytest.approx(sims, abs=1e-6)


STEPS = Sample(id="s", response="Hamlet is a play. Shakespeare wrote it.", expected="Shakespeare")


def test_offline_reliability_and_reasoning_share_the_chunk_embedding(resources: Resources) -> None:
    names = ["output_stability", "determinism_score", "consistency", "step_correctness"]
    metrics = [get_metric(n) for n in [*names, "semantic_similarity"]]
    samples = [*EMBEDDED, STEPS]
    # by hand: b's response and its one non-blank earlier response (stability, determinism,
    # consistency; a and c have none); STEPS's two sentences, its expected answer (the one
    # reference step and the reference text) and its response (the steps joined); the
    # semantic similarity of every sample adds c's reference only
    by_hand = {"It was Marlowe.", "Shakespeare.", "Hamlet is a play.", "Shakespeare wrote it."}
    by_hand |= {"Shakespeare", STEPS.response}
    todo = planned(metrics[:4], samples, Answers())
    assert {a.values["text"] for a in todo.values()} == by_hand
    res, counting = offline(resources)
    run = evaluate(samples, metrics=metrics, resources=res)
    assert counting.calls == 1
    assert sorted(counting.texts) == sorted(by_hand | {"William Shakespeare"})
    # stability and determinism of b: the blank earlier response has cosine 0
    marlowe, shakespeare = resources.embedder.embed(["It was Marlowe.", "Shakespeare."])
    half = min(1.0, max(0.0, float(marlowe @ shakespeare))) / 2
    b = run.results[1]
    assert b["output_stability"].value == pytest.approx(half, abs=1e-6)
    assert b["determinism_score"].value == 0.0  # neither earlier response is the same
    assert b["determinism_score"].components["mean_similarity"] == pytest.approx(half, abs=1e-6)
    # step correctness: 0.7 * the reference step's best step + 0.3 * the joined texts
    first, second, ref, joined = resources.embedder.embed(
        ["Hamlet is a play.", "Shakespeare wrote it.", "Shakespeare", STEPS.response]
    )
    best = max(min(1.0, max(0.0, float(ref @ step))) for step in (first, second))
    overall = min(1.0, max(0.0, float(joined @ ref)))
    assert run.results[3]["step_correctness"].value == pytest.approx(
        0.7 * best + 0.3 * overall, abs=1e-6
    )


def test_offline_reference_agreement_is_computed_once_per_sample(
    resources: Resources, monkeypatch: pytest.MonkeyPatch
) -> None:
    from assay.estimators.agreement import (
        agreement_parse_texts,
        reference_agreement,
        reference_agreement_texts,
    )
    from assay.metrics.judged import reference
    from assay.text.anchors import parse_texts

    compared: list[str] = []

    def counted(*args: Any, **options: Any) -> Any:
        compared.extend(args[3])  # the answers
        return reference_agreement(*args, **options)

    monkeypatch.setattr(reference, "reference_agreement", counted)
    res, _ = offline(resources)
    metrics = [get_metric("factual_accuracy"), get_metric("answer_classification")]
    run = evaluate(SAMPLES, metrics=metrics, resources=res)
    # 4 samples, 3 distinct (question, answer, reference): 3 agreements for both metrics
    assert sorted(compared) == sorted({s.response for s in SAMPLES})
    # the agreement both report is the estimator's on the embedder's vectors
    questions = [s.query for s in SAMPLES]
    said = [s.response for s in SAMPLES]
    refs = [s.expected for s in SAMPLES]
    texts = reference_agreement_texts(questions, said, refs)
    vectors = dict(zip(texts, resources.embedder.embed(texts), strict=True))
    triples = list(zip(questions, said, refs, strict=True))
    docs = parse_texts(resources.nlp, agreement_parse_texts(triples))
    agreements = reference_agreement(res, vectors, questions, said, refs, docs=docs)
    expected = [a.score for a in agreements]
    correctness = [row["factual_accuracy"].components["correctness"] for row in run.results]
    agreement = [row["answer_classification"].components["agreement"] for row in run.results]
    assert correctness == pytest.approx(expected, abs=1e-6)
    assert agreement == pytest.approx(expected, abs=1e-6)


class CountingScorer:
    """The session's real BERTScore model, counting its calls and the pairs sent."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.calls, self.pairs = inner, 0, []  # type: ignore[var-annotated]

    def raw_scores(self, cands: Sequence[str], refs: Sequence[str]) -> np.ndarray:
        self.calls += 1
        self.pairs.extend(zip(cands, refs, strict=True))
        return self.inner.raw_scores(cands, refs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_offline_bertscore_pairs_are_scored_once_in_one_call(resources: Resources) -> None:
    metrics = [get_metric("bertscore"), get_metric("bert_score_f1")]
    res, _ = offline(resources)
    scorer = res.__dict__["bertscorer"] = CountingScorer(resources.bertscorer)
    todo = planned(metrics, EMBEDDED, Answers())
    pairs = {(a.values["candidate"], a.values["reference"]) for a in todo.values()}
    # a and b share no pair (b's response differs); c's is its own: 3 distinct pairs
    assert pairs == {(s.response, s.expected) for s in EMBEDDED} and len(pairs) == 3
    run = evaluate(EMBEDDED, metrics=metrics, resources=res)
    assert scorer.calls == 1 and sorted(scorer.pairs) == sorted(pairs)
    # the rescaled F1 of each sample is (raw F1 - b) / (1 - b), clamped to 0..1
    responses, references = [s.response for s in EMBEDDED], [s.expected for s in EMBEDDED]
    raw = resources.bertscorer.raw_scores(responses, references)
    b = resources.bertscorer.baseline[2]
    assert run.values("bert_score_f1") == pytest.approx([min(1.0, f) for f in raw[:, 2]], abs=1e-9)
    assert run.values("bertscore") == pytest.approx(
        [min(1.0, max(0.0, (f - b) / (1 - b))) for f in raw[:, 2]], abs=1e-9
    )


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


# ---- the structured comparison and the toxicity head: their vectors are embed asks --------

#: two JSON samples whose responses are also scored by semantic similarity and toxicity;
#: j1's response is one of its own JSON texts, so the metrics share that ask
JSONS = [
    Sample(
        id="j1",
        expected_json={"title": "A quiet evening by the lake", "n": 3, "code": "X"},
        output_json={"title": "A calm night near the lake", "n": 3, "code": "x"},
        response="A calm night near the lake",
        expected="A quiet evening by the lake",
    ),
    Sample(
        id="j2",
        expected_json={"items": [{"d": "red wooden chair"}, {"d": "blue lamp"}], "note": "a b"},
        output_json={"items": [{"d": "wooden chair, red"}], "note": "A  B"},
        response="RT @bob: you are a #worthless idiot http://t.co/x",
        expected="Shakespeare",
    ),
]
#: by hand: the SEMANTIC pairs (auto: text fields) are title (j1) and items.0.d (j2);
#: "X"/"x" and "a b"/"A  B" are equal texts (1.0, not embedded), n is EXACT, j2's second
#: item is missing from the output (not compared)
JSON_TEXTS = {
    "A quiet evening by the lake",
    "A calm night near the lake",
    "red wooden chair",
    "wooden chair, red",
}
#: the toxicity head reads the normalised responses (j2's without RT, @bob, # and the URL)
TOXICITY_TEXTS = {"A calm night near the lake", "you are a worthless idiot"}
SIMILARITY_TEXTS = {"A calm night near the lake", "A quiet evening by the lake", JSONS[1].response}
SIMILARITY_TEXTS |= {"Shakespeare"}


def test_offline_json_semantic_and_toxicity_metrics_embed_each_distinct_text_once(
    resources: Resources,
) -> None:
    json_metrics = [get_metric(n) for n in ("json_accuracy", "rqs", "rqs_normalized")]
    # the head (the default with the models extra averages it with alt-profanity-check)
    others = [get_metric("semantic_similarity"), get_metric("toxicity_score", method="head")]
    todo = planned(json_metrics, JSONS, Answers())
    assert {a.values["text"] for a in todo.values()} == JSON_TEXTS
    toxicity = planned(others[1:], JSONS, Answers())
    assert {a.values["text"] for a in toxicity.values()} == TOXICITY_TEXTS
    # the run embeds with USE, the head's encoder: its asks are the run embedder's own
    assert all("embedder" not in a.values for a in toxicity.values())
    res, counting = offline(resources)
    run = evaluate(JSONS, metrics=[*json_metrics, *others], resources=res)
    # one call for the chunk, each distinct text of every metric once
    assert counting.calls == 1
    assert sorted(counting.texts) == sorted(JSON_TEXTS | TOXICITY_TEXTS | SIMILARITY_TEXTS)
    assert all(r.error is None for row in run.results for r in row.values())
    # each SEMANTIC similarity is the embedder's pair similarity (the scorer's former
    # call), to the last bit
    pairs = [("A quiet evening by the lake", "A calm night near the lake")]
    pairs.append(("red wooden chair", "wooden chair, red"))
    expected = resources.embedder.pair_similarity([a for a, _ in pairs], [b for _, b in pairs])
    fields = [
        {f["field"]: f for f in row["json_accuracy"].details["fields"]} for row in run.results
    ]
    got = [fields[0]["title"]["similarity"], fields[1]["items.0.d"]["similarity"]]
    assert got == [min(1.0, max(0.0, float(s))) for s in expected]
    assert fields[0]["code"]["scorer"] == fields[1]["note"]["scorer"] == "normalised-equal"
    assert fields[0]["title"]["scorer"] == f"cosine:{resources.embedder.name}"
    # the toxicity is the head's on the vectors it would embed itself
    head = resources.toxicity
    assert run.values("toxicity_score") == head.probabilities([s.response for s in JSONS])
    # and every value is that of the metric scored on its own
    assert_as_scored_alone(run, [*json_metrics, *others], JSONS, resources)


def test_offline_a_json_metric_scored_alone_embeds_its_batch_in_one_call(
    resources: Resources,
) -> None:
    res, counting = offline(resources)
    results = get_metric("json_accuracy").score_batch(JSONS, res)
    assert counting.calls == 1 and sorted(counting.texts) == sorted(JSON_TEXTS)
    # title 0.875 and items.0.d 0.950 (USE multilingual v3), both >= 0.80: every field
    # right, 3/3 and 2/2
    sims = resources.embedder.pair_similarity(
        ["A quiet evening by the lake", "red wooden chair"],
        ["A calm night near the lake", "wooden chair, red"],
    )
    assert all(float(s) >= 0.8 for s in sims)
    assert [r.value for r in results] == [1.0, 1.0]
    fields = [{f["field"]: f["similarity"] for f in r.details["fields"]} for r in results]
    assert [fields[0]["title"], fields[1]["items.0.d"]] == [float(s) for s in sims]


def test_offline_the_toxicity_head_embeds_with_use_when_the_run_embeds_with_another(
    resources: Resources,
) -> None:
    """A run whose embedder is not USE: the toxicity asks name USE (the head's encoder),
    so the same text asked of the run's embedder is another ask; each embedder gets one
    call."""
    res = Resources(AssayConfig(embedder="e5-small", judge_model=None, judge_base_url=None))
    other = CountingEmbedder(resources.embedder)  # USE's vectors under another name
    other.name = "other-model"
    use = CountingEmbedder(resources.embedder)
    res.__dict__["embedder"], res.__dict__["use_embedder"] = other, use
    metrics = [get_metric("semantic_similarity"), get_metric("toxicity_score", method="head")]
    toxicity = planned(metrics[1:], JSONS, Answers(resources=res))
    assert {a.values["embedder"] for a in toxicity.values()} == {"use-multilingual-v3"}
    shared = embed_ask("A calm night near the lake")
    assert shared.key != embed_ask(shared.values["text"], "use-multilingual-v3").key
    run = evaluate(JSONS, metrics=metrics, resources=res)
    assert (other.calls, use.calls) == (1, 1)
    assert sorted(other.texts) == sorted(SIMILARITY_TEXTS)
    assert sorted(use.texts) == sorted(TOXICITY_TEXTS)
    assert run.values("toxicity_score") == resources.toxicity.probabilities(
        [s.response for s in JSONS]
    )
    assert run.results[0]["semantic_similarity"].signature.endswith("model=other-model")
    with pytest.raises(ModelUnavailable, match="no embedder named 'minilm'"):
        res.embedder_named("minilm")


def test_offline_tool_call_metrics_plan_every_candidate_pairs_arguments(
    resources: Resources,
) -> None:
    def call(name: str, **arguments: Any) -> dict[str, Any]:
        return {"name": name, "arguments": arguments, "kind": "tool"}

    made = [
        call("search", q="hotels near the eiffel tower"),
        call("search", q="cheap hotels in Paris"),
    ]
    sample = Sample(
        trace=made,
        expected_tool_calls=[call("search", q="cheap hotel in Paris"), call("book", n=2)],
    )
    metrics = [get_metric(n) for n in ("tool_call_accuracy", "tool_call_f1")]
    todo = planned(metrics, [sample], Answers())
    # the one reference search against both searches made (the pairing is chosen from
    # both agreements); book has no partner; n is a number (EXACT)
    assert {a.values["text"] for a in todo.values()} == {
        "cheap hotel in Paris",
        "hotels near the eiffel tower",
        "cheap hotels in Paris",
    }
    res, counting = offline(resources)
    run = evaluate([sample], metrics=metrics, resources=res)
    assert counting.calls == 1 and len(counting.texts) == 3
    # q: 0.31 with the first search (agreement 0), 0.98 with the second (agreement 1);
    # the pairing takes the second: 1 / max(2, 2); F1: 1 correct, P = R = 1/2
    sims = resources.embedder.pair_similarity(
        ["cheap hotel in Paris"] * 2, ["hotels near the eiffel tower", "cheap hotels in Paris"]
    )
    assert float(sims[0]) < 0.8 <= float(sims[1])
    assert run.values("tool_call_accuracy") == [0.5]
    assert run.values("tool_call_f1") == [0.5]
    (match,) = run.results[0]["tool_call_accuracy"].details["matches"]
    assert (match["made"], match["arguments"][0]["score"]) == (1, 1.0)


def test_offline_an_embedder_that_fails_fails_only_its_own_asks(resources: Resources) -> None:
    class Broken:
        name = "use-multilingual-v3"

        def embed(self, texts: Sequence[str]) -> np.ndarray:
            raise ModelUnavailable("USE is broken here")

    res = Resources(AssayConfig(embedder="e5-small", judge_model=None, judge_base_url=None))
    other = CountingEmbedder(resources.embedder)
    other.name = "other-model"
    res.__dict__["embedder"], res.__dict__["use_embedder"] = other, Broken()
    metrics = [get_metric("semantic_similarity"), get_metric("toxicity_score", method="head")]
    run = evaluate(JSONS, metrics=metrics, resources=res)
    assert other.calls == 1
    alone = get_metric("semantic_similarity").score_batch(JSONS, resources)
    assert run.values("semantic_similarity") == [r.value for r in alone]
    assert {r["toxicity_score"].error for r in run.results} == {
        "ModelUnavailable: USE is broken here"
    }
