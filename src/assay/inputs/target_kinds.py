"""The kinds of target ``assay run`` calls (`parse_target`): an OpenAI-compatible chat
endpoint, streamed; a JSON API with a request template and JMESPath picks; a Python
function. Each answers one sample (`Target.call`) with a `Reply`, or raises `CallFailed`
for that attempt; `assay.inputs.targets` makes the calls (timeouts, retries, replays).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.util
import inspect
import json
import os
import re
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx

from assay.core.http import retry_after_seconds
from assay.core.http_timing import call_times
from assay.core.redaction import is_secret_name, register_secret
from assay.core.sample import Sample
from assay.inputs import target_replies
from assay.inputs.target_replies import (
    ACCEPTED_ENCODINGS,
    CallFailed,
    StreamedChat,
    chat_completion,
    finite_seconds,
    json_kind,
    json_reply,
    quoted,
    read_body,
    stream_lines,
    usage_counts,
    valid_text,
)

__all__ = [
    "CallFailed",
    "HTTPTarget",
    "OpenAITarget",
    "PythonTarget",
    "Reply",
    "Target",
    "TargetError",
    "parse_target",
]

#: a placeholder of a request template: ``{query}``, ``{id}``, ``{metadata_key}``
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
#: ``$NAME`` or ``${NAME}`` in a header value
_ENV_VAR = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")
#: headers whose value is a credential whatever their name says
_CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie"})


class TargetError(ValueError):
    """A target that cannot be called as given (a malformed template, path or header, a
    missing environment variable, a function that cannot be imported): said once, at the
    start."""


@dataclass
class Reply:
    """What a target answered for one sample."""

    response: str
    contexts: list[str] | None = None
    first_token_time: float | None = None
    duration: float | None = None
    usage: dict[str, int] | None = None

    def __post_init__(self) -> None:
        # what the target said is kept as text any file or database takes
        self.response = valid_text(self.response)
        if self.contexts is not None:
            self.contexts = [valid_text(c) for c in self.contexts]


class Target(Protocol):
    """Something that answers a sample: ``name`` (for messages; holds no secret)."""

    name: str

    async def call(self, sample: Sample, client: httpx.AsyncClient) -> Reply: ...


def _status_error(response: httpx.Response, body: str) -> CallFailed:
    status = response.status_code
    shown = quoted(body)
    return CallFailed(
        f"HTTP {status}: {shown}" if shown else f"HTTP {status}",
        http_status=status,
        retryable=status == 429 or status >= 500,
        retry_after=retry_after_seconds(response.headers),
    )


def conversation(sample: Sample) -> list[dict[str, str]]:
    """The conversation so far as chat messages (``turns`` up to the last user message),
    else the query as one user message: what an ``openai:`` target gets as ``messages``
    and an http target as ``{history}``."""
    turns = [t for t in sample.turns or [] if t.content is not None]
    while turns and turns[-1].role != "user":
        turns.pop()
    if turns:
        return [{"role": t.role, "content": t.content or ""} for t in turns]
    return [{"role": "user", "content": sample.query or ""}]


@dataclass
class OpenAITarget:
    """An OpenAI-compatible chat endpoint, streamed."""

    base_url: str
    model: str
    api_key: str | None = None
    name: str = ""

    def __post_init__(self) -> None:
        self.name = self.name or f"openai:{self.base_url} (model {self.model})"

    async def call(self, sample: Sample, client: httpx.AsyncClient) -> Reply:
        body = {
            "model": self.model,
            "messages": conversation(sample),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        headers = {"Accept-Encoding": ACCEPTED_ENCODINGS}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        url = self.base_url.rstrip("/") + "/chat/completions"
        started = time.perf_counter()
        async with client.stream("POST", url, json=body, headers=headers) as response:
            if response.status_code >= 400:
                raise _status_error(response, (await read_body(response)).decode(errors="replace"))
            if "text/event-stream" not in response.headers.get("content-type", ""):
                # a server that does not stream: one JSON reply
                try:
                    text, usage = chat_completion(await read_body(response))
                except CallFailed as failed:
                    failed.http_status = response.status_code
                    raise
                return Reply(text, duration=_network_seconds(response, started), usage=usage)
            return await _streamed(response, started)


async def _streamed(response: httpx.Response, started: float) -> Reply:
    """A streamed chat completion read event by event (`StreamedChat`), its lines bounded
    (`stream_lines`), up to ``data: [DONE]`` or the stream's end."""
    chat = StreamedChat()
    first: float | None = None
    async with contextlib.aclosing(stream_lines(response)) as lines:
        async for line in lines:
            data = line.removeprefix("data:").strip() if line.startswith("data:") else ""
            if not data:
                continue
            if data == "[DONE]":
                break
            try:
                carried_text = chat.event(data)
            except CallFailed as failed:
                failed.http_status = response.status_code
                raise
            if carried_text and first is None:
                network = _network_seconds(response, started)
                first = time.perf_counter() - started if network is None else network
    duration = _network_seconds(response, started)
    return Reply("".join(chat.parts), first_token_time=first, duration=duration, usage=chat.usage)


