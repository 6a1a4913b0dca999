"""The OpenAI Batch API as the judge's transport: the same requests at half the price.

With ``judge_batch`` (``--judge-batch``) the judge client (`assay.judge.client`) sends
the questions of a round that neither its memo nor its cache answers through
`BatchTransport` instead of one ``POST /chat/completions`` each; the engine still sees
one judge ask kind, and parsing, caching, evidence and errors are those of direct calls
(the client reads each batch reply as it reads a direct one). For one round it:

1. looks the requests up in the ledger (`BatchLedger`): a request already sent in a
   batch that a stopped run left behind is collected from that batch, not sent again;
2. writes the others as JSONL, at most ``size`` (`MAX_BATCH_REQUESTS`) a batch, one line
   a request (``{"custom_id", "method": "POST", "url": "/v1/chat/completions",
   "body"}``, the custom id being the request's cache key: 64 hex characters), uploads
   it (``POST /files``, multipart, purpose ``batch``), creates the batch (``POST
   /batches``: ``input_file_id``, endpoint ``/v1/chat/completions``, completion window
   ``24h``) and records its id in
   the ledger before polling it;
3. polls each batch (``GET /batches/{id}``) on the schedule of `poll_delays`: ``poll``
   seconds first, twice as long each time after, at most `POLL_CAP` (or ``poll`` when
   longer), for at most ``wait`` seconds a batch;
4. once a batch is ``completed`` (or ``expired`` or ``cancelled``, whose finished lines
   are kept), downloads its output file and its error file (``GET /files/{id}/content``),
   every body read with the client's ``max_reply_bytes`` bound, and matches the lines
   to the requests by ``custom_id``; then forgets the batch in the ledger.

What each request gets (`collect`): `LineReply` (the line's chat completion, status
200); `LineFailed` (an error line, a status other than 200, a line missing from both
files, a batch that failed, or a file or batch the server refused or would not send:
the client asks that question again directly, at the full price); or `BatchPending` (the
batch was still running after ``wait`` seconds, or could not be polled: the batch stays
in the ledger, the question is that sample's error, and a re-run collects the batch).
A run that is stopped while a batch runs leaves it running and in the ledger: the batch
is never cancelled by Assay, and the next run with the same questions polls it.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from assay.core.http import ReplyTooLarge
from assay.judge.completion import describe_failure, json_field

if TYPE_CHECKING:
    from assay.core.config import AssayConfig

__all__ = [
    "BATCH_PRICE",
    "COMPLETION_WINDOW",
    "ENDPOINT",
    "MAX_BATCH_REQUESTS",
    "POLL_CAP",
    "BatchLedger",
    "BatchPending",
    "BatchTransport",
    "LineFailed",
    "LineReply",
    "poll_delays",
]

#: the share of the direct price a batch request costs (OpenAI: half)
BATCH_PRICE = 0.5
#: the endpoint every batch line calls, and the window a batch is given
ENDPOINT = "/v1/chat/completions"
COMPLETION_WINDOW = "24h"
#: most requests in one batch: a judge reply line is 1 to 5 KB, so the output file stays
#: well under the 16 MiB of ``max_reply_bytes``; OpenAI takes up to 50,000
MAX_BATCH_REQUESTS = 2_000
#: longest pause between two polls of a batch (unless ``poll`` is longer)
POLL_CAP = 60.0
#: statuses of a batch still at work, and those after which its files are final
_RUNNING = frozenset({"validating", "in_progress", "finalizing", "cancelling"})
_ENDED = frozenset({"completed", "expired", "cancelled"})
#: polls in a row that may fail (a 5xx, a lost connection) before the batch is left
_POLL_FAILURES = 5


@dataclass(frozen=True)
class LineReply:
    """A batch line's reply: ``completion`` is its ``response.body`` (a chat completion)."""

    completion: Any


@dataclass(frozen=True)
class LineFailed:
    """A request the batch did not answer; ``reason`` says why (asked again directly)."""

    reason: str


