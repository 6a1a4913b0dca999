"""Offline estimators of the judged metrics (used when no judge is configured).

Each function works on a batch (the vectors of its texts given, see below) and returns
plain numbers plus the evidence they came from. They are *estimators*: cheaper,
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
  answer, for the answer's best sentence: the cosine of sentence and reference after
  removing the question's content words from both (so the shared topic does not count
  as agreement), halved by each contradiction cue (a negation on one side only, unless
  either side is hedged; a number, date or entity each side states and the other
  contradicts; yes/no disagreement), with the distance to 1 halved when both start with
  the same yes/no; two non-answers ("I have no comment") agree. Measured on TruthfulQA
  (400 questions; each correct vs each incorrect answer against the best answer):
  AUROC 0.83 leaving out the 80 answers the RAG specification's rule classifies DON'T KNOW, 0.82
  with them as reported, 0.79 with them scored 0 (benchmarks/validity.py; the
  question-residual cosine with additive negation and yes/no terms it replaced: 0.78
  without them, 0.74 with them scored 0).
  Weaknesses: embeddings measure topic and phrasing, not truth; TruthfulQA's wrong
  answers are popular misconceptions phrased like the truth, which only a cue (negation,
  a different name or number) separates; a correct answer worded very differently from
  the reference scores low.
- `context_similarity` ("context_similarity"): how relevant each context is to the
  question (and reference answer, when given): the best cosine of the question (or the
  reference) with the context or any of its sentences. Weakness: topical similarity,
  not usefulness: a passage on the right subject without the needed fact passes.
- `question_answer_cosine`: cosine of question and answer; 0 for a non-committal
  answer. Weakness: an answer that restates the question scores high without answering.
- `uncertainty_phrase`: the RAG specification "don't know" phrases (a substring test).

The estimators embed nothing themselves: each ``*_texts`` function lists the texts an
estimator compares (the non-blank ones), the judged metrics plan them as embed asks
(`assay.engine.embed_ask`, executed with every other ask of the chunk, one embedding per
distinct text), and the estimator reads their vectors from a mapping text -> vector (a
text missing from it is blank: it has no vector). spaCy (the anchors) is still called
here, through ``res.nlp``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
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
    "Vectors",
    "context_similarity",
    "context_similarity_texts",
    "question_answer_cosine",
    "question_answer_texts",
    "reference_agreement",
    "reference_agreement_texts",
    "sentence_support",
    "sentence_support_texts",
    "uncertainty_phrase",
]

#: the vectors of an estimator's texts, by text (blank texts have none)
Vectors = Mapping[str, np.ndarray]

#: a sentence (claim) counts as supported at or above this support
SUPPORT_THRESHOLD = 0.6
#: a context counts as relevant at or above this similarity
CONTEXT_RELEVANCE_THRESHOLD = 0.5

#: the RAG specification's "don't know" phrases (section 11), plus "no comment" (Assay's addition)
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
    """The uncertainty phrase ``answer`` contains (RAG specification rule), or None.

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


def _non_blank(texts: Iterable[str | None]) -> list[str]:
    """The distinct texts worth embedding, in order (blank ones embed as zeros: left out)."""
    return list(dict.fromkeys(t for t in texts if t and t.strip()))


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


def _evidence_units(passages: Sequence[str]) -> list[str]:
    """The passages' sentences and the passages themselves (the units a sentence is
    compared with)."""
    return [u for p in passages if p and p.strip() for u in (*_split(p), p.strip())]


def sentence_support_texts(texts: Sequence[str], evidence: Sequence[Sequence[str]]) -> list[str]:
    """The texts `sentence_support` compares: the sentences of ``texts`` and the evidence
    units."""
    return _non_blank(
        [
            *(s for t in texts for s in _split(t)),
            *(u for passages in evidence for u in _evidence_units(passages)),
        ]
    )


