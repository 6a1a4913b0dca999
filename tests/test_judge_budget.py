"""The judge budget's slots in blocks (`JudgeBudget.acquire_many` / `release_many`) and a
worker's `BudgetSlots` over them, in one event loop (the actor's methods called through
a stand-in for its Ray handle): the limit, the rate limit, the pause and a forgotten
holder hold as with one call per slot."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from assay.evaluation.scale.budget import RELEASE_WAIT, BudgetSlots, JudgeBudget


class LocalHandle:
    """``handle.method.remote(*args)`` for an in-process `JudgeBudget`: a future (or task)
    of the method's result, as awaiting a Ray actor call gives it."""

    def __init__(self, budget: JudgeBudget) -> None:
        self.budget = budget

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.budget, name)

        class Remote:
            @staticmethod
            def remote(*args: Any) -> asyncio.Future[Any]:
                result = method(*args)
                if asyncio.iscoroutine(result):
                    return asyncio.ensure_future(result)
                done = asyncio.get_running_loop().create_future()
                done.set_result(result)
                return done

        return Remote()


def test_acquire_many_takes_the_free_slots_and_waits_for_one() -> None:
    async def scenario() -> tuple[list[int], dict[str, Any]]:
        budget = JudgeBudget(5)
        got = [await budget.acquire_many("a", 3), await budget.acquire_many("b", 5)]
        waiting = asyncio.ensure_future(budget.acquire_many("a", 4))  # none free: waits
        await asyncio.sleep(0.01)
        assert not waiting.done()
        budget.release_many("b", 2)  # both free again: the waiting call takes both
        got.append(await waiting)
        budget.release_many("b", 7)  # b holds none now: nothing more comes back
        return got, budget.stats()

    got, stats = asyncio.run(scenario())
    assert got == [3, 2, 2]
    assert stats == {
        "limit": 5,
        "rate_limit": None,
        "peak": 5,
        "in_flight": 5,
        "granted": 7,
        "calls": {"acquire": 3, "release": 2},
    }


def test_acquire_many_gives_one_slot_a_call_with_a_rate_limit_and_none_when_forgotten() -> None:
    async def scenario() -> tuple[int, int, float]:
        budget = JudgeBudget(8, rate_limit=1000.0)
        one = await budget.acquire_many("a", 8)
        budget.forget("b")
        none = await budget.acquire_many("b", 8)
        budget.hold_off(0.2)
        started = time.monotonic()
        await budget.acquire_many("a", 3)
        return one, none, time.monotonic() - started

    one, none, paused = asyncio.run(scenario())
    assert (one, none) == (1, 0)
    assert 0.19 <= paused < 0.5


def test_budget_slots_keep_the_limit_and_ask_in_blocks() -> None:
    """40 requests, each holding its slot 20 ms, limit 4: never more than 4 at once,
    every slot back, and the first block request gets all 4 slots in one call (so at
    most 37 calls for 40 slots)."""

    async def scenario() -> tuple[int, dict[str, Any]]:
        budget = JudgeBudget(4)
        slots = BudgetSlots(LocalHandle(budget), "w")
        busy = most = 0

        async def request() -> None:
            nonlocal busy, most
            async with slots.slot():
                busy += 1
                most = max(most, busy)
                await asyncio.sleep(0.02)
                busy -= 1

        await asyncio.gather(*(request() for _ in range(40)))
        await asyncio.sleep(3 * RELEASE_WAIT)  # the last slots' return call
        return most, budget.stats()

    most, stats = asyncio.run(scenario())
    assert most == 4
    assert (stats["peak"], stats["in_flight"], stats["granted"]) == (4, 0, 40)
    assert stats["calls"]["acquire"] <= 37
    assert stats["calls"]["release"] <= 40


