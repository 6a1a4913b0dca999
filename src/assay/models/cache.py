"""One on-disk cache for model outputs, keyed by (model, text).

SQLite in WAL mode so several processes on one machine can share it. Vectors (embeddings,
entailment probabilities) are float32 rows with an in-memory dict in front; blobs (a
parser's serialised parses) are bytes, read from disk only (their reader keeps what it
needs).

A cache never stops a run: when its file cannot be created or opened (a folder that is
not writable, a corrupt file, a database another process keeps locked), or a read or
write fails later, it warns once (`AssayWarning`, naming the file and the reason) and
goes on in memory only. A stored vector whose size does not match its dimension is
ignored and computed again.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import threading
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from assay.core.config import AssayWarning

__all__ = ["MEMORY_LIMIT", "EmbeddingCache", "folder_digest", "pair_text", "text_key"]

#: seconds to wait for another process's write lock before giving up on the disk cache
BUSY_TIMEOUT = 10.0
#: vectors kept in memory (about 150 MB of 384-d ones); the memory starts over when
#: full, so a streamed run's memory stays flat however many texts it embeds (the disk
#: cache, when on, keeps them all)
MEMORY_LIMIT = 100_000


def text_key(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def pair_text(first: str, second: str) -> str:
    """One text standing for the pair (``first``, ``second``), unambiguous: the first
    text's length says where it ends."""
    return f"{len(first)}:{first}{second}"


def folder_digest(path: str) -> str:
    """8 hex digits of the full path of a model folder: a local model's cache key carries
    them, so two folders of one name never share cached outputs."""
    full = os.path.realpath(path).encode("utf-8", "surrogatepass")
    return hashlib.sha1(full).hexdigest()[:8]


class EmbeddingCache:
    """Embedding vectors by (model id, text); ``path=None`` keeps them in memory only (at
    most `MEMORY_LIMIT` at once, in either case)."""

    def __init__(self, path: str | Path | None, timeout: float = BUSY_TIMEOUT) -> None:
        self._memory: dict[tuple[str, bytes], np.ndarray] = {}
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self.path = Path(path) if path is not None else None
        self.problem: str | None = None  # why the disk cache was given up, if it was
        if self.path is not None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._db = sqlite3.connect(str(self.path), timeout=timeout, check_same_thread=False)
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=NORMAL")
                self._db.execute(
                    "CREATE TABLE IF NOT EXISTS embeddings ("
                    "model TEXT NOT NULL, key BLOB NOT NULL, dim INTEGER NOT NULL, "
                    "vec BLOB NOT NULL, PRIMARY KEY (model, key))"
                )
                self._db.execute(
                    "CREATE TABLE IF NOT EXISTS blobs (model TEXT NOT NULL, key BLOB NOT NULL, "
                    "value BLOB NOT NULL, PRIMARY KEY (model, key))"
                )
                self._db.commit()
            except (OSError, sqlite3.Error) as exc:
                self._give_up("cannot be opened", exc)

    @property
    def on_disk(self) -> bool:
        """True while vectors are kept on disk (False: memory only)."""
        return self._db is not None

    def _give_up(self, what: str, exc: BaseException) -> None:
        """Warn once and continue in memory only."""
        if self._db is not None:
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
            self._db = None
        if self.problem is None:
            reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
            hint = ""
            if isinstance(exc, sqlite3.DatabaseError) and "not a database" in str(exc):
                hint = " (the file is corrupt: delete it and it is rebuilt)"
            elif isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
                hint = " (another process holds it locked)"
            else:
                hint = " (set ASSAY_CACHE_DIR to a writable folder)"
            self.problem = f"the embedding cache {self.path} {what}: {reason}{hint}"
            warnings.warn(
                f"{self.problem}; continuing with an in-memory cache for this run",
                AssayWarning,
                stacklevel=3,
            )

    def get_many(self, model: str, texts: Iterable[str]) -> dict[str, np.ndarray]:
        """Cached vectors for the texts that have one."""
        found: dict[str, np.ndarray] = {}
        missing: dict[bytes, str] = {}
        for text in texts:
            key = text_key(text)
            vec = self._memory.get((model, key))
            if vec is not None:
                found[text] = vec
            else:
                missing[key] = text
        if missing and self._db is not None:
            for key, dim, blob in self._rows("embeddings", "dim, vec", model, list(missing)):
                if not isinstance(blob, bytes) or len(blob) != 4 * int(dim) or not dim:
                    continue  # a damaged row: compute the vector again
                vec = np.frombuffer(blob, dtype=np.float32)
                if not np.all(np.isfinite(vec)):
                    continue
                if len(self._memory) >= MEMORY_LIMIT:
                    self._memory.clear()
                self._memory[(model, key)] = vec
                found[missing[key]] = vec
        return found

    def put_many(self, model: str, items: dict[str, np.ndarray]) -> None:
        if len(self._memory) + len(items) > MEMORY_LIMIT:
            self._memory.clear()
        rows = []
        for text, vec in items.items():
            key = text_key(text)
            arr = np.ascontiguousarray(vec, dtype=np.float32)
            self._memory[(model, key)] = arr
            if self._db is not None:
                rows.append((model, key, int(arr.shape[0]), arr.tobytes()))
        if rows and self._db is not None:
            self._write(
                "INSERT OR REPLACE INTO embeddings (model, key, dim, vec) VALUES (?, ?, ?, ?)", rows
            )

    def get_blobs(self, model: str, texts: Iterable[str]) -> dict[str, bytes]:
        """The stored blobs of ``model`` for the texts that have one (none in memory only)."""
        if self._db is None:
            return {}
        missing = {text_key(t): t for t in texts}
        rows = self._rows("blobs", "value", model, list(missing))
        return {missing[key]: value for key, value in rows if isinstance(value, bytes)}

    def put_blobs(self, model: str, items: dict[str, bytes]) -> None:
        """Store a blob of ``model`` per text (nothing in memory only)."""
        if self._db is not None and items:
            rows = [(model, text_key(t), value) for t, value in items.items()]
            self._write("INSERT OR REPLACE INTO blobs (model, key, value) VALUES (?, ?, ?)", rows)

    def _rows(self, table: str, columns: str, model: str, keys: list[bytes]) -> list[Any]:
        """The rows (key, ``columns``) of ``table`` for ``model`` and ``keys``, read 500 keys
        at a time; those read before a failure, after which the cache goes on in memory."""
        found: list[Any] = []
        with self._lock:
            try:
                for start in range(0, len(keys), 500):
                    if self._db is None:
                        break
                    chunk = keys[start : start + 500]
                    marks = ",".join("?" * len(chunk))
                    found += self._db.execute(
                        f"SELECT key, {columns} FROM {table} WHERE model = ? AND key IN ({marks})",
                        [model, *chunk],
                    ).fetchall()
            except sqlite3.Error as exc:
                self._give_up("cannot be read", exc)
        return found

    def _write(self, statement: str, rows: list[tuple[Any, ...]]) -> None:
        """Run ``statement`` for each row and commit; on a failure, roll back and go on in
        memory."""
        with self._lock:
            if self._db is None:
                return
            try:
                self._db.executemany(statement, rows)
                self._db.commit()
            except sqlite3.Error as exc:
                with contextlib.suppress(sqlite3.Error):
                    self._db.rollback()
                self._give_up("cannot be written", exc)

    def close(self) -> None:
        if self._db is not None:
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
            self._db = None
