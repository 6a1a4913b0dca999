"""Secrets never rest: redaction for everything Assay writes.

Two rules, applied together by `redact`:

- **By field name.** A mapping key that names a credential (``api_key``, ``token``,
  ``secret``, ``password``, ``authorization``, ``cookie``, ``credentials``, ``*_key``) has
  its value replaced by ``[redacted]`` when the value is set.
- **HTTP credentials in text.** ``Bearer <token>`` and ``Basic <base64>`` (what an HTTP
  client sends for ``https://user:password@host``) quoted back by a server.
- **By value.** The values of the secrets Assay knows (the configured judge and embedding
  keys, and credential-named environment variables such as ``OPENAI_API_KEY``) are cut
  out of every string, wherever they appear; so are passwords in URLs
  (``scheme://user:password@host``).

Use `redact` for structured data (a run's configuration snapshot, API payloads) and
`redact_text` for free text (error messages, log lines, evidence).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import Any

__all__ = [
    "REDACTED",
    "is_secret_name",
    "known_secrets",
    "redact",
    "redact_text",
    "redact_url",
    "register_secret",
    "url_password",
]

REDACTED = "[redacted]"

_SECRET_WORDS = (
    "apikey",
    "api_key",
    "secret",
    "password",
    "passwd",
    "token",
    "authorization",
    "credential",
    "cookie",
    "private_key",
    "access_key",
)
_SECRET_NAMES = {"key", "auth", "pwd", "bearer"}
# user:password@ in a URL (the user name alone is kept); the scheme is bounded so that
# the search stays linear on long dotted runs
_URL_PASSWORD = re.compile(
    r"(?P<head>\b[a-z][a-z0-9+.\-]{0,30}://[^\s/@:]*):(?P<password>[^\s/@]*)@", re.I
)
# a query parameter in a URL ("?key=…", "&access_token=…"); redacted when its name
# names a credential (see is_secret_name)
_URL_QUERY_PARAMETER = re.compile(
    r"(?P<head>[?&](?P<name>[A-Za-z0-9_.\-]{1,60})=)(?P<value>[^&#\s]+)"
)
# HTTP credentials quoted in free text: "Bearer abc…", "Basic dXNlcjpwYXNz" (the
# base64 of user:password that an HTTP client sends for a URL with credentials)
_BEARER = re.compile(r"(?P<head>\b(?:bearer|basic)\s+)(?P<token>[A-Za-z0-9._~+/=\-]{8,})", re.I)
# a secret shorter than this is not searched for in text: it would match ordinary words
_MIN_SECRET_LENGTH = 6
# secrets this process was configured with (config files, overrides): see register_secret
_registered: set[str] = set()


def register_secret(value: str | None) -> None:
    """Remember a secret this process uses (an API key from a config file, a password in
    a configured URL) so that `known_secrets` and every redaction cut it out."""
    if value and len(value) >= _MIN_SECRET_LENGTH:
        _registered.add(value)


def url_password(url: str | None) -> str | None:
    """The password in ``scheme://user:password@host``, or None."""
    match = _URL_PASSWORD.search(url or "")
    return match["password"] or None if match else None


def is_secret_name(name: str) -> bool:
    """True when a field or variable name says its value is a credential."""
    lowered = name.lower().replace("-", "_")
    if lowered in _SECRET_NAMES or lowered.endswith("_key"):
        return True
    return any(word in lowered for word in _SECRET_WORDS)


#: the secrets of this process's environment and registry (a set, and the sorted list
#: `known_secrets` returns), with a copy of the environment and the registry's size they
#: were read from
_known: tuple[dict[Any, Any], int, frozenset[str], tuple[str, ...]] | None = None


def _longest_first(found: Iterable[str]) -> list[str]:
    """The secrets long enough to search for, longest first."""
    return sorted((s for s in found if len(s) >= _MIN_SECRET_LENGTH), key=len, reverse=True)


