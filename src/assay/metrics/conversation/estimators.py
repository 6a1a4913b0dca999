"""Offline estimators of the conversation and agent-goal metrics (no judge configured).

Each reads the conversation as `assay.metrics.conversation.transcript` does and returns
per-turn evidence; the metrics reduce it the same way as the judge's verdicts. They are
estimators: cheap stand-ins named in ``details["estimator"]``, with their weaknesses in
each metric's docstring.

- `reply_relevance`: cosine of each assistant reply with the last user message before it.
- `reasked_questions`: the reply's questions that ask again for what an earlier user
  sentence already stated (every requested content word in it); `repeated_reply`: an
  earlier reply the assistant says again word for word.
- `persona_breaks`: phrases by which an assistant steps out of a role ("as an AI
  language model").
- `topic_handling`: whether each user message is on an allowed topic (embedding cosine
  with the topic names) and whether the reply refused it (the refusal patterns).
- `request_coverage`: whether a later reply answers each user request (cosine, not a
  refusal or "I don't know").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from assay.text.tokenize import content_words, sentences, words

if TYPE_CHECKING:
    from assay.engine.resources import Resources
    from assay.text.patterns import PatternSet

__all__ = [
    "ALLOWED_TOPIC_COSINE",
    "REASK_MIN_WORDS",
    "SATISFIED_COSINE",
    "persona_breaks",
    "questions",
    "reasked_questions",
    "refusal_patterns",
    "repeated_reply",
]

#: a question re-asks a user sentence when it requests at least this many content words
#: and the sentence holds all of them (one shared word, "do you like music?" after
#: "I like rpgs", is a follow-up more often than a re-ask in open chat)
REASK_MIN_WORDS = 2
#: a user message is on an allowed topic at this cosine with the topic's name
ALLOWED_TOPIC_COSINE = 0.15
#: a later reply answers a user request at this cosine with it
SATISFIED_COSINE = 0.35

#: words that make a question a request for information, not what it is about
_REQUEST_WORDS = frozenset(
    "please could would can tell give provide share confirm let know need want "
    "again remind say send enter type".split()
)

_QUESTION = re.compile(r"[^.!?\n]*\?")
#: where one question asks two things: ", and do you ...", "; what ..."
_CLAUSE = re.compile(
    r",\s*(?:and|or)\s+|;\s*|\s+and\s+(?=(?:do|does|did|are|is|can|could|have|what|where|"
    r"when|how|who|which|would|will)\b)",
    re.IGNORECASE,
)

#: ways an assistant steps out of the role it was given
_PERSONA_BREAKS = re.compile(
    r"\b(?:as an? (?:ai|artificial intelligence)(?: language model| model| assistant)?"
    r"|as a (?:large )?language model"
    r"|i(?:'m| am) (?:just |only )?an? (?:ai|artificial intelligence|language model|chatbot)"
    r"|i(?:'m| am) (?:chatgpt|gpt-?\d|claude|gemini|llama)"
    r"|(?:i )?(?:can(?:no|')t|cannot|won't) (?:role-?play|pretend|stay in character))\b",
    re.IGNORECASE,
)
#: the phrases that are no break when the role itself is an AI assistant
_AI_SELF_REFERENCE = re.compile(
    r"\b(?:ai|artificial intelligence|chatbot|virtual assistant)\b", re.I
)


def questions(text: str) -> list[str]:
    """The sentences of ``text`` that end with a question mark."""
    return [q.strip() for q in _QUESTION.findall(text or "") if q.strip(" ?")]


def _asked_words(question: str) -> set[str]:
    return set(content_words(question)) - _REQUEST_WORDS


def reasked_questions(reply: str, statements: Sequence[tuple[int, str]]) -> list[dict[str, object]]:
    """The reply's questions that ask for what a user statement already gave.

    ``statements`` are (message index, sentence) of the earlier user messages'
    non-question sentences. Each question is split where it asks two things (", and do
    you ..."); a part re-asks a statement when it requests at least `REASK_MIN_WORDS`
    content words (request words like "could", "tell", "confirm" left out) and the
    statement holds every one of them. Each question is reported once, with the first
    statement it repeats.
    """
    found: list[dict[str, object]] = []
    for question in questions(reply):
        for part in _CLAUSE.split(question):
            asked = _asked_words(part)
            if len(asked) < REASK_MIN_WORDS:
                continue
            given = next(((i, s) for i, s in statements if asked <= set(content_words(s))), None)
            if given is not None:
                found.append(
                    {
                        "question": question,
                        "asks": sorted(asked),
                        "already_given_in": given[0],
                        "statement": given[1],
                    }
                )
                break
    return found


def repeated_reply(reply: str, earlier: Sequence[tuple[int, str]]) -> int | None:
    """The message index of the first earlier reply (index, text) with the same words as
    ``reply`` (lower-cased word tokens; punctuation and spacing ignored), else None."""
    said = words(reply)
    return next((i for i, text in earlier if said and words(text) == said), None)


def user_statements(texts: Sequence[tuple[int, str]]) -> list[tuple[int, str]]:
    """(index, sentence) of the sentences of user messages that are not questions."""
    asked = {q.rstrip("?").strip() for _, text in texts for q in questions(text)}
    return [
        (index, sentence)
        for index, text in texts
        for sentence in sentences(text)
        if sentence.rstrip("?").strip() not in asked
    ]


def persona_breaks(reply: str, role_description: str) -> list[str]:
    """Phrases of ``reply`` that step out of the role (none counted as a break when the
    role itself is an AI assistant and the phrase only says so)."""
    hits = [m.group(0) for m in _PERSONA_BREAKS.finditer(reply or "")]
    if _AI_SELF_REFERENCE.search(role_description or ""):
        hits = [
            h
            for h in hits
            if re.search(r"role-?play|pretend|character|chatgpt|gpt|claude|gemini|llama", h, re.I)
        ]
    return hits


def refusal_patterns(res: Resources) -> PatternSet:
    """The safety patterns' ``refusal`` list (plus a configured extra patterns file)."""
    from assay.metrics.safety import safety_patterns

    return safety_patterns(res)["refusal"]