def _network_seconds(response: httpx.Response, started: float) -> float | None:
    """Seconds from writing the request to the arrival of the last bytes read so far of
    its reply, by the kernel's clock (`call_times`); None on an untimed connection, or
    past the time since ``started`` (`time.perf_counter`; a wall clock that stepped)."""
    times = call_times(response)
    if times is None:
        return None
    seconds = (times[1] - times[0]) / 1e9
    return seconds if seconds <= time.perf_counter() - started else None


@dataclass
class HTTPTarget:
    """A JSON POST with a request template and JMESPath picks of the reply."""

    url: str
    template: str
    response_path: str
    contexts_path: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    name: str = ""

    def __post_init__(self) -> None:
        import jmespath
        from jmespath.exceptions import JMESPathError

        self.name = self.name or self.url
        blank = _PLACEHOLDER.sub("x", self.template.replace("{history}", "[]"))
        try:
            json.loads(blank)
        except ValueError as exc:
            raise TargetError(
                f"--request is not a JSON template ({exc}); write placeholders inside JSON "
                'strings, e.g. \'{"question": "{query}"}\', and {history} (the '
                "conversation, a JSON array) outside them"
            ) from None
        picks: dict[str, Any] = {}
        paths = {"--response-path": self.response_path, "--contexts-path": self.contexts_path}
        for option, path in paths.items():
            if path is None:
                continue
            try:
                picks[option] = jmespath.compile(path)
            except JMESPathError as exc:
                raise TargetError(
                    f"{option} {path!r} is not a JMESPath expression: {exc}"
                ) from None
        self._response = picks["--response-path"]
        self._contexts = picks.get("--contexts-path")

    def body(self, sample: Sample) -> str:
        """The request body: each placeholder replaced by the sample's value, JSON-escaped;
        ``{history}`` by the conversation so far (`conversation`), a JSON array."""
        record = {**sample.metadata, **sample.model_dump(exclude_none=True, mode="json")}

        def value(match: re.Match[str]) -> str:
            name = match.group(1)
            if name == "history":
                return json.dumps(conversation(sample), ensure_ascii=False)
            if name not in record:
                raise CallFailed(f"--request names {{{name}}}, which this sample has no value for")
            found = record[name]
            text = found if isinstance(found, str) else json.dumps(found, ensure_ascii=False)
            return json.dumps(text, ensure_ascii=False)[1:-1]

        return _PLACEHOLDER.sub(value, self.template)

    async def call(self, sample: Sample, client: httpx.AsyncClient) -> Reply:
        headers = {
            "content-type": "application/json",
            "accept-encoding": ACCEPTED_ENCODINGS,
            **self.headers,
        }
        body = self.body(sample).encode()
        started = time.perf_counter()
        async with client.stream("POST", self.url, content=body, headers=headers) as response:
            raw = await read_body(response)
            duration = _network_seconds(response, started)
        if response.status_code >= 400:
            raise _status_error(response, raw.decode(errors="replace"))
        reply = json_reply(raw, response.status_code)
        answer = self._pick("--response-path", self.response_path, self._response, reply)
        if not isinstance(answer, str):
            kind = json_kind(answer)
            raise CallFailed(f"--response-path {self.response_path!r} found {kind}, not text")
        contexts = None
        if self._contexts is not None:
            found = self._pick("--contexts-path", self.contexts_path, self._contexts, reply)
            items = found if isinstance(found, list) else [found]
            try:
                contexts = [c if isinstance(c, str) else json.dumps(c) for c in items]
            except (ValueError, RecursionError):
                path = self.contexts_path
                raise CallFailed(f"--contexts-path {path!r} found a value too deep") from None
        return Reply(answer, contexts=contexts, duration=duration)

    @staticmethod
    def _pick(option: str, path: str | None, compiled: Any, reply: Any) -> Any:
        """What the compiled JMESPath ``compiled`` (``option`` ``path``) finds in ``reply``;
        `CallFailed` when it finds nothing or fails on it (a function given the wrong
        type, a value nested too deeply)."""
        try:
            found = compiled.search(reply)
        except Exception as exc:  # jmespath's evaluation of untrusted data: that sample's
            why = quoted(str(exc) or type(exc).__name__)
            raise CallFailed(f"{option} {path!r} failed on the reply: {why}") from None
        if found is None:
            raise CallFailed(f"{option} {path!r} found nothing in the reply")
        return found