@dataclass(frozen=True)
class BatchPending:
    """A request whose batch is still running (or could not be polled) after the wait;
    the batch stays in the ledger for a re-run to collect."""

    reason: str


Outcome = LineReply | LineFailed | BatchPending


def poll_delays(first: float, cap: float = POLL_CAP) -> Iterator[float]:
    """The pauses before each poll of a batch: ``first``, then twice the last, at most
    ``max(cap, first)`` (5 s, 10 s, 20 s, 40 s, 60 s, 60 s, ... by default)."""
    delay, top = first, max(cap, first)
    while True:
        yield min(delay, top)
        delay *= 2


class BatchLedger:
    """The batches a run created and has not collected yet, by request: a SQLite file
    (``cache_dir/judge_batches.sqlite``) that outlives the run, so a stopped run's
    batches are polled by the next, not paid again. ``path=None`` keeps it in memory."""

    def __init__(self, path: str | Path | None) -> None:
        self.path = Path(path) if path is not None else None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(
            str(self.path) if self.path is not None else ":memory:",
            timeout=30,
            check_same_thread=False,
        )
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS batch_requests (custom_id TEXT PRIMARY KEY, "
            "batch_id TEXT NOT NULL, created REAL NOT NULL)"
        )
        self._db.commit()

    @classmethod
    def opened(cls, path: Path) -> BatchLedger:
        """The ledger at ``path``; one in memory, with an `AssayWarning`, when that file
        cannot be opened (the run goes on; only resuming its batches is lost)."""
        try:
            return cls(path)
        except (OSError, sqlite3.Error) as exc:
            from assay.core.config import AssayWarning  # the settings module: only here

            reason = getattr(exc, "strerror", None) or str(exc)
            warnings.warn(
                f"the judge batch ledger {path} cannot be opened: {reason}; a batch of this "
                "run that is stopped will not be collected by the next (set ASSAY_CACHE_DIR "
                "to a writable folder)",
                AssayWarning,
                stacklevel=2,
            )
            return cls(None)

    def batches_of(self, custom_ids: list[str]) -> dict[str, str]:
        """The batch each of ``custom_ids`` was sent in, for those in the ledger."""
        found: dict[str, str] = {}
        with self._lock:
            for start in range(0, len(custom_ids), 500):
                part = custom_ids[start : start + 500]
                marks = ",".join("?" * len(part))
                rows = self._db.execute(
                    f"SELECT custom_id, batch_id FROM batch_requests WHERE custom_id IN ({marks})",
                    part,
                ).fetchall()
                found.update({str(c): str(b) for c, b in rows})
        return found

    def record(self, batch_id: str, custom_ids: list[str]) -> None:
        """Note that ``custom_ids`` were sent in ``batch_id`` (committed at once)."""
        now = time.time()
        with self._lock:
            self._db.executemany(
                "INSERT OR REPLACE INTO batch_requests VALUES (?, ?, ?)",
                [(c, batch_id, now) for c in custom_ids],
            )
            self._db.commit()

    def forget(self, batch_id: str) -> None:
        """The batch was collected (or failed for good): its requests leave the ledger."""
        with self._lock:
            self._db.execute("DELETE FROM batch_requests WHERE batch_id = ?", (batch_id,))
            self._db.commit()

    def count(self) -> int:
        """Requests in the ledger (sent in batches not collected yet)."""
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM batch_requests").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()


