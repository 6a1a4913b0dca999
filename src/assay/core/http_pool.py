"""An httpx transport whose connection pool stays cheap with many requests in flight, for
``assay run``'s targets (the judge's requests go through `assay.core.http_aiohttp`).

The connection pool is httpcore's with one change (`LinearPool`): httpcore 1.0's
``_assign_requests_to_connections``, run as each request enters and leaves the pool,
counts the pool's connections once per idle connection (a list of every connection,
built for each idle one: O(connections²) a request) and polls the socket of every idle
connection; with 64 requests in flight these took about a fifth and a sixth of a Ray
worker's CPU time (py-spy, ``benchmarks/scale.py judged``; encode/httpcore#1035).
`LinearPool` counts once and polls only the connection a request is about to get.
A timed transport (``assay run``'s targets) connects through
`assay.core.http_timing.ReceiveTimestampBackend`.
"""

from __future__ import annotations

import sys

import httpcore
import httpx

from assay.core.http_timing import ReceiveTimestampBackend

__all__ = ["LinearPool", "linear_pool_fits", "linear_transport"]


class LinearPool(httpcore.AsyncConnectionPool):
    """httpcore's connection pool, its bookkeeping linear in the number of connections
    and its expiry checked on the connection about to be used.

    httpcore 1.0, as each request enters and leaves the pool, (a) closes an idle
    connection while ``len([c.is_idle() for c in connections])`` (the number of
    connections, idle or not) exceeds ``max_keepalive_connections``, building that list
    once per idle connection, and (b) asks every connection whether it has expired, which
    for an idle one polls its socket (a server that closed it makes it readable). This
    pool (a) compares ``len(connections)``, and (b) asks an idle connection only when it
    is the one a request would get: an expired one is then closed and the next one taken.
    Without expired connections it closes, keeps and assigns the same connections as
    httpcore; an expired one that no request reaches stays in the pool (its socket open)
    until one does, the surplus rule closes it, or the pool is closed.
    """

    def _assign_requests_to_connections(self) -> list[httpcore.AsyncConnectionInterface]:
        closing: list[httpcore.AsyncConnectionInterface] = []
        for connection in list(self._connections):
            if connection.is_closed():
                self._connections.remove(connection)
            elif connection.is_idle() and len(self._connections) > self._max_keepalive_connections:
                self._connections.remove(connection)
                closing.append(connection)
        for pool_request in [r for r in self._requests if r.is_queued()]:
            origin = pool_request.request.url.origin
            available = None
            for connection in list(self._connections):
                if connection.can_handle_request(origin) and connection.is_available():
                    if not connection.has_expired():
                        available = connection
                        break
                    self._connections.remove(connection)
                    closing.append(connection)
            if available is not None:
                pool_request.assign_to_connection(available)
                continue
            if len(self._connections) >= self._max_connections:
                idle = next((c for c in self._connections if c.is_idle()), None)
                if idle is None:
                    continue  # the request waits for a connection to come free
                self._connections.remove(idle)
                closing.append(idle)
            connection = self.create_connection(origin)
            self._connections.append(connection)
            pool_request.assign_to_connection(connection)
        return closing


#: the httpcore releases whose private pool bookkeeping `LinearPool` re-implements
LINEAR_POOL_HTTPCORE = "1.0."


def linear_pool_fits(transport: httpx.AsyncHTTPTransport) -> bool:
    """Whether ``transport``'s pool is the httpcore 1.0 pool `LinearPool` was checked
    against (another httpcore keeps its own pool: correct, only slower at many requests
    in flight)."""
    pool = getattr(transport, "_pool", None)
    return (
        httpcore.__version__.startswith(LINEAR_POOL_HTTPCORE)
        and type(pool) is httpcore.AsyncConnectionPool
        and hasattr(pool, "_assign_requests_to_connections")
    )


def linear_transport(limits: httpx.Limits, timed: bool = False) -> httpx.AsyncHTTPTransport:
    """An async transport with these limits whose pool is a `LinearPool` (httpcore's own
    pool where `linear_pool_fits` says the release is not the one checked); ``timed``:
    its TCP connections know when their bytes arrived (`assay.core.http_timing`; on
    Linux with the release checked, untimed otherwise)."""
    transport = httpx.AsyncHTTPTransport(limits=limits)
    if linear_pool_fits(transport):
        # the transport's own pool, of the same settings, made linear (see LinearPool)
        transport._pool.__class__ = LinearPool
        if timed and sys.platform == "linux":  # the kernel's stamps, its event loops
            transport._pool._network_backend = ReceiveTimestampBackend()
    return transport
