"""What agents and conversations are made of: tool calls (`ToolCall`) and chat turns (`Turn`).

Both read the shapes applications log as they are:

* a tool call as Assay writes it (``{"name", "arguments", "ok", "latency", ...}``) or as
  the OpenAI chat API returns it (``{"id", "type": "function", "function": {"name",
  "arguments": "<JSON text>"}}``: the arguments text is parsed, the id kept as
  ``call_id``);
* a turn as an OpenAI chat-format message: ``{"role", "content", "tool_calls",
  "tool_call_id", "name"}``, where ``content`` may be text or a list of parts
  (``[{"type": "text", "text": ...}]``; the text parts are joined).

`trace_from_turns` turns a chat log's tool calls into an agent trace: each assistant
tool call in order, with the ``result`` of the tool message that answers it.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["ToolCall", "Turn", "trace_from_turns"]


class ToolCall(BaseModel):
    """One step of an agent trace: a tool call with its outcome and latency (seconds)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    name: str
    arguments: dict[str, Any] | None = None
    ok: bool = True
    error: str | None = None
    latency: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    kind: str = Field(default="tool", description="tool, llm or api")

    @model_validator(mode="before")
    @classmethod
    def _openai_shape(cls, data: Any) -> Any:
        """Accept the OpenAI ``{"id", "type": "function", "function": {...}}`` shape."""
        if not isinstance(data, dict) or not isinstance(data.get("function"), dict):
            return data
        out = {k: v for k, v in data.items() if k not in {"function", "type", "id"}}
        out["name"] = data["function"].get("name")
        out["arguments"] = _arguments(data["function"].get("arguments"))
        if data.get("id") is not None:
            out["call_id"] = data["id"]
        return out


def _arguments(value: Any) -> Any:
    """Arguments as the API sends them (JSON text) parsed into an object."""
    if not isinstance(value, str):
        return value
    if not value.strip():
        return None
    try:
        parsed = json.loads(value)
    except ValueError:
        raise ValueError(f"tool call arguments are not JSON: {value[:80]!r}") from None
    if not isinstance(parsed, dict):
        raise ValueError(f"tool call arguments are not a JSON object: {value[:80]!r}")
    return parsed


class Turn(BaseModel):
    """One message of a conversation: who spoke (``role``: user, assistant, system, tool,
    developer), what was said, the tool calls an assistant message made, and for a tool
    message the id of the call it answers."""

    model_config = ConfigDict(extra="allow")

    role: str
    content: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    name: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _message_shape(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        out = dict(data)
        if isinstance(out.get("role"), str):
            out["role"] = out["role"].strip().lower()
        content = out.get("content")
        if isinstance(content, list):
            texts = [
                part.get("text", part.get("content"))
                for part in content
                if isinstance(part, dict) and part.get("type", "text") == "text"
            ]
            out["content"] = "\n".join(t for t in texts if isinstance(t, str)) or None
        return out


def trace_from_turns(turns: list[Turn]) -> list[ToolCall] | None:
    """The tool calls of the assistant turns, in order, each with the ``result`` of the
    tool turn answering it (matched by call id); None when no turn called a tool."""
    results = {
        turn.tool_call_id: turn.content
        for turn in turns
        if turn.role == "tool" and turn.tool_call_id is not None
    }
    steps = []
    for turn in turns:
        for call in turn.tool_calls or []:
            step = call.model_copy()
            call_id = (call.model_extra or {}).get("call_id")
            if call_id in results and "result" not in (call.model_extra or {}):
                step = ToolCall.model_validate({**call.model_dump(), "result": results[call_id]})
            steps.append(step)
    return steps or None
