"""`AiohttpTransport`: the judge's HTTP/1.1 transport under httpx's client: aiohttp's
connection pool and C parser carry the exchange, and aiohttp's failures are raised as
the exceptions httpx's own transport raises.

Why aiohttp: the judge sends many small requests at once, and httpx's default transport
(httpcore, h11, anyio) spends about 1 ms of CPU on each; aiohttp's pool and parser are
maintained and strict (malformed chunk sizes, a missing CRLF after a chunk, bad status
lines are refused), and within 11 % of the hand-written transport this replaced at a 20
ms judge, equal at 200 ms (``benchmarks/judge_throughput.py``; docs/scale.md). Where it
reads replies differently from h11, tests/test_judge_transport_fuzz.py lists how.
httpx's client keeps its request building, headers, authentication and proxies: a URL
that an ``HTTP(S)_PROXY`` variable sends through a proxy is mounted on httpx's own proxy
transport (`assay.core.http.client_over`); this transport never reads the environment.
The body comes as it was sent (aiohttp's own decompression is off), for httpx or
`assay.core.http.read_bounded` to decode.

The ``httpx-aiohttp`` package does the same in less: it maps aiohttp's exceptions
loosely (a refused connection and a server that hangs up mid-reply both become
`httpx.ConnectTimeout`, a malformed reply is not mapped at all), a reason phrase that is
not UTF-8 escapes it as a `UnicodeEncodeError`, and a request's ``Connection: close`` is
not honoured; this module is its own adapter, and maps each failure from the exception
aiohttp raised:

=====================================================  ===============================
aiohttp                                                httpx
=====================================================  ===============================
``ClientConnectorDNSError``                            `httpx.ConnectError` ("could not
                                                       resolve host NAME: reason")
``ClientConnectorError`` (refused, TLS, no route)      `httpx.ConnectError` ("cannot
                                                       connect to HOST:PORT: reason")
``ConnectionTimeoutError``                             `httpx.ConnectTimeout`
``SocketTimeoutError``, ``ServerTimeoutError``         `httpx.ReadTimeout`
``ServerDisconnectedError``, ``ClientPayloadError``,   `httpx.RemoteProtocolError`
``ClientResponseError`` (a reply that is not HTTP/1.1
or a malformed body)
``ClientOSError`` (the connection was reset), others   `httpx.ReadError`
=====================================================  ===============================

A connection is reused only after a whole, well-formed reply that does not end it: it is
closed after a reply's ``Connection: close``, an HTTP/1.0 reply without keep-alive, a
parse error or a body not read to its end (aiohttp), and after a request's ``Connection:
close`` (sent on a pool of its own whose connections are never reused: aiohttp reads
only the reply's).
"""

from __future__ import annotations

import os
import socket
import ssl
from collections.abc import AsyncIterator

import aiohttp
import httpx
import yarl

__all__ = ["AiohttpTransport", "as_httpx_error"]


def _reason(error: aiohttp.ClientConnectorError) -> str:
    """The operating system's words for a failed connection (TLS: OpenSSL's own)."""
    cause = error.os_error
    if isinstance(cause, socket.gaierror):  # the resolver's words ("Name or service ...")
        return cause.strerror or str(cause)
    if isinstance(cause, ssl.SSLError) or not getattr(cause, "errno", None):
        return str(cause)
    return os.strerror(cause.errno)


def as_httpx_error(error: aiohttp.ClientError) -> httpx.TransportError:
    """The httpx exception that stands for ``error``, an aiohttp exception."""
    mapped: httpx.TransportError
    if isinstance(error, aiohttp.ClientConnectorDNSError):
        mapped = httpx.ConnectError(f"could not resolve host {error.host}: {_reason(error)}")
    elif isinstance(error, aiohttp.ClientConnectorError):
        mapped = httpx.ConnectError(
            f"cannot connect to {error.host}:{error.port}: {_reason(error)}"
        )
    elif isinstance(error, aiohttp.ConnectionTimeoutError):
        mapped = httpx.ConnectTimeout(f"no connection in time ({error})")
    elif isinstance(error, aiohttp.ServerTimeoutError):
        mapped = httpx.ReadTimeout(f"no reply within the read timeout ({error})")
    elif isinstance(error, aiohttp.ServerDisconnectedError):
        mapped = httpx.RemoteProtocolError("the server closed the connection before the reply")
    elif isinstance(error, aiohttp.ClientPayloadError):
        mapped = httpx.RemoteProtocolError(f"the reply's body is incomplete or malformed: {error}")
    elif isinstance(error, aiohttp.ClientResponseError):  # the parser refused the reply
        message = " ".join(str(error.message).split())
        mapped = httpx.RemoteProtocolError(f"a reply that is not HTTP/1.1: {message}")
    else:  # a reset connection, and what else aiohttp may raise
        mapped = httpx.ReadError(f"the connection broke: {error}")
    return mapped


