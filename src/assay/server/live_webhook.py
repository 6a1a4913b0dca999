"""The monitor webhook, delivered in the background: scoring never waits on it.

`WebhookQueue.send` puts a monitor's state change in a bounded queue and returns at once;
a daemon thread POSTs the changes in order, each with a timeout. When the queue is full
(the webhook is slow or down), the oldest change waiting is dropped, counted and logged:
the newest states are the ones worth sending. A reply is judged by its status alone; its
body is never read. The webhook's URL is a secret (the path of a hook URL often is):
errors name its scheme and host only.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from assay.core.redaction import known_secrets, redact_text

__all__ = ["WEBHOOK_QUEUE", "WEBHOOK_TIMEOUT", "WebhookQueue"]

log = logging.getLogger("assay.live")

#: state changes that may wait for the webhook before the oldest is dropped
WEBHOOK_QUEUE = 100
#: seconds one POST may take (to connect, send and get the status line)
WEBHOOK_TIMEOUT = 5.0


class WebhookQueue:
    """POSTs JSON payloads to ``url`` from a daemon thread, at most ``limit`` waiting.

    ``shown`` is how the URL may be written in messages; ``on_error`` is called with the
    message of each failed delivery. ``counts`` gives what was sent, failed, dropped and
    is waiting.
    """

    def __init__(
        self,
        url: str,
        shown: str,
        *,
        limit: int = WEBHOOK_QUEUE,
        timeout: float = WEBHOOK_TIMEOUT,
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        self.url = url
        self.shown = shown
        self.timeout = timeout
        self.on_error = on_error
        self._waiting: deque[dict[str, Any]] = deque()
        self._limit = limit
        self._ready = threading.Condition()
        self._busy = False
        self._closed = False
        self.sent = self.failed = self.dropped = 0
        self._thread = threading.Thread(target=self._deliver, name="assay-webhook", daemon=True)
        self._thread.start()

    def send(self, payload: dict[str, Any]) -> None:
        """Queue ``payload`` for the webhook; never waits (drops the oldest when full)."""
        with self._ready:
            if len(self._waiting) >= self._limit:
                old = self._waiting.popleft()
                self.dropped += 1
                log.warning(
                    "the monitor webhook (%s) is behind: %d changes waiting; dropped the "
                    "oldest (%s on %s), %d dropped in all",
                    self.shown,
                    self._limit,
                    old.get("monitor"),
                    old.get("service"),
                    self.dropped,
                )
            self._waiting.append(payload)
            self._ready.notify()

    @property
    def counts(self) -> dict[str, int]:
        with self._ready:
            return {
                "waiting": len(self._waiting) + self._busy,
                "sent": self.sent,
                "failed": self.failed,
                "dropped": self.dropped,
                "limit": self._limit,
            }

    def flush(self, timeout: float) -> bool:
        """Wait until nothing is waiting or being sent (tests, shutdown); False on timeout."""
        with self._ready:
            return self._ready.wait_for(lambda: not self._waiting and not self._busy, timeout)

    def close(self, timeout: float = 1.0) -> None:
        """Stop the thread after the POST in flight (the changes still waiting are lost)."""
        with self._ready:
            self._closed = True
            self._ready.notify_all()
        self._thread.join(timeout)

    def _deliver(self) -> None:
        import httpx

        with httpx.Client(timeout=self.timeout) as client:
            while True:
                with self._ready:
                    self._ready.wait_for(lambda: self._waiting or self._closed)
                    if self._closed:
                        return
                    payload = self._waiting.popleft()
                    self._busy = True
                why = self._post(client, payload)
                if why is not None:
                    message = f"the monitor webhook ({self.shown}) failed: {why}"
                    log.warning("%s", message)
                    if self.on_error is not None:
                        self.on_error(message)
                with self._ready:
                    self._busy = False
                    if why is None:
                        self.sent += 1
                    else:
                        self.failed += 1
                    self._ready.notify_all()

    def _post(self, client: Any, payload: dict[str, Any]) -> str | None:
        """None when the webhook answered 2xx, else why not (its body is never read)."""
        import httpx

        try:
            with client.stream("POST", self.url, json=payload) as answer:
                if not answer.is_success:
                    return f"it answered {answer.status_code}"
        except (httpx.HTTPError, httpx.InvalidURL, ValueError) as exc:
            return redact_text(str(exc) or type(exc).__name__, known_secrets())
        return None
