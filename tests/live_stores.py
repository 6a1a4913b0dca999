"""The store and live app the live tests share: ``store_url`` (a fixture) runs a test on
SQLite and, marked ``postgres``, on a fresh PostgreSQL database; `live_app_on` builds the
dashboard app with a `LiveScoring` worker over it and closes them afterwards. A test
module takes the fixture by importing `sqlite_or_postgres`."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from assay.core.config import AssayConfig
from assay.engine.resources import Resources
from assay.metrics.registry import resolve_metrics
from assay.server.app import create_app
from assay.server.live_scoring import LiveScoring
from assay.store.db import Store
from pg_databases import fresh_postgres


@pytest.fixture(
    name="store_url",
    params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)],
)
def sqlite_or_postgres(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A SQLite file's URL, or a fresh PostgreSQL database's (dropped afterwards)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'live.db'}"
        return
    with fresh_postgres("assay_live") as url:
        yield url


@contextmanager
def live_app_on(
    store_url: str, tmp_path: Path, metrics: Sequence[str], grace_seconds: float
) -> Iterator[tuple[Any, LiveScoring, Store]]:
    """(app, worker, store): the app with a live worker scoring ``metrics`` after
    ``grace_seconds`` of quiet; the worker, resources and store are closed on exit."""
    store = Store(store_url)
    config = AssayConfig(cache_dir=str(tmp_path / "cache"), live_grace_seconds=grace_seconds)
    resources = Resources(config)
    live = LiveScoring(store, config, resolve_metrics(list(metrics)), resources)
    try:
        yield create_app(store, resources=resources, live=live), live, store
    finally:
        live.stop()
        resources.close()
        store.close()
