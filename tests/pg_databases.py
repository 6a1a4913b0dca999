"""A fresh PostgreSQL database per test, on the server the suite uses (127.0.0.1:5432,
trust auth; ``ASSAY_TEST_POSTGRES_URL`` names another admin URL)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

PG_ADMIN_URL = os.environ.get(
    "ASSAY_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)


@contextmanager
def fresh_postgres(prefix: str) -> Iterator[str]:
    """A new, empty database named ``prefix_<random>`` as a plain URL, dropped afterwards
    (connections closed by force); the test is skipped when the server is unreachable."""
    psycopg = pytest.importorskip("psycopg")
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    try:
        admin = psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        pytest.skip(f"PostgreSQL at {PG_ADMIN_URL} is not reachable: {exc}")
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