def test_slots_finished_within_the_release_wait_go_back_in_one_call() -> None:
    """Eight requests finishing 0.2 ms apart: the last, finishing with none of the
    worker's requests holding a slot, sends the count at once, so one call gives back all
    8. With a ninth request that outlasts them by 50 ms, the eight go back in one call
    after the 5 ms wait and the ninth's alone at its end. Eight finishing 20 ms apart:
    one call each. (The first request asks for one slot, the seven after it for theirs
    in a second call.)"""

    async def scenario(gaps: list[float]) -> dict[str, Any]:
        budget = JudgeBudget(len(gaps))
        slots = BudgetSlots(LocalHandle(budget), "w")

        async def request(seconds: float) -> None:
            async with slots.slot():
                await asyncio.sleep(seconds)

        await asyncio.gather(*(request(0.05 + gap) for gap in gaps))
        await asyncio.sleep(3 * RELEASE_WAIT)
        return budget.stats()

    assert RELEASE_WAIT == 0.005
    together = asyncio.run(scenario([0.0002 * k for k in range(8)]))
    assert (together["in_flight"], together["granted"]) == (0, 8)
    assert together["calls"]["acquire"] == 2
    assert together["calls"]["release"] <= 2  # 1, or 2 on a machine that stalls 5 ms
    outlasting = asyncio.run(scenario([0.0002 * k for k in range(8)] + [0.05]))
    assert outlasting["in_flight"] == 0
    assert 2 <= outlasting["calls"]["release"] <= 3
    apart = asyncio.run(scenario([0.02 * k for k in range(8)]))
    assert apart["in_flight"] == 0
    assert 6 <= apart["calls"]["release"] <= 8  # one each (two may share on a stall)


def test_settle_gives_the_slots_back_before_it_returns() -> None:
    """A worker at a chunk's end: one request finished, another still holding a slot,
    so the first's slot waits for the 5 ms give-back; settle sends it at once and
    returns once the budget has it back."""

    async def scenario() -> tuple[int, int, int]:
        budget = JudgeBudget(2)
        slots = BudgetSlots(LocalHandle(budget), "w")
        entered, hold = asyncio.Event(), asyncio.Event()

        async def request(wait: bool) -> None:
            async with slots.slot():
                if wait:
                    entered.set()
                    await hold.wait()

        holding = asyncio.ensure_future(request(True))
        await entered.wait()
        await request(False)
        before = budget.stats()["in_flight"]  # the quick one's slot waits for the wait
        await slots.settle()
        after = budget.stats()["in_flight"]
        hold.set()
        await holding
        await slots.settle()
        return before, after, budget.stats()["in_flight"]

    assert asyncio.run(scenario()) == (2, 1, 0)


def test_budget_slots_a_request_given_up_while_waiting_takes_no_slot() -> None:
    async def scenario() -> dict[str, Any]:
        budget = JudgeBudget(1)
        slots = BudgetSlots(LocalHandle(budget), "w")
        release = asyncio.Event()

        async def holder() -> None:
            async with slots.slot():
                await release.wait()

        first = asyncio.ensure_future(holder())
        await asyncio.sleep(0.01)
        second = asyncio.ensure_future(holder())  # waits for the one slot ...
        await asyncio.sleep(0.01)
        second.cancel()  # ... and is given up
        release.set()
        await first
        with pytest.raises(asyncio.CancelledError):
            await second
        await asyncio.sleep(3 * RELEASE_WAIT)
        return budget.stats()

    stats = asyncio.run(scenario())
    assert (stats["in_flight"], stats["peak"]) == (0, 1)


def test_budget_slots_of_a_forgotten_worker_are_refused() -> None:
    async def scenario() -> str:
        budget = JudgeBudget(2)
        budget.forget("w")
        slots = BudgetSlots(LocalHandle(budget), "w")
        try:
            async with slots.slot():
                return "served"
        except RuntimeError as exc:
            return str(exc)

    assert asyncio.run(scenario()) == "the judge budget no longer serves worker w"
