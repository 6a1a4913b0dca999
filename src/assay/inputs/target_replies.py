"""Reading a target's reply within limits (`assay.inputs.target_kinds`): nothing a
target sends can make ``assay run`` hold more than a bounded amount of memory, and no
reply's shape can end the run.

- `read_body`: the body decoded (``gzip``, ``deflate``: `assay.core.http_codings`, as
  the judge's replies are) by pieces of at most `PIECE_BYTES`, its decoded bytes
  counted as they are produced; past `MAX_REPLY_BYTES` nothing more is read, and the
  call fails naming the limit (a small compressed body that inflates to gigabytes stops
  at the limit).
- `stream_lines`: the lines of a server-sent event stream, each at most
  `MAX_STREAM_LINE_BYTES` (a longer one fails the call as soon as it passes the limit,
  before it is whole) and `MAX_STREAM_BYTES` in all.
- `StreamedChat` and `chat_completion`: an OpenAI-compatible chat reply, streamed or
  whole, checked shape by shape: an event or field of the wrong JSON type is the call's
  error, saying which event and what it was.

Every failure is a `CallFailed`, which `assay.inputs.targets` makes that sample's error.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx

from assay.core.http_codings import (
    ACCEPTED_ENCODINGS,
    PIECE_BYTES,
    Undecodable,
    decoded,
    inflaters,
)
from assay.core.limits import DEFAULT_MAX_REPLY_BYTES

__all__ = [
    "ACCEPTED_ENCODINGS",
    "MAX_REPLY_BYTES",
    "MAX_STREAM_BYTES",
    "MAX_STREAM_LINE_BYTES",
    "PIECE_BYTES",
    "CallFailed",
    "StreamedChat",
    "chat_completion",
    "decoded_pieces",
    "finite_seconds",
    "json_kind",
    "json_reply",
    "quoted",
    "read_body",
    "stream_lines",
    "too_large",
    "usage_counts",
    "valid_text",
]

#: most decoded bytes of a reply body read (and of the text of a streamed reply, in
#: UTF-8): a larger one is the sample's error, not a run that runs out of memory (the
#: scoring limits, max_field_chars and the others, apply to what is read); the judge's
#: default (max_reply_bytes), not that setting
MAX_REPLY_BYTES = DEFAULT_MAX_REPLY_BYTES
#: most bytes of one line of an event stream (one event's ``data:``), decoded
MAX_STREAM_LINE_BYTES = 2**20
#: most decoded bytes of an event stream in all, its events' JSON included
MAX_STREAM_BYTES = 64 * 2**20
#: most characters of a reply quoted in an error
_QUOTED_CHARS = 200
#: the line ends of an event stream: CRLF, LF or CR
_LINE_END = re.compile(rb"\r\n|\r|\n")
#: the largest token count kept (a 64-bit integer column)
_MAX_COUNT = 2**63 - 1
#: a code point of a UTF-16 surrogate: alone in a Python string (JSON's "\ud800"), it
#: cannot be written as UTF-8
_SURROGATE = re.compile("[\ud800-\udfff]")


def valid_text(text: str) -> str:
    """``text`` with each lone surrogate (which no UTF-8 file or database takes) replaced
    by U+FFFD; ``text`` itself when it has none."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


class CallFailed(Exception):
    """One attempt failed: ``retryable`` for 429, 5xx and connection failures;
    ``unconnected`` when no connection was made (refused, no route, connect timeout)."""

    def __init__(
        self, reason: str, http_status: int | None = None, retryable: bool = False, **extra: Any
    ) -> None:
        reason = valid_text(reason)
        super().__init__(reason)
        self.reason = reason
        self.http_status = http_status
        self.retryable = retryable
        self.retry_after: float | None = extra.get("retry_after")
        self.unconnected: bool = extra.get("unconnected", False)


def quoted(text: str) -> str:
    """``text`` on one line, cut to its first characters, for an error."""
    return " ".join(text.split())[:_QUOTED_CHARS]


