"""Per-reply conversation metrics: turn relevancy, knowledge retention, role and topic
adherence.

With a judge, each assistant reply of a conversation is one `TURN_REVIEW` ask, shared by
the four metrics (each reads its key of the reply). Without a judge each metric runs its
named estimator (`assay.metrics.conversation.estimators`). Either way the result's
``details["turns"]`` lists the reviewed replies ``{"turn": message index, "score":
0..1, "reason": ...}`` and the conversation's value is the documented reduction of them.
The estimators that compare texts plan the embed asks of exactly those texts
(`ConversationMetric.estimate_texts`), embedded once per chunk with every other metric's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from assay.core.result import MetricResult
from assay.core.sample import Sample
from assay.engine import Answers, Ask, judge_ask
from assay.engine.resources import Resources
from assay.estimators.offline import distinct_texts, uncertainty_phrase
from assay.metrics.base import clamp01
from assay.metrics.conversation.estimators import (
    ALLOWED_TOPIC_COSINE,
    persona_breaks,
    questions,
    reasked_questions,
    refusal_patterns,
    user_statements,
)
from assay.metrics.conversation.prompts import TURN_REVIEW
from assay.metrics.conversation.transcript import (
    DEFAULT_WINDOW,
    ReviewedTurn,
    messages,
    reviewed_turns,
)
from assay.metrics.judged.base import JudgedMetric, embed_asks
from assay.metrics.registry import register
from assay.metrics.semantic import cosine

__all__ = [
    "ConversationMetric",
    "KnowledgeRetention",
    "RoleAdherence",
    "TopicAdherence",
    "TurnRelevancy",
    "review_ask",
]


def review_ask(sample: Sample, turn: ReviewedTurn) -> Ask:
    """The `TURN_REVIEW` ask of one reply: the same for every metric that reads it."""
    return judge_ask(
        TURN_REVIEW,
        role_description=sample.role_description,
        allowed_topics=sample.allowed_topics,
        earlier_turns=list(turn.earlier),
        recent_turns=list(turn.recent),
        assistant_turn=turn.text,
    )


class ConversationMetric(JudgedMetric):
    """A metric over a conversation's replies: one `TURN_REVIEW` ask per reply, or a local
    estimator; per-reply scores in ``details["turns"]``, the value their mean."""

    family = "conversation"
    suites: ClassVar[tuple[str, ...]] = ("conversation",)
    requires: ClassVar[tuple[str, ...]] = ("turns",)
    #: key of the `TurnReview` reply this metric reads
    key: ClassVar[str]

    def __init__(self, window: int = DEFAULT_WINDOW) -> None:
        if window < 1:
            raise ValueError(f"window must be at least 1 message; got {window}")
        self.window = window

    def params(self) -> dict[str, Any]:
        return {} if self.window == DEFAULT_WINDOW else {"window": self.window}

    def judge_plan(self, sample: Sample, answers: Answers) -> list[Ask]:
        return [review_ask(sample, t) for t in reviewed_turns(sample, self.window)]

    def reduce(self, sample: Sample, answers: Answers) -> MetricResult:
        scored = []
        for turn in reviewed_turns(sample, self.window):
            verdict = getattr(answers.reply(review_ask(sample, turn)).output, self.key)
            if verdict is not None:
                scored.append(self.judged_turn(turn.index, verdict))
        value, reason = self.reduce_turns(scored)
        return self.llm(
            value,
            answers.model,
            [TURN_REVIEW],
            components=self.turn_components(scored),
            reason=reason,
            turns=scored,
        )

    def judged_turn(self, index: int, verdict: Any) -> dict[str, Any]:
        """A reply's evidence from its verdict."""
        return {"turn": index, "score": float(verdict.verdict), "reason": verdict.reason}

    def reduce_turns(self, turns: list[dict[str, Any]]) -> tuple[float | None, str | None]:
        """The conversation's value: the mean of the reviewed replies' scores."""
        if not turns:
            return None, "no assistant reply with a message before it to review"
        return sum(t["score"] for t in turns) / len(turns), None

    def turn_components(self, turns: list[dict[str, Any]]) -> dict[str, float | None] | None:
        """Sub-scores of the conversation's value (None: none)."""
        return None

    def estimate_plan(self, sample: Sample, answers: Answers) -> list[Ask]:
        return embed_asks(distinct_texts(self.estimate_texts(sample)))

    def estimate_texts(self, sample: Sample) -> list[str]:
        """The texts whose vectors the estimator reads for ``sample`` (none by default)."""
        return []

    def estimate(
        self, samples: Sequence[Sample], answers: Answers, res: Resources
    ) -> list[MetricResult]:
        out = []
        for turns in self.estimate_turns(samples, answers, res):
            value, reason = self.reduce_turns(turns)
            components = self.turn_components(turns)
            out.append(self.local(value, res, components=components, reason=reason, turns=turns))
        return out

    def estimate_turns(
        self, samples: Sequence[Sample], answers: Answers, res: Resources
    ) -> list[list[dict[str, Any]]]:
        """Each sample's per-reply evidence from the local estimator (the vectors of
        `estimate_texts` in ``answers``)."""
        raise NotImplementedError


