"""`AiohttpTransport`: the judge's HTTP/1.1 transport under httpx's client, aiohttp's
connection pool and C parser through the ``httpx-aiohttp`` package, with aiohttp's
failures raised as the exceptions httpx's own transport raises.

Why aiohttp: the judge sends many small requests at once, and httpx's default transport
(httpcore, h11, anyio) spends about 1 ms of CPU on each; aiohttp's pool and parser are
maintained, strict (malformed chunk sizes, a missing CRLF after a chunk, bad status lines
are refused) and as fast as the hand-written transport this replaced
(``benchmarks/judge_throughput.py``: the calls a second at 20 and 200 ms replies are in
docs/scale.md). httpx's client keeps its request building, headers, authentication, the
decoding of the body (aiohttp's own decompression is off) and proxies: a URL that an
``HTTP(S)_PROXY`` variable sends through a proxy is mounted on httpx's own proxy
transport (`assay.core.http.client_over`); this transport never reads the environment.

httpx-aiohttp maps aiohttp's exceptions loosely (a refused connection or a server that
hangs up mid-reply both become `httpx.ConnectTimeout`, a malformed reply is not mapped
at all), so each failure is mapped here again, from the exception aiohttp raised:

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
import httpx_aiohttp

__all__ = ["AiohttpTransport", "as_httpx_error"]


def _reason(error: aiohttp.ClientConnectorError) -> str:
    """The operating system's words for a failed connection (TLS: OpenSSL's own)."""
    cause = error.os_error
    if isinstance(cause, socket.gaierror):  # the resolver's words ("Name or service ...")
        return cause.strerror or str(cause)
    if isinstance(cause, ssl.SSLError) or not getattr(cause, "errno", None):
        return str(cause)
    return os.strerror(cause.errno)


def as_httpx_error(error: BaseException) -> BaseException:
    """The httpx exception that stands for ``error``, an aiohttp exception (or one that
    httpx-aiohttp mapped from it: its cause is then mapped); anything else unchanged."""
    if isinstance(error, httpx.HTTPError) and isinstance(error.__cause__, aiohttp.ClientError):
        error = error.__cause__
    if not isinstance(error, aiohttp.ClientError):
        return error
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


class _MappedStream(httpx.AsyncByteStream):
    """httpx-aiohttp's body stream, its failures raised as httpx's (`as_httpx_error`)."""

    def __init__(self, stream: httpx.AsyncByteStream) -> None:
        self._stream = stream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._stream:
                yield chunk
        except (aiohttp.ClientError, httpx.HTTPError) as exc:
            raise as_httpx_error(exc) from exc

    async def aclose(self) -> None:
        await self._stream.aclose()


def _says_close(headers: httpx.Headers) -> bool:
    """Whether a request's ``Connection`` header asks to close the connection after it
    (RFC 9112, 9.6: no further request may then be sent on it)."""
    return any(
        token.strip().lower() == "close"
        for value in headers.get_list("connection")
        for token in value.split(",")
    )


class AiohttpTransport(httpx_aiohttp.AiohttpTransport):
    """httpx-aiohttp's transport over one aiohttp session (see the module).

    Args:
        max_connections: connections open at once, all origins together (None: no limit).
        keepalive_expiry: seconds an idle connection is kept.
        ssl_context: how ``https`` servers are verified; default httpx's
            (``httpx.create_ssl_context()``: certifi's authorities, ``SSL_CERT_FILE`` and
            ``SSL_CERT_DIR`` honoured).
    """

    def __init__(
        self,
        max_connections: int | None = None,
        keepalive_expiry: float = 5.0,
        ssl_context: ssl.SSLContext | None = None,
        *,
        force_close: bool = False,
    ) -> None:
        context = ssl_context if ssl_context is not None else httpx.create_ssl_context()
        super().__init__(verify=context, client=self._session)
        self._max_connections = max_connections
        self._keepalive_expiry = keepalive_expiry
        self._force_close = force_close
        # requests that say Connection: close, on connections never reused (aiohttp's
        # pool reads only the reply's Connection header)
        self._closing: AiohttpTransport | None = None

    def _session(self) -> aiohttp.ClientSession:
        """The aiohttp session, made on the first request (in the loop that uses it)."""
        connector = aiohttp.TCPConnector(
            limit=self._max_connections or 0,
            keepalive_timeout=None if self._force_close else self._keepalive_expiry,
            force_close=self._force_close,
            ssl=self.ssl_context,
        )
        # httpx keeps the cookies: aiohttp's jar would only filter them again per request
        return aiohttp.ClientSession(
            connector=connector, trust_env=False, cookie_jar=aiohttp.DummyCookieJar()
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if not self._force_close and _says_close(request.headers):
            if self._closing is None:
                self._closing = AiohttpTransport(
                    self._max_connections, ssl_context=self.ssl_context, force_close=True
                )
            return await self._closing.handle_async_request(request)
        try:
            response = await super().handle_async_request(request)
        except (aiohttp.ClientError, httpx.HTTPError) as exc:
            raise as_httpx_error(exc) from exc
        assert isinstance(response.stream, httpx.AsyncByteStream)
        return httpx.Response(
            response.status_code,
            headers=response.headers.raw,
            stream=_MappedStream(response.stream),
            request=request,
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        if self._closing is not None:
            await self._closing.aclose()
        await super().aclose()

    def __repr__(self) -> str:
        return f"AiohttpTransport(max_connections={self._max_connections})"
