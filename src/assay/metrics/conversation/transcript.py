"""A conversation as the conversation metrics read it: numbered lines and reviewed turns.

A sample's conversation is its ``turns`` (chat messages as logged). An agent run with no
turns (e.g. imported from a trace) reads as a short conversation: the ``query`` as the
user's message, each tool step of the ``trace``, and the ``response`` as the assistant's
final message.

Each message is shown to the judge as one line ``[i] role: text`` where ``i`` is its
0-based index in ``turns``, so every per-turn verdict names the turn it is about, and
the evidence of every metric points at the same index the dashboard shows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from assay.core.sample import Sample
from assay.core.steps import ToolCall, Turn

__all__ = [
    "DEFAULT_WINDOW",
    "ReviewedTurn",
    "has_conversation",
    "line",
    "messages",
    "reviewed_turns",
    "transcript",
]

#: turns before a reviewed assistant turn shown as its recent context (the sliding window)
DEFAULT_WINDOW = 4

#: characters of one tool argument value or tool result kept in a transcript line
_VALUE_CHARS = 300


def has_conversation(sample: Sample) -> bool:
    """True when the sample has turns, or an agent run to read as one (query and response)."""
    return bool(sample.turns) or bool(sample.query and sample.response)


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= _VALUE_CHARS else text[:_VALUE_CHARS] + "…"


def _call(call: ToolCall) -> str:
    args = ", ".join(f"{k}={_short(v)}" for k, v in (call.arguments or {}).items())
    outcome = "" if call.ok else f" -> error: {_short(call.error or 'failed')}"
    result = getattr(call, "result", None)
    if call.ok and result is not None:
        outcome = f" -> {_short(result)}"
    return f"{call.name}({args}){outcome}"


def line(index: int, turn: Turn) -> str:
    """One message as the judge sees it: ``[index] role: text``, with its tool calls."""
    role = turn.role if turn.role != "tool" or not turn.name else f"tool {turn.name}"
    text = (turn.content or "").strip()
    calls = "; ".join(_call(c) for c in turn.tool_calls or [])
    if calls:
        text = f"{text} [calls {calls}]" if text else f"[calls {calls}]"
    return f"[{index}] {role}: {text}"


def messages(sample: Sample) -> list[Turn]:
    """The conversation's messages: ``turns``, or the agent-run reading of the sample."""
    if sample.turns:
        return list(sample.turns)
    turns = [Turn(role="user", content=sample.query)]
    turns += [
        Turn(role="tool", name=step.name, content=_call(step))
        for step in sample.trace or []
        if step.kind == "tool"
    ]
    return [*turns, Turn(role="assistant", content=sample.response)]


def transcript(sample: Sample) -> list[str]:
    """Every message of the conversation as a numbered line (system messages included)."""
    return [line(i, t) for i, t in enumerate(messages(sample))]


@dataclass(frozen=True)
class ReviewedTurn:
    """An assistant message under review and what precedes it.

    Attributes:
        index: its 0-based index in the conversation.
        text: its content (with its tool calls, as `line` writes them).
        earlier: the lines before the window (oldest first).
        recent: the ``window`` lines just before it (oldest first).
        user_indices: indices of the user messages before it (oldest first).
    """

    index: int
    text: str
    earlier: tuple[str, ...]
    recent: tuple[str, ...]
    user_indices: tuple[int, ...]


def reviewed_turns(sample: Sample, window: int = DEFAULT_WINDOW) -> list[ReviewedTurn]:
    """The assistant messages with text and a message before them (a message that only
    calls tools is a step, not a reply; an opening message replies to nothing), each with
    its earlier and recent lines."""
    turns = messages(sample)
    lines = [line(i, t) for i, t in enumerate(turns)]
    out = []
    for i, turn in enumerate(turns):
        if i == 0 or turn.role != "assistant" or not (turn.content or "").strip():
            continue
        start = max(0, i - window)
        users = tuple(j for j in range(i) if turns[j].role == "user")
        text = lines[i].split(": ", 1)[1]
        out.append(ReviewedTurn(i, text, tuple(lines[:start]), tuple(lines[start:i]), users))
    return out