def _last_user(sample: Sample, turn: ReviewedTurn) -> str | None:
    if not turn.user_indices:
        return None
    return messages(sample)[turn.user_indices[-1]].content or None


def _answers_to_users(sample: Sample, window: int) -> list[tuple[ReviewedTurn, str]]:
    """Each reviewed reply with the last user message before it (replies with no user
    message before them are left out)."""
    pairs = [(turn, _last_user(sample, turn)) for turn in reviewed_turns(sample, window)]
    return [(turn, user) for turn, user in pairs if user]


@register
class TurnRelevancy(ConversationMetric):
    """Share of the assistant's replies that are relevant to the turns just before them.

    Formula: ``relevant replies / reviewed replies``, where a reply is reviewed when a
    message precedes it and the judge sees it with the ``window`` messages before it
    (default 4; the rest of the conversation as earlier context) and answers whether it
    responds to what the user last said. Inputs: turns. Range 0..1, higher is better;
    None when no reply has a message before it.
    Local estimator ``reply_cosine``: each reply's score is clip(cos(embed(reply),
    embed(last user message)), 0, 1), 0 for a non-committal reply ("I don't know"); the
    value is their mean (a graded score, not a share). Agreement with people (dev data,
    ``benchmarks/conversation_validity.py``): Spearman 0.33 (95% CI 0.23-0.43) with USR
    Topical-Chat "Maintains Context" ratings of 360 replies (the reply as the last turn;
    reply length alone 0.22), 0.43 (0.33-0.53) with the MiniLM embedder
    (``embedder = "minilm"``); 0.18 (0.09-0.25) with DSTC9 "coherent" over 550 whole
    conversations. Weaknesses: the estimator measures topical closeness to the last user
    message only, so a reply on the right subject that ignores the request scores high,
    and a short acknowledgement ("Sure, done!") low; among replies to the same context
    (USE) it ranks no better than reply length (0.28 against 0.32).
    """

    name = "turn_relevancy"
    key = "relevant"
    estimator = "reply_cosine"

    def estimate_texts(self, sample: Sample) -> list[str]:
        """Each reply and the last user message before it."""
        return [
            t for turn, user in _answers_to_users(sample, self.window) for t in (turn.text, user)
        ]

    def estimate_turns(
        self, samples: Sequence[Sample], answers: Answers, res: Resources
    ) -> list[list[dict[str, Any]]]:
        out = []
        for sample in samples:
            turns = []
            for turn, user in _answers_to_users(sample, self.window):
                phrase = uncertainty_phrase(turn.text)
                similarity = cosine(answers, turn.text, user)
                turns.append(
                    {
                        "turn": turn.index,
                        "score": 0.0 if phrase else clamp01(similarity),
                        "reason": f"non-committal ({phrase!r})"
                        if phrase
                        else "cosine with the last user message",
                        "cosine": round(similarity, 4),
                    }
                )
            out.append(turns)
        return out


