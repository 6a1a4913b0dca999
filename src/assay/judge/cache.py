"""Persistent cache of judge replies, keyed by a hash of (model, messages, parameters).

SQLite in WAL mode under the configured ``cache_dir`` (``judge.sqlite``), so re-running
the same dataset with the same judge makes no calls. Only replies that parsed are
stored. ``JudgeCache(None)`` is a disabled cache (``--no-cache``).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assay.core.redaction import known_secrets, redact_text

__all__ = ["CachedReply", "JudgeCache", "cache_key"]


def cache_key(model: str, messages: list[dict[str, str]], params: dict[str, Any]) -> str:
    """SHA-256 over the model, the exact messages and the sampling parameters."""
    payload = json.dumps(
        {"model": model, "messages": messages, "params": params},
        sort_keys=True,
        ensure_ascii=False,
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class CachedReply:
    content: str
    prompt_tokens: int
    completion_tokens: int


class JudgeCache:
    """Judge replies by key; ``path=None`` disables caching entirely."""

    def __init__(self, path: str | Path | None) -> None:
        self.path = Path(path) if path is not None else None
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(self.path), timeout=30, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS judge_replies ("
                "key TEXT PRIMARY KEY, model TEXT NOT NULL, prompt TEXT NOT NULL, "
                "content TEXT NOT NULL, prompt_tokens INTEGER NOT NULL, "
                "completion_tokens INTEGER NOT NULL, created REAL NOT NULL)"
            )
            self._db.commit()

    @property
    def enabled(self) -> bool:
        return self._db is not None

    def get(self, key: str) -> CachedReply | None:
        if self._db is None:
            return None
        with self._lock:
            row = self._db.execute(
                "SELECT content, prompt_tokens, completion_tokens FROM judge_replies WHERE key = ?",
                (key,),
            ).fetchone()
        return CachedReply(row[0], int(row[1]), int(row[2])) if row else None

    def put(
        self,
        key: str,
        *,
        model: str,
        prompt: str,
        content: str,
        prompt_tokens: int,
        completion_tokens: int,
    ) -> None:
        if self._db is None:
            return
        secrets = known_secrets()
        prompt, content = redact_text(prompt, secrets), redact_text(content, secrets)
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO judge_replies VALUES (?, ?, ?, ?, ?, ?, ?)",
                (key, model, prompt, content, prompt_tokens, completion_tokens, time.time()),
            )
            self._db.commit()

    def delete(self, key: str) -> None:
        if self._db is None:
            return
        with self._lock:
            self._db.execute("DELETE FROM judge_replies WHERE key = ?", (key,))
            self._db.commit()

    def __len__(self) -> int:
        if self._db is None:
            return 0
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM judge_replies").fetchone()[0])

    def close(self) -> None:
        if self._db is not None:
            with self._lock:
                self._db.close()
                self._db = None