def json_kind(value: Any) -> str:
    """What a JSON value is, in words: "an object", "a list", "text", "a number"..."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "text"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return "a number"
    if value is None:
        return "null"
    return f"a {type(value).__name__}"


async def decoded_pieces(response: httpx.Response, limit: int, what: str) -> AsyncIterator[bytes]:
    """The reply's body decoded, in pieces of at most `PIECE_BYTES`; `CallFailed` as soon as its
    decoded bytes pass ``limit`` (``what`` names the limit in the error)."""
    undo = inflaters(response.headers)
    size = 0
    async for raw in response.aiter_raw():
        try:
            for piece in decoded(raw, undo):
                size += len(piece)
                if size > limit:
                    raise too_large(what, limit, response.status_code)
                yield piece
        except Undecodable as exc:
            raise CallFailed(str(exc)) from None


def too_large(what: str, limit: int, status: int | None = None) -> CallFailed:
    """The error of a reply past a limit."""
    return CallFailed(f"{what} is over {limit:,} bytes: not read further", status)


async def read_body(response: httpx.Response, limit: int | None = None) -> bytes:
    """The reply body decoded, up to ``limit`` bytes (`MAX_REPLY_BYTES`); `CallFailed`
    past it (a body of no coding whose declared length is past it is refused before
    reading)."""
    limit = MAX_REPLY_BYTES if limit is None else limit
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and not inflaters(response.headers) and int(declared) > limit:
        raise too_large("the reply", limit, response.status_code)
    read = bytearray()
    async for piece in decoded_pieces(response, limit, "the reply"):
        read += piece
    return bytes(read)


async def stream_lines(
    response: httpx.Response,
    max_line: int | None = None,
    limit: int | None = None,
) -> AsyncIterator[str]:
    """The lines of an event stream (UTF-8; CRLF, LF or CR ends a line), each at most
    ``max_line`` bytes (`MAX_STREAM_LINE_BYTES`) and ``limit`` in all (`MAX_STREAM_BYTES`);
    `CallFailed` naming the limit past either, and nothing more is read."""
    max_line = MAX_STREAM_LINE_BYTES if max_line is None else max_line
    limit = MAX_STREAM_BYTES if limit is None else limit
    pending = bytearray()
    after_cr = False
    async for piece in decoded_pieces(response, limit, "the stream"):
        if after_cr and piece.startswith(b"\n"):
            piece = piece[1:]  # the LF of a CRLF split between two pieces
        after_cr = piece.endswith(b"\r")
        parts = _LINE_END.split(piece)
        pending += parts[0]
        for part in parts[1:]:
            if len(pending) > max_line:
                break
            yield pending.decode(errors="replace")
            pending = bytearray(part)
        if len(pending) > max_line:
            raise CallFailed(
                f"a line of the stream is over {max_line:,} bytes: not read further",
                response.status_code,
            )
    if pending:
        yield pending.decode(errors="replace")


def _loads(data: str | bytes) -> Any:
    """JSON, or ValueError (a nesting too deep for the parser included)."""
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def json_reply(raw: bytes, status: int | None = None) -> Any:
    """A reply's body ``raw`` as JSON; `CallFailed` (with the reply's HTTP ``status``)
    quoting its start otherwise (a nesting too deep to parse included)."""
    try:
        return _loads(raw)
    except ValueError:
        shown = quoted(raw[:4096].decode(errors="replace"))
        raise CallFailed(f"the reply is not JSON: {shown!r}", status) from None


def usage_counts(raw: Any) -> dict[str, int] | None:
    """The token counts of a reply's ``usage`` object (whole numbers from 0 to 2^63-1;
    others are left out), or None when it is not an object."""
    if not isinstance(raw, dict):
        return None
    keys = ("prompt_tokens", "completion_tokens", "total_tokens")
    return {
        k: raw[k]
        for k in keys
        if isinstance(raw.get(k), int)
        and not isinstance(raw[k], bool)
        and 0 <= raw[k] <= _MAX_COUNT
    }


def _error_message(error: Any) -> str:
    message = error.get("message") if isinstance(error, dict) else error
    return quoted(message if isinstance(message, str) else json.dumps(message, default=str))


def _choice_texts(choices: Any, key: str, where: str) -> list[str]:
    """The text of each choice's ``key`` (``delta`` or ``message``) ``content``; `CallFailed`
    saying ``where`` when a part has the wrong type."""
    if choices is None:
        return []
    if not isinstance(choices, list):
        raise CallFailed(f"{where} has choices that are {json_kind(choices)}, not a list")
    texts = []
    for number, choice in enumerate(choices):
        if not isinstance(choice, dict):
            raise CallFailed(f"{where} has choice {number} that is {json_kind(choice)}")
        part = choice.get(key)
        if part is None:
            continue
        if not isinstance(part, dict):
            raise CallFailed(f"{where} has a {key} that is {json_kind(part)}, not an object")
        content = part.get("content")
        if content is None:
            continue
        if not isinstance(content, str):
            raise CallFailed(f"{where} has {key} content that is {json_kind(content)}, not text")
        texts.append(content)
    return texts


class StreamedChat:
    """The events of a streamed chat completion, read one ``data:`` line at a time: the
    text so far (`MAX_REPLY_BYTES` of UTF-8 at most) and the usage."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.usage: dict[str, int] | None = None
        self.events = 0
        self._size = 0

    def event(self, data: str) -> bool:
        """Reads one event's data; whether it carried text. `CallFailed` when it is not a
        chunk of a chat completion, saying which event and why."""
        self.events += 1
        where = f"the stream's event {self.events}"
        try:
            chunk = _loads(data)
        except ValueError:
            raise CallFailed(f"{where} is not JSON: {quoted(data)!r}") from None
        if not isinstance(chunk, dict):
            raise CallFailed(f"{where} is {json_kind(chunk)}, not an object")
        if chunk.get("error") is not None and not chunk.get("choices"):
            raise CallFailed(f"{where} is an error: {_error_message(chunk['error'])}")
        texts = [t for t in _choice_texts(chunk.get("choices"), "delta", where) if t]
        for text in texts:
            self._size += len(text.encode(errors="surrogatepass"))
            if self._size > MAX_REPLY_BYTES:
                raise too_large("the streamed text", MAX_REPLY_BYTES)
            self.parts.append(text)
        if isinstance(chunk.get("usage"), dict):
            self.usage = usage_counts(chunk["usage"])
        return bool(texts)


def chat_completion(raw: bytes) -> tuple[str, dict[str, int] | None]:
    """A non-streamed chat completion's answer and usage; `CallFailed` saying what is
    wrong with it."""
    reply = json_reply(raw)
    if not isinstance(reply, dict):
        raise CallFailed(f"the reply is {json_kind(reply)}, not a chat completion")
    if reply.get("error") is not None and not reply.get("choices"):
        raise CallFailed(f"the reply is an error: {_error_message(reply['error'])}")
    choices = reply.get("choices")
    _choice_texts(choices, "message", "the reply")  # each part of the right type
    if not choices or choices[0].get("message") is None:
        raise CallFailed("the reply is not a chat completion (no choices[0].message)")
    content = choices[0]["message"].get("content")
    if not isinstance(content, str):
        raise CallFailed("the reply's message has no text content")
    return content, usage_counts(reply.get("usage"))


def finite_seconds(value: Any) -> bool:
    """Whether ``value`` is a number of seconds: finite, not negative, not a bool (an
    integer too large for a float is not)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value) and value >= 0
    except OverflowError:
        return False
