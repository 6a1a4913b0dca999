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

The exchange on the wire is `assay.core.http_lean.LeanTransport` (HTTP/1.1 over asyncio's
own connections: about a fifth of the CPU a request of httpx's default transport); a URL
that an ``HTTP(S)_PROXY`` variable sends through a proxy goes through httpx's own proxy
transport.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from assay.core.http import client_over
from assay.core.http_lean import LeanTransport

__all__ = [
    "DEFAULT_BASE_URL",
    "ChatCompletions",
    "ConnectionFailed",
    "CouldNotConnect",
    "HTTPStatusError",
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


class ChatCompletions:
    """A connection pool to one server's chat-completions endpoint."""

    def __init__(self, base_url: str | None, api_key: str | None, timeout: float) -> None:
        url = (base_url or DEFAULT_BASE_URL).rstrip("/") + "/"
        # requests that go direct take the lean transport; proxied ones httpx's own
        self._client = client_over(
            LeanTransport(max_idle=64),
            base_url=url,
            headers={"Authorization": f"Bearer {api_key or 'not-needed'}"},
            timeout=timeout,
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=64),
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