@register
class KnowledgeRetention(ConversationMetric):
    """Share of the assistant's replies that keep what the user already said.

    Formula: ``replies that neither ask again for information the user gave earlier nor
    contradict it / reviewed replies`` (the judge sees the whole conversation before each
    reply). Inputs: turns. Range 0..1, higher is better; None when no reply has a message
    before it.
    Local estimator ``reasked_questions``: a reply scores 0 when one of its questions asks
    for what an earlier user sentence stated (at least half of the question's content
    words, request words such as "could" or "confirm" left out, are in that sentence, or
    their embedding cosine is at least 0.6), else 1; the evidence names the question and
    the user message it repeats. Agreement with people: no public human-labelled data on
    re-asking was found; on DSTC9's "consistent" labels (550 conversations; the bot
    contradicting itself, which the estimator does not look for) its AUROC is 0.45
    (0.40-0.49), chance level. Weaknesses: the estimator sees re-asked questions only,
    not contradictions stated as facts (that needs an entailment model, which no shipped
    package provides); a clarifying question that reuses the user's words ("Which of your
    two orders, 4417 or 4420?") is counted as re-asking. Use a judge for this metric.
    """

    name = "knowledge_retention"
    key = "retains_knowledge"
    estimator = "reasked_questions"

    def _statements(self, sample: Sample) -> list[tuple[ReviewedTurn, list[tuple[int, str]]]]:
        """Each reviewed reply with the statements of the user messages before it."""
        said = messages(sample)
        return [
            (turn, user_statements([(i, said[i].content or "") for i in turn.user_indices]))
            for turn in reviewed_turns(sample, self.window)
        ]

    def estimate_texts(self, sample: Sample) -> list[str]:
        """Each reply's questions and the user statements before it (when it asks any)."""
        return [
            text
            for turn, statements in self._statements(sample)
            if (asked := questions(turn.text)) and statements
            for text in [*asked, *(s for _, s in statements)]
        ]

    def estimate_turns(
        self, samples: Sequence[Sample], answers: Answers, res: Resources
    ) -> list[list[dict[str, Any]]]:
        out = []
        for sample in samples:
            turns = []
            for turn, statements in self._statements(sample):
                found = reasked_questions(turn.text, statements, lambda a, b: cosine(answers, a, b))
                turns.append(
                    {
                        "turn": turn.index,
                        "score": 0.0 if found else 1.0,
                        "reason": "asks again for what the user said"
                        if found
                        else "no question re-asks a user statement",
                        "reasked": found,
                    }
                )
            out.append(turns)
        return out


@register
class RoleAdherence(ConversationMetric):
    """Share of the assistant's replies that stay in the role given by ``role_description``.

    Formula: ``replies consistent with the role (persona, tone, scope, rules) / replies``,
    each judged against the role description. Inputs: turns, role_description. Range
    0..1, higher is better; None when there is no reply.
    Local estimator ``persona_breaks``: a reply scores 0 when it steps out of character
    by a known phrase ("as an AI language model", "I'm just a chatbot", "I can't
    role-play"; self-references are no break when the role itself is an AI assistant),
    else 1. Agreement with people: no public human-labelled data found. Weaknesses: the
    estimator catches explicit breaks only; a reply in the wrong tone or outside the
    role's scope scores 1.
    """

    name = "role_adherence"
    requires = ("turns", "role_description")
    needs = frozenset({"judge"})
    key = "in_role"
    estimator = "persona_breaks"

    def estimate_turns(
        self, samples: Sequence[Sample], answers: Answers, res: Resources
    ) -> list[list[dict[str, Any]]]:
        out = []
        for sample in samples:
            turns = []
            for turn in reviewed_turns(sample, self.window):
                breaks = persona_breaks(turn.text, sample.role_description or "")
                turns.append(
                    {
                        "turn": turn.index,
                        "score": 0.0 if breaks else 1.0,
                        "reason": "steps out of the role" if breaks else "no persona break found",
                        "breaks": breaks,
                    }
                )
            out.append(turns)
        return out