def sentence_support(
    res: Resources,
    vectors: Vectors,
    texts: Sequence[str],
    evidence: Sequence[Sequence[str]],
    *,
    threshold: float = SUPPORT_THRESHOLD,
    use_anchors: bool = True,
) -> list[Support]:
    """Support of each ``texts[i]`` by the passages ``evidence[i]`` (see module doc), from
    the ``vectors`` of `sentence_support_texts` (``res``: spaCy, for the anchors)."""
    if len(texts) != len(evidence):
        raise ValueError(f"{len(texts)} texts but {len(evidence)} evidence lists")
    text_sents = [_split(t) for t in texts]
    ev_units = [_evidence_units(passages) for passages in evidence]
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
    """Agreement of an answer with a reference (see `reference_agreement`).

    Attributes:
        score: the agreement, 0..1.
        cosine: embedding cosine of the full answer and reference.
        content_cosine: cosine after removing the question's content words from both
            (None without a question, or when nothing is left of one side).
        negation_mismatch: exactly one side has a negation cue and neither is hedged.
        yes_no: +1 both start with yes/no and agree, -1 they disagree, 0 otherwise.
        anchor_conflicts: pairs (answer anchor, reference anchor) of the same kind
            (number, date, entity) that neither side nor the question supports; None when
            spaCy is unavailable.
        hedged: the answer or the reference has a hedging word (so polarity is not compared).
        noncommittal: both answer and reference decline to answer (score 1).
    """

    score: float
    cosine: float
    content_cosine: float | None
    negation_mismatch: bool
    yes_no: int
    anchor_conflicts: list[tuple[str, str]] | None = None
    hedged: bool = False
    noncommittal: bool = False

    def details(self) -> dict[str, Any]:
        return {
            "cosine": round(self.cosine, 4),
            "content_cosine": None
            if self.content_cosine is None
            else round(self.content_cosine, 4),
            "negation_mismatch": self.negation_mismatch,
            "hedged": self.hedged,
            "yes_no": self.yes_no,
            "anchor_conflicts": None
            if self.anchor_conflicts is None
            else [list(pair) for pair in self.anchor_conflicts],
            "noncommittal": self.noncommittal,
        }


#: what one contradiction cue does to the agreement (and one confirmation cue to the
#: disagreement): halve it; a round value, not fitted
_CUE_FACTOR = 0.5
#: anchor kinds compared between answer and reference (claims are not: their verbs vary)
_CONFLICT_KINDS = ("number", "date", "entity")


def _negated(text: str) -> bool:
    tokens = words(text)
    return any(t in _NEGATIONS or t.endswith(("n't", "n’t")) for t in tokens)


def _hedged(text: str) -> bool:
    """A hedging modal or adverb (`assay.text.anchors` lists): "may", "might", "probably"."""
    from assay.text.anchors import HEDGE_ADVERBS, HEDGE_MODALS

    return any(t in HEDGE_MODALS or t in HEDGE_ADVERBS for t in words(text))


def _yes_no(text: str) -> int:
    tokens = words(text)
    if not tokens:
        return 0
    return 1 if tokens[0] == "yes" else -1 if tokens[0] == "no" else 0


def _without_question_words(text: str, question: str | None) -> str:
    """The words of ``text`` (lower-cased) minus the content words of ``question``."""
    if not question:
        return text
    asked = set(content_words(question))
    return " ".join(w for w in words(text) if w not in asked)


def _anchor_conflicts(
    res: Resources, triples: Sequence[tuple[str | None, str, str]]
) -> list[list[tuple[str, str, str]]] | None:
    """Per (question, answer, reference): anchors of one kind that the answer and the
    reference each state and the other (or the question) does not support, as (answer
    anchor, reference anchor, the answer's sentence); None when spaCy is unavailable."""
    try:
        from assay.text.anchors import build_evidence, check_anchors, extract_anchors

        nlp = res.nlp
    except Exception:  # spaCy or its pipeline missing: no anchor comparison
        return None
    unique = list(dict.fromkeys(t for triple in triples for t in triple if t))
    docs = dict(zip(unique, nlp.pipe(unique, batch_size=64), strict=True))
    out = []
    for question, answer, reference in triples:
        if not answer or not reference:
            out.append([])
            continue
        q = [docs[question]] if question else []
        unsupported = []
        for text, other in ((answer, reference), (reference, answer)):
            anchors = extract_anchors(docs[text], _CONFLICT_KINDS)
            flags = check_anchors(anchors, build_evidence([docs[other], *q]))
            unsupported.append([a for a, ok in zip(anchors, flags, strict=True) if not ok])
        out.append(
            [
                (a.text, r.text, a.sentence)
                for a in unsupported[0]
                for r in unsupported[1]
                if a.kind == r.kind
            ]
        )
    return out


