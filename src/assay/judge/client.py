"""The judge client: one OpenAI-compatible chat endpoint, concurrent, cached and resilient.

`JudgeClient` talks to any server that speaks the OpenAI chat-completions API (OpenAI,
Groq, vLLM, Ollama, a llama.cpp server) over HTTP (`assay.judge.http`: httpx, no SDK)
with ``base_url``, ``api_key`` and ``model``. For each question (a `Prompt` and its block
values) it:

1. returns the answer already given in this run, when another metric asked the same
   prompt (the per-run memo; concurrent identical questions share one request);
2. else returns the persistent cache's reply (`JudgeCache`), when enabled;
3. else sends the request at temperature 0, asking for JSON-schema structured output
   and falling back to ``json_object`` and then plain text when the server rejects the
   format (the client's first request probes this while the others wait; the mode that
   then works is remembered, so a refused format is sent once per server, not once per
   question; a request that fails in every mode, e.g. a prompt over the model's context
   length, changes nothing), with at most
   ``concurrency`` requests in flight, at most ``rate_limit`` requests a second when
   one is set (a token bucket, `assay.judge.rate`: every attempt takes a token), a
   per-request ``timeout``, and up to
   ``max_retries`` retries with exponential backoff and jitter on 429, 5xx, timeouts and
   connection errors (``Retry-After`` is honoured, capped, and holds back every request
   of the client, not only the one refused; an unreadable one is ignored). A client
   given a `SharedBudget` (``budget``: the Ray executor's one budget for a cluster)
   takes its request slots from it instead and passes each ``Retry-After`` on to it, so
   the concurrency limit, the rate limit and the pause hold for every worker together.
   A reply that is not a chat completion (an HTML page, JSON of another shape, a broken
   body: usually a wrong ``base_url``) fails at once with `JudgeError` saying so; so
   does a completion without a usable answer (no choices, no message, null content, a
   refusal, a reply cut off at the token limit or withheld by a content filter), with
   that reason: asking again would get the same reply, and the metric reports it as
   the sample's error. A server that cannot be reached opens the circuit: when a
   question fails to connect after its retries before the server has ever answered, or
   `assay.core.http.UNREACHABLE_AFTER` in a row do, `unreachable` says why and every question
   from then on raises `JudgeUnreachable` at once, without a request (a run stops on it
   instead of retrying every sample);
4. parses the reply (`parse_reply`: JSON, json-repair, the prompt's prose fallback,
   which takes the score the judge gave and never one it quotes, and calls prose with
   conflicting scores ambiguous); if that fails, asks once more for "only the JSON",
   then gives up with `JudgeError`.

With ``batch`` (``judge_batch``), `ask_all` first sends what memo and cache do not
answer through the OpenAI Batch API (`assay.judge.batch`); each question then takes its
batch reply in place of step 3's request (read, parsed, cached as a direct reply), or is
asked directly when the batch did not answer it.

Every request is counted in `usage` (calls, retries, tokens from the server's
``usage``, latency, cost when prices are set; batch lines apart, at the batch price).
All requests run on one background event loop (`assay.judge.aio`), so sync code, async
code and notebooks share one connection pool, semaphore and memo.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import importlib
import random
import time
from collections.abc import Awaitable, Coroutine, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from pydantic import BaseModel

from assay.core.http import ConnectCircuit, ReplyTooLarge, retry_after_seconds
from assay.core.limits import DEFAULT_MAX_REPLY_BYTES
from assay.judge.aio import in_background_loop, run_async, run_sync
from assay.judge.batch import BatchPending, BatchTransport, LineFailed, Outcome
from assay.judge.cache import JudgeCache, cache_key
from assay.judge.completion import (
    JudgeError,
    JudgeUnreachable,
    completion_content,
    describe_failure,
    json_field,
    token_count,
)
from assay.judge.parsing import ParseError, parse_reply
from assay.judge.prompts import Prompt
from assay.judge.rate import TokenBucket
from assay.judge.usage import JudgeUsage

__all__ = [
    "STRUCTURED_MODES",
    "JudgeClient",
    "JudgeError",
    "JudgeReply",
    "JudgeUnreachable",
    "SharedBudget",
]

T = TypeVar("T", bound=BaseModel)
R = TypeVar("R")

#: structured-output modes, most to least strict; "auto" starts at the first
STRUCTURED_MODES: tuple[str, ...] = ("json_schema", "json_object", "text")
_RETRY_STATUS = frozenset({408, 409, 425, 429})


class SharedBudget(Protocol):
    """Request slots shared with other processes (e.g. every worker of a Ray cluster)."""

    def slot(self) -> AbstractAsyncContextManager[object]:
        """Held while one request is in flight; waits for a free slot, for any pause and
        for the rate limit's next token."""
        ...

    def hold_off(self, seconds: float) -> None:
        """Pause every holder's next requests for ``seconds`` (a server's Retry-After)."""
        ...


