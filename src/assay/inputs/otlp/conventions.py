"""What a span says, read through the two attribute conventions LLM tracing uses.

* **OpenTelemetry GenAI semantic conventions**: ``gen_ai.operation.name`` (``chat``,
  ``text_completion``, ``generate_content``, ``execute_tool``, ``invoke_agent``, ...),
  messages in ``gen_ai.input.messages`` / ``gen_ai.output.messages`` (JSON, with
  ``parts``), the older ``gen_ai.prompt.N.*`` / ``gen_ai.completion.N.*`` attributes and
  ``gen_ai.content.prompt`` / ``gen_ai.content.completion`` events, tools in
  ``gen_ai.tool.name`` / ``gen_ai.tool.call.arguments`` / ``gen_ai.tool.call.result``,
  models in ``gen_ai.request.model`` / ``gen_ai.response.model``, tokens in
  ``gen_ai.usage.output_tokens``.
* **OpenInference** (Arize Phoenix and the tools that follow it):
  ``openinference.span.kind`` (``LLM``, ``RETRIEVER``, ``TOOL``, ``AGENT``, ``CHAIN``...),
  ``input.value`` / ``output.value``, ``llm.input_messages.N.message.*``,
  ``llm.output_messages.N.message.*``, ``retrieval.documents.N.document.content``,
  ``tool.name``, ``llm.model_name``, ``llm.token_count.completion``.

Each reader returns what it found and the attribute keys it consumed, so that the
attributes nobody read can be kept as metadata.
"""

from __future__ import annotations

from typing import Any

from assay.inputs.otlp.limits import SpanOverLimit, json_value, key_index
from assay.inputs.otlp.reader import Span

__all__ = [
    "ROLE_KEYS",
    "documents",
    "llm_exchange",
    "model_name",
    "output_tokens",
    "span_role",
    "tool_call",
]

#: the attributes that say what kind of span it is
ROLE_KEYS = frozenset({"openinference.span.kind", "gen_ai.operation.name"})
_ROLES_OPENINFERENCE = {
    "LLM": "llm",
    "RETRIEVER": "retriever",
    "TOOL": "tool",
    "AGENT": "agent",
    "CHAIN": "chain",
}
_ROLES_GENAI = {
    "chat": "llm",
    "text_completion": "llm",
    "generate_content": "llm",
    "execute_tool": "tool",
    "invoke_agent": "agent",
    "create_agent": "agent",
    "retrieval": "retriever",
}


def span_role(span: Span) -> str:
    """llm, retriever, tool, agent, chain or other."""
    kind = span.attributes.get("openinference.span.kind")
    if isinstance(kind, str) and kind.upper() in _ROLES_OPENINFERENCE:
        return _ROLES_OPENINFERENCE[kind.upper()]
    operation = span.attributes.get("gen_ai.operation.name")
    if isinstance(operation, str) and operation in _ROLES_GENAI:
        return _ROLES_GENAI[operation]
    return "other"


def indexed(attributes: dict[str, Any], prefix: str) -> tuple[list[dict[str, Any]], set[str]]:
    """``prefix.N.rest`` attributes as a list ordered by N of ``{rest: value}`` dicts. A
    key whose N is over `assay.inputs.otlp.limits.MAX_INDEX` is not read (it stays among
    the attributes kept as metadata)."""
    found: dict[int, dict[str, Any]] = {}
    used: set[str] = set()
    for key, value in attributes.items():
        if not key.startswith(prefix + "."):
            continue
        parts = key_index(key, prefix)
        if parts is not None:
            found.setdefault(parts[0], {})[parts[1]] = value
            used.add(key)
    return [found[i] for i in sorted(found)], used


def _text_of_parts(message: dict[str, Any]) -> str | None:
    content = message.get("content")
    if isinstance(content, str):
        return content
    texts = []
    for part in message.get("parts") or content or []:
        if isinstance(part, dict) and part.get("type", "text") == "text":
            text = part.get("content", part.get("text"))
            if isinstance(text, str):
                texts.append(text)
    return "\n".join(texts) if texts else None


def _messages(value: Any, key: str) -> list[dict[str, Any]] | None:
    """A messages attribute (JSON text or structured) as a list of role/content dicts.
    Raises `assay.inputs.otlp.limits.SpanOverLimit` for JSON text that nests too deep."""
    if isinstance(value, str):
        try:
            value = json_value(value, key)
        except SpanOverLimit:
            raise
        except ValueError:
            return [{"role": "user", "content": value}]
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        return None
    out = []
    for message in value:
        if isinstance(message, dict):
            out.append({"role": str(message.get("role", "")), "content": _text_of_parts(message)})
    return out


def _last_user(messages: list[dict[str, Any]] | None) -> str | None:
    for message in reversed(messages or []):
        if message["role"] == "user" and message["content"]:
            return str(message["content"])
    return None


