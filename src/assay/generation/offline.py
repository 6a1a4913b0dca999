"""The offline source of questions: pools of extractive candidates per kind.

`OfflineSource` parses every chunk's prose once (one spaCy pass through the engine's
parse asks), turns the sentences into facts (`assay.generation.extractive.facts`) and
keeps, per kind, a pool in a seeded order that visits the chunks in turn (a chunk's
second question comes after every chunk's first), so a small N still spreads over the
documents:

- ``single``: one fact;
- ``multi``: two facts of different chunks whose questions keep the same named entity
  (the chunks holding it in a ring, their facts zipped), then (when those run out) the
  facts of a chunk and of each of its `NEIGHBOURS` nearest other chunks by the run
  embedder's cosine, zipped from the last;
- ``conversational``: two facts of different sentences of one chunk, as a question and
  its follow-up, at most `FOLLOW_UPS` facts apart (neighbours first);
- ``unanswerable``: a fact with a named entity swapped (`extractive.unanswerable_question`),
  the questions that open with their wh-word first;
- ``reasoning``: none (`CANNOT`): comparison and reasoning questions need a judge.

`OfflineSource.make` hands out the next candidates of each kind, skipping an item that
holds a question already handed out; `release` frees the questions of candidates the run
did not keep although they passed the checks; a pool that runs dry says so
(`exhausted`).
"""

from __future__ import annotations

import itertools
import random
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from assay.core.extras import MissingExtra
from assay.engine import answer, embed_ask, parse_ask
from assay.engine.resources import Resources
from assay.generation.documents import Chunk
from assay.generation.extractive import (
    Fact,
    conversation,
    facts,
    multi_question,
    prose,
    unanswerable_question,
)
from assay.generation.filters import Candidate
from assay.text.tokenize import content_words

__all__ = ["CANNOT", "METHOD", "UNANSWERED", "OfflineSource"]

#: ``metadata.method`` of offline questions
METHOD = "offline:spacy-extractive"
#: the kinds the offline source cannot make, with why
CANNOT: dict[str, str] = {
    "reasoning": "comparison and reasoning questions need a judge (offline questions are "
    "extractive: one fact, two facts, or a follow-up)"
}
#: the order `OfflineSource.make` hands the kinds out in
_HANDOUT_ORDER = ("multi", "conversational", "unanswerable", "single", "reasoning")
_OPENERS = frozenset({"Who", "What", "Which", "When", "Where", "How"})
#: the nearest chunks a chunk is paired with for multi-chunk questions
NEIGHBOURS = 3
#: how far apart (in facts of one chunk) a conversation's opener and follow-up may be
FOLLOW_UPS = 3
#: the reference answer of an unanswerable question
UNANSWERED = "The documents do not say."


def _round_robin(items: Sequence[Any], key: Any, rng: random.Random) -> list[Any]:
    """``items`` shuffled by ``rng`` within each group of ``key``, the groups visited in
    a shuffled order, one item of each group per turn."""
    groups: dict[Any, list[Any]] = defaultdict(list)
    for item in items:
        groups[key(item)].append(item)
    order = list(groups)
    rng.shuffle(order)
    for name in order:
        rng.shuffle(groups[name])
    out = []
    depth = max((len(g) for g in groups.values()), default=0)
    for i in range(depth):
        out += [groups[name][i] for name in order if i < len(groups[name])]
    return out


