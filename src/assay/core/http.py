"""HTTP details shared by Assay's clients (the judge, a remote embedding endpoint, the
targets of ``assay run``): ``Retry-After``, the circuit that stops calling a server that
cannot be reached, a client over Assay's own transport that still honours proxy
variables, and reading a reply's body with a bound (`read_bounded`)."""

from __future__ import annotations

import datetime
import email.utils
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from assay.core.http_codings import ACCEPTED_ENCODINGS, Undecodable, decoded, inflaters
from assay.core.limits import raise_hint

__all__ = [
    "ACCEPTED_ENCODINGS",
    "UNREACHABLE_AFTER",
    "ConnectCircuit",
    "ReplyTooLarge",
    "Unreachable",
    "client_over",
    "read_bounded",
    "read_bounded_sync",
    "retry_after_seconds",
]

#: calls in a row that fail to connect after their retries before the circuit opens (one
#: is enough while the server has never been reached)
UNREACHABLE_AFTER = 3


class Unreachable(RuntimeError):
    """A server cannot be reached: its client's `ConnectCircuit` is open. A run stops on
    it (exit 2, one line) instead of failing every sample in turn."""


@dataclass
class ConnectCircuit:
    """Whether a server has been reached, how many calls in a row could not connect to it
    (after their retries), and, once open, why (``open``): a call that cannot connect
    before the server was ever reached opens it, or `UNREACHABLE_AFTER` in a row do."""

    reached: bool = False
    unconnected: int = 0
    open: str | None = None

    def connected(self) -> None:
        """The server was reached (it may have answered with an error)."""
        self.reached = True

    def answered(self) -> None:
        """A call succeeded: the count of calls that could not connect starts again."""
        self.reached, self.unconnected = True, 0

    def could_not_connect(self, why: str) -> bool:
        """A call could not connect after its retries; True when that opens the circuit
        (``open`` is then ``why``)."""
        self.unconnected += 1
        if not self.reached or self.unconnected >= UNREACHABLE_AFTER:
            self.open = why
        return self.open is not None


def retry_after_seconds(headers: Mapping[str, str] | None) -> float | None:
    """The wait a ``Retry-After`` header asks for, in seconds (0 for a time passed): a
    number of seconds or an HTTP date; None when absent or unreadable."""
    value = headers.get("retry-after") if headers is not None else None
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:  # an HTTP date, or something unreadable (then ignored)
        try:
            parsed = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=datetime.UTC)
        seconds = parsed.timestamp() - time.time()
    return max(0.0, seconds) if math.isfinite(seconds) else None


def client_over(transport: Any, **options: Any) -> Any:
    """An ``httpx.AsyncClient`` (``options`` passed on) whose direct requests go through
    ``transport``, while a URL that ``HTTP(S)_PROXY`` or ``ALL_PROXY`` sends through a
    proxy (and ``NO_PROXY`` does not exempt) goes through httpx's own proxy transport.

    httpx reads those variables only for a client given no transport, so the client is
    built without one and ``transport`` then takes the place of its default one; where a
    release of httpx keeps that elsewhere, the client is given ``transport`` (and then
    ignores the variables, as a client given a transport does)."""
    import httpx

    client = httpx.AsyncClient(**options)
    if isinstance(getattr(client, "_transport", None), httpx.AsyncBaseTransport):
        client._transport = transport
        return client
    return httpx.AsyncClient(transport=transport, **options)


class ReplyTooLarge(Exception):
    """A reply's body is over the read limit (``max_reply_bytes``): it was not read
    further and its connection was closed. The message names the limit and the setting."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"the reply's body is over the limit of {limit:,} bytes (max_reply_bytes) and was "
            f"not read further; {raise_hint('max_reply_bytes')}"
        )
        self.limit = limit


class _Bounded:
    """A reply's body decoded from its raw reads (`assay.core.http_codings`: at most a
    piece of 64 KiB at a step) and counted as it is produced."""

    def __init__(self, response: Any, limit: int) -> None:
        self._undo = inflaters(response.headers)
        self._limit = limit
        self._parts: list[bytes] = []
        self._size = 0

    def add(self, raw: bytes) -> None:
        """Decodes and keeps one raw read; `ReplyTooLarge` once past the limit, an
        ``httpx.DecodingError`` for a body its coding cannot decode (as httpx's own)."""
        try:
            for piece in decoded(raw, self._undo):
                self._size += len(piece)
                if self._size > self._limit:
                    raise ReplyTooLarge(self._limit)
                self._parts.append(piece)
        except Undecodable as exc:
            import httpx

            raise httpx.DecodingError(str(exc)) from None

    def body(self) -> bytes:
        return b"".join(self._parts)


async def read_bounded(response: Any, limit: int) -> bytes:
    """The decoded body of an ``httpx.Response`` opened as a stream, read as it arrives
    and counted after decompression by pieces of at most 64 KiB (a gzip bomb stops at
    ``limit``, having held no more than the limit and a piece). The request should
    accept only `ACCEPTED_ENCODINGS`, the codings undone here.

    Raises `ReplyTooLarge` once more than ``limit`` bytes have come (the caller's
    ``stream`` block then closes the response, and with it the connection, half read)."""
    body = _Bounded(response, limit)
    async for raw in response.aiter_raw():
        body.add(raw)
    return body.body()


def read_bounded_sync(response: Any, limit: int) -> bytes:
    """`read_bounded` for a response of a synchronous ``httpx.Client``."""
    body = _Bounded(response, limit)
    for raw in response.iter_raw():
        body.add(raw)
    return body.body()
