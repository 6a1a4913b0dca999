"""`LeanTransport`: an httpx transport that speaks HTTP/1.1 over asyncio's own
connections, for the judge's many small requests.

Why: with 64 judge calls in flight a Ray worker's event loop spent about 70 % of its busy
time in httpx's default transport (httpcore's connection pool, h11's parser and anyio's
cancel scopes around every read and write: about 1 ms of CPU a request on the 2-core
machine), and a reply that arrives while the loop is busy waits. This transport keeps
httpx's client (its request building, headers, authentication, decoding of the body,
errors and proxies: a URL that an ``HTTP(S)_PROXY`` variable sends through a proxy is
mounted on httpx's own proxy transport, not on this one) and replaces only the exchange
on the wire:

- a request is written as bytes (request line, httpx's headers, the body) on an idle
  connection to its origin, or on a new one (``loop.create_connection``, TLS with
  httpx's default SSL context for ``https``);
- the reply is parsed by an `asyncio.Protocol` as it arrives: status line, headers,
  then a body of ``Content-Length`` bytes, or ``Transfer-Encoding: chunked``, or up to
  the end of the connection; interim 1xx replies are skipped; a ``HEAD`` request and
  the statuses 204 and 304 have no body;
- the connection goes back to the idle ones unless either side said
  ``Connection: close``, the body ran to the end of the connection, or the server closed
  it; at most ``max_idle`` are kept (the oldest closed first), and one the server
  closed while idle (its socket readable: one ``poll``) is dropped before it is used.

Whole replies are read before the response is returned (the judge reads every reply
whole); it is not for streamed replies (``assay run``'s targets keep httpx's own
transport). Failures raise httpx's exceptions: `httpx.ConnectError`,
`httpx.ConnectTimeout`, `httpx.ReadTimeout`, `httpx.WriteError`, `httpx.ReadError` (the
connection broke) and `httpx.RemoteProtocolError` (a reply that is not HTTP/1.1).
"""

from __future__ import annotations

import asyncio
import os
import select
import ssl
from collections import deque
from typing import Any

import httpx

__all__ = ["LeanTransport"]

#: the longest status line plus headers a reply may have
_MAX_HEAD = 64 * 1024
#: replies whose status carries no body
_NO_BODY = (204, 304)


