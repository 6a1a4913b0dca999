"""The judge's HTTP transport: one OpenAI-compatible ``POST /chat/completions`` over httpx.

`ChatCompletions` sends the request body as JSON to ``{base_url}/chat/completions`` with
``Authorization: Bearer <key>``, and returns the reply as the server sent it: the decoded
JSON (normally a chat completion: a dict with ``choices``), or the text of a body that is
not JSON (an HTML page from a wrong ``base_url``). It makes no retry and no check of its
own: `assay.judge.client.JudgeClient` decides what a reply or a failure means. Failures
are raised as:

- `TimeoutError`: the server did not answer within the timeout;
- `ConnectionFailed`: no connection, or it broke mid-reply;
- `HTTPStatusError`: an HTTP status of 400 or more (``status_code``, ``headers`` for
  ``Retry-After``, and the server's error message);
- `ValueError`: a body that says it is JSON and is not.

The ``openai`` package is not used: it costs about a second of import time on each
``assay evaluate`` with a judge, for one request shape.

The connection pool is httpcore's with one change (`LinearPool`): httpcore 1.0's
``_assign_requests_to_connections``, run as each request enters and leaves the pool,
counts the pool's connections once per idle connection (a list of every connection,
built for each idle one: O(connections²) a request) and polls the socket of every idle
connection; with 64 requests in flight these took about a fifth and a sixth of a Ray
worker's CPU time (py-spy, ``benchmarks/scale.py judged``; encode/httpcore#1035).
`LinearPool` counts once and polls only the connection a request is about to get.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpcore
import httpx

__all__ = [
    "DEFAULT_BASE_URL",
    "ChatCompletions",
    "ConnectionFailed",
    "CouldNotConnect",
    "HTTPStatusError",
    "LinearPool",
    "linear_pool_fits",
]

#: where requests go when no base URL is configured (OpenAI's own API)
DEFAULT_BASE_URL = "https://api.openai.com/v1"
#: characters of an error body kept in the error's message
_ERROR_BODY_CHARS = 300


class ConnectionFailed(Exception):
    """The judge server could not be reached, or the connection broke mid-reply."""


class CouldNotConnect(ConnectionFailed):
    """No connection to the judge server was made (refused, no route, connect timeout)."""


class HTTPStatusError(Exception):
    """The judge server answered with an HTTP error status."""

    def __init__(self, status_code: int, message: str, headers: Mapping[str, str]) -> None:
        super().__init__(f"Error code: {status_code} - {message}")
        self.status_code = status_code
        self.headers = headers


def _error_message(response: httpx.Response) -> str:
    """The server's own error text: ``error.message`` of an OpenAI-style body, else the
    body's start."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return error["message"][:_ERROR_BODY_CHARS]
        return str(body)[:_ERROR_BODY_CHARS]
    return " ".join(response.text.split())[:_ERROR_BODY_CHARS]


class LinearPool(httpcore.AsyncConnectionPool):
    """httpcore's connection pool, its bookkeeping linear in the number of connections
    and its expiry checked on the connection about to be used.

    httpcore 1.0, as each request enters and leaves the pool, (a) closes an idle
    connection while ``len([c.is_idle() for c in connections])`` (the number of
    connections, idle or not) exceeds ``max_keepalive_connections``, building that list
    once per idle connection, and (b) asks every connection whether it has expired, which
    for an idle one polls its socket (a server that closed it makes it readable). This
    pool (a) compares ``len(connections)``, and (b) asks an idle connection only when it
    is the one a request would get: an expired one is then closed and the next one taken.
    Without expired connections it closes, keeps and assigns the same connections as
    httpcore; an expired one that no request reaches stays in the pool (its socket open)
    until one does, the surplus rule closes it, or the pool is closed.
    """

    def _assign_requests_to_connections(self) -> list[httpcore.AsyncConnectionInterface]:
        closing: list[httpcore.AsyncConnectionInterface] = []
        for connection in list(self._connections):
            if connection.is_closed():
                self._connections.remove(connection)
            elif connection.is_idle() and len(self._connections) > self._max_keepalive_connections:
                self._connections.remove(connection)
                closing.append(connection)
        for pool_request in [r for r in self._requests if r.is_queued()]:
            origin = pool_request.request.url.origin
            available = None
            for connection in list(self._connections):
                if connection.can_handle_request(origin) and connection.is_available():
                    if not connection.has_expired():
                        available = connection
                        break
                    self._connections.remove(connection)
                    closing.append(connection)
            if available is not None:
                pool_request.assign_to_connection(available)
                continue
            if len(self._connections) >= self._max_connections:
                idle = next((c for c in self._connections if c.is_idle()), None)
                if idle is None:
                    continue  # the request waits for a connection to come free
                self._connections.remove(idle)
                closing.append(idle)
            connection = self.create_connection(origin)
            self._connections.append(connection)
            pool_request.assign_to_connection(connection)
        return closing


#: the httpcore releases whose private pool bookkeeping `LinearPool` re-implements
LINEAR_POOL_HTTPCORE = "1.0."


def linear_pool_fits(transport: httpx.AsyncHTTPTransport) -> bool:
    """Whether ``transport``'s pool is the httpcore 1.0 pool `LinearPool` was checked
    against (another httpcore keeps its own pool: correct, only slower at many requests
    in flight)."""
    pool = getattr(transport, "_pool", None)
    return (
        httpcore.__version__.startswith(LINEAR_POOL_HTTPCORE)
        and type(pool) is httpcore.AsyncConnectionPool
        and hasattr(pool, "_assign_requests_to_connections")
    )


class ChatCompletions:
    """A connection pool to one server's chat-completions endpoint."""

    def __init__(self, base_url: str | None, api_key: str | None, timeout: float) -> None:
        url = (base_url or DEFAULT_BASE_URL).rstrip("/") + "/"
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=64)
        transport = httpx.AsyncHTTPTransport(limits=limits)
        if linear_pool_fits(transport):
            # the transport's own pool, of the same settings, made linear (see LinearPool)
            transport._pool.__class__ = LinearPool
        self._client = httpx.AsyncClient(
            base_url=url,
            headers={"Authorization": f"Bearer {api_key or 'not-needed'}"},
            timeout=timeout,
            limits=limits,
            transport=transport,
        )

    async def create(self, body: Mapping[str, Any]) -> Any:
        """The server's reply to one chat-completions request (decoded JSON, or text)."""
        try:
            response = await self._client.post("chat/completions", json=dict(body))
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise CouldNotConnect(
                f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            ) from exc
        except httpx.TimeoutException as exc:
            raise TimeoutError(f"no reply within the timeout ({type(exc).__name__})") from exc
        except httpx.TransportError as exc:
            raise ConnectionFailed(
                f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            ) from exc
        if response.status_code >= 400:
            raise HTTPStatusError(response.status_code, _error_message(response), response.headers)
        if "json" not in response.headers.get("content-type", "").lower():
            return response.text
        return response.json()

    async def close(self) -> None:
        await self._client.aclose()