class _Body(httpx.AsyncByteStream):
    """An aiohttp reply's body as it arrives, its failures raised as httpx's; closed
    before its end, the connection is closed with it (aiohttp reuses only a connection
    whose reply was read whole)."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._response.content.iter_any():
                yield chunk
        except aiohttp.ClientError as exc:
            raise as_httpx_error(exc) from exc

    async def aclose(self) -> None:
        self._response.release()


def _says_close(headers: httpx.Headers) -> bool:
    """Whether a request's ``Connection`` header asks to close the connection after it
    (RFC 9112, 9.6: no further request may then be sent on it)."""
    return any(
        token.strip().lower() == "close"
        for value in headers.get_list("connection")
        for token in value.split(",")
    )


class AiohttpTransport(httpx.AsyncBaseTransport):
    """An httpx transport over aiohttp sessions (see the module), made on the first
    request in the event loop that uses them.

    Args:
        max_connections: connections open at once, all origins together (None: no limit).
        keepalive_expiry: seconds an idle connection is kept.
        ssl_context: how ``https`` servers are verified; default httpx's, made at the
            first ``https`` request (``httpx.create_ssl_context()``, 0.1 s: certifi's
            authorities, ``SSL_CERT_FILE`` and
            ``SSL_CERT_DIR`` honoured).
    """

    def __init__(
        self,
        max_connections: int | None = None,
        keepalive_expiry: float = 5.0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.max_connections = max_connections
        self.keepalive_expiry = keepalive_expiry
        self._ssl_context = ssl_context
        self._kept: aiohttp.ClientSession | None = None
        # requests that say Connection: close, on connections never reused (aiohttp's
        # pool reads only the reply's Connection header)
        self._closing: aiohttp.ClientSession | None = None

    def _session(self, close: bool) -> aiohttp.ClientSession:
        session = self._closing if close else self._kept
        if session is None:
            connector = aiohttp.TCPConnector(
                limit=self.max_connections or 0,
                keepalive_timeout=None if close else self.keepalive_expiry,
                force_close=close,
            )
            # httpx keeps the cookies: aiohttp's jar would only filter them again
            session = aiohttp.ClientSession(
                connector=connector, trust_env=False, cookie_jar=aiohttp.DummyCookieJar()
            )
            if close:
                self._closing = session
            else:
                self._kept = session
        return session

    def ssl_context(self) -> ssl.SSLContext:
        """The context that verifies ``https`` servers (httpx's default, made once)."""
        if self._ssl_context is None:
            self._ssl_context = httpx.create_ssl_context()
        return self._ssl_context

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        timeouts = request.extensions.get("timeout", {})
        body = await request.aread()
        session = self._session(close=_says_close(request.headers))
        raw_headers = request.headers.raw  # with httpx's spelling
        try:
            response = await session.request(
                request.method,
                # as httpx encoded it; a user and password in it are already httpx's
                # Authorization header (aiohttp refuses a URL with both)
                yarl.URL(str(request.url.copy_with(userinfo=b"")), encoded=True),
                headers=[(k.decode("latin-1"), v.decode("latin-1")) for k, v in raw_headers],
                data=body or None,
                allow_redirects=False,  # httpx follows them, if asked
                auto_decompress=False,  # httpx decodes the body
                timeout=aiohttp.ClientTimeout(
                    total=None,
                    connect=timeouts.get("pool"),
                    sock_connect=timeouts.get("connect"),
                    sock_read=timeouts.get("read"),
                ),
                ssl=self.ssl_context() if request.url.scheme == "https" else True,
                server_hostname=request.extensions.get("sni_hostname"),
            )
        except aiohttp.ClientError as exc:
            raise as_httpx_error(exc) from exc
        version = b"HTTP/%d.%d" % (response.version.major, response.version.minor)
        reason = (response.reason or "").encode("utf-8", "replace")  # may not be text
        return httpx.Response(
            response.status,
            headers=response.raw_headers,
            stream=_Body(response),
            request=request,
            extensions={"http_version": version, "reason_phrase": reason},
        )

    async def aclose(self) -> None:
        for session in (self._kept, self._closing):
            if session is not None:
                await session.close()
        self._kept = self._closing = None

    def __repr__(self) -> str:
        return f"AiohttpTransport(max_connections={self.max_connections})"
