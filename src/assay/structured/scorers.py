"""Field scorers: the similarity behind FUZZY and SEMANTIC.

A scorer is anything with a ``method`` name and two batched functions, ``fuzzy(pairs)`` and
``semantic(pairs)``, each taking ``(expected_text, output_text)`` pairs and returning one
similarity in [0, 1] per pair (a float, or a `PairScore` that also carries a reason). The
pipeline compares the similarity with the fuzzy (0.85) or semantic (0.80) threshold.
Every pair of a whole batch of documents arrives in one call, so an embedder encodes in
batches and a judge can run its calls concurrently.

`LocalFieldScorer` is the offline scorer; an LLM-judge scorer plugs in by implementing the
same protocol with ``method = "llm"``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from rapidfuzz import fuzz
from rapidfuzz.utils import default_process

if TYPE_CHECKING:
    from assay.models.embedders import Embedder
    from assay.resources import Resources

__all__ = ["FieldScorer", "LocalFieldScorer", "PairScore", "as_pair_scores", "default_scorer"]

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


class LocalFieldScorer:
    """Offline scorer: rapidfuzz for FUZZY, embedding cosine for SEMANTIC.

    FUZZY: ``rapidfuzz.fuzz.token_set_ratio(a, b, processor=default_process) / 100``
    (lower-cased, punctuation stripped; word order and repeated words do not matter).
    "John Smith" vs "John Smyth" gives 0.90.
    SEMANTIC: cosine of the two embeddings from ``res.embedder`` (default USE multilingual
    v3), clamped to [0, 1]; texts equal after case-folding and whitespace collapsing score
    1.0 without being embedded. All pairs of a call are embedded in one batch.
    The embedder is loaded only when a SEMANTIC pair needs it.
    """

    method = "local"
    name = "local"

    def __init__(self, resources: Resources | None = None, embedder: Embedder | None = None):
        self._resources = resources
        self._embedder = embedder
        #: texts sent to the embedder so far (before its cache and de-duplication)
        self.texts_embedded = 0

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            from assay.resources import default_resources

            self._embedder = (self._resources or default_resources()).embedder
        return self._embedder

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
            embedder = self.embedder
            self.texts_embedded += 2 * len(todo)
            sims = embedder.pair_similarity(
                [pairs[i][0] for i in todo], [pairs[i][1] for i in todo]
            )
            name = f"cosine:{embedder.name}"
            for i, sim in zip(todo, sims, strict=True):
                out[i] = PairScore(max(0.0, min(1.0, float(sim))), "local", name)
        return [score for score in out if score is not None]


def default_scorer(resources: Resources | None = None) -> FieldScorer:
    """The scorer the metrics and ``assay json-eval`` use when none is given.

    Today the offline `LocalFieldScorer`; this is the one place to return a judge-backed
    scorer instead when the run's configuration names an LLM judge.
    """
    return LocalFieldScorer(resources)