def _standing() -> tuple[frozenset[str], tuple[str, ...]]:
    """The registered secrets and the credential-named variables of ``os.environ``, as a
    set and longest first; recomputed only when either changed (asked for every result
    with a reason: a scan of the environment cost about 200 µs, the comparison of the
    environment with the copy it was read from is one dict comparison)."""
    global _known
    raw = getattr(os.environ, "_data", None)  # CPython: the bytes behind os.environ
    environ = raw if isinstance(raw, dict) else dict(os.environ)
    known = _known
    if known is None or known[1] != len(_registered) or known[0] != environ:
        snapshot = dict(environ)  # taken before the scan: a change during it is seen next
        found = set(_registered)
        for name, value in os.environ.items():
            if value and is_secret_name(name):
                found.add(value)
        known = _known = (
            snapshot,
            len(_registered),
            frozenset(found),
            tuple(_longest_first(found)),
        )
    return known[2], known[3]


def known_secrets(config: Any = None, environ: dict[str, str] | None = None) -> list[str]:
    """The secret values Assay knows of: credential fields of ``config`` (an `AssayConfig`
    or mapping) and credential-named environment variables. Longest first, so a secret
    that contains another is cut out whole."""
    if environ is None:
        standing, ordered = _standing()
        if config is None:
            return list(ordered)
        found = set(standing)
    else:
        found = set(_registered)
        for name, value in environ.items():
            if value and is_secret_name(name):
                found.add(value)
    if config is not None:
        fields = config if isinstance(config, dict) else getattr(config, "__dict__", {})
        for name, value in fields.items():
            if isinstance(value, str) and value and is_secret_name(name):
                found.add(value)
    return _longest_first(found)


def redact_url(url: str) -> str:
    """``url`` with any password and credential-named query parameter replaced:
    ``postgresql://u:[redacted]@host/db``, ``https://host/v1?key=[redacted]``."""
    # each pattern's match holds its literal ("://", "="): a text without it is skipped
    if "://" in url:
        url = _URL_PASSWORD.sub(lambda m: f"{m['head']}:{REDACTED}@", url)
    if "=" not in url:
        return url
    return _URL_QUERY_PARAMETER.sub(
        lambda m: f"{m['head']}{REDACTED}" if is_secret_name(m["name"]) else m[0], url
    )


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every known secret value, URL password and bearer token cut out."""
    for secret in secrets:
        if len(secret) >= _MIN_SECRET_LENGTH and secret in text:
            text = text.replace(secret, REDACTED)
    text = redact_url(text)
    # a bearer match starts with [bB][eE][aA] or [bB][aA] (no other letter folds to b, e
    # or a under re.I), so its lower-cased text holds "bea" or "ba"
    lowered = text.lower()
    if "ba" not in lowered and "bea" not in lowered:
        return text
    return _BEARER.sub(lambda m: f"{m['head']}{REDACTED}", text)


def redact(value: Any, secrets: Iterable[str] | None = None, *, by_name: bool = True) -> Any:
    """A copy of ``value`` (dicts, lists, strings) with secret values replaced by
    ``[redacted]``, and with ``by_name`` the values of credential-named fields too (use
    ``by_name=False`` for evidence, whose keys are the user's data, e.g. a JSON field
    called ``key``). ``secrets`` defaults to `known_secrets()`."""
    values = known_secrets() if secrets is None else list(secrets)
    return _redact(value, values, by_name)


def _redact(value: Any, secrets: list[str], by_name: bool) -> Any:
    """The redacted copy, built level by level: documents as deep as ``max_json_depth``
    allows never meet Python's recursion limit."""
    if not isinstance(value, dict | list | tuple):
        return redact_text(value, secrets) if isinstance(value, str) else value
    root: dict[Any, Any] | list[Any] = {} if isinstance(value, dict) else []
    stack: list[tuple[Any, dict[Any, Any] | list[Any]]] = [(value, root)]
    while stack:
        source, target = stack.pop()
        named = isinstance(source, dict)
        for key, item in source.items() if named else enumerate(source):
            copy: Any
            if by_name and named and isinstance(key, str) and is_secret_name(key):
                copy = REDACTED if item not in (None, "") else item
            elif isinstance(item, dict | list | tuple):
                copy = {} if isinstance(item, dict) else []
                stack.append((item, copy))
            elif isinstance(item, str):
                copy = redact_text(item, secrets)
            else:
                copy = item
            if isinstance(target, dict):
                target[key] = copy
            else:
                target.append(copy)
    return root
