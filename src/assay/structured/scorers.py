"""Field scorers: the similarity behind FUZZY and SEMANTIC.

A scorer is anything with a ``method`` name and two batched functions, ``fuzzy(pairs)`` and
``semantic(pairs)``, each taking ``(expected_text, output_text)`` pairs and returning one
similarity in [0, 1] per pair (a float, or a `PairScore` that also carries a reason). The
pipeline compares the similarity with the fuzzy (0.85) or semantic (0.80) threshold.
Every pair of a whole batch of documents arrives in one call, so an embedder encodes in
batches and a judge can run its calls concurrently.

`LocalFieldScorer` is the offline scorer; an LLM-judge scorer plugs in by implementing the
same protocol with ``method = "llm"``. The local scorer's SEMANTIC vectors are embed asks
of the execution engine (`semantic_asks`, `assay.engine`): the JSON and tool-call metrics
plan them, so a run embeds them once with the chunk's other texts, and the scorer reads
them from the chunk's answers (called on its own, it asks the engine for them: one call).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from rapidfuzz import fuzz
from rapidfuzz.utils import default_process

if TYPE_CHECKING:
    from assay.engine import Ask
    from assay.engine.resources import Resources

__all__ = [
    "FieldScorer",
    "LocalFieldScorer",
    "PairScore",
    "as_pair_scores",
    "default_scorer",
    "semantic_asks",
]

Pair = tuple[str, str]


@dataclass(frozen=True, slots=True)
class PairScore:
    """One similarity with its provenance.

    Attributes:
        score: similarity in [0, 1].
        method: ``local``, ``llm`` or ``pattern`` (the project's method vocabulary).
        scorer: what computed it, e.g. ``rapidfuzz.token_set_ratio``,
            ``cosine:use-multilingual-v3``, ``llm:gpt-4o-mini``.
        reason: an explanation (a judge's reason), if any.
    """

    score: float
    method: str
    scorer: str
    reason: str | None = None


@runtime_checkable
class FieldScorer(Protocol):
    """What the pipeline needs to score FUZZY and SEMANTIC fields."""

    #: ``local`` for offline scorers, ``llm`` for a judge
    method: str

    def fuzzy(self, pairs: Sequence[Pair]) -> Sequence[float | PairScore]:
        """String similarity of each (expected, output) pair, in [0, 1]."""
        ...

    def semantic(self, pairs: Sequence[Pair]) -> Sequence[float | PairScore]:
        """Meaning similarity of each (expected, output) pair, in [0, 1]."""
        ...


def as_pair_scores(
    scorer: FieldScorer, kind: str, scores: Sequence[float | PairScore], expected: int
) -> list[PairScore]:
    """Normalise a scorer's answer: one `PairScore` per pair, score clamped to [0, 1]."""
    if len(scores) != expected:
        raise ValueError(
            f"{type(scorer).__name__}.{kind} returned {len(scores)} scores for {expected} pairs"
        )
    default = f"{getattr(scorer, 'name', type(scorer).__name__)}.{kind}"
    out = []
    for item in scores:
        if isinstance(item, PairScore):
            value, method, name, reason = item.score, item.method, item.scorer, item.reason
        else:
            value, method, name, reason = float(item), scorer.method, default, None
        if value != value:  # NaN never leaves: treat as no similarity
            value = 0.0
        out.append(PairScore(max(0.0, min(1.0, float(value))), method, name, reason))
    return out


def _same_text(a: str, b: str) -> bool:
    return " ".join(a.split()).casefold() == " ".join(b.split()).casefold()


def _embedded_texts(pairs: Sequence[Pair]) -> list[str]:
    """The distinct non-blank texts of the pairs the local scorer embeds (those not
    settled as equal texts), in order."""
    texts = (t for a, b in pairs if not _same_text(a, b) for t in (a, b))
    return [t for t in dict.fromkeys(texts) if t.strip()]


def semantic_asks(pairs: Sequence[Pair]) -> list[Ask]:
    """The embed asks (`assay.engine.embed_ask`, the run's embedder) whose vectors
    `LocalFieldScorer.semantic` reads for these (expected, output) pairs: both texts of
    each pair that is not settled as equal text; a blank text none (its cosine is 0, as
    the embedder's zero vector gives). A metric plans them from
    `assay.structured.pipeline.scorer_pairs`."""
    from assay.engine import embed_ask

    return [embed_ask(text) for text in _embedded_texts(pairs)]


class LocalFieldScorer:
    """Offline scorer: rapidfuzz for FUZZY, embedding cosine for SEMANTIC.

    FUZZY: ``rapidfuzz.fuzz.token_set_ratio(a, b, processor=default_process) / 100``
    (lower-cased, punctuation stripped; word order and repeated words do not matter).
    "John Smith" vs "John Smyth" gives 0.90.
    SEMANTIC: cosine of the two embeddings from the run's embedder (``resources``, default
    `default_resources`; USE multilingual v3 unless configured), ``dot(e(a), e(b))`` of
    the L2-normalised vectors, clamped to [0, 1]; a blank text has cosine 0. Texts equal
    after case-folding and whitespace collapsing score 1.0 without being embedded. The
    vectors are the answers of `semantic_asks` (`assay.engine.answer`): inside a run's
    chunk the ones its metrics planned, otherwise all texts of the call in one round.
    """

    method = "local"
    name = "local"

    def __init__(self, resources: Resources | None = None) -> None:
        self._resources = resources
        #: texts compared by their vectors so far (two per pair not settled as equal)
        self.texts_embedded = 0

    @property
    def resources(self) -> Resources:
        if self._resources is None:
            from assay.engine.resources import default_resources

            self._resources = default_resources()
        return self._resources

    def fuzzy(self, pairs: Sequence[Pair]) -> list[PairScore]:
        out = []
        for a, b in pairs:
            if _same_text(a, b):
                score = 1.0
            else:
                score = fuzz.token_set_ratio(a, b, processor=default_process) / 100.0
            out.append(PairScore(score, "local", "rapidfuzz.token_set_ratio"))
        return out

    def semantic(self, pairs: Sequence[Pair]) -> list[PairScore]:
        out = [
            PairScore(1.0, "local", "normalised-equal") if _same_text(a, b) else None
            for a, b in pairs
        ]
        todo = [i for i, score in enumerate(out) if score is None]
        if todo:
            from assay.engine import answer

            answers = answer(semantic_asks(pairs), self.resources)
            self.texts_embedded += 2 * len(todo)
            for i in todo:
                sim = answers.cosine(*pairs[i])
                out[i] = PairScore(max(0.0, min(1.0, sim)), "local", f"cosine:{answers.embedder}")
        return [score for score in out if score is not None]


def default_scorer(resources: Resources | None = None) -> FieldScorer:
    """The scorer the metrics and ``assay json-eval`` use when none is given.

    Today the offline `LocalFieldScorer`; this is the one place to return a judge-backed
    scorer instead when the run's configuration names an LLM judge (the JSON metrics then
    plan no embed asks for it: they plan `semantic_asks` for the local scorer only).
    """
    return LocalFieldScorer(resources)
