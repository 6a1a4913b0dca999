"""Offline question wording: the wh-phrase moved to the front of a sentence's clause.

`front` turns a declarative sentence parsed by spaCy into a wh-question that opens with
its wh-phrase: the phrase asked for (the *gap*, a span after the main verb) is taken out,
the first auxiliary of the main verb goes before the subject, and a verb with no
auxiliary gets do-support in its tense (``VBD`` → *did*, ``VBZ`` → *does*, ``VBP`` →
*do*) with the verb as its lemma:

- ``The library has 300 contributors.`` → ``How many contributors does the library have?``
- ``Maria Lopez introduced it in 2019.`` → ``When did Maria Lopez introduce it?``
- ``The parser reads the file in one pass.`` → ``What does the parser read in one pass?``
- ``The office is in Porto.`` → ``Where is the office?`` (the copula is its own auxiliary)
- ``Install the package with pip.`` → ``What should you install with pip?`` (an
  imperative asks what *you* should do)

An opening phrase before the subject (`opening`: ``By default,``) stays in front of the
question: ``By default, what does the parser read?``. `fronted_entity` says which named
entities can be fronted; where the shape is not one of these, the caller keeps the
in-place question (``The library has how many contributors?``), which is always
well-formed if less natural.
"""

from __future__ import annotations

from typing import Any

__all__ = ["MAX_OPENING", "front", "fronted_count", "fronted_entity", "opening", "words_of"]

#: the most tokens of an opening phrase kept in front of a question (`opening`)
MAX_OPENING = 10
#: the auxiliary of a question about a verb of this tense with no auxiliary of its own
DO_SUPPORT = {"VBD": "did", "VBZ": "does", "VBP": "do"}
_CURRENCY = frozenset("$€£¥₹")
_ARTICLES = frozenset({"a", "an", "the"})


def words_of(tokens: Any) -> str:
    """The text of a sequence of spaCy tokens, with their own spacing."""
    return "".join(t.text_with_ws for t in tokens).strip()


def opening(sent: Any, index: int) -> str | None:
    """The words of ``sent`` before its token ``index`` when they are an opening phrase
    that a question can keep in front (``By default,`` in ``By default, the parser reads
    the file.``): at most `MAX_OPENING` tokens ending with the only comma among them;
    ``""`` when ``index`` is the sentence's first token; None otherwise."""
    if index == sent.start:
        return ""
    before = sent.doc[sent.start : index]
    commas = [t for t in before if t.text == ","]
    if len(before) > MAX_OPENING or len(commas) != 1 or before[-1].text != ",":
        return None
    return before.text


def _asker(subject: Any, kept_in_front: bool) -> str:
    """The subject as it reads after the auxiliary: lower-cased unless it is a name, a
    lower-case name, or follows an opening phrase."""
    text = subject.text
    if kept_in_front or subject[0].pos_ == "PROPN" or text[0].islower():
        return text
    return text[0].lower() + text[1:]


def front(sent: Any, subject: Any | None, wh: str, gap: tuple[int, int]) -> str | None:
    """The question of ``sent`` asking ``wh`` for the tokens ``gap`` (doc indices
    [start, end), after the main verb), the wh-phrase in front (see the module doc);
    ``subject`` is the main verb's subject span (None: an imperative). None when the
    sentence does not have the shape: no subject or imperative verb after an `opening`,
    a gap before the verb, words other than adverbs between the subject and a verb that
    needs do-support, a gap followed by a comma, semicolon, colon or bracket."""
    root, doc = sent.root, sent.doc
    start, end = gap
    if start <= root.i or (end < sent.end and doc[end].text in {",", ";", ":", "("}):
        return None  # before the verb, or a gap whose comma would be left dangling
    lead = opening(sent, root.i if subject is None else subject.start)
    if lead is None:
        return None
    after = [t for t in doc[root.i : sent.end] if not start <= t.i < end]
    lemma = root.lemma_.lower() + root.whitespace_
    if subject is None:
        if root.tag_ != "VB":
            return None
        parts = [wh, "should you", lemma + words_of(after[1:])]
    else:
        auxes = [
            t for t in root.children if t.dep_ in {"aux", "auxpass"} and subject.end <= t.i < root.i
        ]
        middle = [t for t in doc[subject.end : root.i] if not auxes or t.i != auxes[0].i]
        asker = _asker(subject, bool(lead))
        if auxes:
            parts = [wh, auxes[0].text, asker, words_of([*middle, *after])]
        elif root.pos_ == "AUX" and root.lemma_ == "be" and not middle:
            parts = [wh, root.text, asker, words_of(after[1:])]
        else:
            head = DO_SUPPORT.get(root.tag_)
            if head is None or root.pos_ != "VERB" or any(t.pos_ != "ADV" for t in middle):
                return None
            parts = [wh, head, asker, words_of(middle), lemma + words_of(after[1:])]
    question = " ".join(p.strip() for p in parts if p.strip()).rstrip(" .!;:,") + "?"
    if lead:
        return f"{lead} {question[0].lower()}{question[1:]}"
    return question[0].upper() + question[1:]


