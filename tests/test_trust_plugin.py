"""Trust under faults: the pytest plugin never passes an uncomputed gate and never stops a
test session over its results store (locked, unreachable, unwritable, failing midway).
Each inner session runs in a subprocess like a user's test suite."""

from __future__ import annotations

import json
import re
import sqlite3

import pytest

from assay.pytest_plugin import import_spool
from assay.store.db import Store
from inner_sessions import PLAIN
from pg_databases import fresh_postgres

PASSWORD = "secretpw"
UNREACHABLE = f"postgresql://u:{PASSWORD}@127.0.0.1:1/x"  # port 1 refuses at once
SAFE_UNREACHABLE = "postgresql+psycopg://u:[redacted]@127.0.0.1:1/x"
API_KEY = "sk-spool-secret-123456"

FIVE_TESTS = """
import os

import pytest

def test_exact_pass(assay):
    assay.check(response="Paris", expected="paris", metrics=["exact_match"])

def test_exact_fail(assay):
    assay.check(response="Lyon", expected="Paris", metrics=["exact_match"])

def test_plain():
    assert 1 + 1 == 2

def test_shows_a_key():
    assert os.environ["ASSAY_JUDGE_API_KEY"] == "something else"

@pytest.mark.skip(reason="not today")
def test_skipped():
    pass
"""
FIVE_OUTCOMES = [
    ("test_exact_pass", "passed"),
    ("test_exact_fail", "failed"),
    ("test_plain", "passed"),
    ("test_shows_a_key", "failed"),
    ("test_skipped", "skipped"),
]


@pytest.fixture()
def inner(pytester, cache_dir, monkeypatch):
    monkeypatch.setenv("ASSAY_CACHE_DIR", cache_dir)
    monkeypatch.setenv("ASSAY_JUDGE_API_KEY", API_KEY)
    pytester.makepyfile(test_inner=FIVE_TESTS)
    return pytester


def _spool(directory) -> tuple[dict, list[dict]]:
    """The one spool file in ``directory``: its run header and its rows."""
    (path,) = directory.glob("*.jsonl")
    head, *rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert path.name == f"{head['run_id']}.jsonl"
    return head, rows


def _outcomes(rows: list[dict]) -> list[tuple[str, str]]:
    return [(r["test_name"].split("::")[1], r["status"]) for r in rows]


def _every_byte(root) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file())


