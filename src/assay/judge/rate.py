"""A token bucket: the judge's requests-per-second limit.

The bucket holds at most ``capacity = max(1, rate)`` tokens and gains ``rate`` tokens a
second; every request attempt (retries included) takes one before it is sent. It holds
one token when the first request comes (however long after the bucket was made: a Ray
cluster's workers may take seconds to start), so a run's requests go out evenly from the
first: ``n`` requests at ``rate`` per second take at least ``(n - 1) / rate`` seconds,
and while requests keep waiting a one-second window holds at most ``rate + 1`` of them.
After an idle spell the bucket fills again, and a burst of up to ``capacity`` requests
(one second's worth) may go at once; in any window of ``T`` seconds at most
``capacity + rate * T`` requests are sent.

A request that finds no token reserves the next one (the count goes below zero) and
waits until it is due, so waiting requests are served first come, first served, and no
one polls. The bucket needs no event loop of its own: the `JudgeClient` keeps one per
client, the Ray executor's `JudgeBudget` actor one for the whole cluster.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable

__all__ = ["TokenBucket"]


class TokenBucket:
    """At most ``rate`` requests per second on average, bursts of at most ``max(1, rate)``.

    Args:
        rate: tokens added per second (requests per second); positive and finite.
        clock: the monotonic clock in seconds (``time.monotonic``).

    Attributes:
        rate: tokens added per second.
        capacity: the most tokens the bucket holds.
    """

    def __init__(self, rate: float, clock: Callable[[], float] = time.monotonic) -> None:
        if not (math.isfinite(rate) and rate > 0):
            raise ValueError(f"the judge rate limit must be a positive number. Got {rate}.")
        self.rate = float(rate)
        self.capacity = max(1.0, self.rate)
        self._clock = clock
        self._tokens = 1.0  # may go below zero: tokens reserved by waiting requests
        self._stamp: float | None = None  # the clock when tokens was counted; None: unused

    def reserve(self) -> float:
        """Take one token: the seconds until it is due (0 when one was there)."""
        now = self._clock()
        if self._stamp is not None:
            self._tokens = min(self.capacity, self._tokens + (now - self._stamp) * self.rate)
        self._stamp = now
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.rate

    async def take(self) -> None:
        """Wait until this request's token is due."""
        wait = self.reserve()
        if wait > 0:
            await asyncio.sleep(wait)
