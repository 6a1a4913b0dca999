"""The request guard: what the server refuses before any endpoint runs.

One ASGI middleware, in this order:

1. **Host** (DNS rebinding): the ``Host`` header must name an allowed host — the
   loopback names (``localhost``, ``127.0.0.1``, ``[::1]``) by default, plus the names
   in ``ASSAY_ALLOWED_HOSTS`` (comma separated) or ``create_app(allowed_hosts=...)``;
   else 400.
2. **Cross-site writes** (CSRF): a POST, PUT, PATCH or DELETE whose ``Origin`` (or, when
   that is absent, ``Referer``) is present must come from the server's own origin or an
   allowed host; else 403. A write with a body must say ``Content-Type:
   application/json``; else 415 — a browser can send text/plain or a form across sites
   without asking, but never JSON.
3. **Token**: with a configured token, every write needs ``Authorization: Bearer``; 401.
4. **Size**: the body is counted as it arrives, chunked bodies included; past the limit
   the request is answered 413 and nothing of it reaches an endpoint.

Error bodies are ``{"detail": message}`` and never quote the request body.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

from assay.core.jsonout import dumps

__all__ = ["ALLOWED_HOSTS_ENV", "LOOPBACK_HOSTS", "WRITE_METHODS", "RequestGuard", "host_name"]

ALLOWED_HOSTS_ENV = "ASSAY_ALLOWED_HOSTS"
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def host_name(netloc: str) -> str:
    """The host of ``host[:port]`` / ``[v6]:port``, lower-case, without brackets."""
    netloc = netloc.strip().lower()
    if netloc.startswith("["):
        return netloc[1 : netloc.find("]")] if "]" in netloc else netloc[1:]
    return netloc.rsplit(":", 1)[0] if netloc.count(":") == 1 else netloc


def _token_ok(header: str | None, token: str) -> bool:
    scheme, _, given = (header or "").partition(" ")
    if scheme.lower() != "bearer":
        return False
    return secrets.compare_digest(given.strip().encode("utf-8"), token.encode("utf-8"))


class _TooLarge(Exception):
    pass


class RequestGuard:
    """ASGI middleware refusing foreign hosts, cross-site writes, non-JSON writes,
    unauthenticated writes (when a token is set) and bodies over ``max_body_bytes``."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        allowed_hosts: Iterable[str] = (),
        max_body_bytes: int,
        token: Callable[[], str | None],
        operations: Callable[[], dict[str, Any]] = dict,
        media_types: dict[str, frozenset[str]] | None = None,
    ) -> None:
        self.app = app
        #: paths whose writes take other bodies than JSON, and which (the OTLP receiver)
        self.media_types = media_types or {}
        self.operations = operations
        self._paths: list[tuple[re.Pattern[str], set[str]]] | None = None
        self.allowed_hosts = LOOPBACK_HOSTS | {host_name(h) for h in allowed_hosts if h.strip()}
        self.max_body_bytes = max_body_bytes
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        refusal = self._refusal(scope["method"], headers, self._routed(scope), scope["path"])
        if refusal is not None:
            await _answer(send, *refusal)
            return
        allowed = self._methods_at(scope)
        if allowed and scope["method"] not in allowed | ({"HEAD"} if "GET" in allowed else set()):
            # one 405 for the path, naming every method some endpoint takes there
            await _answer(send, 405, "method not allowed", allow=sorted(allowed))
            return
        if scope["method"] not in BODY_METHODS or not self._routed(scope):
            await self.app(scope, receive, send)
            return
        try:
            body = await self._read_body(receive, headers)
        except _TooLarge:
            await _answer(
                send, 413, f"request body over {self.max_body_bytes} bytes: send less", close=True
            )
            return
        await self.app(scope, _replay(body, receive), send)

    def _routed(self, scope: Scope) -> bool:
        """True when an API operation takes this method at this path; other requests
        are left to the router (404, 405, the dashboard's pages) after the Host check."""
        return scope["method"] in self._methods_at(scope)

    def _methods_at(self, scope: Scope) -> set[str]:
        """The methods of the API operations at this path (from the OpenAPI document;
        empty when the path is not an API path)."""
        if self._paths is None:
            self._paths = [
                (_path_regex(template), {m.upper() for m in item})
                for template, item in self.operations().items()
            ]
        methods: set[str] = set()
        for regex, found in self._paths:
            if regex.fullmatch(scope["path"]):
                methods |= found
        return methods

    def _refusal(
        self, method: str, headers: dict[str, str], routed: bool, path: str = ""
    ) -> tuple[int, str] | None:
        host = headers.get("host", "")
        if host_name(host) not in self.allowed_hosts:
            return 400, (
                "this server does not answer to that Host name; add it to "
                f"{ALLOWED_HOSTS_ENV} (comma-separated names) or create_app(allowed_hosts=...)"
            )
        if method not in WRITE_METHODS or not routed:
            return None
        source = headers.get("origin") or headers.get("referer")
        if source is not None and not self._same_site(source, host):
            return 403, "cross-site write refused: Origin/Referer is not this server"
        if method in BODY_METHODS:
            media = headers.get("content-type", "").split(";", 1)[0].strip().lower()
            accepted = self.media_types.get(path)
            if accepted is not None:
                if media not in accepted:
                    return 415, f"this path takes {' or '.join(sorted(accepted))} bodies"
            elif media != "application/json" and not media.endswith("+json"):
                return 415, "writes take a JSON body: send 'Content-Type: application/json'"
        expected = self.token()
        if expected and not _token_ok(headers.get("authorization"), expected):
            return 401, "this server requires 'Authorization: Bearer <token>' for writes"
        length = headers.get("content-length", "")
        if length.isdigit() and int(length) > self.max_body_bytes:
            return 413, f"request body over {self.max_body_bytes} bytes: send less"
        return None

    def _same_site(self, source: str, host: str) -> bool:
        try:
            parts = urlsplit(source)
        except ValueError:
            return False
        if parts.scheme not in {"http", "https"} or not parts.netloc:
            return False  # "null" (a sandboxed page, a file) and other schemes
        return parts.netloc.lower() == host.lower() or host_name(parts.netloc) in (
            self.allowed_hosts - LOOPBACK_HOSTS
        )

    async def _read_body(self, receive: Receive, headers: dict[str, str]) -> bytes:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                raise _TooLarge
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)


def _path_regex(template: str) -> re.Pattern[str]:
    """``/api/runs/{run_id}`` -> a regex matching ``/api/runs/<one segment>``."""
    parts = re.split(r"(\{[^/{}]+\})", template)
    return re.compile("".join("[^/]+" if p.startswith("{") else re.escape(p) for p in parts))


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _answer(
    send: Send, status: int, detail: str, close: bool = False, allow: list[str] | None = None
) -> None:
    body = dumps({"detail": detail}).encode("utf-8")
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"x-content-type-options", b"nosniff"),
    ]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    if close:
        headers.append((b"connection", b"close"))
    if allow:
        headers.append((b"allow", ", ".join(allow).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
