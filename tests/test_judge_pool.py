"""`LinearPool` (assay.core.http_pool, the pool of ``assay run``'s targets) against
httpcore's own `AsyncConnectionPool`: the same connections closed, kept and assigned for
every pool state, and a real client through it."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import httpcore
import httpx
from httpcore._async.connection_pool import AsyncPoolRequest

from assay.core.http_pool import LinearPool, linear_transport
from judge_server import JudgeServer

ORIGINS = ("http://a.test", "http://b.test")


class FakeConnection:
    """A connection's state as the pool reads it (no socket)."""

    def __init__(self, name: str, origin: str, state: str, expired: bool = False) -> None:
        self.name, self.origin, self.state, self.expired = name, origin, state, expired

    def can_handle_request(self, origin: httpcore.Origin) -> bool:
        return origin == httpcore.Request("GET", self.origin + "/").url.origin

    def is_available(self) -> bool:
        return self.state == "idle"

    def has_expired(self) -> bool:
        return self.expired

    def is_idle(self) -> bool:
        return self.state == "idle"

    def is_closed(self) -> bool:
        return self.state == "closed"


def decisions(pool_class: type[httpcore.AsyncConnectionPool], state: dict[str, Any]) -> Any:
    """(connections kept, connections closed, each request's connection) after one pass
    of ``pool_class``'s bookkeeping over ``state``."""
    made: list[str] = []

    class Pool(pool_class):  # type: ignore[misc, valid-type]
        def create_connection(self, origin: httpcore.Origin) -> Any:
            made.append(f"new{len(made)}")
            return FakeConnection(made[-1], f"http://{origin.host.decode()}", "new")

    pool = Pool(
        max_connections=state["max_connections"],
        max_keepalive_connections=state["max_keepalive"],
    )
    pool._connections = [FakeConnection(*c) for c in state["connections"]]
    requests = []
    for origin, queued in state["requests"]:
        request = AsyncPoolRequest(httpcore.Request("POST", origin + "/x"))
        if not queued:
            request.assign_to_connection(FakeConnection("busy", origin, "active"))  # type: ignore[arg-type]
        requests.append(request)
    pool._requests = requests
    closing = pool._assign_requests_to_connections()
    assigned = [getattr(r.connection, "name", None) for r in requests]
    return [c.name for c in pool._connections], [c.name for c in closing], assigned


def random_state(rng: random.Random) -> dict[str, Any]:
    connections = []
    for i in range(rng.randint(0, 12)):
        state = rng.choice(["idle", "idle", "active", "closed"])
        connections.append((f"c{i}", rng.choice(ORIGINS), state, rng.random() < 0.2))
    return {
        "max_connections": rng.choice([None, 4, 8, 16]),
        "max_keepalive": rng.choice([2, 5, 64]),
        "connections": connections,
        "requests": [(rng.choice(ORIGINS), rng.random() < 0.6) for _ in range(rng.randint(0, 6))],
    }


def test_linear_pool_decides_as_httpcore_does() -> None:
    """Without expired connections: httpcore's decisions exactly. With them: no request
    gets an expired connection, and only expired or surplus ones are closed."""
    rng = random.Random(7)
    states = [random_state(rng) for _ in range(1000)]

    async def compare() -> tuple[list[Any], list[Any]]:  # the pool's events need a loop
        ours = [decisions(LinearPool, s) for s in states]
        return ours, [decisions(httpcore.AsyncConnectionPool, s) for s in states]

    ours, theirs = asyncio.run(compare())
    fresh = [i for i, s in enumerate(states) if not any(c[3] for c in s["connections"])]
    assert len(fresh) > 300
    assert [i for i in fresh if ours[i] != theirs[i]] == []
    # the fresh states cover every branch: connections closed (surplus, making room),
    # new ones made, and requests left waiting in a full pool
    assert sum(1 for i in fresh if ours[i][1]) > 50
    assert sum(1 for i in fresh for a in ours[i][2] if a and a.startswith("new")) > 50
    assert sum(1 for i in fresh if None in ours[i][2]) > 10
    stale = [i for i in range(len(states)) if i not in set(fresh)]
    expired_given = surplus_kept = expired_closed = 0
    for i in stale:
        expired = {c[0] for c in states[i]["connections"] if c[3]}
        expired_given += len(expired & set(ours[i][2]))
        # what httpcore closed and we kept can only be an expired connection
        surplus_kept += len(set(theirs[i][1]) - set(ours[i][1]) - expired)
        expired_closed += len(expired & set(ours[i][1]))
    assert (expired_given, surplus_kept) == (0, 0)
    # an expired connection a request reached was closed, not given
    assert expired_closed > 20


def test_a_client_through_the_linear_pool_answers_concurrent_requests() -> None:
    """``assay run``'s targets: 100 requests at once through a client whose transport is
    `linear_transport`'s."""
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=64)
    with JudgeServer(delay=0.05) as server:
        transport = linear_transport(limits)
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}

        async def run() -> list[Any]:
            async with httpx.AsyncClient(transport=transport, limits=limits) as client:
                url = server.url.rstrip("/") + "/chat/completions"
                replies = await asyncio.gather(*(client.post(url, json=body) for _ in range(100)))
                return [r.json() for r in replies]

        replies = asyncio.run(run())
        pool = transport._pool
        assert type(pool) is LinearPool
        assert len(replies) == 100
        assert all(r["choices"][0]["message"]["content"] for r in replies)
        assert server.calls == 100
        # 100 requests at once over a pool keeping 64 idle connections at most
        assert len(pool._connections) <= 64


def test_another_httpcore_keeps_its_own_pool(monkeypatch: Any) -> None:
    # LinearPool re-implements httpcore 1.0's private bookkeeping: under another release
    # the transport keeps httpcore's own pool (correct, only slower with many in flight)
    monkeypatch.setattr(httpcore, "__version__", "1.1.0")
    transport = linear_transport(httpx.Limits(max_keepalive_connections=64))
    assert type(transport._pool) is httpcore.AsyncConnectionPool
