"""Opening the store and writing runs into it.

SQLite file by default (WAL mode, a 10 s busy timeout and retried writes, so several
writers on one machine are safe); PostgreSQL when the URL says so (psycopg 3), e.g.
``postgresql+psycopg://user@127.0.0.1:5432/assay``. The schema is created and upgraded
with Alembic on open. All values go through bound parameters: untrusted text never
becomes SQL.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from alembic import command
from alembic.config import Config as AlembicConfig
from sqlalchemy import Engine, create_engine, delete, event, select
from sqlalchemy.exc import OperationalError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from assay.jsonout import to_jsonable
from assay.redaction import known_secrets, redact, redact_text
from assay.result import MetricResult
from assay.sample import Sample
from assay.store.models import (
    FieldStrategyConfig,
    QualityCheck,
    Run,
    RunMetricTotal,
    ScoringDetail,
    TestResult,
    ValidationDetail,
    utcnow,
)

__all__ = ["DEFAULT_URL_ENV", "Store", "StoreError", "default_url", "normalise_url"]

DEFAULT_URL_ENV = "ASSAY_DATABASE_URL"
T = TypeVar("T")


class StoreError(RuntimeError):
    """The store cannot be opened or written; the message says which database and why."""


def default_url() -> str:
    """``ASSAY_DATABASE_URL``, else ``./assay.db`` (SQLite) in the working directory."""
    return os.environ.get(DEFAULT_URL_ENV) or "sqlite:///assay.db"


def normalise_url(url: str) -> str:
    """Accept plain paths and ``postgresql://`` URLs; pick the psycopg 3 driver."""
    if "://" not in url:
        return f"sqlite:///{Path(url).expanduser()}"
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def _is_busy(exc: OperationalError) -> bool:
    orig = getattr(exc, "orig", None)
    code = getattr(orig, "sqlite_errorcode", None)
    return code in {sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED}


