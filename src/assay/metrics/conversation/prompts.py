"""The two judge prompts every conversation and agent-goal metric shares.

- `TURN_REVIEW`: one ask per assistant reply. The reply, the window of turns before it,
  the turns before that, and (when the sample has them) the role description and the
  allowed topics. Its tasks fill ``relevant`` (turn relevancy), ``retains_knowledge``
  (knowledge retention), ``in_role`` (role adherence) and ``on_topic`` (topic
  adherence): the four metrics scored together cost one call per reply.
- `CONVERSATION_OUTCOME`: one ask per conversation. The whole transcript, the scenario
  and the expected outcome when given. It fills ``intentions`` (conversation
  completeness), ``goal_achieved`` (agent goal accuracy without a reference) and
  ``outcome_matches`` (agent goal accuracy against ``expected_outcome``).

So a conversation with n assistant replies costs n + 1 calls for the whole
``conversation`` suite and the two goal metrics; both prompts take their block values
from the sample alone (never from which metric asks), so every metric's ask is the same
question, asked once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from assay.judge.prompts import Prompt, Section, unfilled_task
from assay.judge.verdicts import Binary

__all__ = [
    "CONVERSATION_OUTCOME",
    "TURN_REVIEW",
    "ConversationOutcome",
    "Intention",
    "TopicVerdict",
    "TurnReview",
    "YesNo",
]

_REASON = AliasChoices("reason", "reasoning", "explanation")


class _Reply(BaseModel):
    # NaN is no verdict; extra keys are ignored; judges' aliases (``reasoning``) accepted
    model_config = ConfigDict(extra="ignore", populate_by_name=True, allow_inf_nan=False)


class YesNo(_Reply):
    """A yes/no verdict (1/0) with the judge's reason."""

    verdict: Binary
    reason: str = Field(default="", validation_alias=_REASON)


class TopicVerdict(_Reply):
    """What the last user message is about, whether that is allowed, whether it was refused."""

    topic: str = ""
    allowed: Binary
    refused: Binary
    reason: str = Field(default="", validation_alias=_REASON)


class TurnReview(_Reply):
    """The `TURN_REVIEW` reply: one verdict per task given (null for a task not given)."""

    relevant: YesNo | None = None
    retains_knowledge: YesNo | None = None
    in_role: YesNo | None = None
    on_topic: TopicVerdict | None = None


class Intention(_Reply):
    """One thing the user wanted, the user turn that expressed it, and whether it was met."""

    turn: int = Field(ge=0)
    intention: str
    satisfied: Binary
    reason: str = Field(default="", validation_alias=_REASON)


class ConversationOutcome(_Reply):
    """The `CONVERSATION_OUTCOME` reply."""

    intentions: list[Intention] = Field(default_factory=list)
    goal: str = ""
    end_state: str = ""
    goal_achieved: YesNo
    outcome_matches: YesNo | None = None


#: (reply key, blocks its task needs) of `TURN_REVIEW`
REVIEW_TASKS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("relevant", ("recent_turns",)),
    ("retains_knowledge", ("recent_turns",)),
    ("in_role", ("role_description",)),
    ("on_topic", ("allowed_topics", "recent_turns")),
)


def _check_review(out: TurnReview, values: Mapping[str, Any]) -> str | None:
    return unfilled_task(out, values, REVIEW_TASKS)


