"""Offline estimators of the conversation and agent-goal metrics (no judge configured).

Each reads the conversation as `assay.metrics.conversation.transcript` does and returns
per-turn evidence; the metrics reduce it the same way as the judge's verdicts. They are
estimators: cheap stand-ins named in ``details["estimator"]``, with their weaknesses in
each metric's docstring.

- `reply_relevance`: cosine of each assistant reply with the last user message before it.
- `reasked_questions`: the reply's questions that ask again for what an earlier user
  message already stated (content-word overlap or embedding cosine).
- `persona_breaks`: phrases by which an assistant steps out of a role ("as an AI
  language model").
- `topic_handling`: whether each user message is on an allowed topic (embedding cosine
  with the topic names) and whether the reply refused it (the refusal patterns).
- `request_coverage`: whether a later reply answers each user request (cosine, not a
  refusal or "I don't know").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from assay.text.tokenize import content_words, sentences

if TYPE_CHECKING:
    from assay.engine.resources import Resources
    from assay.text.patterns import PatternSet

__all__ = [
    "ALLOWED_TOPIC_COSINE",
    "REASK_COSINE",
    "REASK_OVERLAP",
    "SATISFIED_COSINE",
    "persona_breaks",
    "questions",
    "reasked_questions",
    "refusal_patterns",
]

#: a reply question re-asks an earlier user statement at this share of its content words
REASK_OVERLAP = 0.5
#: ... or at this embedding cosine with it
REASK_COSINE = 0.6
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


def reasked_questions(
    reply: str, statements: Sequence[tuple[int, str]], similarity: Callable[[str, str], float]
) -> list[dict[str, object]]:
    """The reply's questions that ask for what a user statement already gave.

    ``statements`` are (message index, sentence) of the earlier user messages' non-question
    sentences; ``similarity`` is the embedding cosine of two texts. A question re-asks a
    statement when at least `REASK_OVERLAP` of its content words (request words like
    "could", "tell", "confirm" left out) are in the statement, or their cosine is at
    least `REASK_COSINE`; each is reported with the statement that best matches it.
    """
    found: list[dict[str, object]] = []
    for question in questions(reply):
        asked = _asked_words(question)
        best: tuple[float, float, int, str] | None = None
        for index, statement in statements:
            overlap = len(asked & set(content_words(statement))) / len(asked) if asked else 0.0
            cosine = similarity(question, statement)
            if overlap >= REASK_OVERLAP or cosine >= REASK_COSINE:
                score = max(overlap, cosine)
                if best is None or score > max(best[0], best[1]):
                    best = (overlap, cosine, index, statement)
        if best is not None:
            found.append(
                {
                    "question": question,
                    "already_given_in": best[2],
                    "statement": best[3],
                    "word_overlap": round(best[0], 4),
                    "cosine": round(best[1], 4),
                }
            )
    return found


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
