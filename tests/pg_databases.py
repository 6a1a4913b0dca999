"""A fresh PostgreSQL database per test, on the server the suite uses (127.0.0.1:5432,
trust auth; ``ASSAY_TEST_POSTGRES_URL`` names another admin URL): an empty one
(`fresh_postgres`), or one that already holds the results store's schema
(`fresh_store_database`)."""

from __future__ import annotations

import atexit
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

PG_ADMIN_URL = os.environ.get(
    "ASSAY_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
#: the database new stores are copied from (see `_store_template`), once it is made
_template: str | None = None


def _admin() -> Any:
    """An autocommit connection to the admin database; the test is skipped when the
    server is unreachable."""
    psycopg = pytest.importorskip("psycopg")
    try:
        return psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        pytest.skip(f"PostgreSQL at {PG_ADMIN_URL} is not reachable: {exc}")


def _create(name: str, template: str | None = None) -> str:
    """Create the database ``name`` (empty, or a copy of ``template``); its plain URL."""
    copied = f' TEMPLATE "{template}"' if template else ""
    with _admin() as admin:
        admin.execute(f'CREATE DATABASE "{name}"{copied}')
    return PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"


def _drop(name: str) -> None:
    """Drop the database ``name``, closing its connections by force."""
    import psycopg

    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def fresh_postgres(prefix: str) -> Iterator[str]:
    """A new, empty database named ``prefix_<random>`` as a plain URL, dropped afterwards
    (connections closed by force); the test is skipped when the server is unreachable."""
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    url = _create(name)
    try:
        yield url
    finally:
        _drop(name)


def _store_template() -> str:
    """A database holding the results store's schema at the newest revision, made once
    per process and dropped when it exits. No connection to it stays open (``Store.close``
    disposes of its engine's), as a copy by ``CREATE DATABASE ... TEMPLATE`` requires."""
    global _template
    if _template is None:
        from assay.store.db import Store

        name = f"assay_store_template_{uuid.uuid4().hex[:8]}"
        url = _create(name)
        atexit.register(_drop, name)
        Store(url).close()  # migrates it
        _template = name
    return _template


@contextmanager
def fresh_store_database(prefix: str) -> Iterator[str]:
    """A new database as `fresh_postgres` gives, already holding the results store's
    schema at the newest revision, as ``Store`` leaves a new database: a copy of a
    template migrated once per session, which spares each test the migration (about
    0.25 s). Tests of the migrations themselves use `fresh_postgres`."""
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    url = _create(name, template=_store_template())
    try:
        yield url
    finally:
        _drop(name)