class _Exchange(asyncio.Protocol):
    """One HTTP/1.1 connection: writes a request and parses its reply (see the module)."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False  # the server closed it, or it broke
        self._buffer = bytearray()
        self._reply: asyncio.Future[tuple[int, list[tuple[bytes, bytes]], bytes, bool]] | None
        self._reply = None
        self._head_only = False
        self._status = 0
        self._headers: list[tuple[bytes, bytes]] = []
        self._length: int | None = None  # body bytes expected; None: chunked or to EOF
        self._chunked = False
        self._reading_body = False
        self._body = bytearray()
        # bytes of the current chunk; -1: a size line is next; -2: trailers are next
        self._chunk_left = -1

    # ---- asyncio callbacks ----------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self._reply is None or self._reply.done():
            self.closed = True  # bytes no request asked for: the connection is not reused
            return
        self._buffer += data
        try:
            self._parse()
        except httpx.RemoteProtocolError as exc:
            self._fail(exc)

    def eof_received(self) -> bool:
        self.closed = True
        if self._reply is not None and not self._reply.done():
            if self._reading_body and self._length is None and not self._chunked:
                self._finish(keep=False)  # a body that runs to the end of the connection
            else:
                self._fail(
                    httpx.RemoteProtocolError(
                        "the server closed the connection before the whole reply"
                    )
                )
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._reply is not None and not self._reply.done():
            if exc is None and self._reading_body and self._length is None and not self._chunked:
                self._finish(keep=False)
            else:
                self._fail(httpx.ReadError(f"the connection broke: {exc or 'closed'}"))

    # ---- one exchange ---------------------------------------------------------------
    def send(self, data: bytes, head_only: bool) -> asyncio.Future[Any]:
        """Write a request; the future gets (status, headers, body, reusable)."""
        self._reply = asyncio.get_running_loop().create_future()
        if self.closed or self.transport is None or self.transport.is_closing():
            self._reply.set_exception(httpx.WriteError("the connection was closed"))
            return self._reply
        self._head_only = head_only
        self._status, self._headers, self._length = 0, [], None
        self._chunked = self._reading_body = False
        self._body = bytearray()
        self._chunk_left = -1
        self.transport.write(data)
        return self._reply

    def _fail(self, error: Exception) -> None:
        self.closed = True
        if self._reply is not None and not self._reply.done():
            self._reply.set_exception(error)
        if self.transport is not None:
            self.transport.close()

    def _finish(self, keep: bool) -> None:
        assert self._reply is not None
        if self._buffer:  # bytes past the reply: the connection is out of step
            keep = False
        self._reply.set_result((self._status, self._headers, bytes(self._body), keep))

    def _parse(self) -> None:
        if not self._reading_body:
            end = self._buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(self._buffer) > _MAX_HEAD:
                    raise httpx.RemoteProtocolError("the reply's headers are too long")
                return
            head = bytes(self._buffer[:end])
            del self._buffer[: end + 4]
            self._read_head(head)
            if self._status < 200:  # an interim reply (100 Continue): the real one follows
                self._status = 0
                self._parse()
                return
            if self._head_only or self._status in _NO_BODY or self._length == 0:
                self._finish(keep=self._keep())
                return
            self._reading_body = True
        if self._chunked:
            self._read_chunks()
        elif self._length is not None:
            if len(self._buffer) >= self._length:
                self._body = self._buffer[: self._length]
                del self._buffer[: self._length]
                self._finish(keep=self._keep())
        else:  # to the end of the connection
            self._body += self._buffer
            self._buffer.clear()

    def _read_head(self, head: bytes) -> None:
        lines = head.split(b"\r\n")
        parts = lines[0].split(b" ", 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
            raise httpx.RemoteProtocolError(f"not an HTTP/1.1 status line: {lines[0][:80]!r}")
        self._status = int(parts[1])
        headers = []
        for line in lines[1:]:
            name, colon, value = line.partition(b":")
            if not colon or not name or name != name.strip():
                raise httpx.RemoteProtocolError(f"malformed reply header: {line[:80]!r}")
            headers.append((name, value.strip()))
        self._headers = headers
        for name, value in headers:
            lower = name.lower()
            if lower == b"transfer-encoding" and b"chunked" in value.lower():
                self._chunked = True
            elif lower == b"content-length":
                if not value.isdigit():
                    raise httpx.RemoteProtocolError(f"bad Content-Length: {value[:40]!r}")
                self._length = int(value)
        if self._chunked:
            self._length = None

    def _keep(self) -> bool:
        """Whether the connection may carry another request after this reply."""
        for name, value in self._headers:
            if name.lower() == b"connection" and b"close" in value.lower():
                return False
        return not self.closed

    def _read_chunks(self) -> None:
        """Chunks as they arrive: a size line (hex, extensions ignored), that many bytes
        and CRLF; after the chunk of size 0, trailer lines up to an empty one."""
        while True:
            end = self._buffer.find(b"\r\n") if self._chunk_left < 0 else -2
            if end == -1:
                return
            if self._chunk_left == -2:  # a trailer line, or the empty line that ends
                del self._buffer[: end + 2]
                if end == 0:
                    self._finish(keep=self._keep())
                    return
                continue
            if self._chunk_left == -1:
                size = bytes(self._buffer[:end]).split(b";", 1)[0].strip()
                try:
                    self._chunk_left = int(size, 16)
                except ValueError:
                    raise httpx.RemoteProtocolError(f"bad chunk size: {size[:40]!r}") from None
                del self._buffer[: end + 2]
                if self._chunk_left == 0:
                    self._chunk_left = -2
                    continue
            if len(self._buffer) < self._chunk_left + 2:
                return
            self._body += self._buffer[: self._chunk_left]
            del self._buffer[: self._chunk_left + 2]
            self._chunk_left = -1


def _readable(exchange: _Exchange) -> bool:
    """Whether an idle connection's socket has something to read (an end of file)."""
    assert exchange.transport is not None
    sock = exchange.transport.get_extra_info("socket")
    if sock is None:
        return False
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLIN)
    return bool(poller.poll(0))


