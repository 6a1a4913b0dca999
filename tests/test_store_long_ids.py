"""A sample id of any length is stored (revision 0011): PostgreSQL refused ids over 256
characters, so a run's results were lost there, while SQLite kept them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import create_engine

from assay.cli import app
from assay.store import db
from assay.store.db import Store
from pg_databases import fresh_postgres
from store_revisions import (
    head_revision,
    migrate,
    store_at_revision,
    stored_revisions,
    url_at_revision,
)

#: ids over the old VARCHAR(256) and VARCHAR(512) columns, and a short one
IDS = ["s-" + "x" * 298, "long/" + "é" * 4_995, "s3"]
OLD_ROW = (
    "INSERT INTO test_results (run_id, sample_index, test_name, sample_id, status, "
    "timestamp, response, tags) VALUES ('old', 0, 't', 's0', 'passed', "
    "'2026-11-27 10:00:00', 'Hello.', '{}')"
)


def _evaluate(url: str, folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = folder / "long_ids.jsonl"
    rows = [{"id": i, "response": "Hello there.", "expected": "Hello there."} for i in IDS]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    monkeypatch.setenv("ASSAY_DATABASE_URL", url)
    with pytest.raises(SystemExit) as done:
        app(["evaluate", str(data), "-m", "exact_match", "--store", "-q"])
    assert done.value.code in (0, None)


def _stored(url: str) -> list[tuple[str, str, str]]:
    engine = create_engine(db.normalise_url(url))
    with engine.connect() as connection:
        rows = connection.exec_driver_sql(
            "SELECT sample_id, test_name, status FROM test_results "
            "WHERE run_id <> 'old' ORDER BY sample_index"
        ).fetchall()
    engine.dispose()
    return [tuple(r) for r in rows]


@pytest.mark.postgres
def test_a_postgresql_store_at_0010_upgrades_and_keeps_ids_of_any_length(tmp_path, monkeypatch):
    with fresh_postgres("assay_long_ids") as url:
        url_at_revision(url, "0010", OLD_ROW)
        Store(url).close()  # upgrades to the newest revision on open
        _evaluate(url, tmp_path, monkeypatch)
        assert _stored(url) == [(i, i, "passed") for i in IDS]
        store = Store(url)
        key = "ab" * 32
        store.add_label(sample_key=key, sample_id=IDS[1], value=1.0, raw="1", annotator="ana")
        with store.engine.connect() as connection:
            types = connection.exec_driver_sql(
                "SELECT table_name, column_name, data_type FROM information_schema.columns "
                "WHERE column_name IN ('sample_id', 'test_name') ORDER BY 1, 2"
            ).fetchall()
            kept = connection.exec_driver_sql("SELECT sample_id FROM labels").fetchall()
            old = connection.exec_driver_sql(
                "SELECT sample_id FROM test_results WHERE run_id = 'old'"
            ).fetchall()
        store.close()
        assert stored_revisions(url) == [head_revision()]
    assert [tuple(t) for t in types] == [
        ("labels", "sample_id", "text"),
        ("test_results", "sample_id", "text"),
        ("test_results", "test_name", "text"),
    ]
    assert kept == [(IDS[1],)] and old == [("s0",)]


@pytest.mark.postgres
def test_a_postgresql_store_downgrades_to_0010_cutting_long_ids(tmp_path, monkeypatch):
    with fresh_postgres("assay_long_ids_down") as url:
        Store(url).close()
        _evaluate(url, tmp_path, monkeypatch)
        migrate(url, "0010", down=True)
        # the old sizes: 256 characters of an id, 512 of a test name
        assert _stored(url) == [
            (IDS[0][:256], IDS[0], "passed"),
            (IDS[1][:256], IDS[1][:512], "passed"),
            ("s3", "s3", "passed"),
        ]


def test_a_sqlite_store_from_0010_keeps_long_ids_and_its_label_index(tmp_path, monkeypatch):
    path = tmp_path / "old.db"
    store_at_revision(path, "0010", OLD_ROW)
    url = f"sqlite:///{path}"
    Store(str(path)).close()  # upgrades: nothing to alter on SQLite
    _evaluate(url, tmp_path, monkeypatch)
    assert _stored(url) == [(i, i, "passed") for i in IDS]
    engine = create_engine(url)
    with engine.connect() as connection:
        indexes = connection.exec_driver_sql(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'labels'"
        ).fetchall()
    engine.dispose()
    assert stored_revisions(url) == [head_revision()]
    assert ("uq_labels_file_verdict",) in indexes
