"""Offline estimators of the judged metrics (used when no judge is configured).

Each function works on a batch (the vectors of its texts given, see below) and returns
plain numbers plus the evidence they came from. They are *estimators*: cheaper,
weaker stand-ins for a judge, named in each result's ``details["estimator"]``:

- `sentence_support` ("sentence_support"): how well each sentence of a text is supported
  by evidence passages: the mean of its best embedding cosine against the passages and
  the `EMBEDDED_SENTENCES` (1) passage sentence sharing the most words with it (not every
  sentence of a long context: that costs more embeddings than it tells) and the share of
  its content words found in the evidence, scaled by the
  share of its anchors (numbers, dates, entities, asserted subject-verb-object claims,
  from `assay.text.anchors`) the evidence supports. Faithfulness, hallucination and
  context recall use it. Measured on BEGIN (Wizard-of-Wikipedia dev, 430 responses):
  AUROC 0.92 for "fully attributable" vs not (benchmarks/validity.py).
  With ``support_estimator = "head"`` and the embedder the learned support head was
  trained with, the score is the head's calibrated probability instead ("support_head";
  spaCy's anchors are not checked: the head reads none, and the text's new names and
  numbers are listed; `assay.models.support_head`: a logistic model over the sentence
  rows above plus copy, new-word, new-bigram, name and number features; nested grouped
  CV AUROC BEGIN 0.926, QAGS CNN/DM 0.839 against 0.917 and 0.775 for the graded score,
  but fitted on one and scored on the other 0.894 and 0.745: not the default).
  Weaknesses: it rewards copying; a fluent paraphrase with few shared words scores
  lower than it should; a sentence can share every word with the context and still
  invert its meaning (the anchors catch negated claims and wrong numbers, not swapped
  roles); pronouns are not resolved.
- `reference_agreement` ("reference_agreement" or "agreement_head"): agreement of an
  answer with a reference answer; in `assay.estimators.agreement`.
- `context_similarity` ("context_similarity"): how relevant each context is to the
  question (and reference answer, when given): the best cosine of the question (or the
  reference) with the context or its `CONTEXT_SENTENCES` (1) sentence sharing the most
  words with the question (or reference). Weakness: topical similarity,
  not usefulness: a passage on the right subject without the needed fact passes.
- `question_answer_cosine`: cosine of question and answer; 0 for a non-committal
  answer. Weakness: an answer that restates the question scores high without answering.
- `uncertainty_phrase`: the RAG specification "don't know" phrases (a substring test).

The estimators embed nothing themselves: each ``*_texts`` function lists the texts an
estimator compares (the non-blank ones), the judged metrics plan them as embed asks
(`assay.engine.embed_ask`, executed with every other ask of the chunk, one embedding per
distinct text), and the estimator reads their vectors from a mapping text -> vector (a
text missing from it is blank: it has no vector). The spaCy parses the anchors are read
from come the same way: parse asks (`assay.engine.parse_ask`) of the texts
`assay.text.anchors.anchor_texts` lists, passed in as a mapping text -> ``Doc``.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from assay.models.support_head import (
    closest_sentences,
    new_terms,
    support_features,
)
from assay.text.tokenize import content_words, sentences, words

if TYPE_CHECKING:
    from assay.engine.resources import Resources
    from assay.models.support_head import SupportHead

__all__ = [
    "CONTEXT_RELEVANCE_THRESHOLD",
    "CONTEXT_SENTENCES",
    "EMBEDDED_SENTENCES",
    "SUPPORT_THRESHOLD",
    "UNCERTAINTY_PHRASES",
    "Support",
    "Vectors",
    "context_similarity",
    "context_similarity_texts",
    "distinct_texts",
    "fitting_support_head",
    "question_answer_cosine",
    "question_answer_texts",
    "sentence_support",
    "sentence_support_texts",
    "sentence_units",
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
        score: the support head's calibrated probability that the text is fully supported
            (``estimator`` "support_head"), or, where the head does not apply (another
            embedder than the one it was trained with), the graded support: mean sentence
            support times the anchor factor ``0.5 + 0.5 * anchor_rate`` ("sentence_support").
        estimator: which of the two ``score`` is.
        graded: the graded support (either way).
        head_features: the head's features by name (None without the head).
        new_terms: with the head, the text's names and numbers the evidence lacks (the
            anchors are checked only for the graded support: the head reads none).
        decision_threshold: with the head, its threshold on ``score`` (chosen on the dev
            data: balanced accuracy on out-of-fold probabilities), the pass threshold of
            the metrics reading it; None for the graded support, which has none.
        sentences: per sentence: text, semantic (best cosine), lexical (word share),
            support (their mean), supported (support >= threshold and no unsupported
            anchor in it; with the head: no name or number the evidence lacks).
        anchors, anchors_supported: anchor counts (None when spaCy was unavailable).
        unsupported_anchors: the anchors the evidence does not support.
        out_of_domain: for a learned estimator that can tell, why its input lies outside
            what it was trained on (empty: inside; None: the estimator does not tell).
        entailed: the entailment support, when ``score`` combines it with the graded one.
    """

    score: float
    sentences: list[dict[str, Any]]
    anchors: int | None
    anchors_supported: int | None
    unsupported_anchors: list[dict[str, Any]] = field(default_factory=list)
    estimator: str = "sentence_support"
    graded: float | None = None
    head_features: dict[str, float] | None = None
    new_terms: list[str] | None = None
    decision_threshold: float | None = None
    out_of_domain: list[str] | None = None
    entailed: float | None = None

    @property
    def supported_sentences(self) -> int:
        return sum(1 for s in self.sentences if s["supported"])

    def details(self) -> dict[str, Any]:
        head = (
            {}
            if self.head_features is None
            else {
                "graded_support": self.graded,
                "head_features": self.head_features,
                "new_terms": self.new_terms,
            }
        )
        if self.entailed is not None:
            head = {"graded_support": self.graded, "entailment_support": self.entailed}
        domain = (
            {}
            if self.out_of_domain is None
            else {"in_domain": not self.out_of_domain, "out_of_domain": self.out_of_domain}
        )
        return {
            **head,
            **domain,
            "sentences": self.sentences,
            "anchors": self.anchors,
            "anchors_supported": self.anchors_supported,
            "unsupported_anchors": self.unsupported_anchors,
        }