def _session_went_on(result, warning: str, spool) -> None:
    """Every test ran and reported; the exit status is the tests' own; one warning."""
    result.assert_outcomes(passed=2, failed=2, skipped=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in out and "Traceback" not in out
    assert out.count("WARNING: the results store could not be written") == 1
    result.stdout.re_match_lines(
        [
            r"=+ assay results store =+",
            warning,
            re.escape(
                f"the run and the 5 of 5 test results the store did not take are kept in {spool}"
            ),
        ]
    )


# ---- gates ------------------------------------------------------------------------------
GATES = """
from assay.metrics.base import Metric


class Boom(Metric):
    name = "boom_metric"  # no threshold: an error still fails the check
    requires = ("response",)

    def compute(self, sample, res):
        raise ValueError("boom inside the metric")


def test_metric_raises(assay):
    assay.check(response="x", metrics=[Boom()])

def test_judge_fails(assay):
    assay.check(response="Paris is the capital.", expected="Paris", metrics=["factual_accuracy"])

def test_gated_na(assay):
    assay.check(response="Paris", metrics=["exact_match"])

def test_ungated_na(assay):
    check = assay.check(response="Paris", metrics=["rouge"])
    assert check["rouge"] is None

def test_threshold_for_a_metric_not_computed(assay):
    assay.check(
        response="Paris", expected="Paris", metrics=["exact_match"], thresholds={"rouge": 0.9}
    )
"""


def test_an_uncomputed_metric_never_passes_a_gate(pytester, cache_dir, monkeypatch):
    monkeypatch.setenv("ASSAY_CACHE_DIR", cache_dir)
    monkeypatch.setenv("ASSAY_JUDGE_MODEL", "judge-model")
    monkeypatch.setenv("ASSAY_JUDGE_BASE_URL", "http://127.0.0.1:1/v1")  # refuses at once
    monkeypatch.setenv("ASSAY_JUDGE_MAX_RETRIES", "0")
    monkeypatch.setenv("ASSAY_JUDGE_CACHE", "false")
    pytester.makepyfile(test_gates=GATES)
    result = pytester.runpytest_subprocess(*PLAIN, "-rA")
    # before: "could not be computed" / "is N/A", and the threshold for rouge gated nothing
    result.assert_outcomes(passed=1, failed=4)
    lines = result.stdout.lines
    expected = {
        "test_metric_raises": [
            "  boom_metric errored: ValueError: boom inside the metric [method: error]",
            "    reason: computation failed",
        ],
        "test_judge_fails": [
            "  factual_accuracy errored: JudgeUnreachable: the judge at http://127.0.0.1:1/v1 "
            "cannot be reached (after 0 retries: CouldNotConnect: ConnectError: cannot connect "
            "to 127.0.0.1:1: Connection refused) [method: llm]",
            "    reason: judge call failed",
        ],
        "test_gated_na": [
            "  exact_match = N/A: missing input: expected (needs >= 1) [method: local]",
            "    evidence: {'missing': ['expected']}",
        ],
        "test_threshold_for_a_metric_not_computed": [
            "  rouge has a threshold (0.9) but is not among the metrics this check computes",
        ],
    }
    for name, message in expected.items():
        start = next(i for i, line in enumerate(lines) if re.fullmatch(f"_+ {name} _+", line))
        assert lines[start + 1 : start + 2 + len(message)] == ["assay check failed:", *message]
    assert "PASSED test_gates.py::test_ungated_na" in lines


# ---- a store that cannot be opened ------------------------------------------------------
def test_an_unreachable_postgresql_store_warns_spools_and_hides_the_password(inner):
    result = inner.runpytest_subprocess(*PLAIN, f"--assay-store={UNREACHABLE}")
    spool_dir = inner.path / ".assay-spool"
    head, rows = _spool(spool_dir)
    spool = spool_dir / f"{head['run_id']}.jsonl"
    # before: "--assay-store: cannot open the results store ...", exit 4, no test ran
    _session_went_on(
        result,
        re.escape(
            f"WARNING: the results store could not be written: {SAFE_UNREACHABLE}: "
            'OperationalError: connection failed: connection to server at "127.0.0.1", '
            "port 1 failed: Connection refused"
        )
        + ".*",
        spool,
    )
    result.stdout.re_match_lines(
        [
            re.escape(
                'load them into the store later with: python -c "from assay.pytest_plugin '
                f"import import_spool; import_spool('{spool}', '{SAFE_UNREACHABLE}')\""
            )
        ]
    )
    assert {k: head[k] for k in ("kind", "name", "source", "store")} == {
        "kind": "run",
        "name": None,
        "source": "pytest",
        "store": SAFE_UNREACHABLE,
    }
    assert _outcomes(rows) == FIVE_OUTCOMES
    assert [r["index"] for r in rows] == [0, 1, 2, 3, 4]
    assert rows[0]["sample"] == {
        "id": None,
        "query": None,
        "response": "Paris",
        "expected": "paris",
        "duration": None,
        "tags": {},
    }
    assert rows[0]["results"]["exact_match"]["value"] == 1.0
    assert rows[1]["results"]["exact_match"]["value"] == 0.0
    # the failing test's message quoted the key: the spool has it cut out
    assert "assert '[redacted]' == 'something else'" in rows[3]["error"]
    output = (result.stdout.str() + result.stderr.str()).encode()
    assert PASSWORD.encode() not in output
    spooled = _every_byte(spool_dir)
    assert PASSWORD.encode() not in spooled and API_KEY.encode() not in spooled


@pytest.mark.parametrize("journal", ["wal", "delete"])
def test_a_locked_sqlite_store_warns_and_spools(inner, journal):
    db = inner.path / "results.db"
    if journal == "wal":
        Store(str(db)).close()  # an existing store, as another writer would have it
    else:  # a plain SQLite file: the lock blocks even the store's first pragma
        with sqlite3.connect(db) as plain:
            plain.execute("CREATE TABLE other (x)")
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another process is writing
    try:
        result = inner.runpytest_subprocess(
            *PLAIN, f"--assay-store={db}", "--assay-store-timeout=0.2"
        )
    finally:
        holder.rollback()
        holder.close()
    head, rows = _spool(inner.path / ".assay-spool")
    # before: "results.db is locked by another process (waited about 30 s)", exit 4
    _session_went_on(
        result,
        re.escape(
            f"WARNING: the results store could not be written: sqlite:///{db}: "
            "OperationalError: database is locked"
        ),
        inner.path / ".assay-spool" / f"{head['run_id']}.jsonl",
    )
    assert _outcomes(rows) == FIVE_OUTCOMES
    conn = sqlite3.connect(db)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if journal == "wal":
        assert conn.execute("SELECT COUNT(*) FROM runs").fetchone() == (0,)
    else:
        assert tables == {"other"}
    conn.close()
    assert import_spool(inner.path / ".assay-spool" / f"{head['run_id']}.jsonl", str(db))
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT id, source, status FROM runs").fetchall() == [
        (head["run_id"], "pytest", "finished")
    ]
    rows = conn.execute(
        "SELECT test_name, status FROM test_results ORDER BY sample_index"
    ).fetchall()
    assert [(t.split("::")[1], s) for t, s in rows] == FIVE_OUTCOMES


