"""Run the app in a background thread (browser tests, screenshots, notebooks).

>>> from assay.server import create_app
>>> from assay.server.live import running_server
>>> with running_server(create_app(store)) as url:  # doctest: +SKIP
...     print(url)  # http://127.0.0.1:43817
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["HEADLESS_CHROMIUM_ARGS", "running_server"]

#: flags for driving Debian's Chromium headless against this server (browser tests and
#: the screenshot script): without the background-networking ones Chromium keeps trying
#: Google's hosts, which a closed network refuses
HEADLESS_CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@contextmanager
def running_server(
    app: Any, host: str = "127.0.0.1", port: int = 0, timeout: float = 20.0
) -> Iterator[str]:
    """Serve ``app`` with uvicorn in a daemon thread; yields the base URL. Port 0 picks a
    free port. The server is stopped (and the thread joined) on exit."""
    import uvicorn

    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="assay-live-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError(f"the server on {host}:{port} did not start")
        if time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError(f"the server on {host}:{port} did not start in {timeout} s")
        time.sleep(0.02)
    bound = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://{host}:{bound}"
    finally:
        server.should_exit = True
        thread.join(timeout=timeout)