TURN_REVIEW: Prompt[TurnReview] = Prompt(
    name="conversation_turn_review",
    version="1",
    sections=(
        Section(
            "You are reviewing one reply of an AI assistant in a conversation. Each message "
            "is one item '[index] role: text'. <earlier_turns> holds the conversation before "
            "the recent window, <recent_turns> the messages just before the reply (oldest "
            "first), and <assistant_turn> the reply under review. Do every task below; each "
            'fills one key of the JSON reply with a "verdict" (1 for yes, 0 for no) and a '
            "short reason. Use null for a key whose task is not given below."
        ),
        Section(
            'TASK "relevant": is the reply relevant to the recent turns, i.e. does it '
            "respond to what the user last said or asked, in the context of the recent "
            "messages? A reply that ignores the request, changes the subject or answers a "
            "different question is 0.",
            requires=("recent_turns",),
        ),
        Section(
            'TASK "retains_knowledge": does the reply keep what the user already said '
            "anywhere earlier in the conversation (<earlier_turns> and <recent_turns>)? It is "
            "0 when the reply asks again for information the user already gave, or states "
            "something that contradicts what the user said; otherwise 1 (also when there is "
            "nothing to remember).",
            requires=("recent_turns",),
        ),
        Section(
            'TASK "in_role": the assistant must act in the role described in '
            "<role_description>. Is the reply consistent with that role (persona, tone, "
            "scope and rules)? Breaking character or acting against the role is 0.",
            requires=("role_description",),
        ),
        Section(
            'TASK "on_topic": the assistant may only discuss the topics in <allowed_topics>. '
            'Give "topic": what the last user message asks about, in a few words; '
            '"allowed": 1 when that topic is one of, or falls within, the allowed topics, '
            'else 0; "refused": 1 when the reply declines or deflects answering it, 0 when '
            'it answers it; and a "reason".',
            requires=("allowed_topics", "recent_turns"),
        ),
    ),
    blocks=(
        "role_description",
        "allowed_topics",
        "earlier_turns",
        "recent_turns",
        "assistant_turn",
    ),
    output=TurnReview,
    example=(
        '{"relevant": {"verdict": 1, "reason": "one short sentence"}, '
        '"retains_knowledge": {"verdict": 0, "reason": "asks again for the order number '
        'given in [1]"}, "in_role": {"verdict": 1, "reason": "one short sentence"}, '
        '"on_topic": {"topic": "refund policy", "allowed": 1, "refused": 0, '
        '"reason": "one short sentence"}}'
    ),
    check=_check_review,
)


def _check_outcome(out: ConversationOutcome, values: Mapping[str, Any]) -> str | None:
    if values.get("expected_outcome") and out.outcome_matches is None:
        return "'outcome_matches' must hold the verdict against <expected_outcome>"
    n = len(values.get("turns") or [])
    bad = [i.turn for i in out.intentions if i.turn >= n]
    if bad:
        return f"intention turn index {bad[0]} is not a message index (0..{n - 1})"
    return None


CONVERSATION_OUTCOME: Prompt[ConversationOutcome] = Prompt(
    name="conversation_outcome",
    version="1",
    sections=(
        Section(
            "You are assessing what a conversation between a user and an AI assistant (or "
            "an agent run: the assistant's tool calls and their results are messages too) "
            "achieved. Each message in <turns> is one item '[index] role: text'."
        ),
        Section(
            'TASK "intentions": list each distinct thing the user wanted (a request, a '
            'question, a goal) as {"turn": the index of the user message that first '
            'expressed it, "intention": a few words, "satisfied": 1 when the assistant '
            'met it by the end of the conversation else 0, "reason": one short sentence}. '
            "Small talk and thanks are not intentions."
        ),
        Section(
            'TASK "goal_achieved": state the user\'s overall "goal" and the "end_state" the '
            'conversation reached, one sentence each; "goal_achieved" is {"verdict": 1 when '
            'the end state achieves the goal, else 0, "reason": one short sentence}.'
        ),
        Section(
            "The user's situation is described in <scenario>.",
            requires=("scenario",),
        ),
        Section(
            'TASK "outcome_matches": {"verdict": 1 when the end state achieves the outcome '
            'described in <expected_outcome>, else 0, "reason": one short sentence}.',
            requires=("expected_outcome",),
        ),
    ),
    blocks=("scenario", "expected_outcome", "turns"),
    output=ConversationOutcome,
    example=(
        '{"intentions": [{"turn": 0, "intention": "cancel order 4417", "satisfied": 1, '
        '"reason": "one short sentence"}], "goal": "one sentence", "end_state": "one '
        'sentence", "goal_achieved": {"verdict": 1, "reason": "one short sentence"}, '
        '"outcome_matches": {"verdict": 1, "reason": "one short sentence"}}'
    ),
    check=_check_outcome,
)
