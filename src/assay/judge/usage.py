"""Judge usage accounting: calls, cache hits, tokens, latency and cost of a run."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from assay.judge.batch import BATCH_PRICE

__all__ = ["BATCH_COUNTERS", "SUMMED_COUNTERS", "JudgeUsage", "summed_usage"]

#: the counters of `JudgeUsage.to_dict` that add up over several clients (a panel's
#: judges, a Ray cluster's workers)
SUMMED_COUNTERS = (
    "calls",
    "retries",
    "reparse_calls",
    "failures",
    "cache_hits",
    "memo_hits",
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "latency_seconds",
)
#: the counters of `JudgeUsage.to_dict` in batch mode only (``judge_batch``), summed too
BATCH_COUNTERS = (
    "batch_calls",
    "batch_prompt_tokens",
    "batch_completion_tokens",
    "batches",
    "batches_resumed",
    "batch_failed",
    "batch_pending",
)


def summed_usage(usages: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One usage (as `JudgeUsage.to_dict` gives it) for several clients (a panel's judges,
    a Ray cluster's workers): `SUMMED_COUNTERS` summed, and `BATCH_COUNTERS` when a client
    batched; the slowest call; the mean latency over every answered call; the cost summed
    when every client has one (else None); the calls by prompt summed."""
    batched = any("batch_calls" in u for u in usages)
    counters = (*SUMMED_COUNTERS, *BATCH_COUNTERS) if batched else SUMMED_COUNTERS
    out: dict[str, Any] = {key: sum(u.get(key, 0) for u in usages) for key in counters}
    out["max_latency_seconds"] = max(u.get("max_latency_seconds", 0.0) for u in usages)
    by_prompt: dict[str, int] = {}
    for usage in usages:
        for prompt, n in (usage.get("calls_by_prompt") or {}).items():
            by_prompt[prompt] = by_prompt.get(prompt, 0) + n
    answered = sum(by_prompt.values())
    out["mean_latency_seconds"] = out["latency_seconds"] / answered if answered else None
    costs = [u.get("cost") for u in usages]
    out["cost"] = None if any(c is None for c in costs) else sum(costs)
    out["calls_by_prompt"] = by_prompt
    return out


@dataclass
class JudgeUsage:
    """Counters of one judge client (one run).

    Attributes:
        calls: HTTP requests sent to the judge server (every attempt, retries included).
        retries: requests that repeated an earlier failed attempt (429, 5xx, timeout).
        reparse_calls: extra "answer only with JSON" requests after an unparsable reply.
        failures: judge questions that finally failed (their metric result is None).
        cache_hits: questions answered from the persistent cache (no request).
        memo_hits: questions already asked in this run by another metric (no request).
        prompt_tokens, completion_tokens: as reported by the server's ``usage`` (direct
            calls and batch lines together).
        batch_calls: requests answered through the Batch API (``judge_batch``), counted
            apart from ``calls``; batch_prompt_tokens, batch_completion_tokens: their
            tokens (also in the totals), priced at `BATCH_PRICE` of the direct price.
        batches, batches_resumed: batches created, and batches a stopped run had left
            that this one collected (without sending their requests again).
        batch_failed: requests a batch did not answer (an error line, a missing line, a
            failed batch), then asked directly (and counted in ``calls``).
        batch_pending: requests whose batch was still running after ``judge_batch_wait``
            (the sample's error; a re-run collects the batch).
        latency_seconds: summed wall time of the requests that got a reply.
        max_latency_seconds: the slowest such request.
        price_prompt, price_completion: price per 1M tokens, when configured.
    """

    calls: int = 0
    retries: int = 0
    reparse_calls: int = 0
    failures: int = 0
    cache_hits: int = 0
    memo_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    batch_calls: int = 0
    batch_prompt_tokens: int = 0
    batch_completion_tokens: int = 0
    batches: int = 0
    batches_resumed: int = 0
    batch_failed: int = 0
    batch_pending: int = 0
    latency_seconds: float = 0.0
    max_latency_seconds: float = 0.0
    price_prompt: float | None = None
    price_completion: float | None = None
    #: the client sends through the Batch API: the batch counters are reported
    batch_mode: bool = False
    by_prompt: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def record_call(
        self, prompt: str, latency: float, prompt_tokens: int, completion_tokens: int
    ) -> None:
        """Count one request that got a reply."""
        with self._lock:
            self.latency_seconds += latency
            self.max_latency_seconds = max(self.max_latency_seconds, latency)
            self.prompt_tokens += prompt_tokens
            self.completion_tokens += completion_tokens
            self.by_prompt[prompt] = self.by_prompt.get(prompt, 0) + 1

    def record_batch_line(self, prompt_tokens: int, completion_tokens: int) -> None:
        """Count one request answered by a batch line."""
        with self._lock:
            self.batch_calls += 1
            self.batch_prompt_tokens += prompt_tokens
            self.batch_completion_tokens += completion_tokens
            self.prompt_tokens += prompt_tokens
            self.completion_tokens += completion_tokens

    def add(self, counter: str, n: int = 1) -> None:
        with self._lock:
            setattr(self, counter, getattr(self, counter) + n)

    @property
    def cost(self) -> float | None:
        """Cost in the price's currency, when both per-1M-token prices are configured: the
        direct calls' tokens at the prices, the batch lines' at `BATCH_PRICE` of them."""
        if self.price_prompt is None or self.price_completion is None:
            return None
        prompt = self.prompt_tokens - self.batch_prompt_tokens * (1 - BATCH_PRICE)
        completion = self.completion_tokens - self.batch_completion_tokens * (1 - BATCH_PRICE)
        return (prompt * self.price_prompt + completion * self.price_completion) / 1_000_000

    @property
    def mean_latency_seconds(self) -> float | None:
        answered = sum(self.by_prompt.values())
        return self.latency_seconds / answered if answered else None

    def snapshot(self) -> dict[str, int | float]:
        """The plain counters, for differences between two moments of a run."""
        with self._lock:
            return {
                "calls": self.calls,
                "retries": self.retries,
                "reparse_calls": self.reparse_calls,
                "failures": self.failures,
                "cache_hits": self.cache_hits,
                "memo_hits": self.memo_hits,
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
                "batch_calls": self.batch_calls,
                "batch_prompt_tokens": self.batch_prompt_tokens,
                "batch_completion_tokens": self.batch_completion_tokens,
                "batches": self.batches,
                "batches_resumed": self.batches_resumed,
                "batch_failed": self.batch_failed,
                "batch_pending": self.batch_pending,
                "latency_seconds": self.latency_seconds,
            }

    def to_dict(self) -> dict[str, Any]:
        """The counters, totals, latencies and cost (the batch counters in batch mode)."""
        out: dict[str, Any] = self.snapshot()
        if not self.batch_mode:  # direct calls only: the batch counters say nothing
            out = {k: v for k, v in out.items() if not k.startswith("batch")}
        out["max_latency_seconds"] = self.max_latency_seconds
        out["mean_latency_seconds"] = self.mean_latency_seconds
        out["total_tokens"] = self.prompt_tokens + self.completion_tokens
        out["cost"] = self.cost
        out["calls_by_prompt"] = dict(self.by_prompt)
        return out
