"""The checks every generated question passes, each counting the rows it removes.

In order, through the engine's asks (one entailment-model call and one embedder call per
round, `assay.engine.answer`):

1. ``language``: the question is in the documents' language: its `language_of`
   (Arabic script; English when at least `ENGLISH_STOP_SHARE` of its words are English
   stop words; else another language) is the documents' (the most frequent over their
   chunks), or at least `VOCABULARY_SHARE` of its words occur in the documents (a
   question in their language shares their words; one in another language shares
   little more than names). Questions under 4 words are not judged.
2. ``answerable_alone``: the question must not answer itself: a question with a known
   answer span (offline) is removed when it contains that span; one without (written by
   the judge) when the entailment model reads the reference as entailed by the question
   alone (P(entailment | question ⇒ reference) >= `ENTAILED`). The model is not asked
   where the span is known: it reads a question that restates most of its sentence as
   entailing it even when the missing span is the whole answer (``What can be customised
   per project?`` against ``Alembic can be customised per project.``).
3. ``not_entailed``: the reference must be entailed by the contexts: every sentence of
   it supported at P(entailment) >= `ENTAILED` by its best window of the contexts
   (`assay.estimators.entailment.entailment_support`, the model of
   `assay.models.entailment`). An unanswerable question is exempt (its reference says the
   documents do not say); its construction checks that no sentence holds it.
4. ``near_duplicate``: a question is removed when an earlier kept question is close in
   meaning (cosine of the run embedder's vectors, USE multilingual by default, >=
   ``duplicate_cosine``, default 0.9) or in writing (rapidfuzz's ``ratio``, the
   normalised Indel similarity, >= `DUPLICATE_RATIO`: two questions of one sentence that
   differ in the words asked for).

A check that cannot run (the entailment model's extra is missing, the embedder fails)
removes nothing and says why in ``not_run``; nothing passes silently as checked.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from rapidfuzz import fuzz
from rapidfuzz.process import cdist

from assay.engine import answer, embed_ask, entail_ask
from assay.engine.resources import Resources
from assay.estimators.entailment import ENTAILED, entailment_pairs, entailment_support
from assay.generation.documents import Chunk
from assay.text.lang import is_arabic
from assay.text.tokenize import STOP_WORDS, words

__all__ = [
    "DUPLICATE_COSINE",
    "DUPLICATE_RATIO",
    "FILTERS",
    "Candidate",
    "FilterReport",
    "documents_language",
    "filter_candidates",
    "in_language",
    "language_of",
]

#: the checks, in the order they run
FILTERS: tuple[str, ...] = ("language", "answerable_alone", "not_entailed", "near_duplicate")
#: a question this close (cosine) to a kept one is a near-duplicate
DUPLICATE_COSINE = 0.9
#: a question this close in writing (rapidfuzz ratio, 0..100) to a kept one is one too
DUPLICATE_RATIO = 90.0
#: share of a text's words that must be English stop words for it to count as English
ENGLISH_STOP_SHARE = 0.2
_MIN_LANGUAGE_WORDS = 4
#: share of a question's words found in the documents that makes it their language
VOCABULARY_SHARE = 0.6
#: removed questions shown per check in the report
EXAMPLES = 3


@dataclass
class Candidate:
    """A generated question before the checks.

    Attributes:
        kind: single, multi, reasoning, conversational or unanswerable.
        query: the question (the last user turn of a conversation).
        expected: the reference answer.
        chunks: the chunks it was generated from (its contexts).
        persona: who asks.
        method: how it was made (``offline:spacy-extractive``, ``judge:<model>``).
        answer: the answer span(s) in the reference, when known (offline).
        turns: a conversation's turns, assistant replies empty.
        extra: more metadata (entailment, the linking entity, ...).
    """

    kind: str
    query: str
    expected: str
    chunks: list[Chunk]
    persona: str
    method: str
    answer: str | list[str] | None = None
    turns: list[dict[str, Any]] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def contexts(self) -> list[str]:
        return [c.text for c in self.chunks]


@dataclass
class FilterReport:
    """What the checks removed (by check, with the first `EXAMPLES` questions of each),
    and the checks that could not run (why)."""

    removed: Counter[str] = field(default_factory=Counter)
    not_run: dict[str, str] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=dict)

    def remove(self, check: str, candidate: Candidate) -> None:
        self.removed[check] += 1
        shown = self.examples.setdefault(check, [])
        if len(shown) < EXAMPLES:
            shown.append(candidate.query)

    def to_dict(self) -> dict[str, Any]:
        return {
            "removed": {name: self.removed.get(name, 0) for name in FILTERS},
            "not_run": dict(self.not_run),
            "examples": {k: list(v) for k, v in self.examples.items()},
        }


def language_of(text: str) -> str:
    """``ar`` (Arabic script), ``en`` (at least `ENGLISH_STOP_SHARE` of its words English
    stop words), ``other`` (anything else with words), ``""`` (no words)."""
    if is_arabic(text):
        return "ar"
    found = words(text)
    if not found:
        return ""
    stops = sum(1 for w in found if w in STOP_WORDS)
    return "en" if stops >= ENGLISH_STOP_SHARE * len(found) else "other"


def documents_language(chunks: Sequence[Chunk]) -> str:
    """The most frequent `language_of` over the chunks (ties: first seen)."""
    counts = Counter(language_of(c.text) for c in chunks)
    counts.pop("", None)
    return counts.most_common(1)[0][0] if counts else ""


def in_language(query: str, language: str, vocabulary: frozenset[str]) -> bool:
    """Whether ``query`` is in the documents' ``language`` (see the module doc); True for
    a question under 4 words or documents of no known language."""
    found = words(query)
    if not language or len(found) < _MIN_LANGUAGE_WORDS or language_of(query) == language:
        return True
    return sum(1 for w in found if w in vocabulary) >= VOCABULARY_SHARE * len(found)


def _gives_answer(candidate: Candidate) -> bool:
    spans = candidate.answer if isinstance(candidate.answer, list) else [candidate.answer]
    query = candidate.query.lower()
    return any(span and span.lower() in query for span in spans)


def _entailment_checks(
    candidates: list[Candidate], res: Resources, report: FilterReport
) -> list[Candidate]:
    answerable = [c for c in candidates if c.kind != "unanswerable"]
    texts = [c.expected for c in answerable]
    evidence = [c.contexts for c in answerable]
    pairs = entailment_pairs(texts, evidence)
    alone = [(c.query, c.expected) for c in answerable if c.answer is None]
    answers = answer([entail_ask(p, h) for p, h in [*pairs, *alone]], res)
    try:
        probabilities = answers.entailments([*pairs, *alone])
    except Exception as exc:  # the model's extra is missing, or it failed to load
        reason = f"the entailment model did not run: {exc}"
        report.not_run["answerable_alone"] = reason
        report.not_run["not_entailed"] = reason
        return candidates
    supports = iter(entailment_support(probabilities, texts, evidence))
    kept = []
    for candidate in candidates:
        if candidate.kind == "unanswerable":
            kept.append(candidate)
            continue
        support = next(supports)
        if candidate.answer is not None:
            gives_answer = _gives_answer(candidate)
        else:
            gives_answer = probabilities[(candidate.query, candidate.expected)][0] >= ENTAILED
        if gives_answer:
            report.remove("answerable_alone", candidate)
            continue
        weakest = min((s["entailment"] for s in support.sentences), default=0.0)
        if not support.sentences or weakest < ENTAILED:
            report.remove("not_entailed", candidate)
            continue
        candidate.extra["entailment"] = round(weakest, 4)
        kept.append(candidate)
    return kept


def _unique(
    candidates: list[Candidate],
    earlier: Sequence[str],
    res: Resources,
    threshold: float,
    report: FilterReport,
) -> list[Candidate]:
    queries = [*earlier, *(c.query for c in candidates)]
    answers = answer([embed_ask(q) for q in dict.fromkeys(queries)], res)
    try:
        vectors = answers.vectors(queries)
    except Exception as exc:  # the embedder failed to load or to embed
        report.not_run["near_duplicate"] = f"the embedder did not run: {exc}"
        return candidates
    matrix = np.stack([vectors[q] for q in queries]) if queries else np.zeros((0, 1))
    similar = matrix @ matrix.T
    written = cdist(
        queries, queries, scorer=fuzz.ratio, dtype=np.uint8, score_cutoff=DUPLICATE_RATIO
    )
    similar[written >= DUPLICATE_RATIO] = np.inf
    kept_rows = list(range(len(earlier)))
    kept = []
    for offset, candidate in enumerate(candidates):
        row = len(earlier) + offset
        if kept_rows and float(similar[row, kept_rows].max()) >= threshold:
            report.remove("near_duplicate", candidate)
            continue
        kept_rows.append(row)
        kept.append(candidate)
    return kept


def filter_candidates(
    candidates: Sequence[Candidate],
    res: Resources,
    language: str,
    vocabulary: frozenset[str] = frozenset(),
    earlier: Sequence[str] = (),
    duplicate_cosine: float = DUPLICATE_COSINE,
    report: FilterReport | None = None,
) -> tuple[list[Candidate], FilterReport]:
    """The candidates that pass every check (see the module doc), in order, and the
    report (``report``, extended, when given). ``earlier``: the questions already kept (a
    near-duplicate of one of them is removed too); ``language`` and ``vocabulary``: the
    documents' (`documents_language`, the set of their `words`)."""
    report = report if report is not None else FilterReport()
    kept = []
    for candidate in candidates:
        if not in_language(candidate.query, language, vocabulary):
            report.remove("language", candidate)
            continue
        kept.append(candidate)
    if kept:
        kept = _entailment_checks(kept, res, report)
    if kept:
        kept = _unique(kept, earlier, res, duplicate_cosine, report)
    return kept, report
