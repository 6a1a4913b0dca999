"""Running judge coroutines from synchronous code, even inside a running event loop.

Every judge request runs on one background event loop owned by this module (a daemon
thread started on first use). Sync code submits a coroutine with `run_sync` and blocks
until it finishes; async code awaits `run_async`, which hops to the same loop. One loop
for every call means the HTTP connection pool, the concurrency semaphore and the per-run
memo are never shared across event loops, and `run_sync` works the same in a script, in
pytest, or in a Jupyter cell whose loop is already running (where ``asyncio.run`` fails).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["background_loop", "in_background_loop", "run_async", "run_sync"]

T = TypeVar("T")

_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None
_lock = threading.Lock()


def background_loop() -> asyncio.AbstractEventLoop:
    """The shared judge event loop, started on first use."""
    global _loop, _thread
    with _lock:
        if _loop is None or _loop.is_closed() or _thread is None or not _thread.is_alive():
            loop = asyncio.new_event_loop()
            ready = threading.Event()

            def _serve() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                loop.run_forever()

            thread = threading.Thread(target=_serve, name="assay-judge-loop", daemon=True)
            thread.start()
            ready.wait()
            _loop, _thread = loop, thread
        return _loop


def in_background_loop() -> bool:
    """True when called from the judge loop's own thread."""
    return _thread is not None and threading.current_thread() is _thread


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on the judge loop and return its result (blocking the caller).

    Raises:
        RuntimeError: when called from the judge loop itself (it would deadlock); await
            the coroutine there instead.
    """
    if in_background_loop():
        coro.close()
        raise RuntimeError("run_sync was called from the judge loop; await the coroutine")
    future = asyncio.run_coroutine_threadsafe(coro, background_loop())
    return future.result()


async def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Await ``coro`` on the judge loop from any event loop."""
    if in_background_loop():
        return await coro
    future = asyncio.run_coroutine_threadsafe(coro, background_loop())
    return await asyncio.wrap_future(future)
