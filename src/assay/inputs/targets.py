"""Calling the application under test (``assay run``): each sample's query goes to a target,
and its reply, timing and outcome come back as the sample's response.

Targets (`parse_target`):

- ``openai:BASE_URL`` with a model: an OpenAI-compatible ``/chat/completions``, streamed
  (``stream: true``), so the time to the first token is measured; the key is read from an
  environment variable named by the caller, never given as a value.
- ``http://...`` or ``https://...``: a JSON POST. The body is a template in which
  ``{query}``, ``{id}`` and any other field of the sample (or key of its metadata) are
  replaced by the value, JSON-escaped; the answer and the contexts are picked from the
  reply by JMESPath expressions. Header values may name environment variables
  (``$NAME``), whose values are secrets: they go into no message.
- ``python:MODULE:FUNCTION``: a callable, sync or async, of a module importable from the
  working directory or of a ``.py`` file, given the sample as a dict; it
  returns the answer (a string) or a dict with ``response`` and any of ``contexts``,
  ``duration``, ``first_token_time`` and ``usage``.

`call_target` calls the target for every sample, ``concurrency`` at a time, each call
limited to ``timeout`` seconds and retried ``retries`` times with exponential backoff on
429, 5xx and connection failures (``Retry-After`` honoured, capped). Each sample comes
back with ``response``, ``contexts`` (when the target gives them), ``duration`` (seconds
from sending the request to the whole reply, of the attempt that counted),
``first_token_time`` (streams) and ``target_call`` (`TargetCall`: ok, timeout or error,
with the HTTP status and a short reason). A timed-out sample's duration is the timeout.
A target that cannot be reached stops the calls (`TargetUnreachable`): one call that
cannot connect after its retries before the target has ever answered, or three in a row.

A conversation whose assistant turns are absent or empty (`replays`) is replayed turn by
turn: at each user turn the target gets the conversation so far (``turns``, with its
earlier replies; ``query`` is that user message) and its reply is inserted before the
next user turn, with its ``duration`` and ``first_token_time``. The sample's duration is
the sum over the turns, its first-token time the first turn's; a failed turn ends the
conversation there.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from assay.core.http import ConnectCircuit, Unreachable, client_over
from assay.core.http_pool import linear_transport
from assay.core.sample import Sample, TargetCall
from assay.core.steps import Turn
from assay.inputs.target_kinds import CallFailed, Reply, Target, TargetError, parse_target

__all__ = [
    "Target",
    "TargetError",
    "TargetSettings",
    "TargetUnreachable",
    "call_target",
    "parse_target",
    "replays",
]


@dataclass(frozen=True)
class TargetSettings:
    """How the calls are made: ``timeout`` seconds a call, ``concurrency`` calls at once,
    ``retries`` after the first attempt, backoff ``min(backoff_max, backoff_base *
    2**(retry - 1))`` seconds with jitter."""

    timeout: float = 30.0
    concurrency: int = 8
    retries: int = 2
    backoff_base: float = 0.5
    backoff_max: float = 10.0


class TargetUnreachable(Unreachable):
    """The target cannot be reached: a call failed to connect after its retries before
    the target had ever answered, or `assay.core.http.UNREACHABLE_AFTER` calls in a row
    did. The calls stop."""


def replays(sample: Sample) -> bool:
    """Whether ``sample`` is a conversation to replay: user turns and no assistant reply
    (assistant turns absent or empty)."""
    turns = sample.turns or []
    return any(t.role == "user" for t in turns) and not any(
        t.role == "assistant" and (t.content or t.tool_calls) for t in turns
    )


@dataclass
class _Caller:
    """The calls of one run: the target, the HTTP client, the settings and the circuit
    every call shares."""

    target: Target
    client: httpx.AsyncClient
    settings: TargetSettings
    circuit: ConnectCircuit

    async def answer(self, sample: Sample) -> Sample:
        """``sample`` answered: one call, or a conversation replayed turn by turn."""
        if not replays(sample):
            return await self.once(sample)
        said: list[Turn] = []
        calls: list[Sample] = []
        for turn in sample.turns or []:
            if turn.role == "assistant":
                continue  # an empty slot: the target's reply takes its place
            said.append(turn)
            if turn.role != "user":
                continue
            answered = await self.once(
                sample.model_copy(update={"turns": list(said), "query": turn.content})
            )
            calls.append(answered)
            call = answered.target_call
            assert call is not None
            if call.status != "ok":  # the conversation stops where the target failed
                reason = f"turn {len(said) - 1}: {call.reason}"
                attempts = sum(a.target_call.attempts for a in calls)  # type: ignore[union-attr]
                failed = call.model_copy(update={"reason": reason, "attempts": attempts})
                return answered.model_copy(update={"turns": said, "target_call": failed})
            timing = {"duration": answered.duration, "first_token_time": answered.first_token_time}
            said.append(Turn(role="assistant", content=answered.response, **timing))
        usage: dict[str, int] = {}
        for answered in calls:
            for key, value in (answered.target_call.usage or {}).items():  # type: ignore[union-attr]
                usage[key] = usage.get(key, 0) + value
        total = TargetCall(
            target=self.target.name,
            status="ok",
            attempts=sum(a.target_call.attempts for a in calls),  # type: ignore[union-attr]
            usage=usage or None,
        )
        return calls[-1].model_copy(
            update={
                "turns": said,
                "query": sample.query,
                "duration": sum(a.duration or 0.0 for a in calls),
                "first_token_time": calls[0].first_token_time,
                "target_call": total,
            }
        )

    async def once(self, sample: Sample) -> Sample:
        """One call for ``sample``, retried as the settings say."""
        target, settings, circuit = self.target, self.settings, self.circuit
        attempt = 0
        while True:
            if circuit.open is not None:
                raise TargetUnreachable(circuit.open)
            started = time.perf_counter()
            try:
                reply = await asyncio.wait_for(target.call(sample, self.client), settings.timeout)
            except TimeoutError:
                circuit.connected()  # connected, or a function that runs: reached
                call = TargetCall(
                    target=target.name,
                    status="timeout",
                    reason=f"no reply within {settings.timeout:g} s",
                    attempts=attempt + 1,
                )
                return _answered(sample, None, settings.timeout, call)
            except Exception as exc:  # any failure is this sample's alone
                failed = _failure(exc)
                if not failed.unconnected:
                    circuit.connected()
                attempt += 1
                if failed.unconnected and attempt > settings.retries:
                    why = (
                        f"the target {target.name} cannot be reached ({failed.reason}, "
                        f"after {settings.retries} retries); the calls stop"
                    )
                    if circuit.could_not_connect(why):
                        raise TargetUnreachable(why) from None
                if not failed.retryable or attempt > settings.retries:
                    call = TargetCall(
                        target=target.name,
                        status="error",
                        http_status=failed.http_status,
                        reason=failed.reason,
                        attempts=attempt,
                    )
                    return _answered(sample, None, None, call)
                delay = min(settings.backoff_max, settings.backoff_base * 2 ** (attempt - 1))
                delay *= 0.5 + random.random() / 2  # jitter: retries do not arrive together
                if failed.retry_after is not None:  # the server's wait, capped, is not cut
                    delay = max(delay, min(failed.retry_after, settings.backoff_max))
                await asyncio.sleep(delay)
                continue
            elapsed = time.perf_counter() - started
            circuit.answered()
            usage = reply.usage
            call = TargetCall(target=target.name, status="ok", attempts=attempt + 1, usage=usage)
            duration = reply.duration if reply.duration is not None else elapsed
            return _answered(sample, reply, duration, call)


def _failure(exc: Exception) -> CallFailed:
    """What an attempt's exception says: a `CallFailed` as it is; httpx's failure as
    `_transport` says; anything else (a reply that met a case no check foresaw) that
    sample's error naming it, not retried."""
    if isinstance(exc, CallFailed):
        return exc
    if isinstance(exc, httpx.HTTPError):
        return _transport(exc)
    why = " ".join(str(exc).split())[:200]
    return CallFailed(f"the reply could not be read ({type(exc).__name__}: {why})")