@dataclass(frozen=True)
class JudgeReply(Generic[T]):
    """A parsed judge answer.

    Attributes:
        output: the reply parsed into the prompt's output model.
        content: the reply text as received.
        source: ``call`` (requested now), ``cache`` (persistent cache) or ``memo``
            (already asked in this run).
        prompt: the prompt's signature (``name@version#hash``).
        model: the judge model.
    """

    output: T
    content: str
    source: str
    prompt: str
    model: str


class JudgeClient:
    """An OpenAI-compatible judge with bounded concurrency, retries, cache and memo.

    Args:
        model: the judge model name as the server knows it.
        base_url: the server's ``/v1`` URL; None means OpenAI's.
        api_key: the key; servers that need none get a placeholder.
        concurrency: most requests in flight at once (default 64, as ``judge_concurrency``).
        timeout: seconds a request may take before it counts as timed out.
        max_retries: retries after the first attempt on 429/5xx/timeouts.
        cache: persistent reply cache (``JudgeCache(None)`` or None disables it).
        price_prompt, price_completion: price per 1M prompt/completion tokens, for cost.
        structured: ``auto`` (json_schema, then json_object, then text), or one mode.
        backoff_base, backoff_max: backoff seconds: ``min(max, base * 2**attempt)``
            with jitter (half fixed, half random).
        max_tokens: completion token limit sent with each request (None: server default).
        rate_limit: most request attempts a second, retries included (None: no limit;
            as ``judge_rate_limit``); bursts of at most ``max(1, rate_limit)``. A client
            given a ``budget`` leaves this to the budget.
        max_reply_bytes: largest reply body read, after decompression (as
            ``max_reply_bytes``); a reply over it is that call's `JudgeError`, not retried.
        batch: send `ask_all`'s questions through the Batch API (None: direct calls).
    """

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        concurrency: int = 64,
        timeout: float = 60.0,
        max_retries: int = 4,
        cache: JudgeCache | None = None,
        price_prompt: float | None = None,
        price_completion: float | None = None,
        structured: str = "auto",
        backoff_base: float = 0.5,
        backoff_max: float = 20.0,
        max_tokens: int | None = None,
        rate_limit: float | None = None,
        max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
        batch: BatchTransport | None = None,
    ) -> None:
        if not model:
            raise ValueError("JudgeClient needs a model name (ASSAY_JUDGE_MODEL)")
        if concurrency < 1:
            raise ValueError(f"judge concurrency must be at least 1. Got {concurrency}.")
        if timeout <= 0:
            raise ValueError(f"judge timeout must be positive. Got {timeout}.")
        if max_retries < 0:
            raise ValueError(f"judge max_retries must be 0 or more. Got {max_retries}.")
        if structured != "auto" and structured not in STRUCTURED_MODES:
            raise ValueError(
                f"structured must be 'auto' or one of {STRUCTURED_MODES}. Got {structured!r}."
            )
        self.model = model
        self.base_url = base_url
        self.api_key = api_key
        self.concurrency = concurrency
        self.timeout = float(timeout)
        self.max_retries = max_retries
        self.cache = cache if cache is not None else JudgeCache(None)
        self.usage = JudgeUsage(price_prompt=price_prompt, price_completion=price_completion)
        self.mode = STRUCTURED_MODES[0] if structured == "auto" else structured
        self._fixed_mode = structured != "auto"
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.max_tokens = max_tokens
        self.rate_limit = rate_limit
        self.max_reply_bytes = max_reply_bytes
        self.batch = batch
        self.usage.batch_mode = batch is not None
        #: batch outcomes by cache key, each taken by its question's first request
        self._fetched: dict[str, Outcome] = {}
        self._bucket = TokenBucket(rate_limit) if rate_limit is not None else None
        self._api: Any = None
        #: request slots shared with other processes; None: this client's own semaphore
        self.budget: SharedBudget | None = None
        self._semaphore: asyncio.Semaphore | None = None
        self._memo: dict[str, asyncio.Future[JudgeReply[Any]]] = {}
        self._rng = random.Random()
        # until one request has settled which response_format the server takes, requests
        # wait for it: the format is probed once per client (one server, one model)
        self._probed = self._fixed_mode
        self._quiet_until = 0.0  # loop time before which no request is sent (Retry-After)
        self._probe: asyncio.Lock | None = None
        # whether the server was reached, and whether it cannot be (`unreachable`)
        self._circuit = ConnectCircuit()
        # the HTTP modules (httpx, aiohttp: 0.3-0.4 s to import on 2 cores) are imported
        # now, not on the judge loop at the first request, where the import would hold
        # back every request of the run's first round (and bunch rate-limited ones)
        importlib.import_module("assay.judge.http")

    @property
    def unreachable(self) -> str | None:
        """Why the server cannot be reached, once the circuit is open; None while closed."""
        return self._circuit.open

    def __repr__(self) -> str:
        return f"JudgeClient(model={self.model!r}, base_url={self.base_url!r})"

    # ---- running from sync code ----------------------------------------------------------
    def run(self, coro: Coroutine[Any, Any, R]) -> R:
        """Run a coroutine on the judge loop from sync code (works inside a running loop)."""
        return run_sync(coro)

    def gather(self, awaitables: Iterable[Awaitable[R]]) -> list[R]:
        """Run many coroutines concurrently from sync code; results in order."""
        items = list(awaitables)

        async def _all() -> list[R]:
            return list(await asyncio.gather(*items))

        return run_sync(_all())

    def ask_sync(self, prompt: Prompt[T], **values: Any) -> JudgeReply[T]:
        return run_sync(self.ask(prompt, **values))

    def close(self) -> None:
        """Close the HTTP connections and the cache."""
        if self._api is not None:
            api, self._api = self._api, None
            with contextlib.suppress(Exception):  # closing is best effort
                run_sync(api.close())
        self.cache.close()
        if self.batch is not None:
            self.batch.ledger.close()

    # ---- asking --------------------------------------------------------------------------
    def params(self, prompt: Prompt[Any]) -> dict[str, Any]:
        """The request parameters that change the answer (part of the cache key)."""
        return {"temperature": 0, "max_tokens": self.max_tokens, "prompt": prompt.signature}

    async def ask(self, prompt: Prompt[T], **values: Any) -> JudgeReply[T]:
        """The judge's parsed answer to ``prompt`` with these block values.

        Raises:
            JudgeError: the request failed after retries, or the reply stayed unparsable.
        """
        if not in_background_loop():
            return await run_async(self.ask(prompt, **values))
        messages = prompt.render(**values)
        key = self._key(prompt, messages)
        pending = self._memo.get(key)
        if pending is not None:
            self.usage.add("memo_hits")
            reply = await asyncio.shield(pending)
            return dataclasses.replace(reply, source="memo")
        future: asyncio.Future[JudgeReply[Any]] = asyncio.get_running_loop().create_future()
        self._memo[key] = future
        try:
            reply = await self._answer(prompt, messages, key, values)
        except Exception as exc:
            # kept in the memo: the same question fails the same way for the rest of
            # the run instead of spending its retries again
            self.usage.add("failures")
            future.set_exception(exc)
            future.exception()  # retrieved: no "never retrieved" warning without waiters
            raise
        except BaseException:
            self._memo.pop(key, None)
            future.cancel()
            raise
        future.set_result(reply)
        return reply

    def _key(self, prompt: Prompt[Any], messages: list[dict[str, str]]) -> str:
        """The question's cache key. The endpoint is part of it: the same model name on
        two servers (a local quantised build and the provider's) may answer differently."""
        endpoint = (self.base_url or "default").rstrip("/")
        return cache_key(self.model, messages, {**self.params(prompt), "endpoint": endpoint})

    async def ask_all(
        self, questions: Sequence[tuple[Prompt[Any], Mapping[str, Any]]]
    ) -> list[JudgeReply[Any] | Exception]:
        """The answers to many questions (prompt and block values), in order; a question
        that fails has its exception as its answer. With ``batch``, the questions the
        memo and the cache do not answer go through the Batch API first."""
        if not in_background_loop():
            return await run_async(self.ask_all(questions))
        if self.batch is not None:
            await self._by_batch(questions)

        async def one(prompt: Prompt[Any], values: Mapping[str, Any]) -> Any:
            try:
                return await self.ask(prompt, **values)
            except Exception as exc:  # the question's answer
                return exc

        return list(await asyncio.gather(*(one(p, v) for p, v in questions)))

    async def _by_batch(self, questions: Sequence[tuple[Prompt[Any], Mapping[str, Any]]]) -> None:
        """Send the questions no memo or cache answers as one round of batches; their
        outcomes wait in ``_fetched`` for the questions' first request (`_first`)."""
        assert self.batch is not None
        requests: dict[str, dict[str, Any]] = {}
        for prompt, values in questions:
            try:
                messages = prompt.render(**values)
            except Exception:  # `ask` raises it again as the question's answer
                continue
            key = self._key(prompt, messages)
            if key in self._memo or key in requests or self.cache.get(key) is not None:
                continue
            requests[key] = self._body(prompt, messages, self.mode)
        if not requests:
            return
        self._fetched.update(await self.batch.collect(self._client(), requests, self.usage.add))

    async def _first(
        self, prompt: Prompt[Any], messages: list[dict[str, str]], key: str
    ) -> tuple[str, int, int]:
        """The question's first reply: its batch line's when a batch answered it, else
        a direct request (`_request`)."""
        fetched = self._fetched.pop(key, None)
        if isinstance(fetched, BatchPending):
            self.usage.add("batch_pending")
            raise JudgeError(f"judge batch not collected: {fetched.reason}")
        if fetched is None or isinstance(fetched, LineFailed):
            if fetched is not None:
                self.usage.add("batch_failed")
            return await self._request(prompt, messages)
        self._circuit.answered()
        p_tok, c_tok = _tokens(fetched.completion)
        self.usage.record_batch_line(p_tok, c_tok)  # paid for, at the batch price
        return completion_content(fetched.completion, self.base_url, self.max_tokens), p_tok, c_tok

    async def _answer(
        self,
        prompt: Prompt[T],
        messages: list[dict[str, str]],
        key: str,
        values: Mapping[str, Any],
    ) -> JudgeReply[T]:
        cached = self.cache.get(key)
        if cached is not None:
            try:
                output = self._parse(prompt, cached.content, values)
            except ParseError:
                self.cache.delete(key)
            else:
                self.usage.add("cache_hits")
                return JudgeReply(output, cached.content, "cache", prompt.signature, self.model)
        content, p_tok, c_tok = await self._first(prompt, messages, key)
        try:
            output = self._parse(prompt, content, values)
        except ParseError as exc:
            retry = [
                *messages,
                {"role": "assistant", "content": content[:4000]},
                {
                    "role": "user",
                    "content": (
                        f"Your reply could not be used ({exc}). Answer again with ONLY the "
                        f"JSON, nothing else, in exactly this form: {prompt.example}"
                    ),
                },
            ]
            self.usage.add("reparse_calls")
            content, p2, c2 = await self._request(prompt, retry)
            p_tok, c_tok = p_tok + p2, c_tok + c2
            try:
                output = self._parse(prompt, content, values)
            except ParseError as exc2:
                raise JudgeError(
                    f"judge reply to {prompt.id} unparsable after a JSON-only retry: {exc2}"
                ) from None
        self.cache.put(
            key,
            model=self.model,
            prompt=prompt.signature,
            content=content,
            prompt_tokens=p_tok,
            completion_tokens=c_tok,
        )
        return JudgeReply(output, content, "call", prompt.signature, self.model)

    @staticmethod
    def _parse(prompt: Prompt[T], content: str, values: Mapping[str, Any]) -> T:
        return parse_reply(content, prompt.output, prompt.fallback, prompt.check, values)

    # ---- HTTP ----------------------------------------------------------------------------
    def _client(self) -> Any:
        if self._api is None:
            from assay.judge.http import ChatCompletions

            # no retries there: they are ours (backoff with jitter, counted in usage)
            self._api = ChatCompletions(
                self.base_url, self.api_key, self.timeout, self.max_reply_bytes
            )
        return self._api

    def share_slots(self, slots: asyncio.Semaphore) -> None:
        """Take request slots from ``slots`` (a judge panel's, shared by its judges)."""
        self._semaphore = slots

    def _sem(self) -> AbstractAsyncContextManager[object]:
        """One request slot: from the shared budget when there is one."""
        if self.budget is not None:
            return self.budget.slot()
        if self._semaphore is None:
            self._semaphore = asyncio.Semaphore(self.concurrency)
        return self._semaphore

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        delay = min(self.backoff_max, self.backoff_base * (2 ** (attempt - 1)))
        delay = delay / 2 + self._rng.uniform(0, delay / 2)
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.backoff_max))
        return delay

    async def _request(
        self, prompt: Prompt[Any], messages: list[dict[str, str]]
    ) -> tuple[str, int, int]:
        """One answered request: (content, prompt tokens, completion tokens).

        The first request of the client probes the structured-output mode while the
        others wait; whatever its outcome, they then start at the mode it settled on, so
        a server that refuses ``response_format`` is sent it once, not once per question.
        """
        if self._probed:
            return await self._send(prompt, messages)
        if self._probe is None:
            self._probe = asyncio.Lock()
        async with self._probe:
            if not self._probed:
                try:
                    return await self._send(prompt, messages)
                finally:
                    self._probed = True
        return await self._send(prompt, messages)

    def _body(
        self, prompt: Prompt[Any], messages: list[dict[str, str]], mode: str
    ) -> dict[str, Any]:
        """The chat-completions request of ``messages`` in structured-output ``mode``."""
        body: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": 0}
        response_format = prompt.response_format(mode)
        if response_format is not None:
            body["response_format"] = response_format
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        return body

    async def _send(
        self, prompt: Prompt[Any], messages: list[dict[str, str]]
    ) -> tuple[str, int, int]:
        from assay.judge.http import ConnectionFailed, CouldNotConnect, HTTPStatusError

        attempt = 0
        mode = self.mode
        while True:
            if self.unreachable is not None:
                raise JudgeUnreachable(self.unreachable)
            kwargs = self._body(prompt, messages, mode)
            error: BaseException | None = None
            async with self._sem():
                await self._hold_off()
                if self._bucket is not None and self.budget is None:
                    await self._bucket.take()  # a shared budget keeps the cluster's rate
                self.usage.add("calls")
                started = time.perf_counter()
                try:
                    completion = await asyncio.wait_for(self._client().create(kwargs), self.timeout)
                except (TimeoutError, ConnectionFailed, HTTPStatusError) as exc:
                    error = exc
                except ReplyTooLarge as exc:  # the same URL would send it again: no retry
                    raise JudgeError(
                        f"judge server at {self.base_url} sent a reply too large: {exc}"
                    ) from None
                except ValueError as exc:  # a body that is not JSON though it says it is
                    raise JudgeError(
                        f"judge server at {self.base_url} sent a body that is not valid JSON "
                        f"({type(exc).__name__}: {exc}); is base_url its OpenAI-compatible "
                        "/v1 address?"
                    ) from None
                latency = time.perf_counter() - started
            if error is None:
                self._circuit.answered()
                p_tok, c_tok = _tokens(completion)
                self.usage.record_call(prompt.name, latency, p_tok, c_tok)  # paid for
                if isinstance(json_field(completion, "choices"), list) and STRUCTURED_MODES.index(
                    mode
                ) > STRUCTURED_MODES.index(self.mode):
                    # the server took this format (even if this reply is of no use):
                    # start here from now on
                    self.mode = mode
                return completion_content(completion, self.base_url, self.max_tokens), p_tok, c_tok
            if not isinstance(error, CouldNotConnect):
                self._circuit.connected()  # the server was reached (it failed)
            status = getattr(error, "status_code", None)
            if status in (400, 422) and not self._fixed_mode and mode != STRUCTURED_MODES[-1]:
                # perhaps the server does not take this response_format: try the next mode
                # (remembered only once one succeeds: a 400 for another reason, such as a
                # prompt over the context length, must not switch structured output off)
                mode = STRUCTURED_MODES[STRUCTURED_MODES.index(mode) + 1]
                continue
            retryable = status is None or status in _RETRY_STATUS or status >= 500
            if not retryable:
                raise JudgeError(f"judge request failed: {describe_failure(error)}") from None
            attempt += 1
            if attempt > self.max_retries:
                failed = f"after {self.max_retries} retries: {describe_failure(error)}"
                why = f"the judge at {self.base_url} cannot be reached ({failed})"
                if isinstance(error, CouldNotConnect) and self._circuit.could_not_connect(why):
                    raise JudgeUnreachable(why) from None
                raise JudgeError(f"judge request failed {failed}") from None
            self.usage.add("retries")
            retry_after = retry_after_seconds(getattr(error, "headers", None))
            if retry_after:
                # the server asked this client to wait: no request of any question goes
                # before then (a 429 storm is not fed by the other questions in flight)
                until = asyncio.get_running_loop().time() + min(retry_after, self.backoff_max)
                self._quiet_until = max(self._quiet_until, until)
                if self.budget is not None:
                    self.budget.hold_off(min(retry_after, self.backoff_max))
            await asyncio.sleep(self._backoff(attempt, retry_after))

    async def _hold_off(self) -> None:
        """Wait out the latest ``Retry-After`` the server gave (bounded by backoff_max)."""
        loop = asyncio.get_running_loop()
        while (wait := self._quiet_until - loop.time()) > 0:
            await asyncio.sleep(wait)


def _tokens(completion: Any) -> tuple[int, int]:
    """The prompt and completion tokens of a chat completion's ``usage`` (direct or batch)."""
    usage = json_field(completion, "usage")
    prompt = token_count(json_field(usage, "prompt_tokens"))
    return prompt, token_count(json_field(usage, "completion_tokens"))
