"""What a whole conversation or agent run achieved: conversation completeness and agent
goal accuracy, with and without a reference outcome.

With a judge, the three metrics read one `CONVERSATION_OUTCOME` ask per conversation
(each its key of the reply). Without a judge each runs its named estimator; the two that
compare texts plan the embed asks of exactly the texts they compare (which depend on the
run's refusal patterns), embedded once per chunk with every other metric's texts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from assay.core.result import MetricResult
from assay.core.sample import Sample
from assay.engine import Answers, Ask, judge_ask
from assay.engine.resources import Resources
from assay.estimators.offline import distinct_texts, uncertainty_phrase
from assay.metrics.agent import retried_later
from assay.metrics.base import clamp01
from assay.metrics.conversation.estimators import (
    SATISFIED_COSINE,
    questions,
    refusal_patterns,
)
from assay.metrics.conversation.prompts import CONVERSATION_OUTCOME
from assay.metrics.conversation.transcript import has_conversation, messages, transcript
from assay.metrics.judged.base import JudgedMetric, embed_asks
from assay.metrics.registry import register
from assay.metrics.semantic import cosine
from assay.text.patterns import load_patterns
from assay.text.tokenize import content_words

if TYPE_CHECKING:
    from assay.core.steps import Turn
    from assay.text.patterns import PatternSet

__all__ = [
    "AgentGoalAccuracy",
    "AgentGoalAccuracyNoReference",
    "ConversationCompleteness",
    "outcome_ask",
]


def outcome_ask(sample: Sample) -> Ask:
    """The `CONVERSATION_OUTCOME` ask of a sample: the same for every metric reading it."""
    return judge_ask(
        CONVERSATION_OUTCOME,
        scenario=sample.scenario,
        expected_outcome=sample.expected_outcome,
        turns=transcript(sample),
    )


def _refusals(answers: Answers) -> PatternSet:
    """The refusal patterns of the resources answering (the shipped ones for answers made
    by hand)."""
    if answers.resources is not None:
        return refusal_patterns(answers.resources)
    return load_patterns("safety")["refusal"]


class _OutcomeMetric(JudgedMetric):
    def judge_plan(self, sample: Sample, answers: Answers) -> list[Ask]:
        return [outcome_ask(sample)]

    def plan(self, sample: Sample, answers: Answers) -> list[Ask]:
        """The judge plan with a judge; else the embed asks of the texts the estimator
        compares (`estimate_texts`: which replies count depends on the refusal patterns)."""
        if answers.model is None:
            return embed_asks(self.estimate_texts(sample, _refusals(answers)))
        return self.judge_plan(sample, answers)

    def estimate_texts(self, sample: Sample, refusals: PatternSet) -> list[str]:
        """The texts whose vectors the estimator reads for ``sample`` (none by default)."""
        return []


def _is_request(text: str) -> bool:
    """A user message that asks for something: a question, or two content words or more
    (so "thanks!" or "ok" is not a request)."""
    return bool(questions(text)) or len(content_words(text)) >= 2


def _requests(turns: list[Turn], refusals: PatternSet) -> list[tuple[int, list[int]]]:
    """Each user request (message index) with the later assistant replies that may
    satisfy it: not blank, not a refusal, not non-committal."""
    out = []
    for i, turn in enumerate(turns):
        if turn.role != "user" or not _is_request(turn.content or ""):
            continue
        later = []
        for j in range(i + 1, len(turns)):
            reply = turns[j].content or ""
            if turns[j].role != "assistant" or not reply.strip():
                continue
            if refusals.find(reply) or uncertainty_phrase(reply):
                continue
            later.append(j)
        out.append((i, later))
    return out


@register
class ConversationCompleteness(_OutcomeMetric):
    """Share of the user's intentions in a conversation that the assistant satisfied.

    Formula: ``satisfied intentions / intentions``: the judge lists each distinct thing
    the user wanted (a request, a question, a goal) with the user message that first
    expressed it and whether it was met by the end of the conversation. Inputs: turns.
    Range 0..1, higher is better; None when the user expressed no intention.
    Local estimator ``request_coverage``: each user message with a question or at least
    two content words is an intention; it is satisfied when a later assistant reply has
    an embedding cosine of at least 0.35 with it and neither refuses (the refusal
    patterns) nor is non-committal ("I don't know"). Agreement with people: Spearman 0.17
    (0.10-0.27) with DSTC9 "understanding" over 538 conversations (conversation length
    alone 0.12): weak, and open chit-chat has few requests. Weaknesses: the estimator
    counts messages, not intentions (two requests in one message are one, a request spread over
    two messages two), and a reply on the subject that does not do what was asked counts
    as satisfying it.
    """

    name = "conversation_completeness"
    family = "conversation"
    suites: ClassVar[tuple[str, ...]] = ("conversation",)
    requires = ("turns",)
    estimator = "request_coverage"

    def reduce(self, sample: Sample, answers: Answers) -> MetricResult:
        reply = answers.reply(outcome_ask(sample)).output
        intentions = [
            {
                "turn": i.turn,
                "intention": i.intention,
                "satisfied": bool(i.satisfied),
                "reason": i.reason,
            }
            for i in reply.intentions
        ]
        value, reason = _share_satisfied(intentions)
        return self.llm(
            value, answers.model, [CONVERSATION_OUTCOME], reason=reason, intentions=intentions
        )

    def estimate_texts(self, sample: Sample, refusals: PatternSet) -> list[str]:
        """Each request that a later reply may satisfy, and those replies."""
        turns = messages(sample)
        return distinct_texts(
            t
            for i, later in _requests(turns, refusals)
            if later
            for t in (turns[i].content, *(turns[j].content for j in later))
        )

    def estimate(
        self, samples: Sequence[Sample], answers: Answers, res: Resources
    ) -> list[MetricResult]:
        refusals = refusal_patterns(res)
        out = []
        for sample in samples:
            turns = messages(sample)
            intentions = []
            for i, later in _requests(turns, refusals):
                request = turns[i].content or ""
                best, by = 0.0, None
                for j in later:
                    similarity = cosine(answers, request, turns[j].content or "")
                    if similarity > best:
                        best, by = similarity, j
                satisfied = best >= SATISFIED_COSINE
                intentions.append(
                    {
                        "turn": i,
                        "intention": turns[i].content,
                        "satisfied": satisfied,
                        "reason": f"best later reply [{by}] at cosine {best:.2f}"
                        if by is not None
                        else "no later reply answers it",
                    }
                )
            value, reason = _share_satisfied(intentions)
            out.append(self.local(value, res, reason=reason, intentions=intentions))
        return out


def _share_satisfied(intentions: list[dict[str, Any]]) -> tuple[float | None, str | None]:
    if not intentions:
        return None, "the user expressed no intention"
    return sum(i["satisfied"] for i in intentions) / len(intentions), None


class _GoalMetric(_OutcomeMetric):
    family = "agent"
    suites: ClassVar[tuple[str, ...]] = ("agent", "conversation")
    unit = "bool"

    def missing_inputs(self, sample: Sample) -> list[str]:
        missing = [f for f in self.requires if not sample.has(f)]
        if not has_conversation(sample):
            missing.append("turns (or query and response)")
        return missing


@register
class AgentGoalAccuracy(_GoalMetric):
    """Whether the conversation or agent run reached the expected outcome: 0..1.

    Formula: the judge states the end state the run reached and answers whether it
    achieves ``expected_outcome``: 1 when it does, else 0. Inputs: turns (or an agent run:
    query, trace and response) and expected_outcome. Range 0..1, higher is better: the
    judge's value is 1 or 0, the local estimator's a graded similarity (unit ``ratio``,
    not ``bool``: offline it is no verdict).
    Local estimator ``outcome_similarity``: the best embedding cosine of
    ``expected_outcome`` with an assistant message or a successful tool step's result
    (the end state may be stated before the closing small talk; refusals and "I don't
    know" are left out, and 0 when nothing is left), clipped to 0..1 (a graded score, not
    a verdict). Weaknesses: the estimator measures
    wording, so "your refund was not issued" is close to "the refund is issued";
    read it as a ranking aid, and use a judge for a verdict. Agreement with people: no
    public human-labelled data found.
    """

    name = "agent_goal_accuracy"
    requires = ("expected_outcome",)
    unit = "ratio"
    estimator = "outcome_similarity"

    def reduce(self, sample: Sample, answers: Answers) -> MetricResult:
        reply = answers.reply(outcome_ask(sample)).output
        verdict = reply.outcome_matches
        if verdict is None:  # the prompt's check makes the judge give it: a safeguard
            raise ValueError("the judge's reply has no 'outcome_matches' verdict")
        return self.llm(
            float(verdict.verdict),
            answers.model,
            [CONVERSATION_OUTCOME],
            judge_reason=verdict.reason,
            end_state=reply.end_state,
        )

    def estimate_texts(self, sample: Sample, refusals: PatternSet) -> list[str]:
        """The expected outcome and the texts that can show the end state, when any."""
        states = _end_states(sample, refusals)
        return distinct_texts([sample.expected_outcome, *states] if states else [])

    def estimate(
        self, samples: Sequence[Sample], answers: Answers, res: Resources
    ) -> list[MetricResult]:
        refusals = refusal_patterns(res)
        out = []
        for sample in samples:
            states = _end_states(sample, refusals)
            expected = sample.expected_outcome or ""
            cosines = [(cosine(answers, expected, e), e) for e in states]
            best, state = max(cosines, default=(0.0, None))
            reason = None if states else "no assistant message or tool result states an outcome"
            out.append(
                self.local(
                    clamp01(best), res, reason=reason, cosine=round(best, 4), end_state=state
                )
            )
        return out


def _end_states(sample: Sample, refusals: PatternSet) -> list[str]:
    """The texts that can show the run's end state: the assistant messages that neither
    refuse nor are non-committal, and the results of successful tool steps."""
    said = [
        text
        for t in messages(sample)
        if t.role == "assistant" and (text := (t.content or "").strip())
        if not refusals.find(text) and not uncertainty_phrase(text)
    ]
    tools = [
        str(getattr(step, "result", None) or "")
        for step in sample.trace or []
        if step.kind == "tool" and step.ok and getattr(step, "result", None) is not None
    ]
    return [*said, *tools]


@register
class AgentGoalAccuracyNoReference(_GoalMetric):
    """Whether the conversation or agent run achieved the user's goal, with no reference: 1 or 0.

    Formula: the judge states the user's goal and the end state the run reached and
    answers whether the end state achieves the goal: 1 when it does, else 0. Inputs:
    turns (or an agent run: query, trace and response). Range {0, 1}, higher is better.
    Local estimator ``completion_signals``: 0 when the final assistant message refuses
    (the refusal patterns) or is non-committal ("I don't know"), or a tool step failed
    and no later call of the same tool succeeded; else 1; the evidence names the signal.
    Agreement with people: no public human-labelled data found. Weaknesses: the estimator
    sees failure signals only: a confident wrong answer or an unfinished task with no
    error scores 1.
    """

    name = "agent_goal_accuracy_no_reference"
    needs = frozenset({"judge"})
    estimator = "completion_signals"

    def reduce(self, sample: Sample, answers: Answers) -> MetricResult:
        reply = answers.reply(outcome_ask(sample)).output
        return self.llm(
            float(reply.goal_achieved.verdict),
            answers.model,
            [CONVERSATION_OUTCOME],
            judge_reason=reply.goal_achieved.reason,
            goal=reply.goal,
            end_state=reply.end_state,
        )

    def estimate(
        self, samples: Sequence[Sample], answers: Answers, res: Resources
    ) -> list[MetricResult]:
        refusals = refusal_patterns(res)
        out = []
        for sample in samples:
            finals = [
                t.content or ""
                for t in messages(sample)
                if t.role == "assistant" and (t.content or "").strip()
            ]
            final = finals[-1] if finals else ""
            signals = []
            if refusals.find(final):
                signals.append("the final reply refuses")
            if uncertainty_phrase(final):
                signals.append("the final reply is non-committal")
            steps = [s for s in sample.trace or [] if s.kind == "tool"]
            for i, step in enumerate(steps):
                if not step.ok and not retried_later(steps, i):
                    signals.append(f"tool {step.name!r} failed and was not retried successfully")
            out.append(self.local(0.0 if signals else 1.0, res, failure_signals=signals))
        return out
