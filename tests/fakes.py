"""Test doubles shared by several test modules (imported as ``from fakes import ...``;
pytest puts this folder on ``sys.path``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from assay.core.config import AssayConfig
from assay.engine.resources import Resources
from assay.models.embedders import Embedder


class FakeEmbedder(Embedder):
    """Fixed vectors for known texts; any other text gets its own unused axis (cosine 0)."""

    name = "fake"
    dim = 64

    def __init__(self, table: dict[str, tuple[float, ...]]) -> None:
        super().__init__()
        self.table = {
            k: np.pad(np.asarray(v, dtype=np.float32), (0, self.dim - len(v)))
            for k, v in table.items()
        }
        self.next_axis = 8
        self.batches: list[list[str]] = []

    def _encode(self, texts: list[str]) -> np.ndarray:
        self.batches.append(list(texts))
        rows = []
        for text in texts:
            if text not in self.table:
                vec = np.zeros(self.dim, dtype=np.float32)
                vec[self.next_axis] = 1.0
                self.next_axis += 1
                self.table[text] = vec
            rows.append(self.table[text])
        return np.stack(rows)


def fake_resources(table: dict[str, tuple[float, ...]], **config: object) -> Resources:
    """Resources with no cache whose embedder is a `FakeEmbedder` over ``table``."""
    res = Resources(AssayConfig(use_cache=False, **config))
    res.embedder = FakeEmbedder(table)  # type: ignore[misc]
    return res


def interrupt_on_call(monkeypatch: Any, metric_name: str, call: int) -> Callable[..., Any]:
    """Make the metric's ``compute_batch`` raise KeyboardInterrupt (a user's Ctrl-C) on its
    ``call``-th call from now on, counting from 1; returns the real ``compute_batch`` so a
    test can put it back."""
    from assay.metrics.registry import metric_class

    cls = metric_class(metric_name)
    real = cls.compute_batch
    calls = 0

    def interrupting(self: Any, samples: Any, res: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == call:
            raise KeyboardInterrupt
        return real(self, samples, res)

    monkeypatch.setattr(cls, "compute_batch", interrupting)
    return real


def interrupt_on_store(monkeypatch: Any, call: int) -> Callable[..., Any]:
    """Make the run recorder raise KeyboardInterrupt (a user's Ctrl-C) on its ``call``-th
    stored sample from now on, counting from 1, before storing it; returns the real
    ``RunRecorder.__call__`` so a test can put it back."""
    from assay.store.recorder import RunRecorder

    real = RunRecorder.__call__
    calls = 0

    def interrupting(self: Any, *args: Any, **kwargs: Any) -> None:
        nonlocal calls
        calls += 1
        if calls == call:
            raise KeyboardInterrupt
        real(self, *args, **kwargs)

    monkeypatch.setattr(RunRecorder, "__call__", interrupting)
    return real
