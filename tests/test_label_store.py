"""The store's labels (revision 0010, `assay.store.labels`) on a real SQLite file and a
real PostgreSQL database: add, list and delete labels, a labelled data file's labels
written once per stored run, labels given on run A found from run B of the same data,
and an existing store upgraded."""

from __future__ import annotations

import sqlite3
import threading
from datetime import datetime
from pathlib import Path

import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine

from assay.core.labels import LabelError, sample_key
from assay.core.sample import Sample
from assay.store import db
from assay.store.db import Store
from assay.store.labels import FileLabels, StoredLabel, write_file_labels
from pg_databases import fresh_postgres
from store_revisions import head_revision, store_at_revision, stored_revisions


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store(request, tmp_path):
    if request.param == "sqlite":
        opened = Store(str(tmp_path / "labels.db"))
        yield opened
        opened.close()
        return
    with fresh_postgres("assay_labels") as url:
        opened = Store(url)
        yield opened
        opened.close()


FAITHFUL = Sample(
    id="s1",
    query="Where is the Eiffel Tower?",
    response="In Paris.",
    contexts=["The Eiffel Tower is in Paris."],
    label=1,
    labels={"toxicity_score": 0},
)
UNFAITHFUL = Sample(
    id="s2",
    query="Where is the Eiffel Tower?",
    response="In Rome.",
    contexts=["The Eiffel Tower is in Paris."],
)


def _store_run(store, run_id, *samples):
    store.start_run(run_id)
    for index, sample in enumerate(samples):
        store.record(run_id, index, sample, {}, status="ungated")
    store.finish_run(run_id)


def test_add_list_and_delete_a_label(store):
    key = sample_key(UNFAITHFUL)
    added = store.add_label(
        sample_key=key,
        value=0.75,
        raw="4",
        scale="1-5",
        annotator=" ana ",
        metric="faithfulness",
        sample_id="s2",
        run_id="r1",
        note="the tower is <b>not</b> in Rome'); DROP TABLE labels; --",
    )
    assert isinstance(added.created_at, datetime)
    assert added == StoredLabel(
        id=added.id,
        sample_key=key,
        sample_id="s2",
        run_id="r1",
        metric="faithfulness",
        value=0.75,
        raw="4",
        scale="1-5",
        annotator="ana",
        note="the tower is <b>not</b> in Rome'); DROP TABLE labels; --",
        created_at=added.created_at,
    )
    verdict = store.add_label(sample_key=key, value=0.0, raw="0", annotator="bo")
    assert store.labels_for_keys([key]) == [added, verdict]
    assert store.labels_for_keys([key], metric=None) == [verdict]
    assert store.labels_for_keys([key], metric="faithfulness") == [added]
    assert store.labels_for_keys([sample_key(FAITHFUL)]) == []
    assert store.delete_label(added.id) is True
    assert store.delete_label(added.id) is False
    assert store.labels_for_keys([key]) == [verdict]


def test_labels_are_found_among_more_keys_than_one_query_holds(store):
    first, last = sample_key(FAITHFUL), sample_key(UNFAITHFUL)
    store.add_label(sample_key=first, value=1.0, raw="1", annotator="ana")
    store.add_label(sample_key=last, value=0.0, raw="0", annotator="ana")
    absent = [f"{i:064x}" for i in range(1_200)]  # 1,202 keys: three queries of 500
    found = store.labels_for_keys([first, *absent, last])
    assert sorted((lab.sample_key, lab.value) for lab in found) == sorted(
        [(first, 1.0), (last, 0.0)]
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"value": 1.5}, "value: 1.5 is not a label value in [0, 1]"),
        ({"value": float("nan")}, "value: nan is not a label value in [0, 1]"),
        ({"annotator": "  "}, "annotator: an annotator is required (who gave the label)"),
        ({"annotator": "a" * 257}, "annotator: has 257 characters; at most 256"),
        ({"note": "n" * 10_001}, "note: has 10,001 characters; at most 10,000"),
        ({"metric": "m" * 129}, "metric: has 129 characters; at most 128"),
        ({"metric": " "}, "metric: ' ' is not a metric name"),
        ({"raw": 4}, "raw: 4 is not text"),
        (
            {"sample_key": "s2"},
            "sample_key: 's2' is not a sample key (64 lower-case hex digits: "
            "assay.core.labels.sample_key)",
        ),
    ],
)
def test_a_label_the_store_must_not_keep_is_refused_by_field(tmp_path, change, message):
    store = Store(str(tmp_path / "labels.db"))
    given = {"sample_key": sample_key(UNFAITHFUL), "value": 1.0, "raw": "1", "annotator": "a"}
    with pytest.raises(LabelError) as caught:
        store.add_label(**(given | change))
    assert str(caught.value) == message
    assert store.labels_for_keys([sample_key(UNFAITHFUL)]) == []
    store.close()


