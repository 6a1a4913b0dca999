"""A SQLite store left at an older schema revision, for the migration tests."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import create_engine

from assay.store import db


def store_at_revision(path: Path, revision: str, *statements: str) -> None:
    """Create a SQLite store at ``path`` migrated only up to ``revision``, holding one
    finished run ``old``, then run ``statements`` (SQL of that revision's schema)."""
    url_at_revision(f"sqlite:///{path}", revision, *statements)


def url_at_revision(url: str, revision: str, *statements: str) -> None:
    """`store_at_revision` for the store at ``url`` (SQLite or PostgreSQL)."""
    migrate(url, revision)
    engine = create_engine(db.normalise_url(url))
    with engine.begin() as connection:
        connection.exec_driver_sql(
            "INSERT INTO runs (id, source, status, started_at, metrics, tags, config) "
            "VALUES ('old', 'cli', 'finished', '2026-11-24 10:00:00', '[]', '{}', '{}')"
        )
        for statement in statements:
            connection.exec_driver_sql(statement)
    engine.dispose()


def migrate(url: str, revision: str, down: bool = False) -> None:
    """Upgrade (or with ``down``, downgrade) the store at ``url`` to ``revision``."""
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(Path(db.__file__).parent / "migrations"))
    engine = create_engine(db.normalise_url(url))
    with engine.begin() as connection:
        cfg.attributes["connection"] = connection
        (command.downgrade if down else command.upgrade)(cfg, revision)
    engine.dispose()


def head_revision() -> str:
    """The newest schema revision, the one a store is upgraded to on open."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", str(Path(db.__file__).parent / "migrations"))
    head = ScriptDirectory.from_config(cfg).get_current_head()
    assert head is not None
    return head


def stored_revisions(url: str) -> list[str]:
    """The schema revisions the store at ``url`` records as applied (its
    ``alembic_version`` rows): one, the newest, after an upgrade."""
    engine = create_engine(db.normalise_url(url))
    with engine.connect() as connection:
        rows = connection.exec_driver_sql("SELECT version_num FROM alembic_version").fetchall()
    engine.dispose()
    return [row[0] for row in rows]