class Store:
    """The results store. ``Store(url)`` opens (and migrates) the database."""

    def __init__(self, url: str | None = None, *, migrate: bool = True) -> None:
        self.url = normalise_url(url or default_url())
        self.dialect = self.url.split(":", 1)[0].split("+", 1)[0]
        try:
            self.engine = self._make_engine()
            if migrate:
                self.migrate()
        except (SQLAlchemyError, OSError) as exc:
            reason = getattr(exc, "orig", None) or exc
            raise StoreError(f"cannot open the results store {self.safe_url}: {reason}") from exc
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)

    @property
    def safe_url(self) -> str:
        """The URL with any password hidden, for messages."""
        return (
            self.engine.url.render_as_string(hide_password=True)
            if hasattr(self, "engine")
            else self.url
        )

    def _make_engine(self) -> Engine:
        if self.dialect == "sqlite":
            path = self.url.split("///", 1)[1] if "///" in self.url else ""
            if path and path != ":memory:":
                Path(path).parent.mkdir(parents=True, exist_ok=True)
            engine = create_engine(self.url, connect_args={"timeout": 10})

            @event.listens_for(engine, "connect")
            def _pragmas(dbapi_connection: Any, _record: Any) -> None:
                cursor = dbapi_connection.cursor()
                cursor.execute("PRAGMA journal_mode=WAL")
                cursor.execute("PRAGMA synchronous=NORMAL")
                cursor.execute("PRAGMA foreign_keys=ON")
                cursor.execute("PRAGMA busy_timeout=10000")
                cursor.close()

            return engine
        return create_engine(self.url, pool_pre_ping=True)

    def migrate(self) -> None:
        """Create or upgrade the schema to the newest Alembic revision."""
        cfg = AlembicConfig()
        cfg.set_main_option("script_location", str(Path(__file__).parent / "migrations"))
        with self.engine.begin() as connection:
            cfg.attributes["connection"] = connection
            command.upgrade(cfg, "head")

    def session(self) -> Session:
        return self._sessions()

    def _write(self, action: Callable[[Session], T], attempts: int = 3) -> T:
        """Run a write in its own transaction, retrying while SQLite reports it is busy."""
        delay = 0.05
        for attempt in range(attempts):
            try:
                with self.session() as session, session.begin():
                    return action(session)
            except OperationalError as exc:
                if not _is_busy(exc):
                    raise StoreError(f"writing to {self.safe_url} failed: {exc.orig}") from exc
                if attempt == attempts - 1:
                    raise StoreError(
                        f"{self.safe_url} is locked by another process (waited about "
                        f"{attempts * 10} s); retry when it is done, or use another --db"
                    ) from exc
                time.sleep(delay)
                delay = min(delay * 2, 2.0)
        raise AssertionError("unreachable")

    # ---- runs ---------------------------------------------------------------------
    def start_run(
        self,
        run_id: str,
        *,
        name: str | None = None,
        source: str = "cli",
        dataset: str | None = None,
        metrics: Iterable[str] = (),
        tags: dict[str, Any] | None = None,
        config: dict[str, Any] | None = None,
    ) -> str:
        """Create the run, or mark an existing one running again (resume)."""

        def action(session: Session) -> str:
            run = session.get(Run, run_id)
            if run is None:
                session.add(
                    Run(
                        id=run_id,
                        name=name,
                        source=source,
                        dataset=dataset,
                        metrics=list(metrics),
                        tags=tags or {},
                        config=redact(config or {}),
                    )
                )
            else:
                run.status = "running"
                run.metrics = sorted(set(run.metrics) | set(metrics))
                session.execute(delete(RunMetricTotal).where(RunMetricTotal.run_id == run_id))
            return run_id

        return self._write(action)

    def finish_run(
        self, run_id: str, status: str = "finished", judge_usage: dict[str, Any] | None = None
    ) -> None:
        """Close the run: its metric totals, its averages as time-series snapshots."""
        from assay.store.queries import snapshot_run

        def action(session: Session) -> None:
            run = session.get(Run, run_id)
            if run is None:
                raise StoreError(f"no run {run_id!r} in {self.safe_url}")
            run.status = status
            run.finished_at = utcnow()
            if judge_usage is not None:
                run.judge_usage = judge_usage
            snapshot_run(session, run)

        self._write(action)
        if self.dialect == "sqlite":
            # keep the planner's statistics current; the limit keeps ANALYZE cheap
            with self.engine.begin() as connection:
                connection.exec_driver_sql("PRAGMA analysis_limit=400")
                connection.exec_driver_sql("ANALYZE")

    def done_indices(self, run_id: str) -> set[int]:
        """Sample indices already stored for a run (what a resumed run skips)."""
        with self.session() as session:
            rows = session.execute(
                select(TestResult.sample_index).where(TestResult.run_id == run_id)
            )
            return {r[0] for r in rows}

    def run_exists(self, run_id: str) -> bool:
        with self.session() as session:
            return session.get(Run, run_id) is not None

    # ---- results ------------------------------------------------------------------
    def record(
        self,
        run_id: str,
        sample_index: int,
        sample: Sample,
        results: dict[str, MetricResult],
        *,
        status: str,
        duration: float | None = None,
        test_name: str | None = None,
        quality: dict[str, bool] | None = None,
        validation: dict[str, Any] | None = None,
        error: str | None = None,
        timestamp: datetime | None = None,
    ) -> int:
        """Store one finished sample/test with its metric values; returns its row id."""
        when = timestamp or utcnow()
        secrets = known_secrets()

        def action(session: Session) -> int:
            row = TestResult(
                run_id=run_id,
                sample_index=sample_index,
                test_name=test_name or sample.id or f"sample-{sample_index}",
                sample_id=sample.id,
                status=status,
                duration=duration if duration is not None else sample.duration,
                timestamp=when,
                query=sample.query,
                response=sample.response,
                expected=sample.expected,
                tags=dict(sample.tags),
                error=redact_text(error, secrets) if error else error,
            )
            session.add(row)
            session.flush()
            session.add_all(
                ScoringDetail(
                    test_result_id=row.id,
                    run_id=run_id,
                    metric_name=name,
                    metric_value=r.value,
                    method=r.method,
                    reason=r.reason,
                    error=r.error,
                    details=redact(to_jsonable(r.details), secrets, by_name=False),
                    timestamp=when,
                )
                for name, r in results.items()
            )
            session.add_all(
                QualityCheck(test_result_id=row.id, check_name=k, passed=bool(v), timestamp=when)
                for k, v in (quality or {}).items()
            )
            if validation:
                session.add(ValidationDetail(test_result_id=row.id, timestamp=when, **validation))
            return row.id

        return self._write(action)

    # ---- reads (the dashboard's queries; see assay.store.queries) -----------------
    def statistics(
        self, *, run_id: str | None = None, hours: float | None = None
    ) -> dict[str, Any]:
        from assay.store.queries import statistics

        with self.session() as session:
            return statistics(session, run_id=run_id, hours=hours)

    def history(self, hours: float = 24, metric_type: str | None = None) -> dict[str, Any]:
        from assay.store.queries import history

        with self.session() as session:
            return history(session, hours=hours, metric_type=metric_type)

    def runs(self, limit: int = 100, offset: int = 0) -> list[dict[str, Any]]:
        from assay.store.queries import runs

        with self.session() as session:
            return runs(session, limit=limit, offset=offset)

    def run_detail(self, run_id: str, limit: int = 200, offset: int = 0) -> dict[str, Any] | None:
        from assay.store.queries import run_detail

        with self.session() as session:
            return run_detail(session, run_id, limit=limit, offset=offset)

    def compare(self, a: str, b: str, seed: int = 0) -> list[dict[str, Any]]:
        """Compare selections ``RUN_ID``, ``key=value`` or ``RUN_ID:key=value``."""
        from assay.compare import Selection, compare

        with self.session() as session:
            rows = compare(session, Selection.parse(a), Selection.parse(b), seed=seed)
        return [r.to_dict() for r in rows]

    # ---- field-strategy configurations (seed 002) --------------------------------
    def list_strategy_configs(self) -> list[dict[str, Any]]:
        with self.session() as session:
            rows = session.scalars(select(FieldStrategyConfig).order_by(FieldStrategyConfig.name))
            return [
                {"name": r.name, "strategies": r.strategies, "updated_at": r.updated_at.isoformat()}
                for r in rows
            ]

    def get_strategy_config(self, name: str) -> dict[str, Any] | None:
        with self.session() as session:
            row = session.get(FieldStrategyConfig, name)
            return None if row is None else dict(row.strategies)

    def put_strategy_config(self, name: str, strategies: dict[str, str]) -> None:
        def action(session: Session) -> None:
            row = session.get(FieldStrategyConfig, name)
            if row is None:
                session.add(FieldStrategyConfig(name=name, strategies=dict(strategies)))
            else:
                row.strategies = dict(strategies)
                row.updated_at = utcnow()

        self._write(action)

    def delete_strategy_config(self, name: str) -> bool:
        def action(session: Session) -> bool:
            row = session.get(FieldStrategyConfig, name)
            if row is None:
                return False
            session.delete(row)
            return True

        return self._write(action)

    def close(self) -> None:
        self.engine.dispose()
