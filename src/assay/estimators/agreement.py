"""Agreement of an answer with a reference answer: the local estimator of answer correctness.

`reference_agreement` scores an answer against a reference answer for the answer's best
sentence: the cosine of sentence and reference after
removing the question's content words from both (so the shared topic does not count
as agreement), halved by each contradiction cue (a negation on one side only, unless
either side is hedged; a number, date or entity each side states and the other
contradicts; yes/no disagreement), with the distance to 1 halved when both start with
the same yes/no; two non-answers ("I have no comment") agree. Measured on TruthfulQA
(400 questions; each correct vs each incorrect answer against the best answer):
AUROC 0.83 leaving out the 80 answers the RAG specification's rule classifies DON'T KNOW, 0.82
with them as reported, 0.79 with them scored 0 (benchmarks/validity.py; the
question-residual cosine with additive negation and yes/no terms it replaced: 0.78
without them, 0.74 with them scored 0). Where spaCy's anchors are there and the run's
embedder is the one the learned agreement head was trained with, the score is the
head's calibrated probability over this rule score and ten features relating answer
and reference ("agreement_head", `assay.models.agreement_head`; nested grouped CV
AUROC 0.848 against 0.817 for the rule on the same answers).
Weaknesses: embeddings measure topic and phrasing, not truth; TruthfulQA's wrong
answers are popular misconceptions phrased like the truth, which only a cue (negation,
a different name or number) separates; a correct answer worded very differently from
the reference scores low.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from assay.estimators.offline import Vectors, distinct_texts, sentence_units, uncertainty_phrase
from assay.models.support_head import longest_common_subsequence
from assay.text.tokenize import content_words, words

if TYPE_CHECKING:
    from assay.engine.resources import Resources

__all__ = [
    "Agreement",
    "agreement_features",
    "agreement_parse_texts",
    "content_f1",
    "reference_agreement",
    "reference_agreement_texts",
]

_NEGATIONS = frozenset(
    {"not", "no", "never", "nothing", "none", "cannot", "neither", "nor", "nobody", "nowhere"}
)


@dataclass
class Agreement:
    """Agreement of an answer with a reference (see `reference_agreement`).

    Attributes:
        score: the agreement, 0..1: the agreement head's calibrated probability
            (``estimator`` "agreement_head") where it applies, else the rule score.
        estimator: which of the two ``score`` is ("reference_agreement": the rule).
        rule_score: the rule-based agreement (see `reference_agreement`), either way.
        head_features: the head's features by name (None without the head).
        decision_threshold: with the head, its threshold on ``score`` (chosen on the dev
            data); None for the rule score.
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
    estimator: str = "reference_agreement"
    rule_score: float = field(init=False)
    head_features: dict[str, float] | None = None
    decision_threshold: float | None = None

    def __post_init__(self) -> None:
        self.rule_score = self.score

    def details(self) -> dict[str, Any]:
        head = (
            {}
            if self.head_features is None
            else {"rule_score": round(self.rule_score, 4), "head_features": self.head_features}
        )
        return {
            **head,
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


def agreement_parse_texts(triples: Sequence[tuple[str | None, str, str]]) -> list[str]:
    """The texts whose spaCy parses `reference_agreement` reads (its anchor conflicts):
    the distinct non-empty questions, answers and references of the triples."""
    return list(dict.fromkeys(t for triple in triples for t in triple if t))


def _anchor_conflicts(
    docs: Mapping[str, Any], triples: Sequence[tuple[str | None, str, str]]
) -> list[list[tuple[str, str, str]]]:
    """Per (question, answer, reference): anchors of one kind that the answer and the
    reference each state and the other (or the question) does not support, as (answer
    anchor, reference anchor, the answer's sentence), from the parses of
    `agreement_parse_texts`."""
    from assay.text.anchors import build_evidence, check_anchors, extract_anchors
    from assay.text.parses import evidence_doc

    out = []
    for question, answer, reference in triples:
        if not answer or not reference:
            out.append([])
            continue
        q = [evidence_doc(docs, question)] if question else []
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
    units = [sentence_units(a) if a.strip() else [] for a in answers]
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
    return distinct_texts(
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
    docs: Mapping[str, Any] | None = None,
    use_head: bool = True,
) -> list[Agreement]:
    """Agreement of ``answers[i]`` with ``references[i]``, 0..1, from the ``vectors`` of
    `reference_agreement_texts` and the spaCy parses ``docs`` of `agreement_parse_texts`
    (for the anchor conflicts; None: none checked): with ``use_head``, the agreement
    head's probability (`assay.models.agreement_head`, over the rule below and
    word-overlap features) where the head fits the run's embedder and the parses are
    there, else the rule score.

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
        None
        if docs is None
        else _anchor_conflicts(docs, list(zip(questions, answers, references, strict=True)))
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
    if use_head and conflicts is not None and res.agreement_head.fits(res.embedder.name):
        _apply_agreement_head(res, questions, answers, references, out)
    return out


def _apply_agreement_head(
    res: Resources,
    questions: Sequence[str | None],
    answers: Sequence[str],
    references: Sequence[str],
    agreements: list[Agreement],
) -> None:
    """Score each agreement with the agreement head, in place (two non-answers keep their
    rule score of 1)."""
    head = res.agreement_head
    for question, answer, reference, agreement in zip(
        questions, answers, references, agreements, strict=True
    ):
        if agreement.noncommittal:
            continue
        values = agreement_features(question, answer, reference, agreement)
        agreement.head_features = head.named(values)
        agreement.score = float(head.probability(values)[0])
        agreement.estimator = "agreement_head"
        agreement.decision_threshold = head.threshold


def content_f1(answer: str, reference: str) -> float:
    """F1 of the content-word multisets (0 when either side has none)."""
    a, r = Counter(content_words(answer)), Counter(content_words(reference))
    common = sum((a & r).values())
    if not common:
        return 0.0
    precision, recall = common / sum(a.values()), common / sum(r.values())
    return 2 * precision * recall / (precision + recall)


def agreement_features(
    question: str | None, answer: str, reference: str, agreement: Agreement
) -> np.ndarray:
    """The `FEATURES` of one answer against its reference; ``agreement`` is
    `reference_agreement`'s rule-based result for the same pair (with anchors)."""
    answer_words, reference_words = words(answer), words(reference)
    common = longest_common_subsequence(answer_words, reference_words)
    own = set(content_words(answer))
    known = set(content_words(reference)) | set(content_words(question))
    content = agreement.cosine if agreement.content_cosine is None else agreement.content_cosine
    return np.array(
        [
            agreement.rule_score,
            agreement.cosine,
            content,
            float(agreement.negation_mismatch),
            float(agreement.yes_no),
            float(len(agreement.anchor_conflicts or [])),
            content_f1(answer, reference),
            common / len(answer_words) if answer_words else 0.0,
            common / len(reference_words) if reference_words else 0.0,
            len(own - known) / len(own) if own else 0.0,
            math.log1p(len(answer_words)) - math.log1p(len(reference_words)),
        ],
        dtype=np.float64,
    )
