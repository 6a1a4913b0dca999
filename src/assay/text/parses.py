"""Parsed texts for the claim anchors (`assay.text.anchors`): one ``nlp.pipe`` pass over
the distinct texts, the entity recogniser run only on the docs whose entities are read.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import numpy

__all__ = [
    "PARSE_BATCH_CHARS",
    "Parses",
    "doc_from_bytes",
    "doc_to_bytes",
    "evidence_doc",
    "parse_texts",
    "text_batches",
]

#: characters one ``nlp.pipe`` batch holds at most (a longer text is a batch of its own):
#: the pipeline's working memory grows with a batch's words (12 documents of 10,000 words
#: in one batch peaked at 2.4 GB against 0.6 GB one at a time). 1,200 passages of 150
#: words on 2 cores: 609 MB peak at 100,000 characters (64 passages a batch), 462 MB at
#: 25,000 (about 28), 399 MB at 12,000, in 10.4, 10.5 and 11.8 s
PARSE_BATCH_CHARS = 25_000


def text_batches(
    texts: Iterable[str], size: int, chars: int = PARSE_BATCH_CHARS
) -> Iterator[list[str]]:
    """``texts`` in order, in batches of at most ``size`` texts and ``chars`` characters
    (a text longer than ``chars`` alone)."""
    batch: list[str] = []
    total = 0
    for text in texts:
        if batch and (len(batch) >= size or total + len(text) > chars):
            yield batch
            batch, total = [], 0
        batch.append(text)
        total += len(text)
    if batch:
        yield batch


def parse_texts(
    nlp: Any, texts: Iterable[str], batch_size: int = 64, defer_entities: bool = False
) -> dict[str, Any]:
    """The spaCy ``Doc`` of each distinct text, by text, from one ``nlp.pipe`` pass (the
    engine's ``parse`` asks run this; see `assay.engine.parse_ask`), in batches of at most
    ``batch_size`` texts and `PARSE_BATCH_CHARS` characters (`text_batches`). ``defer_entities``:
    the pipeline's ``ner`` is left out of the pass (in en_core_web_sm it has its own
    tok2vec, so no other annotation depends on it); `Parses` runs it later on the docs
    whose entities are read. A context passage is read for its sentences, parse and
    lemmas only (`build_evidence`), and NER was about 45 % of the pass over contexts.

    Each doc's ``tensor`` (the shared tok2vec's output, 96 floats a token: about 65 KB for
    a 150-word passage, most of a parsed chunk's memory) is dropped once the pass is over,
    unless a deferred ``ner`` listens to that tok2vec: nothing else reads it."""
    distinct = list(dict.fromkeys(texts))
    disable = ["ner"] if defer_entities and "ner" in nlp.pipe_names else []
    listening = nlp.get_pipe("tok2vec").listening_components if "tok2vec" in nlp.pipe_names else []
    keep_tensor = bool(disable) and "ner" in listening
    docs = {}
    for batch in text_batches(distinct, batch_size):
        parsed = nlp.pipe(batch, batch_size=len(batch), disable=disable)
        docs.update(zip(batch, parsed, strict=True))
    if not keep_tensor:
        for doc in docs.values():
            doc.tensor = numpy.zeros((0,), dtype="float32")
    return docs


def doc_to_bytes(doc: Any) -> bytes:
    """A parse as stored in the model cache: the ``Doc``'s annotations (no tensor, no user
    data), compressed (about 4 KB for a 150-word passage; reading it back takes about a
    twentieth of parsing it)."""
    return zlib.compress(doc.to_bytes(exclude=["tensor", "user_data"]), 1)


def doc_from_bytes(nlp: Any, data: bytes) -> Any | None:
    """The ``Doc`` stored by `doc_to_bytes`, on ``nlp``'s vocabulary; None when the bytes
    do not read back (a damaged entry: the text is parsed again)."""
    from spacy.tokens import Doc

    try:
        return Doc(nlp.vocab).from_bytes(zlib.decompress(data))
    except Exception:
        return None


class Parses(Mapping[str, Any]):
    """Parsed texts by text, their named entities recognised when first read.

    ``parses[text]`` is the text's ``Doc`` with its entities (``ner`` run on it in place
    the first time, when `parse_texts` deferred it: the same annotations as one full
    pass); `recognise` runs it on many texts' docs in one batch, for a reader about to
    read them all; `sentences` gives the ``Doc`` as parsed, for a reader of sentences,
    parse and lemmas only (`build_evidence`). ``ner``: the pipeline's entity recogniser
    over a list of docs, in place (None: the docs are complete as given).

    Attributes:
        passage_evidence: each context passage's ``Evidence`` by text, once built
            (`assay.text.anchors.passages_evidence`); the owner of the docs may give
            several `Parses` of them one dict (a chunk's answers do), so that every metric
            and sample reading a passage shares its evidence (None given: a dict of its own).
    """

    def __init__(
        self,
        docs: Mapping[str, Any],
        ner: Callable[[list[Any]], None] | None,
        passage_evidence: dict[str, Any] | None = None,
    ) -> None:
        self._docs = dict(docs)
        self._ner = ner
        self.passage_evidence = {} if passage_evidence is None else passage_evidence

    def __getitem__(self, text: str) -> Any:
        self.recognise([text])  # sets the entities in place, if not yet
        return self._docs[text]

    def recognise(self, texts: Iterable[str]) -> None:
        """Recognise the entities of the docs of ``texts`` that lack them, in one batch
        (about a third faster than one doc at a time; the same entities)."""
        if self._ner is None:
            return
        docs = [self._docs[t] for t in dict.fromkeys(texts)]
        todo = [doc for doc in docs if not doc.has_annotation("ENT_IOB")]
        if todo:
            self._ner(todo)

    def sentences(self, text: str) -> Any:
        """The ``Doc`` of ``text`` as parsed (its entities maybe not recognised)."""
        return self._docs[text]

    def __iter__(self) -> Iterator[str]:
        return iter(self._docs)

    def __len__(self) -> int:
        return len(self._docs)


def evidence_doc(docs: Mapping[str, Any], text: str) -> Any:
    """The parse of ``text`` for `build_evidence` (which reads no entity): as parsed when
    ``docs`` are `Parses`, so no entity is recognised for it."""
    return docs.sentences(text) if isinstance(docs, Parses) else docs[text]