@dataclass
class PythonTarget:
    """A function of the user's code, sync or async, called with the sample as a dict."""

    function: Callable[..., Any]
    name: str

    async def call(self, sample: Sample, client: httpx.AsyncClient) -> Reply:
        record = sample.model_dump(exclude_none=True, mode="json")
        started = time.perf_counter()
        try:
            if inspect.iscoroutinefunction(self.function):
                found = await self.function(record)
            else:
                found = await _in_daemon_thread(self.function, record)
        except (Exception, SystemExit) as exc:  # the user's code failed on this sample
            why = f"{type(exc).__name__}: {quoted(str(exc))}"
            raise CallFailed(f"{self.name} raised {why}") from None
        elapsed = time.perf_counter() - started
        text = found.get("response") if isinstance(found, dict) else found
        limit = target_replies.MAX_REPLY_BYTES
        if isinstance(text, str) and len(text.encode(errors="surrogatepass")) > limit:
            raise target_replies.too_large(f"{self.name}'s reply", limit)
        if isinstance(found, str):
            return Reply(found, duration=elapsed)
        if not isinstance(found, dict) or not isinstance(found.get("response"), str):
            kind = type(found).__name__
            raise CallFailed(
                f"{self.name} returned a {kind}; expected text or a dict with 'response'"
            )
        contexts = found.get("contexts")
        if contexts is not None and not (
            isinstance(contexts, list) and all(isinstance(c, str) for c in contexts)
        ):
            raise CallFailed(f"{self.name} returned contexts that are not a list of texts")
        timing = {k: found.get(k) for k in ("duration", "first_token_time")}
        for key, seconds in timing.items():
            if seconds is not None and not finite_seconds(seconds):
                small = isinstance(seconds, float) or (
                    isinstance(seconds, int) and abs(seconds) < 10**18
                )
                shown = repr(seconds) if small else json_kind(seconds)
                raise CallFailed(f"{self.name} returned {key} {shown}; expected seconds")
        usage = found.get("usage")
        return Reply(
            found["response"],
            contexts=contexts,
            first_token_time=timing["first_token_time"],
            duration=timing["duration"] if timing["duration"] is not None else elapsed,
            usage=usage_counts(usage),
        )


