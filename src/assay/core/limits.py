"""The defaults of Assay's limits on untrusted sizes, and the words of the errors past
them: how to raise a limit is said the same way everywhere (`raise_hint`,
`over_limit`). The settings themselves are `assay.core.config.AssayConfig`'s."""

from __future__ import annotations

__all__ = [
    "DEFAULT_MAX_JSON_DEPTH",
    "DEFAULT_MAX_REPLY_BYTES",
    "MAX_JSON_DEPTH_CEILING",
    "over_limit",
    "raise_hint",
]

#: default largest reply body read from another server (``max_reply_bytes``): 16 MiB
DEFAULT_MAX_REPLY_BYTES = 16 * 2**20
#: default deepest nesting of a JSON field or document (``max_json_depth``)
DEFAULT_MAX_JSON_DEPTH = 500
#: highest ``max_json_depth`` allowed: Python's JSON parser and encoder spend one level of
#: the interpreter's recursion limit (1,000) per level of nesting, and the caller's own
#: frames (a test runner, a web server) need the rest
MAX_JSON_DEPTH_CEILING = 800


def raise_hint(setting: str) -> str:
    """How to raise the limit ``setting`` (``max_field_chars``, ``max_json_depth``,
    ``max_contexts``, ``max_reply_bytes``), for messages."""
    upto = f" (up to {MAX_JSON_DEPTH_CEILING})" if setting == "max_json_depth" else ""
    return f"raise it{upto} with ASSAY_{setting.upper()} or {setting} in [tool.assay]"


def over_limit(measured: str, limit: int, setting: str) -> str:
    """``measured`` (e.g. "has 1,001 characters") past ``limit`` of ``setting``, and how
    to raise it: the message of every input-limit error."""
    return f"{measured}, over the limit of {limit:,} ({setting}); {raise_hint(setting)}"