class OfflineSource:
    """Extractive candidates from the chunks (see the module doc)."""

    method = METHOD
    cannot = CANNOT

    def __init__(
        self,
        chunks: Sequence[Chunk],
        personas: Sequence[str],
        seed: int,
        res: Resources,
    ) -> None:
        texts = list(dict.fromkeys(prose(c.text) for c in chunks))
        answers = answer([parse_ask(t) for t in texts if t], res)
        try:
            docs = answers.docs([t for t in texts if t])
        except MissingExtra as exc:
            raise MissingExtra("offline question generation (spaCy)", exc.extra) from exc
        self._rng = random.Random(seed)
        self._personas = list(personas)
        found = facts(chunks, docs)
        self.facts = len(found)
        self.pools: dict[str, list[dict[str, Any]]] = {
            "single": [self._single(f) for f in _round_robin(found, _sentence, self._rng)],
            "multi": self._multi(found) + self._neighbours(found, chunks, res),
            "conversational": self._conversations(found),
            "unanswerable": self._unanswerable(found, docs),
            "reasoning": [],
        }
        self._next = dict.fromkeys(self.pools, 0)
        self._used: set[str] = set()
        self._parts: dict[tuple[str, str], list[str]] = {}  # (kind, query): its parts
        self._singles = {item["query"]: item for item in self.pools["single"]}

    # ---- pools ------------------------------------------------------------------------
    @staticmethod
    def _single(fact: Fact) -> dict[str, Any]:
        return {
            "query": fact.question,
            "parts": [fact.question],
            "expected": fact.sentence,
            "chunks": [fact.chunk],
            "answer": fact.answer,
        }

    def _multi(self, found: Sequence[Fact]) -> list[dict[str, Any]]:
        """Pairs of facts of different chunks whose questions keep the same named entity:
        for each entity, the chunks that hold it in a ring (each with the next, the last
        with the first when there are three or more), their facts zipped (a chunk's first
        with the other's first, second with second, ...)."""
        by_link: dict[str, dict[str, list[Fact]]] = defaultdict(lambda: defaultdict(list))
        for fact in found:
            for key, _, text in fact.links:
                if text in fact.question:
                    by_link[key][fact.chunk.id].append(fact)
        pairs = []
        for key, chunks in by_link.items():
            ids = list(chunks)
            ring = [*itertools.pairwise(ids), *([(ids[-1], ids[0])] if len(ids) > 2 else [])]
            for a, b in ring:
                for first, second in zip(chunks[a], chunks[b], strict=False):
                    link = next(t for k, _, t in first.links if k == key)
                    pairs.append(multi_question(first, second, link))
        return _round_robin(pairs, lambda p: p["chunks"][0].id, self._rng)

    def _neighbours(
        self, found: Sequence[Fact], chunks: Sequence[Chunk], res: Resources
    ) -> list[dict[str, Any]]:
        """Multi-chunk questions over each chunk and its `NEIGHBOURS` nearest other chunks,
        after those linked by an entity: their facts zipped from the last (the last of each,
        then the one before, ...). A chunk's place in embedding space is
        the mean of the run embedder's vectors of its question sentences (short texts: USE
        spent 15 s of CPU on 361 chunks of about 140 words, the whole offline run of 100
        pages 52 s), and chunks are near by the cosine of those means."""
        by_chunk: dict[str, list[Fact]] = defaultdict(list)
        for fact in found:
            by_chunk[fact.chunk.id].append(fact)
        with_facts = [c for c in chunks if by_chunk[c.id]]
        if len(with_facts) < 2:
            return []
        sentences = {
            c.id: list(dict.fromkeys(f.sentence for f in by_chunk[c.id])) for c in with_facts
        }
        texts = [t for c in with_facts for t in sentences[c.id]]
        vectors = answer([embed_ask(t) for t in dict.fromkeys(texts)], res).vectors(texts)
        means = np.stack(
            [np.mean([vectors[t] for t in sentences[c.id]], axis=0) for c in with_facts]
        )
        matrix = means / np.maximum(np.linalg.norm(means, axis=1, keepdims=True), 1e-12)
        similar = matrix @ matrix.T
        np.fill_diagonal(similar, -np.inf)
        pairs = []
        for i, chunk in enumerate(with_facts):
            nearest = np.argsort(-similar[i], kind="stable")[: min(NEIGHBOURS, len(with_facts) - 1)]
            for j in (int(x) for x in nearest):
                link = f"nearest chunk (cosine {similar[i, j]:.2f})"
                ours, theirs = by_chunk[chunk.id][::-1], by_chunk[with_facts[j].id][::-1]
                for first, second in zip(ours, theirs, strict=False):
                    if first.question != second.question:  # two copies of one text
                        pairs.append(multi_question(first, second, link))
        return _round_robin(pairs, lambda p: p["chunks"][0].id, self._rng)

    def _conversations(self, found: Sequence[Fact]) -> list[dict[str, Any]]:
        """Pairs of facts of different sentences of one chunk, the earlier as the opener:
        neighbours first, then two apart, ... (at most `FOLLOW_UPS` a fact opens)."""
        by_chunk: dict[str, list[Fact]] = defaultdict(list)
        for fact in found:
            by_chunk[fact.chunk.id].append(fact)
        out = []
        for gap in range(1, FOLLOW_UPS + 1):
            for chunk_facts in by_chunk.values():
                for first, follow in zip(chunk_facts, chunk_facts[gap:], strict=False):
                    if first.sentence != follow.sentence:
                        out.append(conversation(first, follow))
        return _round_robin(out, lambda p: p["chunks"][0].id, self._rng)

    def _unanswerable(self, found: Sequence[Fact], docs: Mapping[str, Any]) -> list[dict[str, Any]]:
        names = list(dict.fromkeys((label, text) for f in found for _, label, text in f.links))
        self._rng.shuffle(names)
        sentences = [frozenset(content_words(s.text)) for doc in docs.values() for s in doc.sents]
        out = []
        # questions that open with their wh-word read best with a name swapped in: first
        linked = [f for f in found if f.links]
        openers = [f for f in linked if f.question.split(" ", 1)[0] in _OPENERS]
        others = [f for f in linked if f.question.split(" ", 1)[0] not in _OPENERS]
        for fact in [*_round_robin(openers, _chunk_id, self._rng),
                     *_round_robin(others, _chunk_id, self._rng)]:  # fmt: skip
            made = unanswerable_question(fact, names, sentences)
            if made is not None:
                out.append({**made, "expected": UNANSWERED})
            if len(out) >= 2000:  # far more than any N asks for: stop searching
                break
        return out

    # ---- handing out ------------------------------------------------------------------
    def exhausted(self, kind: str) -> bool:
        return self._next[kind] >= len(self.pools[kind])

    def why_dry(self, kinds: list[str]) -> str:
        return f"the documents gave no more candidates of {', '.join(kinds)}"

    def left(self, kind: str) -> int:
        return len(self.pools[kind]) - self._next[kind]

    def make(self, wants: Mapping[str, int]) -> dict[str, list[Candidate]]:
        """The next ``wants[kind]`` candidates of each kind (fewer where a pool runs dry).
        A question handed out is never part of another (a single question is not also a
        conversation's follow-up or half of a multi-chunk question): such items are
        skipped."""
        out: dict[str, list[Candidate]] = {kind: [] for kind in wants}
        # the kinds made of two questions first: a single question would block them
        for kind in sorted(wants, key=_HANDOUT_ORDER.index):
            pool = self.pools[kind]
            while len(out[kind]) < wants[kind] and self._next[kind] < len(pool):
                item = pool[self._next[kind]]
                self._next[kind] += 1
                if self._used.isdisjoint(item["parts"]):
                    self._used.update(item["parts"])
                    self._parts[kind, item["query"]] = item["parts"]
                    out[kind].append(self._candidate(kind, item))
        return out

    def release(self, candidates: Sequence[Candidate]) -> None:
        """Hand back candidates that were not kept although they passed the checks (their
        kind was full): their questions are free again for the items of the pools not yet
        visited (a surplus single question can be half of a later multi-chunk one), and each
        goes back to the end of the single questions' pool."""
        for candidate in candidates:
            for part in self._parts.pop((candidate.kind, candidate.query), []):
                self._used.discard(part)
                if part in self._singles:
                    self.pools["single"].append(self._singles[part])

    def _candidate(self, kind: str, item: dict[str, Any]) -> Candidate:
        extra = {k: item[k] for k in ("link", "swapped", "turn_expected") if k in item}
        return Candidate(
            kind=kind,
            query=item["query"],
            expected=item["expected"],
            chunks=list(item["chunks"]),
            persona=self._rng.choice(self._personas),
            method=METHOD,
            answer=item.get("answer"),
            turns=item.get("turns"),
            extra=extra,
        )


def _chunk_id(fact: Fact) -> str:
    return fact.chunk.id


def _sentence(fact: Fact) -> tuple[str, str]:
    return fact.chunk.id, fact.sentence