def test_a_labelled_files_labels_are_written_once_and_found_from_the_next_run(store):
    _store_run(store, "A", FAITHFUL, UNFAITHFUL)
    _store_run(store, "B", FAITHFUL, UNFAITHFUL)  # the same data again: no new rows
    labels = store.labels_for_run("B")
    assert [(lab.run_id, lab.metric, lab.value, lab.raw, lab.annotator) for lab in labels] == [
        ("A", None, 1.0, "1", "file"),
        ("A", "toxicity_score", 0.0, "0", "file"),
    ]
    assert {lab.sample_key for lab in labels} == {sample_key(FAITHFUL)}
    assert store.labels_for_run("A") == labels
    # the file changes its verdict: a new row, and the newest is the file's verdict
    _store_run(store, "C", FAITHFUL.model_copy(update={"label": 0.0}), UNFAITHFUL)
    assert len(store.labels_for_run("C")) == 3
    assert [(s.id, s.label, s.labels) for s in store.run_samples("C")] == [
        ("s1", 0.0, {"toxicity_score": 0.0}),
        ("s2", None, {}),
    ]


def test_one_batch_of_rows_writes_a_repeated_samples_labels_once(store):
    store.start_run("A")
    rows = [
        {"run_id": "A", "sample_index": i, "sample": sample, "results": {}, "status": "ungated"}
        for i, sample in enumerate([FAITHFUL, UNFAITHFUL, FAITHFUL])
    ]
    store.record_many(rows)
    store.record_many([{**rows[0], "run_id": "A", "sample_index": 3}])
    labels = store.labels_for_run("A")
    assert [(lab.metric, lab.value) for lab in labels] == [(None, 1.0), ("toxicity_score", 0.0)]
    assert set(store.run_sample_keys("A").values()) == {
        sample_key(FAITHFUL),
        sample_key(UNFAITHFUL),
    }


def test_two_runs_storing_the_same_file_labels_at_once_keep_them_once(store):
    """The second writer looked before the first committed (its query found nothing);
    the unique index makes its insert skip what the first wrote."""
    key, when = sample_key(FAITHFUL), datetime(2026, 11, 28, 12, 0)
    first, second = store.session(), store.session()
    with first.begin():
        assert write_file_labels(first, [FileLabels(key, FAITHFUL, "A", when)]) == 2
        done = threading.Event()

        def store_again() -> None:
            with second.begin():
                write_file_labels(second, [FileLabels(key, FAITHFUL, "B", when)])
            done.set()

        racing = threading.Thread(target=store_again)
        racing.start()
        assert not done.wait(0.3)  # held by the first writer's uncommitted rows
    racing.join(10)
    assert done.is_set()
    first.close()
    second.close()
    assert [(lab.run_id, lab.metric) for lab in store.labels_for_keys([key])] == [
        ("A", None),
        ("A", "toxicity_score"),
    ]


