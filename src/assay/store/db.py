"""Opening the store and writing runs into it.

SQLite file by default (WAL mode, a 10 s busy timeout and retried writes, so several
writers on one machine are safe); PostgreSQL when the URL says so (psycopg 3), e.g.
``postgresql+psycopg://user@127.0.0.1:5432/assay``; any other scheme is refused with
a message naming these two. The schema is created and upgraded with Alembic on open, by
one process at a time (SQLite ``BEGIN IMMEDIATE``, a PostgreSQL advisory lock), so
several processes opening one new database at once all succeed. All values go through
bound parameters: untrusted text never becomes SQL.
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
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, create_engine, delete, event, insert, select
from sqlalchemy.exc import OperationalError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from assay.core.extras import missing_extra
from assay.core.jsonout import to_jsonable
from assay.core.labels import sample_key
from assay.core.redaction import known_secrets, redact, redact_text, redact_url
from assay.core.result import MetricResult
from assay.core.sample import Sample
from assay.store.labels import FileLabels, LabelStore, write_file_labels
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
from assay.store.transcript import stored_items, stored_texts

__all__ = [
    "DEFAULT_URL_ENV",
    "SUPPORTED_SCHEMES",
    "Store",
    "StoreError",
    "default_url",
    "normalise_url",
]

DEFAULT_URL_ENV = "ASSAY_DATABASE_URL"
#: the URL schemes the store accepts (a plain path is a SQLite file)
SUPPORTED_SCHEMES = ("sqlite", "sqlite+pysqlite", "postgresql", "postgres", "postgresql+psycopg")
# the PostgreSQL advisory lock held while migrating (any constant shared by all processes)
_MIGRATION_LOCK = 0x61737361  # "assa"
T = TypeVar("T")


class StoreError(RuntimeError):
    """The store cannot be opened or written; the message says which database and why."""


def default_url() -> str:
    """``ASSAY_DATABASE_URL``, else ``./assay.db`` (SQLite) in the working directory."""
    return os.environ.get(DEFAULT_URL_ENV) or "sqlite:///assay.db"


def normalise_url(url: str) -> str:
    """Accept plain paths, ``sqlite:///`` and ``postgresql://`` URLs; pick the psycopg 3
    driver. Any other scheme raises `StoreError` naming the supported ones (never the URL,
    which may hold a password)."""
    if "://" not in url:
        return f"sqlite:///{Path(url).expanduser()}"
    scheme, rest = url.split("://", 1)
    if scheme.lower() not in SUPPORTED_SCHEMES:
        shown = scheme if scheme.replace("+", "").isalnum() else "?"
        raise StoreError(
            f"unsupported database URL scheme {shown!r}: the results store is SQLite "
            "(sqlite:///PATH, or a plain file path) or PostgreSQL "
            "(postgresql://USER@HOST:PORT/DATABASE)"
        )
    if scheme.lower() in {"postgresql", "postgres"}:
        return "postgresql+psycopg://" + rest
    return url


def _is_busy(exc: OperationalError) -> bool:
    orig = getattr(exc, "orig", None)
    code = getattr(orig, "sqlite_errorcode", None)
    return code in {sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED}


class Store(LabelStore):
    """The results store. ``Store(url)`` opens (and migrates) the database. Its labels
    (add, list, delete; a run's samples with their labels) are `LabelStore`'s."""

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
        except ImportError as exc:  # a postgresql:// URL without psycopg: the postgres extra
            missing = missing_extra(exc, f"the results store {self.safe_url}")
            if missing is None:
                raise
            raise StoreError(str(missing)) from exc
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)

    @property
    def safe_url(self) -> str:
        """The URL with any password hidden, for messages."""
        return (
            self.engine.url.render_as_string(hide_password=True)
            if hasattr(self, "engine")
            else redact_url(self.url)
        )

    def _make_engine(self) -> Engine:
        if self.dialect == "sqlite":
            path = self.url.split("///", 1)[1] if "///" in self.url else ""
            folder = Path(path).expanduser().parent if path and path != ":memory:" else None
            if folder is not None and not folder.is_dir():  # a typo must not make folders
                raise FileNotFoundError(
                    f"the folder {folder} does not exist (the results store creates no "
                    "folders: create it, or check the path)"
                )
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
        """Create or upgrade the schema to the newest Alembic revision.

        A database already at the newest revision is only read (a read-only SQLite file
        opens). Otherwise one process at a time migrates, holding the database's write
        lock (SQLite) or an advisory lock (PostgreSQL) and reading the revision again
        under it: processes that open one new database at once wait for the first and
        then find the schema made, instead of all creating the same tables."""
        cfg = AlembicConfig()
        cfg.set_main_option("script_location", str(Path(__file__).parent / "migrations"))
        head = ScriptDirectory.from_config(cfg).get_current_head()
        with self.engine.connect() as connection:
            if MigrationContext.configure(connection).get_current_revision() == head:
                return
        with self.engine.begin() as connection:
            self._lock_for_migration(connection)
            cfg.attributes["connection"] = connection
            command.upgrade(cfg, "head")

    def _lock_for_migration(self, connection: Connection) -> None:
        """Take the lock that serialises migrations, for this transaction."""
        if self.dialect == "sqlite":
            # the write lock now (waiting up to the busy timeout), not at the first write
            connection.exec_driver_sql("BEGIN IMMEDIATE")
        elif self.dialect == "postgresql":
            connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_MIGRATION_LOCK})")

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
        fingerprint: dict[str, Any] | None = None,
    ) -> str:
        """Create the run, or mark an existing one running again (resume; its fingerprint
        stays the one it was started with)."""

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
                        fingerprint=(
                            redact(fingerprint, by_name=False) if fingerprint is not None else None
                        ),
                    )
                )
            else:
                run.status = "running"
                run.metrics = sorted(set(run.metrics) | set(metrics))
                session.execute(delete(RunMetricTotal).where(RunMetricTotal.run_id == run_id))
            return run_id

        return self._write(action)

    def tag_run(self, run_id: str, tags: dict[str, Any]) -> None:
        """Add ``tags`` to the run's tags (a run of several targets: its comparison)."""

        def action(session: Session) -> None:
            run = session.get(Run, run_id)
            if run is None:
                raise StoreError(f"no run {run_id!r} in {self.safe_url}")
            run.tags = {**(run.tags or {}), **tags}

        self._write(action)

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
        """Sample indices stored for a run with no metric error (what a resumed run skips;
        a sample that errored is scored again)."""
        return set(self.stored_results(run_id))

    def stored_results(self, run_id: str) -> dict[int, dict[str, MetricResult]]:
        """The metric results of a run's samples, by sample index, as they were scored:
        value, components, method, reason, evidence and signature (empty for rows stored
        before revision 0004). Samples with a metric error are left out."""
        stmt = (
            select(TestResult.sample_index, ScoringDetail)
            .outerjoin(ScoringDetail, ScoringDetail.test_result_id == TestResult.id)
            .where(TestResult.run_id == run_id)
        )
        found: dict[int, dict[str, MetricResult]] = {}
        errored: set[int] = set()
        with self.session() as session:
            for index, score in session.execute(stmt):
                row = found.setdefault(index, {})
                if score is None:  # stored with no scores (no metric ran on it)
                    continue
                if score.error is not None:
                    errored.add(index)
                row[score.metric_name] = MetricResult(
                    name=score.metric_name,
                    value=score.metric_value,
                    components=dict(score.components or {}),
                    details=dict(score.details or {}),
                    method=score.method or "local",
                    reason=score.reason,
                    signature=score.signature or "",
                )
        return {i: rows for i, rows in sorted(found.items()) if i not in errored}

    def errored_indices(self, run_id: str) -> set[int]:
        """Sample indices stored for a run with a metric error (a resumed run scores them
        again)."""
        stmt = (
            select(TestResult.sample_index)
            .join(ScoringDetail, ScoringDetail.test_result_id == TestResult.id)
            .where(TestResult.run_id == run_id, ScoringDetail.error.is_not(None))
            .distinct()
        )
        with self.session() as session:
            return {index for (index,) in session.execute(stmt)}

    def run_exists(self, run_id: str) -> bool:
        with self.session() as session:
            return session.get(Run, run_id) is not None

    def fingerprint(self, run_id: str) -> dict[str, Any] | None:
        """What the run was scored on (see `start_run`), or None when it was not recorded."""
        with self.session() as session:
            run = session.get(Run, run_id)
            return None if run is None else run.fingerprint

    # ---- results ------------------------------------------------------------------
    def record(
        self,
        run_id: str,
        sample_index: int,
        sample: Sample,
        results: dict[str, MetricResult],
        **options: Any,
    ) -> int:
        """Store one finished sample/test with its metric values; returns its row id.
        A conversation's turns, an agent's trace and its reference tool calls are stored
        as `assay.store.transcript.stored_items` says (redacted, bounded), its contexts as
        `assay.store.transcript.stored_texts` says (bounded).

        ``options``: ``status`` (required), ``duration``, ``test_name``, ``quality``,
        ``validation``, ``error``, ``timestamp`` and ``replace`` (see `_recording`).
        ``replace=True`` first deletes the run's row of this sample index with its scores
        and checks (a resumed run scoring an errored sample again), in one transaction."""
        return self._write(self._recording(run_id, sample_index, sample, results, **options))

    def record_many(
        self, rows: Iterable[dict[str, Any]], then: Callable[[Session], None] | None = None
    ) -> None:
        """Several `record` calls (each one's arguments as a dict) in one transaction, and
        ``then`` in it last (the live worker marks its traces scored there). The samples'
        labels are written together, after their rows (`write_file_labels`)."""
        labelled: list[FileLabels] = []
        actions = [self._recording(**row, labelled=labelled) for row in rows]

        def action(session: Session) -> None:
            labelled.clear()  # a retried transaction starts again
            for recording in actions:
                recording(session)
            write_file_labels(session, labelled)
            if then is not None:
                then(session)

        self._write(action)

    def _recording(
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
        replace: bool = False,
        labelled: list[FileLabels] | None = None,
    ) -> Callable[[Session], int]:
        """The write of one `record`, to run in a transaction: the sample's row carries
        its `sample_key`, and its labels (a labelled data file's) are written once
        (`assay.store.labels.write_file_labels`), at once or, given ``labelled``, added
        to it for the caller to write with the others."""
        when = timestamp or utcnow()
        secrets = known_secrets()
        key = sample_key(sample)

        def action(session: Session) -> int:
            if replace:
                old = session.scalar(
                    select(TestResult.id).where(
                        TestResult.run_id == run_id, TestResult.sample_index == sample_index
                    )
                )
                if old is not None:
                    for child in (ScoringDetail, QualityCheck, ValidationDetail):
                        session.execute(delete(child).where(child.test_result_id == old))
                    session.execute(delete(TestResult).where(TestResult.id == old))
            # Core inserts (one statement per table): the ORM's unit of work cost about
            # 1 ms a sample, most of a live trace's or a stored run's write
            row_id = session.execute(
                insert(TestResult.__table__).returning(TestResult.__table__.c.id),
                {
                    "run_id": run_id,
                    "sample_index": sample_index,
                    "test_name": test_name or sample.id or f"sample-{sample_index}",
                    "sample_id": sample.id,
                    "status": status,
                    "duration": duration if duration is not None else sample.duration,
                    "first_token_time": sample.first_token_time,
                    "timestamp": when,
                    "query": sample.query,
                    "response": sample.response,
                    "expected": sample.expected,
                    "contexts": stored_texts(sample.contexts),
                    "tags": dict(sample.tags),
                    "error": redact_text(error, secrets) if error else error,
                    "turns": stored_items(sample.turns, secrets),
                    "trace": stored_items(sample.trace, secrets),
                    "expected_tool_calls": stored_items(sample.expected_tool_calls, secrets),
                    "sample_key": key,
                },
            ).scalar_one()
            if sample.label is not None or sample.labels:
                entry = FileLabels(key, sample, run_id, when)
                if labelled is None:
                    write_file_labels(session, [entry])
                else:
                    labelled.append(entry)
            scores = [
                {
                    "test_result_id": row_id,
                    "run_id": run_id,
                    "metric_name": name,
                    "metric_value": r.value,
                    "method": r.method,
                    "reason": r.reason,
                    "error": r.error,
                    "details": redact(to_jsonable(r.details), secrets, by_name=False),
                    "components": dict(r.components),
                    "signature": redact_text(r.signature, secrets),
                    "timestamp": when,
                }
                for name, r in results.items()
            ]
            if scores:
                session.execute(insert(ScoringDetail.__table__), scores)
            checks = [
                {"test_result_id": row_id, "check_name": k, "passed": bool(v), "timestamp": when}
                for k, v in (quality or {}).items()
            ]
            if checks:
                session.execute(insert(QualityCheck.__table__), checks)
            if validation:
                session.execute(
                    insert(ValidationDetail.__table__),
                    {"test_result_id": row_id, "timestamp": when, **validation},
                )
            return row_id

        return action

    # ---- reads (the dashboard's queries; see assay.store.queries) -----------------
    def statistics(
        self, *, run_id: str | None = None, hours: float | None = None
    ) -> dict[str, Any]:
        from assay.store.queries import statistics

        with self.session() as session:
            return statistics(session, run_id=run_id, hours=hours)

    def history(
        self, hours: float = 24, metric_type: str | None = None, now: datetime | None = None
    ) -> dict[str, Any]:
        """Hourly buckets over the ``hours`` before ``now`` (default: the current time)."""
        from assay.store.queries import history

        with self.session() as session:
            return history(session, hours=hours, metric_type=metric_type, now=now)

    def runs(self, limit: int = 100, offset: int = 0) -> list[dict[str, Any]]:
        from assay.store.queries import runs

        with self.session() as session:
            return runs(session, limit=limit, offset=offset)

    def run_detail(self, run_id: str, limit: int = 200, offset: int = 0) -> dict[str, Any] | None:
        from assay.store.queries import run_detail

        with self.session() as session:
            return run_detail(session, run_id, limit=limit, offset=offset)

    def sample_detail(self, run_id: str, index: int) -> dict[str, Any] | None:
        """One stored sample of a run by its sample index (`queries.sample_rows`)."""
        from assay.store.queries import sample_detail

        with self.session() as session:
            return sample_detail(session, run_id, index)

    def tag_groups(self, run_id: str, tag: str) -> dict[str, Any] | None:
        """One run's metric means per value of a sample tag (`assay.store.tag_groups`)."""
        from assay.store.tag_groups import tag_groups

        with self.session() as session:
            return tag_groups(session, run_id, tag)

    def compare(self, a: str, b: str, seed: int = 0) -> list[dict[str, Any]]:
        """Compare selections ``RUN_ID``, ``key=value`` or ``RUN_ID:key=value``."""
        from assay.store.compare import compare
        from assay.store.selections import Selection

        with self.session() as session:
            rows = compare(session, Selection.parse(a), Selection.parse(b), seed=seed)
        return [r.to_dict() for r in rows]

    # ---- field-strategy configurations (JSON comparison) --------------------------
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
