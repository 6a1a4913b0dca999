"""One judge budget for a whole cluster: request slots, the rate limit and Retry-After
pauses.

On one machine a run's `JudgeClient` keeps at most ``judge_concurrency`` requests in
flight and holds every request back while a 429's ``Retry-After`` runs. On a cluster
each worker has its own client, so N workers would send N times that; instead the run
starts one `JudgeBudget` actor (a counting semaphore with a pause and, when
``judge_rate_limit`` is set, one token bucket, `assay.judge.rate`) and gives each
worker's client a `BudgetSlots`: every judge request takes a slot from the actor before
it is sent and gives it back when its reply (or error) has come; the slot is handed out
only when the cluster's rate allows one more request (so the rate costs no second call),
and a ``Retry-After`` seen by any worker pauses the slots handed out to all of them. A
slot costs one actor call each way (about a millisecond on one machine, answered while
the request waits for the judge anyway); the release is not waited for.

Slots are counted per holder (one per worker): when a worker dies the driver calls
`JudgeBudget.forget`, which gives back what it held and refuses what it still had
queued, so a killed worker never shrinks the budget.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from assay.judge.rate import TokenBucket

__all__ = ["BudgetSlots", "JudgeBudget"]


class JudgeBudget:
    """At most ``limit`` judge requests in flight across every holder, at most
    ``rate_limit`` a second (None: no rate limit), and a common pause (run as a Ray
    actor: ``ray.remote(JudgeBudget)``; its methods are coroutines or return at once, so
    thousands of waiting slot requests cost no thread).

    Attributes:
        limit: the most requests in flight at once.
        rate_limit: the most requests a second, or None.
        peak: the most that were in flight at once so far.
        granted: slots handed out so far.
    """

    def __init__(self, limit: int, rate_limit: float | None = None) -> None:
        if limit < 1:
            raise ValueError(f"the judge budget needs a limit of at least 1. Got {limit}.")
        self.limit = limit
        self.rate_limit = rate_limit
        self._bucket = TokenBucket(rate_limit) if rate_limit is not None else None
        self.peak = 0
        self.granted = 0
        self._free = asyncio.Semaphore(limit)
        self._held: Counter[str] = Counter()
        self._gone: set[str] = set()
        self._quiet_until = 0.0  # time.monotonic() before which no slot is handed out

    async def acquire(self, holder: str) -> bool:
        """Wait for a free slot, for the end of any pause and for the rate limit's next
        token, then count the slot as ``holder``'s. False (and no slot) for a holder
        that was forgotten."""
        await self._free.acquire()
        if holder in self._gone:
            self._free.release()
            return False
        self._held[holder] += 1
        self.granted += 1
        self.peak = max(self.peak, sum(self._held.values()))
        while (wait := self._quiet_until - time.monotonic()) > 0:
            await asyncio.sleep(wait)
        if self._bucket is not None:
            await self._bucket.take()
        return True

    def release(self, holder: str) -> None:
        """Give back one of ``holder``'s slots (nothing when it holds none)."""
        if self._held[holder] > 0:
            self._held[holder] -= 1
            self._free.release()

    def hold_off(self, seconds: float) -> None:
        """Hand out no slot for the next ``seconds`` (a server's Retry-After)."""
        self._quiet_until = max(self._quiet_until, time.monotonic() + max(0.0, seconds))

    def forget(self, holder: str) -> int:
        """Give back every slot of ``holder`` (a worker that died) and refuse its later
        requests; returns how many it held."""
        self._gone.add(holder)
        held = self._held.pop(holder, 0)
        for _ in range(held):
            self._free.release()
        return held

    def stats(self) -> dict[str, Any]:
        """The limits, the peak and current number in flight, and slots handed out."""
        return {
            "limit": self.limit,
            "rate_limit": self.rate_limit,
            "peak": self.peak,
            "in_flight": sum(self._held.values()),
            "granted": self.granted,
        }


class BudgetSlots:
    """A worker's view of the cluster's `JudgeBudget` (a `SharedBudget` for its
    `JudgeClient`): ``slot()`` holds one of the budget's slots for one request.

    Args:
        budget: the budget actor's handle.
        holder: this worker's name at the budget.
    """

    def __init__(self, budget: Any, holder: str) -> None:
        self._budget = budget
        self._holder = holder

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        granted = asyncio.ensure_future(self._budget.acquire.remote(self._holder))
        try:
            ok = await asyncio.shield(granted)
        except asyncio.CancelledError:
            # the request was given up while waiting: a slot granted later goes back
            granted.add_done_callback(self._give_back_late)
            raise
        if not ok:
            raise RuntimeError(f"the judge budget no longer serves worker {self._holder}")
        try:
            yield
        finally:
            self._budget.release.remote(self._holder)

    def _give_back_late(self, granted: asyncio.Future[bool]) -> None:
        if not granted.cancelled() and granted.exception() is None and granted.result():
            self._budget.release.remote(self._holder)

    def hold_off(self, seconds: float) -> None:
        self._budget.hold_off.remote(seconds)
