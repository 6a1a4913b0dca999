"""Offline questions: extractive wh-questions from spaCy's parse of the documents.

With no judge, `facts` reads each chunk's prose (headings, code blocks, tables and list
markers left out) parsed by the shipped spaCy pipeline (``en_core_web_sm``) and turns
sentences into questions whose reference answer is the sentence itself:

- **Entity questions**: a named entity, number or date of the sentence is the answer
  and is replaced by a wh-phrase of its type (`WH_IN_PLACE`): a person ``who``, a
  place after *in*/*at* ``where``, a date after *in*/*on*/*during* ``when``, a count
  before a plural noun ``how many``, an amount ``how much``, a percentage ``what
  percentage``; names of other types plain ``what`` (the small model's ORG and PRODUCT
  labels are often wrong, and ``what`` fits them all). An entity that is the sentence's whole
  subject opens the question instead (``Marie Curie discovered radium.`` → ``Who
  discovered radium?``; `WH_SUBJECT`); otherwise it is replaced where it stands (``The
  library has 300 contributors.`` → ``The library has how many contributors?``).
- **Subject questions**: a sentence whose subject is a short noun phrase (no pronoun)
  gives ``What <predicate>?`` with the subject as the answer.
- **Object questions**: a main verb's short noun-phrase object, or the object of its
  preposition, is the answer: ``The parser reads the file in one pass.`` → ``What does
  the parser read in one pass?``; ``Customers restore a backup from the Settings page.``
  → ``What do customers restore a backup from?`` (the first auxiliary opens the
  question where the verb has one: ``What can ...``). Instructions give them too:
  ``Install the package with pip.`` → ``What should you install with pip?``; ``You can
  set the proxy in the config file.`` → ``What can you set in the config file?``.

Inline Markdown (links, code and emphasis marks) is removed first. A sentence is used
when it has 6 to 50 words, starts with a capital letter (or a lower-case name as its
subject: ``orjson serializes ...``), ends with a full stop, has a verb
with a subject as its root, balanced brackets and none of the marks of code or formulas
(``< > { } [ ] | = \\ ^ .. --``), and does not open with a pronoun (``It``, ``This``,
``They``: whom it names is in another sentence). A question that still contains its
answer is dropped.

From these facts the other offline kinds are composed (`multi_question`,
`conversation`, `unanswerable_question`): two facts of different chunks sharing a named
entity, two facts of one chunk as a question and its follow-up, and a fact whose named
entity is swapped for another of the same type from the documents where no sentence of
the documents holds the result. Comparison and reasoning questions need a judge.

Weaknesses: the questions keep the sentence's wording (a retriever matching words finds
them easily), an in-place question reads as an echo question, and spaCy's small model
mislabels some entities (a version number as a date); the filters (`assay.generation.
filters`) remove a question whose reference its contexts do not entail or whose answer
it gives away.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from assay.generation.documents import Chunk
from assay.generation.wording import front, fronted_count, fronted_entity, opening
from assay.text.tokenize import STOP_WORDS, content_words

__all__ = [
    "LINKABLE",
    "WH_IN_PLACE",
    "WH_SUBJECT",
    "Fact",
    "conversation",
    "facts",
    "multi_question",
    "prose",
    "unanswerable_question",
]

#: the wh-phrase that replaces an entity of each label where it stands
WH_IN_PLACE: dict[str, str] = {
    "PERSON": "who",
    "ORG": "what",
    "GPE": "what place",
    "LOC": "what place",
    "FAC": "what",
    "PRODUCT": "what",
    "EVENT": "what event",
    "WORK_OF_ART": "what",
    "LAW": "what",
    "LANGUAGE": "which language",
    "NORP": "what",
    "DATE": "when",
    "TIME": "what time",
    "CARDINAL": "how many",
    "QUANTITY": "how much",
    "MONEY": "how much",
    "PERCENT": "what percentage",
}
#: the wh-word that opens a question whose answer is the sentence's whole subject
WH_SUBJECT: dict[str, str] = {
    "PERSON": "Who",
    "ORG": "What",
    "GPE": "What place",
    "LOC": "What place",
    "FAC": "What",
    "PRODUCT": "What",
    "EVENT": "What event",
    "WORK_OF_ART": "What",
    "LAW": "What",
    "NORP": "What",
    "NOUN": "What",
}
#: entity labels that link two chunks (a name, not a number or a date)
LINKABLE = frozenset(
    {"PERSON", "ORG", "GPE", "LOC", "FAC", "PRODUCT", "EVENT", "WORK_OF_ART", "LAW", "NORP"}
)
_PLACE_PREPOSITIONS = frozenset({"in", "at"})
_ARTICLES = frozenset({"a", "an", "the"})
_TIME_PREPOSITIONS = frozenset({"in", "on", "during"})
_OPENING_PRONOUNS = frozenset(
    {"it", "this", "that", "these", "those", "they", "he", "she", "we", "you", "i", "its", "their"}
)
_CODE_FENCE = re.compile(r"^(```|~~~).*?^(```|~~~)[^\n]*$", re.S | re.M)
_LIST_MARK = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_MARKUP = re.compile(r"`+|(?<!\w)[*_]{1,3}(?=\w)|(?<=[\w.)])[*_]{1,3}(?!\w)")
#: characters that mark a sentence as code, a formula or a list rather than prose
_NOT_PROSE = re.compile(r"[<>{}\[\]|=\\^]|\.\.|--")
#: determiners that make a subject a quantifier ("No input", "Every request"), no answer
_QUANTIFIERS = frozenset({"no", "every", "each", "all", "any", "some", "both", "either", "neither"})
_MIN_QUESTION_WORDS = 4
_YEAR = re.compile(r"^(?:in |on )?(1[5-9]\d\d|20\d\d)$")
#: a duration of one count ("30 days", "10 business days"): the count is asked for
_DURATION = re.compile(
    r"(\d+)\s+(?:business\s+|working\s+|calendar\s+)?"
    r"(?:minutes?|hours?|days?|weeks?|months?|years?)"
)
#: a span of time with its unit ("5 to 8 business days", "24 hours a day"): how long
_SPAN_OF_TIME = re.compile(r"\b(?:minutes?|hours?|days?|weeks?|months?|years?)\b")
_MIN_WORDS, _MAX_WORDS = 6, 50
#: an answer span: words, digits, spaces and the marks of names, amounts and dates
_NAME = re.compile(r"^[\w$€£%&'., -]+$")
#: dependency labels of a name that modifies a noun rather than standing for itself
_MODIFIERS = frozenset({"compound", "amod", "nmod", "poss"})


@dataclass(frozen=True)
class Fact:
    """A question one sentence answers.

    Attributes:
        chunk: the chunk the sentence is in.
        sentence: the sentence: the reference answer.
        answer: the span of the sentence the question asks for.
        label: the answer's entity label (``NOUN`` for a subject noun phrase).
        question: the question.
        links: the named entities (lower-cased text, label, text) the question keeps.
        proper_start: the question opens with a proper noun (kept capitalised after a
            comma).
    """

    chunk: Chunk
    sentence: str
    answer: str
    label: str
    question: str
    links: tuple[tuple[str, str, str], ...]
    proper_start: bool = False

    @property
    def question_lowered(self) -> str:
        """The question to follow a comma: its first letter lower-cased unless it opens
        with a name."""
        if self.proper_start:
            return self.question
        return self.question[0].lower() + self.question[1:]


def prose(text: str) -> str:
    """The prose of a chunk: headings, fenced code, table rows and list markers removed,
    one paragraph a line."""
    text = _CODE_FENCE.sub("\n", text)
    lines = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or stripped.count("|") >= 2:
            lines.append("")
            continue
        lines.append(_MARKUP.sub("", _LINK.sub(r"\1", _LIST_MARK.sub("", stripped))))
    paragraphs = re.split(r"\n\s*\n", "\n".join(lines))
    return "\n".join(" ".join(p.split()) for p in paragraphs if p.strip())


def _usable(sent: Any) -> bool:
    text = sent.text.strip()
    n_words = sum(1 for t in sent if not t.is_punct)
    if not (_MIN_WORDS <= n_words <= _MAX_WORDS) or not text.endswith("."):
        return False
    first = sent[0]
    if not (text[0].isupper() or _lower_case_name(sent)):
        return False
    if first.lower_ in _OPENING_PRONOUNS or _NOT_PROSE.search(text):
        return False
    if text.count("(") != text.count(")"):
        return False
    root = sent.root
    return root.pos_ in {"VERB", "AUX"} and any(
        t.dep_ in {"nsubj", "nsubjpass"} for t in root.children
    )


def _lower_case_name(sent: Any) -> bool:
    """A sentence that opens with a lower-case name as (part of) its subject (``orjson
    serializes dataclasses.``, ``spaCy comes with a test suite.``): one word, not an
    English stop word, of letters, digits and ``_``, whose token is a subject or a
    compound of one."""
    first = sent[0]
    return (
        first.text[0].islower()
        and first.lower_ not in STOP_WORDS
        and re.fullmatch(r"[a-z][A-Za-z0-9_]*", first.text) is not None
        and (
            first.dep_ in {"nsubj", "nsubjpass"}
            or (first.dep_ == "compound" and first.head.dep_ in {"nsubj", "nsubjpass"})
        )
    )


def _question(sent: Any, start: int, end: int, wh: str) -> str:
    """The sentence with the characters [start, end) (sentence offsets) replaced by ``wh``,
    ending with a question mark."""
    text = sent.text.strip()
    out = text[:start] + wh + text[end:]
    out = out.rstrip(" .!;:") + "?"
    return out[0].upper() + out[1:] if start == 0 else out  # "orjson ..." keeps its case


def _entity_question(sent: Any, ent: Any) -> str | None:
    """The question asking for ``ent`` in ``sent``, or None when its type has none."""
    label = ent.label_
    base = sent.start_char
    start, end = ent.start_char - base, ent.end_char - base
    subject = _whole_subject(sent, ent)
    if subject and label in WH_SUBJECT:
        wh = WH_SUBJECT[label]
        return _question(sent, start, end, wh if start == 0 else wh.lower())
    wh = WH_IN_PLACE.get(label)
    if wh is None or ent.root.dep_ in _MODIFIERS:
        return None  # "the Acme library": a name inside a noun phrase asks nothing
    if label == "MONEY" and start > 0 and sent.text[start - 1] in "$€£¥₹":
        start -= 1  # "$25" whose entity is "25": the symbol goes with the amount asked
    before = sent.doc[ent.start - 1] if ent.start > sent.start else None
    if before is not None and before.dep_ == "compound" and ent.start <= before.head.i < ent.end:
        return None  # "Ana Ferreira" read as "Ana" + a place: half a name asks nothing
    if before is not None and before.lower_ in _ARTICLES:  # "the what" -> "what"
        start = before.idx - base
        before = sent.doc[before.i - 1] if before.i > sent.start else None
    prep = None  # the preposition the wh-word takes in ("in 2021" -> "when")
    after = sent.doc[ent.end] if ent.end < sent.end else None
    if label == "DATE":
        if not any(c.isdigit() for c in ent.text):
            return None  # "today", "every week": nothing to ask
        count = _DURATION.fullmatch(ent.text)
        if count is not None:  # "within 30 days" -> "within how many days"
            fronted = fronted_count(sent, ent, before) if before is not None else None
            return fronted or _question(sent, start, start + count.end(1), "how many")
        if _SPAN_OF_TIME.search(ent.text):  # "5 to 8 business days" -> "how long"
            return _question(sent, start, end, "how long")
        if before is not None and before.lower_ in _TIME_PREPOSITIONS:
            start, prep = before.idx - base, before
        else:
            wh = "which year" if _YEAR.match(ent.text) else "what date"
    elif label in {"GPE", "LOC"} and before is not None and before.lower_ in _PLACE_PREPOSITIONS:
        start, wh, prep = before.idx - base, "where", before
    elif label == "CARDINAL":
        if after is None or after.tag_ != "NNS":
            return None  # "in one pass", "exit code 2": not a count to ask
        wh = "how many"
    elif label == "PERSON" and ent.root.dep_ in {"dobj", "pobj", "dative"}:
        wh = "whom"
    return fronted_entity(sent, ent, wh, prep) or _question(sent, start, end, wh)


def _whole_subject(sent: Any, span: Any) -> bool:
    """Whether ``span`` is the whole subject of the sentence's main verb, at its start or
    after an `_opening`."""
    if opening(sent, span.start) is None:
        return False
    root = span.root
    if root.dep_ not in {"nsubj", "nsubjpass"} or root.head.dep_ != "ROOT":
        return False
    subtree = list(root.subtree)
    return subtree[0].i == span.start and subtree[-1].i == span.end - 1


def _fits(question: str, answer: str) -> bool:
    """A question of at least `_MIN_QUESTION_WORDS` words that does not hold its answer."""
    return len(question.split()) >= _MIN_QUESTION_WORDS and answer.lower() not in question.lower()


def _links(sent: Any, skip: Any | None) -> tuple[tuple[str, str, str], ...]:
    return tuple(
        (ent.text.lower(), ent.label_, ent.text)
        for ent in sent.ents
        if ent.label_ in LINKABLE and (skip is None or ent.start != skip.start)
    )


def _instruction(sent: Any) -> bool:
    """An instruction to the reader: an imperative (``Install the package with pip.``) or
    a sentence whose subject is *you* (``You can set the proxy in the config file.``),
    with the shape of `_usable` otherwise."""
    text = sent.text.strip()
    n_words = sum(1 for t in sent if not t.is_punct)
    if not (_MIN_WORDS <= n_words <= _MAX_WORDS) or not text.endswith("."):
        return False
    if not text[0].isupper() or _NOT_PROSE.search(text) or text.count("(") != text.count(")"):
        return False
    root = sent.root
    subjects = [t for t in root.children if t.dep_ in {"nsubj", "nsubjpass"}]
    if not subjects:  # an imperative, at the start or after an opening phrase
        return root.tag_ == "VB" and root.pos_ == "VERB" and opening(sent, root.i) is not None
    first = subjects[0]
    return first.lower_ == "you" and first.i < root.i and opening(sent, first.i) is not None


def _sentence_facts(chunk: Chunk, sent: Any) -> list[Fact]:
    if _instruction(sent):
        return _object_facts(chunk, sent, sent.text.strip())
    if not _usable(sent):
        return []
    text = sent.text.strip()
    out = []
    for ent in sent.ents:
        if not _NAME.match(ent.text):
            continue
        question = _entity_question(sent, ent)
        if question is None or not _fits(question, ent.text):
            continue
        proper = question.split(" ", 1)[0] == sent[0].text and (
            sent[0].pos_ == "PROPN" or text[0].islower()
        )
        out.append(Fact(chunk, text, ent.text, ent.label_, question, _links(sent, ent), proper))
    root = next(t for t in sent if t.dep_ == "ROOT")
    subjects = [t for t in root.children if t.dep_ in {"nsubj", "nsubjpass"}]
    head = subjects[0] if subjects else None
    span = sent.doc[head.left_edge.i : head.right_edge.i + 1] if head is not None else None
    if span is not None and not any(f.answer == span.text for f in out):
        start = span.start_char - sent.start_char
        if (
            opening(sent, span.start) is not None
            and 1 <= len(span) <= 6
            and head.pos_ in {"NOUN", "PROPN"}
            and not any(t.pos_ == "PRON" or t.lower_ in _QUANTIFIERS for t in span)
        ):
            wh = "What" if start == 0 else "what"
            question = _question(sent, start, span.end_char - sent.start_char, wh)
            if _fits(question, span.text):
                out.append(Fact(chunk, text, span.text, "NOUN", question, _links(sent, None)))
    return out + _object_facts(chunk, sent, text)


def _object_facts(chunk: Chunk, sent: Any, text: str) -> list[Fact]:
    """``What does <subject> <verb> <rest>?`` for the main verb's short noun-phrase direct
    object, and ``What does <subject> <verb> <preposition> <rest>?`` for the object of a
    preposition of the main verb (``Customers restore a backup from the Settings page.``
    → ``What do customers restore a backup from?``), the object being the answer; the
    subject must open the sentence or follow an opening phrase. The first auxiliary opens
    the question (``What can the parser read?``), else do-support in the verb's tense
    (`assay.generation.wording.front`)."""
    root, doc = sent.root, sent.doc
    if root.pos_ != "VERB" or any(t.dep_ == "neg" for t in root.children):
        return []
    subjects = [t for t in root.children if t.dep_ == "nsubj" and t.i < root.i]
    subject = None  # an imperative: the question asks what *you* should do
    if subjects:
        subj = subjects[0]
        if subj.pos_ == "PRON" and subj.lower_ != "you":
            return []
        subject = doc[subj.left_edge.i : subj.right_edge.i + 1]
    targets = [(t, None) for t in root.children if t.dep_ == "dobj" and t.i > root.i]
    for prep in root.children:
        if prep.dep_ == "prep" and prep.i > root.i:
            targets += [(t, prep) for t in prep.children if t.dep_ == "pobj"][:1]
    out = []
    for obj, prep in targets:
        answer = doc[obj.left_edge.i : obj.right_edge.i + 1]
        if obj.pos_ not in {"NOUN", "PROPN"} or len(answer) > 8:
            continue
        if any(t.pos_ == "PRON" for t in answer) or obj.ent_type_ in WH_IN_PLACE:
            continue  # a pronoun names nothing; a named entity has its own question
        if prep is not None and (
            answer.start != prep.i + 1 or any(t.text == "," for t in doc[root.i : prep.i])
        ):
            continue  # "from the very first page", ", even on weekends": not to strand
        question = front(sent, subject, "What", (answer.start, answer.end))
        if question is not None and _fits(question, answer.text):
            out.append(Fact(chunk, text, answer.text, "NOUN", question, _links(sent, None)))
    return out


def facts(chunks: Sequence[Chunk], docs: Mapping[str, Any]) -> list[Fact]:
    """Every question the chunks' sentences give (see the module doc), in chunk order;
    ``docs`` holds the spaCy parse of each chunk's `prose`."""
    out: list[Fact] = []
    for chunk in chunks:
        doc = docs.get(prose(chunk.text))
        if doc is None:
            continue
        for sent in doc.sents:
            out += _sentence_facts(chunk, sent)
    return out


