"""Judge usage accounting: calls, cache hits, tokens, latency and cost of a run."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

__all__ = ["JudgeUsage"]


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
        prompt_tokens, completion_tokens: as reported by the server's ``usage``.
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
    latency_seconds: float = 0.0
    max_latency_seconds: float = 0.0
    price_prompt: float | None = None
    price_completion: float | None = None
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

    def add(self, counter: str, n: int = 1) -> None:
        with self._lock:
            setattr(self, counter, getattr(self, counter) + n)

    @property
    def cost(self) -> float | None:
        """Cost in the price's currency, when both per-1M-token prices are configured."""
        if self.price_prompt is None or self.price_completion is None:
            return None
        return (
            self.prompt_tokens * self.price_prompt + self.completion_tokens * self.price_completion
        ) / 1_000_000

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
                "latency_seconds": self.latency_seconds,
            }

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = self.snapshot()
        out["max_latency_seconds"] = self.max_latency_seconds
        out["mean_latency_seconds"] = self.mean_latency_seconds
        out["total_tokens"] = self.prompt_tokens + self.completion_tokens
        out["cost"] = self.cost
        out["calls_by_prompt"] = dict(self.by_prompt)
        return out