def sentence_units(text: str) -> list[str]:
    """The sentences of ``text``; the whole stripped text when it has no sentence end."""
    return sentences(text) or ([text.strip()] if text.strip() else [])


def distinct_texts(texts: Iterable[str | None]) -> list[str]:
    """The distinct texts worth embedding, in order (blank ones embed as zeros: left out)."""
    return list(dict.fromkeys(t for t in texts if t and t.strip()))


def _anchor_checks(
    docs: Mapping[str, Any], texts: Sequence[str], evidence: Sequence[Sequence[str]]
) -> list[tuple[list[Any], list[bool]]]:
    """Per text: its anchors and whether its evidence supports each, from the parses (each
    passage's evidence built once for all the `Parses` of one chunk's answers: another
    metric reading another text against the same passages reuses it)."""
    from assay.text.anchors import analyse, check_anchors

    return [
        (anchors, check_anchors(anchors, evidence_))
        for anchors, evidence_ in analyse(docs, list(texts), [list(e) for e in evidence])
    ]


def fitting_support_head(res: Resources) -> SupportHead | None:
    """The support head when the run asks for it (``support_estimator = "head"``) and it
    was trained on the run's embedder's cosines (it scores `sentence_support`), else None
    (the graded support scores, with spaCy's anchors). The graded score is the default:
    fitted on one source and scored on the other, the head lost to it on both (BEGIN
    0.894 against 0.917, QAGS CNN/DM 0.745 against 0.775), and it lost on paraphrasing
    answers held out of Assay (docs/validity.md)."""
    if res.config.support_estimator != "head":
        return None
    head = res.support_head
    return head if head.fits(res.embedder.name) else None


def _closest_units(probes: Sequence[str], passages: Sequence[str], k: int) -> list[str]:
    """The sentences of ``passages`` among the ``k`` sharing the most words with any of the
    ``probes`` (`closest_sentences`), in passage order."""
    return list(_closest_units_of(tuple(probes), tuple(passages), k))


@functools.lru_cache(maxsize=8192)
def _closest_units_of(
    probes: tuple[str, ...], passages: tuple[str, ...], k: int
) -> tuple[str, ...]:
    """`_closest_units`, remembered: every metric planning the same sample asks again."""
    candidates = [s for p in passages for s in sentence_units(p)]
    tokens = [words(c) for c in candidates]
    chosen = {j for probe in probes for j in closest_sentences(words(probe), tokens, k)}
    return tuple(candidates[j] for j in sorted(chosen))


#: passage sentences a text sentence is compared with by cosine (those sharing the most
#: words with it); the support head's copy features read `LOCAL_SENTENCES` of them
EMBEDDED_SENTENCES = 1


def _evidence_units(text: str, passages: Sequence[str]) -> list[str]:
    """The units the sentences of ``text`` are compared with: the passages themselves
    and, for each sentence, the `EMBEDDED_SENTENCES` passage sentence(s) sharing the most
    words with it. Embedding every sentence of long contexts costs more than it tells: the
    sentence that supports a claim shares its words."""
    kept = [p.strip() for p in passages if p and p.strip()]
    closest = _closest_units(sentence_units(text), kept, EMBEDDED_SENTENCES)
    return distinct_texts([*kept, *closest])