def _assistant_text(messages: list[dict[str, Any]] | None) -> str | None:
    for message in messages or []:
        if message["role"] in {"assistant", "model", ""} and message["content"]:
            return str(message["content"])
    return None


def _indexed_messages(
    attributes: dict[str, Any], prefix: str, content_key: str, role_key: str
) -> tuple[list[dict[str, Any]] | None, set[str]]:
    items, used = indexed(attributes, prefix)
    if not items:
        return None, used
    messages = [
        {"role": str(item.get(role_key, "")), "content": item.get(content_key)} for item in items
    ]
    return messages, used


def llm_exchange(span: Span) -> tuple[str | None, str | None, set[str]]:
    """(question, answer, keys consumed) of a span: the last user message it was sent and
    the assistant text it returned, from whichever convention the span follows; the
    span's ``input.value`` / ``output.value`` when it holds no messages."""
    attrs = span.attributes
    used: set[str] = set()
    inputs = outputs = None
    for key in ("gen_ai.input.messages", "gen_ai.prompt"):
        if key in attrs:
            inputs, used = _messages(attrs[key], key), used | {key}
            break
    for key in ("gen_ai.output.messages", "gen_ai.completion"):
        if key in attrs:
            outputs, used = _messages(attrs[key], key), used | {key}
            break
    for name, event_attributes in span.events:
        if inputs is None and name == "gen_ai.content.prompt":
            inputs = _messages(event_attributes.get("gen_ai.prompt"), "gen_ai.prompt")
        if outputs is None and name == "gen_ai.content.completion":
            outputs = _messages(event_attributes.get("gen_ai.completion"), "gen_ai.completion")
    for prefix, content, role, is_input in (
        ("gen_ai.prompt", "content", "role", True),
        ("gen_ai.completion", "content", "role", False),
        ("llm.input_messages", "message.content", "message.role", True),
        ("llm.output_messages", "message.content", "message.role", False),
    ):
        messages, keys = _indexed_messages(attrs, prefix, content, role)
        used |= keys
        if is_input and inputs is None:
            inputs = messages
        elif not is_input and outputs is None:
            outputs = messages
    question, answer = _last_user(inputs), _assistant_text(outputs)
    if question is None and isinstance(attrs.get("input.value"), str):
        question, used = attrs["input.value"], used | {"input.value", "input.mime_type"}
    if answer is None and isinstance(attrs.get("output.value"), str):
        answer, used = attrs["output.value"], used | {"output.value", "output.mime_type"}
    return question, answer, used


def documents(span: Span) -> tuple[list[str], set[str]]:
    """The retrieved documents' texts in rank order (OpenInference ``retrieval.documents``)."""
    items, used = indexed(span.attributes, "retrieval.documents")
    texts = [str(item["document.content"]) for item in items if item.get("document.content")]
    if isinstance(span.attributes.get("input.value"), str):
        used |= {"input.value", "input.mime_type"}
    return texts, used


def _arguments(value: Any, key: str) -> dict[str, Any] | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = json_value(value, key)
        except SpanOverLimit:
            raise
        except ValueError:
            return {"input": value}
    return value if isinstance(value, dict) else {"input": value}


def tool_call(span: Span) -> tuple[dict[str, Any], set[str]]:
    """A tool span as a step: name, arguments (a JSON object when the call sent one),
    result, outcome and latency in seconds."""
    attrs = span.attributes
    used: set[str] = set()
    name = span.name
    for key in ("gen_ai.tool.name", "tool.name"):
        if isinstance(attrs.get(key), str):
            name, used = attrs[key], used | {key}
            break
    arguments = result = None
    for key in ("gen_ai.tool.call.arguments", "tool.parameters", "input.value"):
        if key in attrs:
            arguments, used = _arguments(attrs[key], key), used | {key, "input.mime_type"}
            break
    for key in ("gen_ai.tool.call.result", "output.value"):
        if key in attrs:
            result, used = attrs[key], used | {key, "output.mime_type"}
            break
    step = {
        "name": name,
        "arguments": arguments,
        "result": result,
        "ok": span.error is None,
        "error": span.error,
        "latency": span.seconds,
        "kind": "tool",
    }
    if "gen_ai.tool.call.id" in attrs:
        step["call_id"], used = attrs["gen_ai.tool.call.id"], used | {"gen_ai.tool.call.id"}
    return step, used


def model_name(span: Span) -> tuple[str | None, set[str]]:
    for key in ("gen_ai.response.model", "gen_ai.request.model", "llm.model_name"):
        if isinstance(span.attributes.get(key), str):
            return span.attributes[key], {key}
    return None, set()


def output_tokens(span: Span) -> tuple[int | None, set[str]]:
    for key in ("gen_ai.usage.output_tokens", "llm.token_count.completion"):
        value = span.attributes.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value, {key}
    return None, set()