def _agreement_units(
    questions: Sequence[str | None], answers: Sequence[str], references: Sequence[str]
) -> tuple[list[list[str]], list[list[str]], list[str | None]]:
    """Per answer: its sentences, the same without the question's content words; per
    reference: it without them (None without a question)."""
    units = [_split(a) if a.strip() else [] for a in answers]
    trimmed = [
        [_without_question_words(u, q) for u in per] if q else []
        for q, per in zip(questions, units, strict=True)
    ]
    trimmed_refs = [
        _without_question_words(r, q) if q else None
        for q, r in zip(questions, references, strict=True)
    ]
    return units, trimmed, trimmed_refs


def reference_agreement_texts(
    questions: Sequence[str | None], answers: Sequence[str], references: Sequence[str]
) -> list[str]:
    """The texts `reference_agreement` compares: answers, references, the answers'
    sentences, and those and the references without the question's content words."""
    units, trimmed, trimmed_refs = _agreement_units(questions, answers, references)
    return _non_blank(
        [
            *answers,
            *references,
            *(u for per in units for u in per),
            *(t for per in trimmed for t in per),
            *(t for t in trimmed_refs if t),
        ]
    )


def reference_agreement(
    res: Resources,
    vectors: Vectors,
    questions: Sequence[str | None],
    answers: Sequence[str],
    references: Sequence[str],
    *,
    use_anchors: bool = True,
) -> list[Agreement]:
    """Agreement of ``answers[i]`` with ``references[i]``, 0..1, from the ``vectors`` of
    `reference_agreement_texts` (``res``: spaCy, for the anchor conflicts).

    Formula, per sentence of the answer (the score is the best sentence's: the answer
    agrees when one of its sentences states what the reference says; what else it says is
    for faithfulness and completeness to judge). Each signal is independent and
    contradiction cues multiply; nothing is fitted:

    1. similarity ``s``: cosine of the sentence and the reference after removing the
       question's content words from both, clipped to 0..1, so only what each adds to the
       question is compared ("The Arabian Desert is the largest desert" vs "The Antarctic
       Desert is the largest desert" compare "the arabian is the" with "the antarctic is
       the"). Without a question, or when nothing of one side is left, the full-text cosine.
    2. each contradiction cue halves ``s``: a negation mismatch (exactly one side has a
       negation cue: not, no, never, nothing, n't, ...; ignored when either side is
       hedged with may/might/could/would/should/probably/..., since a hedged claim does
       not assert the opposite of a negation); an anchor conflict (the sentence and the
       reference each state a number, date or entity of the same kind that the other
       side and the question do not support: "Alabama produces the most peaches" vs
       "California ..."; needs spaCy, skipped without it); yes/no disagreement (the
       answer starts with "yes" and the reference with "no", or the reverse).
    3. yes/no agreement (both start with the same yes/no) halves the distance to 1.
    4. an answer and a reference that both decline to answer (`uncertainty_phrase`,
       e.g. "I have no comment" against "I have no comment") agree: 1.

    A non-committal answer against a substantive reference is scored like any answer
    (low: it adds nothing the reference says); callers label it DON'T KNOW separately.
    Weaknesses: embeddings measure topic and phrasing, not truth, so a misconception
    worded like the reference scores high unless a cue catches it; negation is a cue
    count, not a parse (a negation in a subordinate clause counts); hedging switches the
    polarity check off for wrong hedged answers too; an anchor conflict fires on a correct
    answer that names a more specific place or person ("Hawaii" for "the U.S."); taking
    the best sentence ignores a later sentence that contradicts it; a correct answer that
    rejects the question's premise in other words ("the question is wrong") scores low.
    """
    units, trimmed, trimmed_refs = _agreement_units(questions, answers, references)
    conflicts = (
        _anchor_conflicts(res, list(zip(questions, answers, references, strict=True)))
        if use_anchors
        else None
    )
    out = []
    for i, (answer, reference) in enumerate(zip(answers, references, strict=True)):
        found = None if conflicts is None else [(a, r) for a, r, _ in conflicts[i]]
        if uncertainty_phrase(answer) and uncertainty_phrase(reference):
            out.append(Agreement(1.0, 1.0, None, False, 0, found, noncommittal=True))
            continue
        a, r = vectors.get(answer), vectors.get(reference)
        if a is None or r is None:
            out.append(Agreement(0.0, 0.0, None, False, 0, found))
            continue
        yes_no = _yes_no(answer) * _yes_no(reference)
        ref_negated, ref_hedged = _negated(reference), _hedged(reference)
        tr = vectors.get(trimmed_refs[i] or "")
        best: Agreement | None = None
        for j, unit in enumerate(units[i]):
            ta = vectors.get(trimmed[i][j]) if trimmed[i] else None
            content = float(ta @ tr) if ta is not None and tr is not None else None
            if content is None:
                u = vectors.get(unit)
                similarity = float(u @ r) if u is not None else 0.0
            else:
                similarity = content
            score = float(np.clip(similarity, 0.0, 1.0))
            hedged = ref_hedged or _hedged(unit)
            mismatch = _negated(unit) != ref_negated and not hedged
            clash = conflicts is not None and any(
                s and (s in unit or unit in s) for _, _, s in conflicts[i]
            )
            for cue in (mismatch, clash, yes_no < 0):
                if cue:
                    score *= _CUE_FACTOR
            if yes_no > 0:
                score = 1.0 - (1.0 - score) * _CUE_FACTOR
            if best is None or score > best.score:
                best = Agreement(score, float(a @ r), content, mismatch, yes_no, found, hedged)
        out.append(best or Agreement(0.0, float(a @ r), None, False, yes_no, found))
    return out