class LeanTransport(httpx.AsyncBaseTransport):
    """An httpx transport over asyncio connections (see the module).

    Args:
        max_idle: idle connections kept for later requests, all origins together.
        ssl_context: how ``https`` servers are verified; default httpx's
            (``httpx.create_ssl_context()``: certifi's authorities, ``SSL_CERT_FILE`` and
            ``SSL_CERT_DIR`` honoured).
    """

    def __init__(self, max_idle: int = 64, ssl_context: ssl.SSLContext | None = None) -> None:
        self.max_idle = max_idle
        self._idle: deque[tuple[tuple[bytes, bytes, int], _Exchange]] = deque()
        self._ssl = ssl_context

    async def _connect(self, url: httpx.URL, timeout: float | None) -> _Exchange:
        loop = asyncio.get_running_loop()
        secure = url.scheme == "https"
        if secure and self._ssl is None:
            self._ssl = httpx.create_ssl_context()
        port = url.port or (443 if secure else 80)
        try:
            _, exchange = await asyncio.wait_for(
                loop.create_connection(
                    _Exchange,
                    url.host,
                    port,
                    ssl=self._ssl if secure else None,
                    server_hostname=url.host if secure else None,
                ),
                timeout,
            )
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(f"no connection to {url.host}:{port} in time") from exc
        except OSError as exc:
            plain = exc.errno and not isinstance(exc, ssl.SSLError)  # TLS: its own words
            reason = os.strerror(exc.errno) if plain else str(exc)
            raise httpx.ConnectError(f"cannot connect to {url.host}:{port}: {reason}") from exc
        return exchange

    def _take_idle(self, origin: tuple[bytes, bytes, int]) -> _Exchange | None:
        """The most recently used open idle connection to ``origin``, if any: one whose
        socket is readable (the server closed it, and the loop has not seen it yet) is
        closed instead."""
        for i in range(len(self._idle) - 1, -1, -1):
            key, exchange = self._idle[i]
            if key == origin:
                del self._idle[i]
                if not exchange.closed and not _readable(exchange):
                    return exchange
                assert exchange.transport is not None
                exchange.transport.close()
        return None

    def _put_idle(self, origin: tuple[bytes, bytes, int], exchange: _Exchange) -> None:
        self._idle.append((origin, exchange))
        while len(self._idle) > self.max_idle:
            _, oldest = self._idle.popleft()
            assert oldest.transport is not None
            oldest.transport.close()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if url.scheme not in ("http", "https"):
            raise httpx.UnsupportedProtocol(f"{url.scheme!r} URLs are not supported")
        timeouts = request.extensions.get("timeout", {})
        origin = (url.raw_scheme, url.raw_host, url.port or 0)
        exchange = self._take_idle(origin) or await self._connect(url, timeouts.get("connect"))
        body = await request.aread()
        target = url.raw_path
        lines = [request.method.encode("ascii") + b" " + target + b" HTTP/1.1"]
        lines.extend(name + b": " + value for name, value in request.headers.raw)
        data = b"\r\n".join(lines) + b"\r\n\r\n" + body
        try:
            reply = exchange.send(data, head_only=request.method == "HEAD")
            status, headers, content, keep = await asyncio.wait_for(reply, timeouts.get("read"))
        except TimeoutError as exc:
            exchange._fail(httpx.ReadTimeout("no reply in time"))
            raise httpx.ReadTimeout("no reply within the read timeout", request=request) from exc
        except BaseException:
            exchange._fail(httpx.ReadError("the request was abandoned"))
            raise
        if keep and not exchange.closed:
            self._put_idle(origin, exchange)
        elif exchange.transport is not None:
            exchange.transport.close()
        return httpx.Response(
            status,
            headers=headers,
            stream=httpx.ByteStream(content),
            extensions={"http_version": b"HTTP/1.1"},
        )

    async def aclose(self) -> None:
        while self._idle:
            _, exchange = self._idle.popleft()
            if exchange.transport is not None:
                exchange.transport.close()