async def _in_daemon_thread(function: Callable[..., Any], *args: Any) -> Any:
    """``function(*args)`` in a thread of its own that does not hold the process: a call
    that hangs past the timeout is left behind, and the run still ends."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[Any] = loop.create_future()

    def settle(outcome: Any, failed: bool) -> None:
        if not done.done():
            (done.set_exception if failed else done.set_result)(outcome)

    def work() -> None:
        try:
            outcome, failed = function(*args), False
        except BaseException as exc:  # handed to the caller, whatever it is
            outcome, failed = exc, True
        if not loop.is_closed():
            loop.call_soon_threadsafe(settle, outcome, failed)

    threading.Thread(target=work, name="assay-target", daemon=True).start()
    return await done


def _headers(items: Sequence[str]) -> dict[str, str]:
    """``Name: value`` headers, ``$NAME`` in a value read from the environment."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition(":")
        if not sep or not name.strip():
            raise TargetError(f"--header {item.split(':')[0]!r}...: expected 'Name: value'")
        variables = _ENV_VAR.findall(value)
        missing = [v for v in variables if v not in os.environ]
        if missing:
            raise TargetError(f"--header {name.strip()}: ${missing[0]} is not set")
        resolved = _ENV_VAR.sub(lambda m: os.environ[m.group(1)], value.strip())
        # what a header brings from the environment, or a credential header's value (the
        # shell may have put the secret in it), is cut out of every message and of the
        # resume command
        for variable in variables:
            register_secret(os.environ[variable])
        if is_secret_name(name) or name.strip().lower() in _CREDENTIAL_HEADERS:
            register_secret(resolved.split(" ", 1)[-1])
            register_secret(resolved)
        out[name.strip()] = resolved
    return out


def _function(spec: str) -> Callable[..., Any]:
    """The function ``MODULE:FUNCTION`` names: a module importable from the working
    directory (``app.bot``), or a Python file (``examples/support_app.py``)."""
    module_name, sep, attribute = spec.rpartition(":")
    if not sep or not module_name or not attribute:
        raise TargetError(f"python:{spec}: expected python:MODULE:FUNCTION")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # the user's module, beside the data
    try:
        if module_name.endswith(".py"):
            if not os.path.isfile(module_name):
                raise FileNotFoundError(f"no file {module_name}")
            module = _file_module(module_name)
        else:
            module = importlib.import_module(module_name)
    except Exception as exc:  # a module that fails to import: one line, no traceback
        why = f"{type(exc).__name__}: {exc}"
        raise TargetError(f"python:{spec}: cannot import {module_name}: {why}") from None
    function = getattr(module, attribute, None)
    if not callable(function):
        raise TargetError(f"python:{spec}: {module_name} has no function {attribute!r}")
    return function


def _file_module(path: str) -> Any:
    """The Python file ``path`` imported as a module of a name of its own, registered in
    ``sys.modules`` before its code runs (a dataclass under ``from __future__ import
    annotations`` looks its module up there), and taken out again when it fails."""
    stem = re.sub(r"\W", "_", os.path.splitext(os.path.basename(path))[0])
    name = f"assay_target_{stem}_{uuid.uuid4().hex[:12]}"
    found = importlib.util.spec_from_file_location(name, path)
    if found is None or found.loader is None:
        raise ImportError(f"{path} cannot be imported as a Python module")
    module = importlib.util.module_from_spec(found)
    sys.modules[name] = module
    try:
        found.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def parse_target(
    spec: str,
    *,
    model: str | None = None,
    key_env: str | None = None,
    request: str | None = None,
    response_path: str | None = None,
    contexts_path: str | None = None,
    headers: Sequence[str] = (),
) -> Target:
    """The target ``spec`` names; `TargetError` saying what is wrong with it."""
    if spec.startswith("openai:"):
        if not model:
            raise TargetError("an openai: target needs --target-model NAME")
        key = None
        if key_env:
            key = os.environ.get(key_env)
            if not key:
                raise TargetError(f"--target-key-env {key_env}: the variable is not set")
            register_secret(key)
        return OpenAITarget(spec.removeprefix("openai:"), model, key)
    if spec.startswith(("http://", "https://")):
        return HTTPTarget(
            spec,
            request or '{"query": "{query}"}',
            response_path or "response",
            contexts_path,
            _headers(headers),
        )
    if spec.startswith("python:"):
        return PythonTarget(_function(spec.removeprefix("python:")), spec)
    raise TargetError(
        f"unknown target {spec!r}: use openai:BASE_URL, http(s)://URL or python:MODULE:FUNCTION"
    )