# ---- contexts and questions ----------------------------------------------------------------


def _context_units(contexts: Sequence[Sequence[str]]) -> list[list[list[str]]]:
    """Per sample, per context: the context and its sentences."""
    return [[[c.strip(), *_split(c)] for c in ctxs] for ctxs in contexts]


def context_similarity_texts(
    questions: Sequence[str],
    contexts: Sequence[Sequence[str]],
    references: Sequence[str | None] | None = None,
) -> list[str]:
    """The texts `context_similarity` compares: questions, references, the contexts and
    their sentences."""
    units = _context_units(contexts)
    return _non_blank(
        [
            *questions,
            *(references or []),
            *(u for per in units for ctx in per for u in ctx),
        ]
    )


def context_similarity(
    vectors: Vectors,
    questions: Sequence[str],
    contexts: Sequence[Sequence[str]],
    references: Sequence[str | None] | None = None,
) -> list[list[float]]:
    """Per context, the best cosine of the question (or the reference, when given) with
    the context or any of its sentences, clipped to [0, 1], from the ``vectors`` of
    `context_similarity_texts`."""
    refs = list(references) if references is not None else [None] * len(questions)
    units = _context_units(contexts)
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


def question_answer_texts(questions: Sequence[str], answers: Sequence[str]) -> list[str]:
    """The texts `question_answer_cosine` compares."""
    return _non_blank([*questions, *answers])


def question_answer_cosine(
    vectors: Vectors, questions: Sequence[str], answers: Sequence[str]
) -> list[float]:
    """Cosine of question and answer, clipped to [0, 1] (0 when either is blank), from
    the ``vectors`` of `question_answer_texts`."""
    out = []
    for question, answer in zip(questions, answers, strict=True):
        q, a = vectors.get(question), vectors.get(answer)
        cosine = float(np.einsum("i,i->", q, a)) if q is not None and a is not None else 0.0
        out.append(float(np.clip(cosine, 0.0, 1.0)))
    return out
