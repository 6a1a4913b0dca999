"""One on-disk cache for model outputs (embeddings), keyed by (model, text).

SQLite in WAL mode so several processes on one machine can share it; an in-memory
dict sits in front. Values are float32 vectors.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections.abc import Iterable
from pathlib import Path

import numpy as np

__all__ = ["EmbeddingCache", "text_key"]


def text_key(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


class EmbeddingCache:
    """Embedding vectors by (model id, text); ``path=None`` keeps them in memory only."""

    def __init__(self, path: str | Path | None) -> None:
        self._memory: dict[tuple[str, bytes], np.ndarray] = {}
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        if path is not None:
            path = Path(path)
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(path), timeout=30, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS embeddings ("
                "model TEXT NOT NULL, key BLOB NOT NULL, dim INTEGER NOT NULL, "
                "vec BLOB NOT NULL, PRIMARY KEY (model, key))"
            )
            self._db.commit()

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
            keys = list(missing)
            with self._lock:
                for start in range(0, len(keys), 500):
                    chunk = keys[start : start + 500]
                    marks = ",".join("?" * len(chunk))
                    rows = self._db.execute(
                        f"SELECT key, vec FROM embeddings WHERE model = ? AND key IN ({marks})",
                        [model, *chunk],
                    ).fetchall()
                    for key, blob in rows:
                        vec = np.frombuffer(blob, dtype=np.float32)
                        self._memory[(model, key)] = vec
                        found[missing[key]] = vec
        return found

    def put_many(self, model: str, items: dict[str, np.ndarray]) -> None:
        rows = []
        for text, vec in items.items():
            key = text_key(text)
            arr = np.ascontiguousarray(vec, dtype=np.float32)
            self._memory[(model, key)] = arr
            rows.append((model, key, int(arr.shape[0]), arr.tobytes()))
        if rows and self._db is not None:
            with self._lock:
                self._db.executemany(
                    "INSERT OR REPLACE INTO embeddings (model, key, dim, vec) VALUES (?, ?, ?, ?)",
                    rows,
                )
                self._db.commit()

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