def _transport(exc: httpx.HTTPError) -> CallFailed:
    """A failure of httpx: a connection failure is retried; another (an invalid URL, a
    body that cannot be decoded) is not."""
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    if isinstance(exc, httpx.TransportError):
        unconnected = isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout)
        return CallFailed(f"connection failed ({text})", retryable=True, unconnected=unconnected)
    return CallFailed(text)


def _answered(
    sample: Sample, reply: Reply | None, duration: float | None, call: TargetCall
) -> Sample:
    update: dict[str, Any] = {
        "response": reply.response if reply is not None else None,
        "duration": duration,
        "first_token_time": reply.first_token_time if reply is not None else None,
        "target_call": call,
    }
    if reply is not None and reply.contexts is not None:
        update["contexts"] = reply.contexts
    if reply is not None and reply.usage and "completion_tokens" in reply.usage:
        update["response_tokens"] = reply.usage["completion_tokens"]
    return sample.model_copy(update=update)


def call_target(
    samples: Sequence[Sample],
    target: Target,
    settings: TargetSettings | None = None,
    progress: Callable[[int], None] | None = None,
) -> list[Sample]:
    """Each sample answered by ``target`` (see the module docstring), in order;
    `TargetUnreachable` when the target cannot be reached (the calls stop)."""
    settings = settings or TargetSettings()

    async def run() -> list[Sample]:
        gate = asyncio.Semaphore(settings.concurrency)
        limits = httpx.Limits(
            max_connections=settings.concurrency, max_keepalive_connections=settings.concurrency
        )
        transport = linear_transport(limits, timed=True)  # direct calls; proxied: httpx's
        timeout = httpx.Timeout(settings.timeout)
        async with client_over(transport, timeout=timeout, limits=limits) as client:
            caller = _Caller(target, client, settings, ConnectCircuit())

            async def one(sample: Sample) -> Sample:
                async with gate:
                    answered = await caller.answer(sample)
                if progress is not None:
                    progress(1)
                return answered

            return list(await asyncio.gather(*(one(s) for s in samples)))

    return asyncio.run(run())