def multi_question(first: Fact, second: Fact, link: str) -> dict[str, Any]:
    """A question joining two facts of different chunks that share the entity ``link``:
    both questions in one, both sentences as the reference, both chunks as contexts."""
    return {
        "query": first.question.rstrip("?") + ", and " + second.question_lowered,
        "parts": [first.question, second.question],
        "expected": f"{first.sentence} {second.sentence}",
        "chunks": [first.chunk, second.chunk],
        "answer": [first.answer, second.answer],
        "link": link,
    }


def conversation(first: Fact, follow: Fact) -> dict[str, Any]:
    """A conversation of two user turns about one chunk, the assistant's replies left
    empty for ``assay run`` to fill: the follow-up is the sample's query and its sentence
    the reference."""
    follow_up = "And " + follow.question_lowered
    return {
        "query": follow_up,
        "parts": [follow.question],  # the opener is no row's query: it may be one
        "expected": follow.sentence,
        "chunks": [first.chunk],
        "answer": follow.answer,
        "turns": [
            {"role": "user", "content": first.question},
            {"role": "assistant", "content": None},
            {"role": "user", "content": follow_up},
        ],
        "turn_expected": [first.sentence, follow.sentence],
    }


def _words(text: str) -> frozenset[str]:
    return frozenset(content_words(text))


def unanswerable_question(
    fact: Fact, replacements: Iterable[tuple[str, str]], sentences: Sequence[frozenset[str]]
) -> dict[str, Any] | None:
    """A question close to the documents but not in them: ``fact``'s question with a named
    entity swapped for another of the same label (``replacements``: (label, text) pairs
    from the documents) such that no sentence of the documents (``sentences``: each one's
    content words) holds every content word of the result; None when no swap does."""
    for key, label, text in fact.links:
        if text not in fact.question:
            continue
        for other_label, other in replacements:
            if other_label != label or other.lower() == key or not _NAME.match(other):
                continue  # the same name, or one with the marks of code or versions
            query = fact.question.replace(text, other, 1)
            needed = _words(query) - _words("who what which when where how many much")
            if needed and not any(needed <= words for words in sentences):
                return {
                    "query": query,
                    "chunks": [fact.chunk],
                    "swapped": [text, other],
                    "parts": [fact.question],
                }
    return None