def fronted_entity(sent: Any, ent: Any, wh: str, prep: Any | None) -> str | None:
    """`front` for the named entity ``ent`` asked by ``wh`` (``when``, ``where``, ``how
    many``, ``whom``, ...), or None where the in-place question should stay:

    - ``prep`` (the preposition the wh-word took in, ``in 2019`` → ``when``): the
      preposition must be the main verb's and hold only the entity (an article too);
    - otherwise the entity must be the main verb's direct object, whole (a currency
      symbol before it included: ``costs $25`` → ``How much does ... cost``), or a count
      that opens it (``has 300 contributors`` → ``How many contributors does ... have``).

    The main verb must have a subject that is not a pronoun other than *you* (an
    imperative has none) and no negation, and what is left after the verb no comma (a
    clause after a comma would read as part of the question)."""
    root, doc = sent.root, sent.doc
    if prep is not None:
        if prep.head.i != root.i or prep.dep_ != "prep":
            return None
        gap = (prep.i, prep.right_edge.i + 1)
        if gap != (prep.i, ent.end) or any(
            t.lower_ not in _ARTICLES for t in doc[prep.i + 1 : ent.start]
        ):
            return None
        phrase = wh
    else:
        obj = ent.root if ent.root.dep_ == "dobj" else ent.root.head
        if obj.dep_ != "dobj" or obj.head.i != root.i:
            return None
        gap = (obj.left_edge.i, obj.right_edge.i + 1)
        outside = [t for t in doc[gap[0] : gap[1]] if not ent.start <= t.i < ent.end]
        if all(t.text in _CURRENCY or t.lower_ in _ARTICLES for t in outside):  # all of it
            phrase = wh
        elif wh == "how many" and ent.start == gap[0] and ent.root.dep_ == "nummod":
            phrase = f"{wh} {words_of(doc[ent.end : gap[1]])}"
        else:
            return None
    return _front_checked(sent, phrase, gap)


def fronted_count(sent: Any, ent: Any, prep: Any) -> str | None:
    """`front` for a duration of one count after the main verb's preposition, the whole
    prepositional phrase in front with the count asked for (``Returns are accepted within
    30 days of delivery.`` → ``Within how many days of delivery are returns accepted?``);
    None where the in-place question should stay (the checks of `fronted_entity`)."""
    doc = sent.doc
    if prep.head.i != sent.root.i or prep.dep_ != "prep" or ent.start != prep.i + 1:
        return None
    if not doc[ent.start].like_num:
        return None
    gap = (prep.i, prep.right_edge.i + 1)
    phrase = f"{prep.text} how many {words_of(doc[ent.start + 1 : gap[1]])}"
    return _front_checked(sent, phrase, gap)


def _front_checked(sent: Any, phrase: str, gap: tuple[int, int]) -> str | None:
    """`front` when the main verb has a subject that is not a pronoun other than *you*
    (or none: an imperative) and no negation, and what is left after the verb has no
    comma, semicolon or colon; else None."""
    root, doc = sent.root, sent.doc
    if any(t.dep_ == "neg" for t in root.children):
        return None
    subjects = [t for t in root.children if t.dep_ in {"nsubj", "nsubjpass"} and t.i < root.i]
    subject = None
    if subjects:
        head = subjects[0]
        if head.pos_ == "PRON" and head.lower_ != "you":
            return None
        subject = doc[head.left_edge.i : head.right_edge.i + 1]
    rest = doc[root.i + 1 : sent.end]
    if any(t.text in {",", ";", ":"} for t in rest if not gap[0] <= t.i < gap[1]):
        return None
    return front(sent, subject, phrase, gap)