def test_an_unwritable_sqlite_path_warns_and_spools_where_asked(inner):
    (inner.path / "afile").write_text("a file, not a directory")
    db = inner.path / "afile" / "sub" / "results.db"
    result = inner.runpytest_subprocess(*PLAIN, f"--assay-store={db}", "--assay-spool=kept")
    head, rows = _spool(inner.path / "kept")
    _session_went_on(
        result,
        re.escape(
            f"WARNING: the results store could not be written: sqlite:///{db}: "
            f"FileNotFoundError: the folder {db.parent} does not exist (the results store "
            "creates no folders: create it, or check the path)"
        ),
        inner.path / "kept" / f"{head['run_id']}.jsonl",
    )
    assert _outcomes(rows) == FIVE_OUTCOMES
    assert not (inner.path / ".assay-spool").exists()


def test_a_spool_that_cannot_be_written_says_what_is_lost(inner):
    (inner.path / "afile").write_text("a file, not a directory")
    result = inner.runpytest_subprocess(
        *PLAIN, f"--assay-store={UNREACHABLE}", "--assay-spool=afile/spool"
    )
    result.assert_outcomes(passed=2, failed=2, skipped=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    spool_dir = inner.path / "afile" / "spool"
    result.stdout.re_match_lines(
        [
            re.escape(f"WARNING: the results store could not be written: {SAFE_UNREACHABLE}: ")
            + ".*",
            re.escape("5 of 5 test results are lost: the spool could not be written: ")
            + re.escape(f"{spool_dir}/")
            + r"[0-9a-f]{12}\.jsonl"
            + re.escape(f": NotADirectoryError: [Errno 20] Not a directory: '{spool_dir}'"),
        ]
    )
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


# ---- a store that fails midway ----------------------------------------------------------
MIDWAY = """
import sqlite3

_held = []

def test_first(assay):
    assay.check(response="Paris", expected="Paris", metrics=["exact_match"])

def test_locks_the_store():
    conn = sqlite3.connect({db!r}, isolation_level=None)
    conn.execute("BEGIN EXCLUSIVE")  # held until the session ends
    _held.append(conn)

def test_after(assay):
    assay.check(response="Lyon", expected="Paris", metrics=["exact_match"])
"""


def test_a_store_that_locks_midway_spools_the_rest_and_loses_nothing(
    pytester, cache_dir, monkeypatch
):
    monkeypatch.setenv("ASSAY_CACHE_DIR", cache_dir)
    db = pytester.path / "results.db"
    pytester.makepyfile(test_midway=MIDWAY.format(db=str(db)))
    result = pytester.runpytest_subprocess(
        *PLAIN, f"--assay-store={db}", "--assay-store-timeout=0.2", "--assay-run-name=midway"
    )
    result.assert_outcomes(passed=2, failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    head, rows = _spool(pytester.path / ".assay-spool")
    spool = pytester.path / ".assay-spool" / f"{head['run_id']}.jsonl"
    result.stdout.re_match_lines(
        [
            re.escape(
                f"WARNING: the results store could not be written: sqlite:///{db}: "
                "OperationalError: database is locked"
            ),
            re.escape(
                f"the run and the 2 of 3 test results the store did not take are kept in {spool}"
            ),
        ]
    )
    assert (head["name"], head["source"]) == ("midway", "pytest")
    assert [(r["index"], r["test_name"].split("::")[1], r["status"]) for r in rows] == [
        (1, "test_locks_the_store", "passed"),
        (2, "test_after", "failed"),
    ]
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT status FROM runs").fetchall() == [("running",)]
    assert conn.execute("SELECT sample_index FROM test_results").fetchall() == [(0,)]
    conn.close()

    for _ in range(2):  # importing twice adds nothing
        assert import_spool(spool, str(db)) == head["run_id"]
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT name, status FROM runs").fetchall() == [("midway", "finished")]
    stored = conn.execute(
        "SELECT sample_index, test_name, status, response FROM test_results ORDER BY sample_index"
    ).fetchall()
    assert [(i, t.split("::")[1], s, r) for i, t, s, r in stored] == [
        (0, "test_first", "passed", "Paris"),
        (1, "test_locks_the_store", "passed", None),
        (2, "test_after", "failed", "Lyon"),
    ]
    scores = conn.execute(
        "SELECT t.sample_index, s.metric_name, s.metric_value FROM scoring_details s "
        "JOIN test_results t ON t.id = s.test_result_id ORDER BY t.sample_index"
    ).fetchall()
    assert scores == [(0, "exact_match", 1.0), (2, "exact_match", 0.0)]
    checks = conn.execute(
        "SELECT q.check_name, q.passed FROM quality_checks q JOIN test_results t "
        "ON t.id = q.test_result_id WHERE t.sample_index = 2 ORDER BY q.check_name"
    ).fetchall()
    # "Lyon": shorter than 10 characters and no sentence ending
    assert checks == [
        ("ends_properly", 0),
        ("has_minimum_length", 0),
        ("has_no_html_tags", 1),
        ("is_not_empty", 1),
    ]


# ---- a spool loads into the real PostgreSQL ---------------------------------------------
@pytest.mark.postgres
def test_a_spool_loads_into_postgresql(inner):
    psycopg = pytest.importorskip("psycopg")
    with fresh_postgres("assay_spool") as url:
        inner.runpytest_subprocess(*PLAIN, f"--assay-store={UNREACHABLE}")
        head, _ = _spool(inner.path / ".assay-spool")
        import_spool(inner.path / ".assay-spool" / f"{head['run_id']}.jsonl", url)
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT id, source, status FROM runs").fetchall() == [
                (head["run_id"], "pytest", "finished")
            ]
            rows = conn.execute(
                "SELECT test_name, status, error FROM test_results ORDER BY sample_index"
            ).fetchall()
            scores = conn.execute(
                "SELECT metric_name, metric_value FROM scoring_details ORDER BY id"
            ).fetchall()
        assert [(t.split("::")[1], s) for t, s, _ in rows] == FIVE_OUTCOMES
        assert API_KEY not in rows[3][2] and "[redacted]" in rows[3][2]
        assert scores == [("exact_match", 1.0), ("exact_match", 0.0)]
