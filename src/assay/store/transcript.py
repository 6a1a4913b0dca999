"""What the store keeps of a sample's conversation turns, agent trace and reference calls.

`stored_items` turns ``Sample.turns`` / ``Sample.trace`` / ``Sample.expected_tool_calls``
into the JSON the ``test_results`` columns of the same names hold:

- each item as ``model_dump(mode="json", exclude_none=True)``: a turn is ``{"role",
  "content", "tool_calls", "tool_call_id", "name"}``, a step ``{"name", "arguments",
  "ok", "error", "latency", "kind", "result"}`` (extra keys a log carried are kept);
- redacted as metric evidence is (`assay.core.redaction.redact` with ``by_name=False``: known
  secret values, URL passwords and bearer tokens are cut out of every string; keys are
  the user's data and are kept);
- bounded: at most `MAX_STORED_ITEMS` items (then one last item ``{"omitted": n}`` says
  how many more the sample had) and `MAX_STORED_CHARS` characters per string (then the
  text ends with `cut_marker`). The limit per string equals the default
  ``max_field_chars``, the longest text a metric reads by default; query and response are
  stored whole, as before.

`stored_texts` does the same for a sample's ``contexts`` (a list of texts; not redacted,
as query and response are not): at most `MAX_STORED_ITEMS` texts, then one last text
saying how many more there were, each cut at `MAX_STORED_CHARS` characters.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from assay.core.redaction import redact

__all__ = [
    "MAX_STORED_CHARS",
    "MAX_STORED_ITEMS",
    "OMITTED_KEY",
    "cut_marker",
    "omitted_texts",
    "stored_items",
    "stored_texts",
]

#: most turns / steps / reference calls stored per sample
MAX_STORED_ITEMS = 1_000
#: most characters stored per string inside them (the default ``max_field_chars``)
MAX_STORED_CHARS = 100_000
#: the key of the last item when items were left out: ``{"omitted": <count>}``
OMITTED_KEY = "omitted"


def cut_marker(cut: int) -> str:
    """What ends a string that was cut: ``… [1,234 more characters not stored]``."""
    return f"… [{cut:,} more characters not stored]"


def _cut(text: str) -> str:
    if len(text) <= MAX_STORED_CHARS:
        return text
    return text[:MAX_STORED_CHARS] + cut_marker(len(text) - MAX_STORED_CHARS)


def _cut_strings(value: Any) -> Any:
    """``value`` (a fresh JSON copy, changed in place) with every string and key cut to
    `MAX_STORED_CHARS`; level by level, so deep arguments cost no recursion."""
    if isinstance(value, str):
        return _cut(value)
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key in [k for k in node if isinstance(k, str) and len(k) > MAX_STORED_CHARS]:
                node[_cut(key)] = node.pop(key)
            items = list(node.items())
        elif isinstance(node, list):
            items = list(enumerate(node))
        else:
            continue
        for key, item in items:
            if isinstance(item, str):
                node[key] = _cut(item)
            elif isinstance(item, dict | list):
                stack.append(item)
    return value


def stored_items(
    items: Sequence[BaseModel] | None, secrets: Sequence[str]
) -> list[dict[str, Any]] | None:
    """The stored form of ``items`` (module docstring); None for None. ``secrets`` are the
    values to cut out (`assay.core.redaction.known_secrets`)."""
    if items is None:
        return None
    kept = [item.model_dump(mode="json", exclude_none=True) for item in items[:MAX_STORED_ITEMS]]
    out: list[dict[str, Any]] = _cut_strings(redact(kept, secrets, by_name=False))
    if len(items) > MAX_STORED_ITEMS:
        out.append({OMITTED_KEY: len(items) - MAX_STORED_ITEMS})
    return out


def omitted_texts(count: int) -> str:
    """The last stored context of a sample that had more: ``[3 more contexts not stored]``."""
    return f"[{count:,} more contexts not stored]"


def stored_texts(texts: Sequence[str] | None) -> list[str] | None:
    """The stored form of a sample's ``contexts`` (module docstring); None for None."""
    if texts is None:
        return None
    out = [_cut(text) for text in texts[:MAX_STORED_ITEMS]]
    if len(texts) > MAX_STORED_ITEMS:
        out.append(omitted_texts(len(texts) - MAX_STORED_ITEMS))
    return out