class BatchTransport:
    """Judge requests through the Batch API of the judge's server (see the module).

    Args:
        ledger: where batch ids are kept between runs.
        poll: seconds before the first poll (``judge_batch_poll``); see `poll_delays`.
        wait: most seconds to wait for one batch (``judge_batch_wait``).
        size: most requests in one batch.
    """

    def __init__(
        self,
        ledger: BatchLedger,
        *,
        poll: float = 5.0,
        wait: float = 90_000.0,
        size: int = MAX_BATCH_REQUESTS,
    ) -> None:
        if poll <= 0 or wait <= 0 or size < 1:
            raise ValueError(
                f"a batch needs poll > 0, wait > 0 and size >= 1. Got {poll}, {wait}, {size}."
            )
        self.ledger = ledger
        self.poll = poll
        self.wait = wait
        self.size = size

    @classmethod
    def from_config(cls, config: AssayConfig) -> BatchTransport:
        """The transport ``judge_batch_poll`` and ``judge_batch_wait`` describe, its ledger
        in ``cache_dir/judge_batches.sqlite`` (state, not a cache: kept with --no-cache)."""
        ledger = BatchLedger.opened(Path(config.cache_dir) / "judge_batches.sqlite")
        return cls(ledger, poll=config.judge_batch_poll, wait=config.judge_batch_wait)

    async def collect(
        self, api: Any, requests: Mapping[str, dict[str, Any]], count: Callable[[str, int], None]
    ) -> dict[str, Outcome]:
        """What the server answers to ``requests`` (request body by custom id) through
        batches; ``api`` is the judge's `assay.judge.http.ChatCompletions` (its ``call``).
        ``count`` (`assay.judge.usage.JudgeUsage.add`) counts the batches created
        (``batches``) and those a stopped run left that are collected (``batches_resumed``)."""
        ids = list(requests)
        stored = self.ledger.batches_of(ids)
        by_batch: dict[str, list[str]] = {}
        for custom_id, batch_id in stored.items():
            by_batch.setdefault(batch_id, []).append(custom_id)
        count("batches_resumed", len(by_batch))
        outcomes: dict[str, Outcome] = {}
        fresh = [c for c in ids if c not in stored]
        for start in range(0, len(fresh), self.size):
            part = fresh[start : start + self.size]
            try:
                batch_id = await self._create(api, {c: requests[c] for c in part})
            except Exception as exc:  # every request of the part asks directly
                failed = LineFailed(f"batch not created: {describe_failure(exc)}")
                outcomes.update(dict.fromkeys(part, failed))
                continue
            self.ledger.record(batch_id, part)
            count("batches", 1)
            by_batch[batch_id] = part
        results = await asyncio.gather(
            *(self._outcomes(api, batch_id, part) for batch_id, part in by_batch.items())
        )
        for found in results:
            outcomes.update(found)
        return outcomes

    async def _create(self, api: Any, requests: Mapping[str, dict[str, Any]]) -> str:
        """Upload the requests as a JSONL file and create their batch; its id."""
        lines = (
            json.dumps(
                {"custom_id": c, "method": "POST", "url": ENDPOINT, "body": body},
                ensure_ascii=False,
            )
            for c, body in requests.items()
        )
        data = ("\n".join(lines) + "\n").encode("utf-8")
        uploaded = await api.call(
            "POST",
            "files",
            data={"purpose": "batch"},
            files={"file": ("assay-judge-batch.jsonl", data, "application/jsonl")},
        )
        file_id = json_field(uploaded, "id")
        if not isinstance(file_id, str) or not file_id:
            raise ValueError(f"the file upload's reply has no id: {str(uploaded)[:120]}")
        body = {
            "input_file_id": file_id,
            "endpoint": ENDPOINT,
            "completion_window": COMPLETION_WINDOW,
        }
        batch = await api.call("POST", "batches", json=body)
        batch_id = json_field(batch, "id")
        if not isinstance(batch_id, str) or not batch_id:
            raise ValueError(f"the batch's creation reply has no id: {str(batch)[:120]}")
        return batch_id

    async def _outcomes(self, api: Any, batch_id: str, ids: list[str]) -> dict[str, Outcome]:
        """Poll ``batch_id`` until it ends (or the wait is over); each request's outcome."""
        waited, failures = 0.0, 0
        delays = poll_delays(self.poll)
        while True:
            try:
                batch = await api.call("GET", f"batches/{batch_id}")
            except Exception as exc:  # judged below
                status_code = getattr(exc, "status_code", None)
                # the server has no such batch (any more), or sends it over the bound
                if status_code in (400, 404) or isinstance(exc, ReplyTooLarge):
                    self.ledger.forget(batch_id)
                    gone = LineFailed(f"batch {batch_id}: {describe_failure(exc)}")
                    return dict.fromkeys(ids, gone)
                failures += 1
                if failures >= _POLL_FAILURES:
                    why = f"batch {batch_id} could not be polled ({describe_failure(exc)})"
                    return dict.fromkeys(ids, BatchPending(why + _AGAIN))
                status = "unpolled"
            else:
                failures = 0
                status = str(json_field(batch, "status"))
                if status in _ENDED:
                    found = await self._read_files(api, batch_id, batch, ids)
                    self.ledger.forget(batch_id)
                    return found
                if status not in _RUNNING:  # failed, or a status no one documented
                    self.ledger.forget(batch_id)
                    errors = json_field(json_field(batch, "errors"), "data")
                    why = f"batch {batch_id} {status}: {_first_message(errors)}"
                    return dict.fromkeys(ids, LineFailed(why))
            if waited >= self.wait:
                why = f"batch {batch_id} still {status} after {self.wait:g} s"
                return dict.fromkeys(ids, BatchPending(why + _AGAIN))
            delay = min(next(delays), max(0.0, self.wait - waited))
            await asyncio.sleep(delay)
            waited += delay

    async def _read_files(
        self, api: Any, batch_id: str, batch: Any, ids: list[str]
    ) -> dict[str, Outcome]:
        """The outcome of each request of an ended batch, from its output and error files."""
        found: dict[str, Outcome] = {}
        wanted = set(ids)
        for key in ("output_file_id", "error_file_id"):
            file_id = json_field(batch, key)
            if not isinstance(file_id, str) or not file_id:
                continue
            try:
                content = await api.call("GET", f"files/{file_id}/content", raw=True)
            except ReplyTooLarge as exc:
                why = f"the {key[:-8]} file of batch {batch_id} is too large: {exc}"
                return {c: found.get(c, LineFailed(why)) for c in ids}
            except Exception as exc:  # its lines are then failed
                why = f"the {key[:-8]} file of batch {batch_id}: {describe_failure(exc)}"
                found.update({c: LineFailed(why) for c in ids if c not in found})
                continue
            for custom_id, outcome in _lines(content):
                if custom_id in wanted and not isinstance(found.get(custom_id), LineReply):
                    found[custom_id] = outcome
        missing = LineFailed(f"missing from the output of batch {batch_id}")
        return {c: found.get(c, missing) for c in ids}


_AGAIN = "; the batch is kept: run again to collect it"


def _lines(content: bytes) -> Iterator[tuple[str, Outcome]]:
    """(custom id, outcome) of each readable line of an output or error file."""
    for raw in content.splitlines():
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        custom_id = json_field(line, "custom_id")
        if not isinstance(custom_id, str):
            continue
        error = json_field(line, "error")
        response = json_field(line, "response")
        status = json_field(response, "status_code")
        body = json_field(response, "body")
        if error:
            code = json_field(error, "code")
            message = json_field(error, "message") or str(error)[:200]
            yield custom_id, LineFailed(f"batch line error{f' {code}' if code else ''}: {message}")
        elif status == 200 and body is not None:
            yield custom_id, LineReply(body)
        else:
            message = json_field(json_field(body, "error"), "message") or str(body)[:200]
            yield custom_id, LineFailed(f"batch line HTTP {status}: {message}")


def _first_message(errors: Any) -> str:
    """The first error's message of a failed batch's ``errors.data``."""
    if isinstance(errors, list) and errors:
        return str(json_field(errors[0], "message") or errors[0])[:200]
    return "no reason given"
