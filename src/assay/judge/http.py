"""The judge's HTTP transport: OpenAI-compatible ``POST /chat/completions`` over httpx.

`ChatCompletions` sends the request body as JSON to ``{base_url}/chat/completions`` with
``Authorization: Bearer <key>``, and returns the reply as the server sent it: the decoded
JSON (normally a chat completion: a dict with ``choices``), or the text of a body that is
not JSON (an HTML page from a wrong ``base_url``). It makes no retry and no check of its
own: `assay.judge.client.JudgeClient` decides what a reply or a failure means. `call`
sends any other request to the same server on the same pool (the Batch API's files and
batches, `assay.judge.batch`), read with the same bound. Failures
are raised as:

- `TimeoutError`: the server did not answer within the timeout;
- `ConnectionFailed`: no connection, or it broke mid-reply;
- `HTTPStatusError`: an HTTP status of 400 or more (``status_code``, ``headers`` for
  ``Retry-After``, and the server's error message);
- `ValueError`: a body that says it is JSON and is not;
- `assay.core.http.ReplyTooLarge`: a body over ``max_reply_bytes`` (counted after
  decompression, as it arrives): not read further, its connection closed.

The ``openai`` package is not used: it costs about a second of import time on each
``assay evaluate`` with a judge, for one request shape.

The exchange on the wire is `assay.core.http_aiohttp.AiohttpTransport` (aiohttp's pool
and C parser under httpx's client); a URL that an ``HTTP(S)_PROXY`` variable sends
through a proxy goes through httpx's own proxy transport.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import httpx

from assay.core.http import ACCEPTED_ENCODINGS, client_over, read_bounded
from assay.core.http_aiohttp import AiohttpTransport
from assay.core.limits import DEFAULT_MAX_REPLY_BYTES

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


def _text(response: httpx.Response, body: bytes) -> str:
    """The body as text, in the reply's charset (UTF-8 when it names none or a wrong one)."""
    try:
        return body.decode(response.charset_encoding or "utf-8", errors="replace")
    except LookupError:
        return body.decode("utf-8", errors="replace")


def _error_message(response: httpx.Response, body: bytes) -> str:
    """The server's own error text: ``error.message`` of an OpenAI-style body, else the
    body's start."""
    try:
        parsed = json.loads(body)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        error = parsed.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return error["message"][:_ERROR_BODY_CHARS]
        return str(parsed)[:_ERROR_BODY_CHARS]
    return " ".join(_text(response, body).split())[:_ERROR_BODY_CHARS]


class ChatCompletions:
    """A connection pool to one server's chat-completions endpoint; a reply's body is
    read up to ``max_reply_bytes``."""

    def __init__(
        self,
        base_url: str | None,
        api_key: str | None,
        timeout: float,
        max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
    ) -> None:
        url = (base_url or DEFAULT_BASE_URL).rstrip("/") + "/"
        self.max_reply_bytes = max_reply_bytes
        # requests that go direct take aiohttp's transport; proxied ones httpx's own
        self._client = client_over(
            AiohttpTransport(max_connections=None),
            base_url=url,
            headers={
                "Authorization": f"Bearer {api_key or 'not-needed'}",
                "Accept-Encoding": ACCEPTED_ENCODINGS,  # the codings read_bounded undoes
            },
            timeout=timeout,
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=64),
        )

    async def create(self, body: Mapping[str, Any]) -> Any:
        """The server's reply to one chat-completions request (decoded JSON, or text)."""
        return await self.call("POST", "chat/completions", json=dict(body))

    async def call(self, method: str, path: str, *, raw: bool = False, **request: Any) -> Any:
        """The server's reply to ``method path`` (relative to the base URL; ``request``
        is passed to httpx: ``json``, ``files``, ``data``), its body read up to
        ``max_reply_bytes``: decoded JSON, the text of a body that is not JSON, or the
        bytes themselves with ``raw`` (a file's content). Failures as `create`'s."""
        try:
            async with self._client.stream(method, path, **request) as response:
                content = await read_bounded(response, self.max_reply_bytes)
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
            message = _error_message(response, content)
            raise HTTPStatusError(response.status_code, message, response.headers)
        if raw:
            return content
        if "json" not in response.headers.get("content-type", "").lower():
            return _text(response, content)
        return json.loads(content)

    async def close(self) -> None:
        await self._client.aclose()
