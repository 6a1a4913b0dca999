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
and a ``Retry-After`` seen by any worker pauses the slots handed out to all of them.

Slots travel in blocks: a worker keeps at most one slot request at the actor, for as
many slots as it has requests waiting (`JudgeBudget.acquire_many`: it waits for the
first and takes at once those other slots that are free then, none with a rate limit),
hands each slot to one waiting request, and gives back the slots its requests finished
with in one call `RELEASE_WAIT` (5 ms) after the first of them, or at once when none of
its requests holds a slot any more (`JudgeBudget.release_many`, not waited for). A slot
still serves one request only, so the limit, the rate and the pause hold as with one
call per slot. Measured (``benchmarks/scale.py judged``: 2 workers, 64 in flight, 49,606
slots on 2 cores): 24,995 block requests and 21,278 give-backs, where one call a slot
each way would be 99,212, and where giving back once a turn of the event loop made
38,115 give-backs (each call costs the worker about 0.3 ms of CPU, the actor as much).

Slots are counted per holder (one per worker): when a worker dies the driver calls
`JudgeBudget.forget`, which gives back what it held and refuses what it still had
queued, so a killed worker never shrinks the budget.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter, deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from assay.judge.rate import TokenBucket

__all__ = ["RELEASE_WAIT", "BudgetSlots", "JudgeBudget"]

#: seconds a worker gathers the slots its requests finish with before giving them back
#: in one call: replies that come within it share the call (one a turn of the event
#: loop gave 1.3 slots a call at 64 in flight); a slot then idles up to this long
RELEASE_WAIT = 0.005


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
        calls: the calls asking for slots (``acquire``: `acquire_many`) and giving them
            back (``release``: `release_many`) so far.
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
        self.calls: Counter[str] = Counter()
        self._gone: set[str] = set()
        self._quiet_until = 0.0  # time.monotonic() before which no slot is handed out

    async def _acquire(self, holder: str) -> bool:
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

    async def acquire_many(self, holder: str, most: int) -> int:
        """Wait for one slot (for a free one, the end of any pause and the rate limit's
        next token), then take at once up to ``most - 1``
        more that are free now (none with a rate limit: each of those waits for its own
        token, in its own call); how many ``holder`` got (0: it was forgotten)."""
        self.calls["acquire"] += 1
        if not await self._acquire(holder):
            return 0
        got = 1
        while (
            got < most
            and self._bucket is None
            and not self._free.locked()  # so the acquire below returns at once
            and self._quiet_until <= time.monotonic()
            and holder not in self._gone  # forgotten while its first slot waited
        ):
            await self._free.acquire()
            self._held[holder] += 1
            self.granted += 1
            got += 1
        self.peak = max(self.peak, sum(self._held.values()))
        return got

    def release_many(self, holder: str, count: int) -> None:
        """Give back ``count`` of ``holder``'s slots (at most as many as it holds)."""
        self.calls["release"] += 1
        for _ in range(min(count, self._held[holder])):
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
        """The limits, the peak and current number in flight, the slots handed out and
        the calls for them."""
        return {
            "limit": self.limit,
            "rate_limit": self.rate_limit,
            "peak": self.peak,
            "in_flight": sum(self._held.values()),
            "granted": self.granted,
            "calls": {"acquire": self.calls["acquire"], "release": self.calls["release"]},
        }


class BudgetSlots:
    """A worker's view of the cluster's `JudgeBudget` (a `SharedBudget` for its
    `JudgeClient`): ``slot()`` holds one of the budget's slots for one request. The
    slots are asked for and given back in blocks (see the module docstring); use it
    from one event loop (the judge's).

    Args:
        budget: the budget actor's handle.
        holder: this worker's name at the budget.
    """

    def __init__(self, budget: Any, holder: str) -> None:
        self._budget = budget
        self._holder = holder
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._asking: asyncio.Task[None] | None = None  # the block request at the actor
        self._done = 0  # slots finished with, to give back in one call (`_give_back`)
        self._flushing: asyncio.Handle | None = None  # the call that gives them back
        self._active = 0  # slots held by this worker's requests now
        self._released: Any = None  # the last give-back call (awaitable), until settled

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append(granted)
        self._ask()
        try:
            await granted
        except asyncio.CancelledError:
            # given up while waiting: a slot already handed to it goes back
            if granted.done() and not granted.cancelled() and granted.exception() is None:
                self._give_back()
            raise
        self._active += 1
        try:
            yield
        finally:
            self._active -= 1
            self._give_back()

    def _ask(self) -> None:
        """Ask the actor for a block of slots, one per waiting request, unless a request
        for a block is already there."""
        if self._asking is not None:
            return
        wanted = sum(1 for f in self._waiting if not f.done())
        if not wanted:
            return
        self._asking = asyncio.ensure_future(self._lease(wanted))

    async def _lease(self, wanted: int) -> None:
        try:
            got = await self._budget.acquire_many.remote(self._holder, wanted)
        except Exception as exc:  # the actor is gone: every waiting request fails so
            self._asking = None
            self._fail_waiting(exc)
            return
        self._asking = None
        if got == 0:
            self._fail_waiting(
                RuntimeError(f"the judge budget no longer serves worker {self._holder}")
            )
            return
        while got and self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():  # one given up meanwhile gets none
                waiter.set_result(None)
                got -= 1
        for _ in range(got):  # more than are waiting now: back at once
            self._give_back()
        self._ask()

    def _fail_waiting(self, error: BaseException) -> None:
        """Every waiting request fails with ``error``."""
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_exception(error)

    def _give_back(self) -> None:
        """Count one slot as finished with; the count goes back to the actor in one call
        `RELEASE_WAIT` seconds after the first of them, or at the end of this turn of
        the event loop once no request of this worker holds a slot (no reply is coming
        that could share the call)."""
        self._done += 1
        loop = asyncio.get_running_loop()
        if self._active:
            if self._flushing is None:
                self._flushing = loop.call_later(RELEASE_WAIT, self._flush)
            return
        if self._flushing is not None:
            self._flushing.cancel()
        self._flushing = loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flushing = None
        done, self._done = self._done, 0
        if done:
            self._released = self._budget.release_many.remote(self._holder, done)

    async def settle(self) -> None:
        """Give back at once the slots finished with, and wait until the actor has taken
        back every slot given back so far (a chunk's end: the driver may read the
        budget's counts next)."""
        if self._flushing is not None:
            self._flushing.cancel()
        self._flush()
        released, self._released = self._released, None
        if released is not None:
            await released

    def hold_off(self, seconds: float) -> None:
        self._budget.hold_off.remote(seconds)