def sentence_support_texts(texts: Sequence[str], evidence: Sequence[Sequence[str]]) -> list[str]:
    """The texts `sentence_support` compares: the sentences of ``texts`` and their
    evidence units."""
    return distinct_texts(
        [
            *(s for t in texts for s in sentence_units(t)),
            *(
                u
                for t, passages in zip(texts, evidence, strict=True)
                for u in _evidence_units(t, passages)
            ),
        ]
    )


def sentence_support(
    res: Resources,
    vectors: Vectors,
    texts: Sequence[str],
    evidence: Sequence[Sequence[str]],
    *,
    docs: Mapping[str, Any] | None = None,
    threshold: float = SUPPORT_THRESHOLD,
    use_head: bool = True,
) -> list[Support]:
    """Support of each ``texts[i]`` by the passages ``evidence[i]`` (see module doc), from
    the ``vectors`` of `sentence_support_texts`; ``use_head``: the score is the support
    head's probability where the head fits the run's embedder (`fitting_support_head`),
    else the graded support, which checks the anchors in ``docs`` (the spaCy parses of
    `assay.text.anchors.anchor_texts` of the texts and evidence; None: no anchors)."""
    if len(texts) != len(evidence):
        raise ValueError(f"{len(texts)} texts but {len(evidence)} evidence lists")
    text_sents = [sentence_units(t) for t in texts]
    ev_units = [_evidence_units(t, p) for t, p in zip(texts, evidence, strict=True)]
    head = fitting_support_head(res) if use_head else None
    # the head reads no anchor: the parses serve the graded support only
    checks = _anchor_checks(docs, texts, evidence) if docs is not None and head is None else None
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
            if head is None:  # an anchor the evidence does not support
                has_bad = any(b and (b in sent or sent in b) for b in bad_sentences)
            else:  # a name or number the evidence lacks
                has_bad = bool(new_terms(sent, evidence[i]))
            rows.append(
                {
                    "text": sent,
                    "semantic": round(semantic, 4),
                    "lexical": round(lexical, 4),
                    "support": round(support, 4),
                    "unsupported_anchor": has_bad,
                    "supported": support >= threshold and not has_bad,
                }
            )
        mean_support = sum(r["support"] for r in rows) / len(rows) if rows else 1.0
        if checks is None:
            factor, n_anchors, n_ok = 1.0, None, None
        else:
            n_anchors, n_ok = len(anchors), sum(flags)
            factor = 0.5 + 0.5 * (n_ok / n_anchors) if n_anchors else 1.0
        graded = float(np.clip(mean_support * factor, 0.0, 1.0))
        features, terms = None, None
        if head is not None:
            values = support_features(texts[i], evidence[i], rows)
            features = head.named(values)
            terms = new_terms(texts[i], evidence[i])
        out.append(
            Support(
                score=graded if head is None else float(head.probability(values)[0]),
                estimator="sentence_support" if head is None else "support_head",
                graded=graded,
                head_features=features,
                new_terms=terms,
                decision_threshold=None if head is None else round(head.threshold, 4),
                sentences=rows,
                anchors=n_anchors,
                anchors_supported=n_ok,
                unsupported_anchors=[
                    a.to_dict() for a, ok in zip(anchors, flags, strict=True) if not ok
                ],
            )
        )
    return out


# ---- contexts and questions ----------------------------------------------------------------


#: sentences of a context compared with the question (those sharing the most words with it)
CONTEXT_SENTENCES = 1


def _context_units(
    contexts: Sequence[Sequence[str]], probes: Sequence[Sequence[str | None]]
) -> list[list[list[str]]]:
    """Per sample, per context: the context and its `CONTEXT_SENTENCES` sentences sharing
    the most words with the sample's probes (question, reference)."""
    return [
        [
            [c.strip(), *_closest_units([p for p in probe if p], [c], CONTEXT_SENTENCES)]
            for c in ctxs
        ]
        for ctxs, probe in zip(contexts, probes, strict=True)
    ]


def context_similarity_texts(
    questions: Sequence[str],
    contexts: Sequence[Sequence[str]],
    references: Sequence[str | None] | None = None,
) -> list[str]:
    """The texts `context_similarity` compares: questions, references, the contexts and
    their sentences closest to the question or reference."""
    refs = list(references) if references is not None else [None] * len(questions)
    units = _context_units(contexts, list(zip(questions, refs, strict=True)))
    return distinct_texts(
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
    the context or one of its `CONTEXT_SENTENCES` sentences sharing the most words with
    them, clipped to [0, 1], from the ``vectors`` of `context_similarity_texts`."""
    refs = list(references) if references is not None else [None] * len(questions)
    units = _context_units(contexts, list(zip(questions, refs, strict=True)))
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
    return distinct_texts([*questions, *answers])


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