def test_labels_given_on_run_a_serve_run_b_of_the_same_data(store):
    _store_run(store, "A", FAITHFUL, UNFAITHFUL)
    key = store.run_sample_keys("A")[1]
    assert key == sample_key(UNFAITHFUL)
    store.add_label(sample_key=key, value=0.0, raw="0", annotator="ana", run_id="A")
    store.add_label(sample_key=key, value=1.0, raw="1", annotator="bo", run_id="A")
    store.add_label(sample_key=key, value=0.25, raw="2", scale="1-5", annotator="ana")
    changed = UNFAITHFUL.model_copy(update={"response": "In Rome, Italy."})
    _store_run(store, "B", FAITHFUL, UNFAITHFUL, changed)
    samples = store.run_samples("B")
    assert [s.id for s in samples] == ["s1", "s2", "s2"]
    # ana's latest verdict (0.25) and bo's (1.0): their mean, (0.25 + 1.0) / 2
    assert samples[1].label == 0.625
    assert samples[2].label is None  # another response: another sample, unlabelled
    assert samples[0].label == 1.0 and samples[0].labels == {"toxicity_score": 0.0}
    assert (samples[1].query, samples[1].response, samples[1].contexts) == (
        UNFAITHFUL.query,
        UNFAITHFUL.response,
        UNFAITHFUL.contexts,
    )
    assert [sample_key(s) for s in samples] == list(store.run_sample_keys("B").values())


def test_a_conversations_stored_turns_rebuild_the_sample_and_its_key(store):
    chat = Sample(
        id="c1",
        turns=[
            {"role": "user", "content": "Is it in Paris?"},
            {"role": "assistant", "content": "Yes."},
        ],
        labels={"conversation_relevancy": 1},
    )
    _store_run(store, "A", chat)
    (rebuilt,) = store.run_samples("A")
    assert [(t.role, t.content) for t in rebuilt.turns] == [
        ("user", "Is it in Paris?"),
        ("assistant", "Yes."),
    ]
    assert rebuilt.labels == {"conversation_relevancy": 1.0}
    assert sample_key(rebuilt) == sample_key(chat) == store.run_sample_keys("A")[0]


def _postgres_at_0009(url: str) -> None:
    """Migrate a fresh PostgreSQL database up to revision 0009 only, holding one stored
    row of run ``old`` (sample s2) written before sample keys existed."""
    cfg = Config()
    cfg.set_main_option("script_location", str(Path(db.__file__).parent / "migrations"))
    engine = create_engine(db.normalise_url(url))
    with engine.begin() as connection:
        cfg.attributes["connection"] = connection
        command.upgrade(cfg, "0009")
        connection.exec_driver_sql(
            "INSERT INTO runs (id, source, status, started_at, metrics, tags, config) "
            "VALUES ('old', 'cli', 'finished', '2026-11-24 10:00:00', '[]', '{}', '{}')"
        )
        connection.exec_driver_sql(OLD_ROW)
    engine.dispose()


OLD_ROW = (
    "INSERT INTO test_results (run_id, sample_index, test_name, sample_id, status, "
    "timestamp, query, response, tags) VALUES ('old', 0, 't', 's2', 'passed', "
    "'2026-11-27 10:00:00', 'Where is the Eiffel Tower?', 'In Rome.', '{}')"
)


@pytest.mark.postgres
def test_revision_0010_upgrades_an_existing_postgresql_store():
    with fresh_postgres("assay_labels_old") as url:
        _postgres_at_0009(url)
        store = Store(url)  # upgrades to the newest revision on open
        old = Sample(id="s2", query="Where is the Eiffel Tower?", response="In Rome.")
        assert store.run_sample_keys("old") == {0: sample_key(old)}
        store.add_label(sample_key=sample_key(old), value=0.0, raw="no", annotator="ana")
        assert [s.label for s in store.run_samples("old")] == [0.0]
        store.close()
        assert stored_revisions(url) == [head_revision()]


def test_revision_0010_upgrades_an_existing_store(tmp_path):
    path = tmp_path / "old.db"
    store_at_revision(path, "0009", OLD_ROW)
    store = Store(str(path))  # upgrades to the newest revision on open
    old = Sample(id="s2", query="Where is the Eiffel Tower?", response="In Rome.")
    # a row stored before 0010 has no key: the key of the sample rebuilt from it serves
    assert store.run_sample_keys("old") == {0: sample_key(old)}
    store.add_label(sample_key=sample_key(old), value=1.0, raw="1", annotator="ana")
    assert [s.label for s in store.run_samples("old")] == [1.0]
    assert [lab.annotator for lab in store.labels_for_run("old")] == ["ana"]
    store.close()
    assert stored_revisions(f"sqlite:///{path}") == [head_revision()]
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT sample_key FROM test_results").fetchall() == [(None,)]
    conn.close()
