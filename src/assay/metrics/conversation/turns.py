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
    reasked_questions,
    refusal_patterns,
    repeated_reply,
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
    """Share of the assistant's replies that keep what was already said.

    Formula: ``replies that neither ask again for information the user gave earlier nor
    contradict it / reviewed replies`` (the judge sees the whole conversation before each
    reply). Inputs: turns. Range 0..1, higher is better; None when no reply has a message
    before it.
    Local estimator ``repeats_and_reasks``: a reply scores 0 when it says an earlier
    reply again word for word (`repeated_reply`: a bot that has lost track of the
    conversation), or when one of its questions asks for what an earlier user sentence
    stated (`reasked_questions`: a part of the question requests at least two content
    words, request words such as "could" or "confirm" left out, and that sentence holds
    all of them), else 1; the evidence names the repeated reply or the question and the
    user message it repeats. Agreement with people, on DSTC9's "consistent" labels (550
    open-domain conversations, dev): AUROC 0.547 (0.51-0.59); the repeats alone 0.568,
    fitted on nothing, and the earlier estimator (re-asks by any shared word or an
    embedding cosine of 0.6) 0.45, below chance. The two-word minimum was set after
    reading that rule's matches in DSTC9, so 0.547 is optimistic. Most of the agreement
    lies between bots (within one bot: 0.55). Weaknesses: contradictions stated as facts
    are not looked for (the entailment model, tried on these conversations, was at
    chance: 0.44-0.48); a one-word request ("What is your name?" after "My name is Lena")
    or one in other words ("Do you eat meat?" after "I am vegetarian") is not seen as
    re-asked; a clarifying question that reuses the user's words ("Which of your two
    orders, 4417 or 4420?") counts as re-asking. Use a judge for this metric.
    """

    name = "knowledge_retention"
    key = "retains_knowledge"
    estimator = "repeats_and_reasks"

    def estimate_turns(
        self, samples: Sequence[Sample], answers: Answers, res: Resources
    ) -> list[list[dict[str, Any]]]:
        out = []
        for sample in samples:
            said = messages(sample)
            turns = []
            for turn in reviewed_turns(sample, self.window):
                before = [(i, said[i].content or "") for i in range(turn.index)]
                replies = [(i, text) for i, text in before if said[i].role == "assistant"]
                statements = user_statements([before[i] for i in turn.user_indices])
                repeats = repeated_reply(said[turn.index].content or "", replies)
                found = reasked_questions(turn.text, statements)
                if repeats is not None:
                    reason = f"says message {repeats} again"
                elif found:
                    reason = "asks again for what the user said"
                else:
                    reason = "repeats no reply and re-asks no user statement"
                turns.append(
                    {
                        "turn": turn.index,
                        "score": 0.0 if repeats is not None or found else 1.0,
                        "reason": reason,
                        "repeats": repeats,
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
