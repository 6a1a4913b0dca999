"""Conversation and agent-goal metrics: multi-turn chats and agent runs as a whole.

Per reply (`turns`): ``turn_relevancy``, ``knowledge_retention``, ``role_adherence``,
``topic_adherence``; per conversation (`outcome`): ``conversation_completeness``,
``agent_goal_accuracy`` and ``agent_goal_accuracy_no_reference``.

With a judge they share two prompts (`prompts`): one `TURN_REVIEW` ask per assistant
reply and one `CONVERSATION_OUTCOME` ask per conversation, so the whole ``conversation``
suite costs n + 1 calls for a conversation with n replies. Without a judge each runs a
named local estimator (`estimators`). Every result lists its evidence per turn:
``details["turns"]`` (per reply) or ``details["intentions"]`` (per user request), with
the message index as in ``Sample.turns``.
"""

from __future__ import annotations

from assay.metrics.conversation.outcome import (
    AgentGoalAccuracy,
    AgentGoalAccuracyNoReference,
    ConversationCompleteness,
)
from assay.metrics.conversation.turns import (
    KnowledgeRetention,
    RoleAdherence,
    TopicAdherence,
    TurnRelevancy,
)

__all__ = [
    "AgentGoalAccuracy",
    "AgentGoalAccuracyNoReference",
    "ConversationCompleteness",
    "KnowledgeRetention",
    "RoleAdherence",
    "TopicAdherence",
    "TurnRelevancy",
]