@register
class TopicAdherence(ConversationMetric):
    """F1 of answering the allowed topics and refusing the others, over the user's requests.

    Formula: for each reply to a user message, the judge names the message's topic and
    says whether it is allowed (one of ``allowed_topics``) and whether the reply refused
    it. An allowed topic answered is a true positive (TP), a disallowed one answered a
    false positive (FP), an allowed one refused a false negative (FN), a disallowed one
    refused a true negative. Value ``F1 = 2·TP / (2·TP + FP + FN)``, with
    ``precision = TP / (TP + FP)`` and ``recall = TP / (TP + FN)`` as components; when
    there is no TP, FP or FN (every request was off-topic and refused) the value is 1
    with that reason. Inputs: turns, allowed_topics. Range 0..1, higher is better; None
    when no reply follows a user message.
    Local estimator ``topic_cosine``: a user message is on an allowed topic when its
    embedding cosine with a topic's name is at least 0.15, and a reply refuses when it
    matches the refusal patterns (``refusal`` of the safety patterns). The 0.15 was set on
    hand-made examples (USE: requests on a topic 0.2-0.5, off-topic ones below 0.1);
    agreement with people: no public human-labelled data found. Weaknesses: short topic
    names embed loosely, so the topic test is coarse; a polite deflection without a
    refusal phrase counts as answering.
    """

    name = "topic_adherence"
    requires = ("turns", "allowed_topics")
    key = "on_topic"
    estimator = "topic_cosine"
    components = ("precision", "recall")

    def judged_turn(self, index: int, verdict: Any) -> dict[str, Any]:
        return _topic_turn(
            index, bool(verdict.allowed), bool(verdict.refused), verdict.reason, verdict.topic
        )

    def reduce_turns(self, turns: list[dict[str, Any]]) -> tuple[float | None, str | None]:
        if not turns:
            return None, "no reply to a user message to review"
        tp, fp, fn = (sum(t["outcome"] == k for t in turns) for k in ("TP", "FP", "FN"))
        if tp + fp + fn == 0:
            return 1.0, "every request was off-topic and refused"
        return 2 * tp / (2 * tp + fp + fn), None

    def turn_components(self, turns: list[dict[str, Any]]) -> dict[str, float | None] | None:
        tp, fp, fn = (sum(t["outcome"] == k for t in turns) for k in ("TP", "FP", "FN"))
        return {
            "precision": tp / (tp + fp) if tp + fp else None,
            "recall": tp / (tp + fn) if tp + fn else None,
        }

    def estimate_texts(self, sample: Sample) -> list[str]:
        """The allowed topics and each user message a reply answers (when any)."""
        users = [user for _, user in _answers_to_users(sample, self.window)]
        return [*(sample.allowed_topics or []), *users] if users else []

    def estimate_turns(
        self, samples: Sequence[Sample], answers: Answers, res: Resources
    ) -> list[list[dict[str, Any]]]:
        refusals = refusal_patterns(res)
        out = []
        for sample in samples:
            turns = []
            for turn, user in _answers_to_users(sample, self.window):
                cosines = {t: cosine(answers, user, t) for t in sample.allowed_topics or []}
                topic, best = max(cosines.items(), key=lambda kv: kv[1], default=("", 0.0))
                refused = bool(refusals.find(turn.text))
                allowed = best >= ALLOWED_TOPIC_COSINE
                reason = f"closest allowed topic {topic!r} at cosine {best:.2f}"
                turns.append(_topic_turn(turn.index, allowed, refused, reason, topic))
            out.append(turns)
        return out


def _topic_turn(
    index: int, allowed: bool, refused: bool, reason: str, topic: str
) -> dict[str, Any]:
    outcome = {(True, False): "TP", (False, False): "FP", (True, True): "FN", (False, True): "TN"}[
        (allowed, refused)
    ]
    return {
        "turn": index,
        "score": 1.0 if outcome in {"TP", "TN"} else 0.0,
        "reason": reason,
        "topic": topic,
        "allowed": allowed,
        "refused": refused,
        "outcome": outcome,
    }
