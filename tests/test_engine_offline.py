"""The engine offline (no judge): each distinct text of a chunk is embedded, parsed or
scored once, in one call, across metrics and samples: the semantic and rag suites, the
judged metrics' estimators, spaCy's parses and entity passes, the reliability and
reasoning metrics sharing the chunk embedding, the reference agreement once per sample
and BERTScore's pairs; answers of other resources are not reused, and every value is
that of the metric scored on its own."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import pytest

from assay.core.sample import Sample
from assay.engine import Answers, answered, execute, planned
from assay.engine.resources import Resources
from assay.evaluation.runner import evaluate
from assay.metrics.registry import get_metric, resolve_metrics
from assay.models.cache import EmbeddingCache

pytest.register_assert_rewrite("tests.engine_helpers")

from tests.engine_helpers import CALLS, SAMPLES, assert_as_scored_alone, offline  # noqa: E402

# ---- offline: model asks without a judge ---------------------------------------------------


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
