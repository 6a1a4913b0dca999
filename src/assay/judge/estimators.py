"""Offline estimators of the judged metrics (used when no judge is configured).

Each function works on a batch (one embedder call for all texts of the batch) and
returns plain numbers plus the evidence they came from. They are *estimators*: cheaper,
weaker stand-ins for a judge, named in each result's ``details["estimator"]``:

- `sentence_support` ("sentence_support"): how well each sentence of a text is supported
  by evidence passages: the mean of its best embedding cosine against the evidence
  sentences and the share of its content words found in the evidence, scaled by the
  share of its anchors (numbers, dates, entities, asserted subject-verb-object claims,
  from `assay.text.anchors`) the evidence supports. Faithfulness, hallucination and
  context recall use it. Measured on BEGIN (Wizard-of-Wikipedia dev, 430 responses):
  AUROC 0.92 for "fully attributable" vs not (benchmarks/validity.py).
  Weaknesses: it rewards copying; a fluent paraphrase with few shared words scores
  lower than it should; a sentence can share every word with the context and still
  invert its meaning (the anchors catch negated claims and wrong numbers, not swapped
  roles); pronouns are not resolved.
- `reference_agreement` ("reference_agreement"): agreement of an answer with a reference
  answer: the cosine of the two after removing the question's direction from both
  embeddings (so the shared topic does not count as agreement), minus 0.2 when exactly
  one of them is negated, plus/minus 0.15 when both start with yes/no and agree/disagree.
  Measured on TruthfulQA (400 questions; each correct vs each incorrect answer against
  the best answer): AUROC 0.74 (0.78 leaving out the answers that say "I have no
  comment", which seed 003's rule classifies DON'T KNOW), benchmarks/validity.py.
  Weaknesses: embeddings measure topic and phrasing, not truth; TruthfulQA's wrong
  answers are popular misconceptions phrased like the truth, which no similarity can
  separate reliably; a correct answer worded very differently from the reference
  scores low.
- `context_similarity` ("context_similarity"): how relevant each context is to the
  question (and reference answer, when given): the best cosine of the question (or the
  reference) with the context or any of its sentences. Weakness: topical similarity,
  not usefulness: a passage on the right subject without the needed fact passes.
- `question_answer_cosine`: cosine of question and answer; 0 for a non-committal
  answer. Weakness: an answer that restates the question scores high without answering.
- `uncertainty_phrase`: the seed 003 "don't know" phrases (a substring test).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from assay.text.tokenize import content_words, sentences, words

if TYPE_CHECKING:
    from assay.resources import Resources

__all__ = [
    "CONTEXT_RELEVANCE_THRESHOLD",
    "SUPPORT_THRESHOLD",
    "UNCERTAINTY_PHRASES",
    "Agreement",
    "Support",
    "context_similarity",
    "question_answer_cosine",
    "reference_agreement",
    "sentence_support",
    "uncertainty_phrase",
]

#: a sentence (claim) counts as supported at or above this support
SUPPORT_THRESHOLD = 0.6
#: a context counts as relevant at or above this similarity
CONTEXT_RELEVANCE_THRESHOLD = 0.5

#: seed 003's "don't know" phrases (section 11), plus "no comment" (Assay's addition)
UNCERTAINTY_PHRASES: tuple[str, ...] = (
    "i don't know",
    "i do not know",
    "unknown",
    "not sure",
    "cannot determine",
    "no information",
    "insufficient data",
    "unable to answer",
    "cannot answer",
    "don't have enough information",
    "not available",
    "no data",
    "no comment",
)
_SHORT_NON_ANSWERS = ("unknown", "n/a", "none", "null")
_NEGATIONS = frozenset(
    {"not", "no", "never", "nothing", "none", "cannot", "neither", "nor", "nobody", "nowhere"}
)


def uncertainty_phrase(answer: str) -> str | None:
    """The uncertainty phrase ``answer`` contains (seed 003 rule), or None.

    A substring test on the lower-cased answer, plus very short non-answers ("n/a",
    "none"). Weakness: "the origin is unknown" counts as "don't know" even when that is
    the correct answer.
    """
    text = (answer or "").lower().replace("’", "'").strip()
    for phrase in UNCERTAINTY_PHRASES:
        if phrase in text:
            return phrase
    if len(text) < 10:
        for word in _SHORT_NON_ANSWERS:
            if word in text:
                return word
    return None


# ---- sentence support ------------------------------------------------------------------


@dataclass
class Support:
    """Support of one text by its evidence passages.

    Attributes:
        score: mean sentence support times the anchor factor ``0.5 + 0.5 * anchor_rate``.
        sentences: per sentence: text, semantic (best cosine), lexical (word share),
            support (their mean), supported (support >= threshold and no unsupported
            anchor in it).
        anchors, anchors_supported: anchor counts (None when spaCy was unavailable).
        unsupported_anchors: the anchors the evidence does not support.
    """

    score: float
    sentences: list[dict[str, Any]]
    anchors: int | None
    anchors_supported: int | None
    unsupported_anchors: list[dict[str, Any]] = field(default_factory=list)

    @property
    def supported_sentences(self) -> int:
        return sum(1 for s in self.sentences if s["supported"])

    def details(self) -> dict[str, Any]:
        return {
            "sentences": self.sentences,
            "anchors": self.anchors,
            "anchors_supported": self.anchors_supported,
            "unsupported_anchors": self.unsupported_anchors,
        }


def _split(text: str) -> list[str]:
    return sentences(text) or ([text.strip()] if text.strip() else [])


def _vectors(res: Resources, texts: Sequence[str]) -> dict[str, np.ndarray]:
    unique = list(dict.fromkeys(t for t in texts if t and t.strip()))
    if not unique:
        return {}
    matrix = res.embedder.embed(unique)
    return dict(zip(unique, matrix, strict=True))


def _anchor_checks(
    res: Resources, texts: Sequence[str], evidence: Sequence[Sequence[str]]
) -> list[tuple[list[Any], list[bool]]] | None:
    try:
        from assay.text.anchors import analyse, check_anchors

        nlp = res.nlp
    except Exception:  # spaCy or its pipeline missing: estimate without anchors
        return None
    out = []
    for anchors, evidence_ in analyse(nlp, list(texts), [list(e) for e in evidence]):
        out.append((anchors, check_anchors(anchors, evidence_)))
    return out


def sentence_support(
    res: Resources,
    texts: Sequence[str],
    evidence: Sequence[Sequence[str]],
    *,
    threshold: float = SUPPORT_THRESHOLD,
    use_anchors: bool = True,
) -> list[Support]:
    """Support of each ``texts[i]`` by the passages ``evidence[i]`` (see module doc)."""
    if len(texts) != len(evidence):
        raise ValueError(f"{len(texts)} texts but {len(evidence)} evidence lists")
    text_sents = [_split(t) for t in texts]
    ev_units = [
        [u for p in passages if p and p.strip() for u in (*_split(p), p.strip())]
        for passages in evidence
    ]
    all_units = [s for ss in text_sents for s in ss] + [u for us in ev_units for u in us]
    vectors = _vectors(res, all_units)
    checks = _anchor_checks(res, texts, evidence) if use_anchors else None
    out: list[Support] = []
    for i, sents in enumerate(text_sents):
        units = [u for u in ev_units[i] if u in vectors]
        ev_words = set(words(" ".join(evidence[i])))
        ev_matrix = np.stack([vectors[u] for u in units]) if units else None
        anchors: list[Any] = []
        flags: list[bool] = []
        if checks is not None:
            anchors, flags = checks[i]
        bad_sentences = {a.sentence for a, ok in zip(anchors, flags, strict=True) if not ok}
        rows = []
        for sent in sents:
            semantic = 0.0
            if ev_matrix is not None and sent in vectors:
                semantic = float(np.clip((ev_matrix @ vectors[sent]).max(), 0.0, 1.0))
            cw = set(content_words(sent))
            lexical = len(cw & ev_words) / len(cw) if cw else 1.0
            support = (semantic + lexical) / 2
            has_bad = any(b and (b in sent or sent in b) for b in bad_sentences)
            rows.append(
                {
                    "text": sent,
                    "semantic": round(semantic, 4),
                    "lexical": round(lexical, 4),
                    "support": round(support, 4),
                    "supported": support >= threshold and not has_bad,
                }
            )
        mean_support = sum(r["support"] for r in rows) / len(rows) if rows else 1.0
        if checks is None:
            factor, n_anchors, n_ok = 1.0, None, None
        else:
            n_anchors, n_ok = len(anchors), sum(flags)
            factor = 0.5 + 0.5 * (n_ok / n_anchors) if n_anchors else 1.0
        out.append(
            Support(
                score=float(np.clip(mean_support * factor, 0.0, 1.0)),
                sentences=rows,
                anchors=n_anchors,
                anchors_supported=n_ok,
                unsupported_anchors=[
                    a.to_dict() for a, ok in zip(anchors, flags, strict=True) if not ok
                ],
            )
        )
    return out


# ---- agreement with a reference answer --------------------------------------------------


@dataclass
class Agreement:
    """Agreement of an answer with a reference (see `reference_agreement`)."""

    score: float
    cosine: float
    residual_cosine: float | None
    negation_mismatch: bool
    yes_no: int  # +1 both yes/no and agree, -1 disagree, 0 not a yes/no pair

    def details(self) -> dict[str, Any]:
        return {
            "cosine": round(self.cosine, 4),
            "residual_cosine": None
            if self.residual_cosine is None
            else round(self.residual_cosine, 4),
            "negation_mismatch": self.negation_mismatch,
            "yes_no": self.yes_no,
        }


def _negated(text: str) -> bool:
    tokens = words(text)
    return any(t in _NEGATIONS or t.endswith(("n't", "n’t")) for t in tokens)


def _yes_no(text: str) -> int:
    tokens = words(text)
    if not tokens:
        return 0
    return 1 if tokens[0] == "yes" else -1 if tokens[0] == "no" else 0


def _residual(vector: np.ndarray, direction: np.ndarray) -> np.ndarray:
    rest = vector - float(vector @ direction) * direction
    norm = float(np.linalg.norm(rest))
    return rest / norm if norm > 1e-9 else rest


def reference_agreement(
    res: Resources,
    questions: Sequence[str | None],
    answers: Sequence[str],
    references: Sequence[str],
) -> list[Agreement]:
    """Agreement of ``answers[i]`` with ``references[i]`` (see module doc for the formula)."""
    vectors = _vectors(res, [*answers, *references, *(q for q in questions if q)])
    out = []
    for question, answer, reference in zip(questions, answers, references, strict=True):
        a, r = vectors.get(answer), vectors.get(reference)
        if a is None or r is None:
            out.append(Agreement(0.0, 0.0, None, False, 0))
            continue
        cosine = float(a @ r)
        residual = None
        base = cosine
        q = vectors.get(question) if question else None
        if q is not None:
            residual = float(_residual(a, q) @ _residual(r, q))
            base = residual
        mismatch = _negated(answer) != _negated(reference)
        yes_no = _yes_no(answer) * _yes_no(reference)
        score = base - (0.2 if mismatch else 0.0) + 0.15 * yes_no
        out.append(Agreement(float(np.clip(score, 0.0, 1.0)), cosine, residual, mismatch, yes_no))
    return out


# ---- contexts and questions ----------------------------------------------------------------


def context_similarity(
    res: Resources,
    questions: Sequence[str],
    contexts: Sequence[Sequence[str]],
    references: Sequence[str | None] | None = None,
) -> list[list[float]]:
    """Per context, the best cosine of the question (or the reference, when given) with
    the context or any of its sentences, clipped to [0, 1]."""
    refs = list(references) if references is not None else [None] * len(questions)
    units = [[[c.strip(), *_split(c)] for c in ctxs] for ctxs in contexts]
    flat = [u for per in units for ctx in per for u in ctx]
    vectors = _vectors(res, [*questions, *(r for r in refs if r), *flat])
    out = []
    for question, reference, per in zip(questions, refs, units, strict=True):
        probes = [vectors[t] for t in (question, reference) if t and t in vectors]
        scores = []
        for ctx_units in per:
            best = 0.0
            for unit in ctx_units:
                vec = vectors.get(unit)
                if vec is None:
                    continue
                for probe in probes:
                    best = max(best, float(probe @ vec))
            scores.append(float(np.clip(best, 0.0, 1.0)))
        out.append(scores)
    return out


def question_answer_cosine(
    res: Resources, questions: Sequence[str], answers: Sequence[str]
) -> list[float]:
    """Cosine of question and answer, clipped to [0, 1]."""
    sims = res.embedder.pair_similarity(list(questions), list(answers))
    return [float(np.clip(s, 0.0, 1.0)) for s in sims]
