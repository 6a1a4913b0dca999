"""Runs you can trust under faults: ``--resume`` never mixes a different dataset or setting
into a run and reports the whole run; several processes can open one new store at once;
output that cannot be written ends with one line and exit 2; an unsupported store URL is
refused without echoing its password. Real SQLite files, the real PostgreSQL server,
real subprocesses where the fault is one of the process (pipes, concurrent migrations)."""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from assay.cli import app
from assay.core.result import MetricResult
from assay.core.sample import Sample
from assay.metrics.registry import metric_class
from assay.store.db import Store
from fakes import interrupt_on_call
from pg_databases import fresh_postgres
from store_revisions import head_revision, stored_revisions

runner = CliRunner()


def _lines(path: Path, rows: list[dict]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def _summary(result) -> dict:
    payload = json.loads(result.stdout[result.stdout.index("{") :])
    (metric,) = payload["metrics"]
    return {"samples": payload["samples"], **metric}


def _oneline(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture
def pg_url():
    """A fresh PostgreSQL database (dropped after the test), as a plain URL."""
    with fresh_postgres("assay_trust") as url:
        yield url


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def db_url(request, env):
    if request.param == "sqlite":
        return f"sqlite:///{env / 'runs.db'}"
    return request.getfixturevalue("pg_url")


def _stored(url: str, run_id: str) -> list[tuple]:
    """(sample index, value, error) of every stored score of a run, read back directly."""
    store = Store(url)
    try:
        with store.engine.connect() as conn:
            rows = conn.exec_driver_sql(
                "SELECT t.sample_index, s.metric_value, s.error FROM test_results t "
                "JOIN scoring_details s ON s.test_result_id = t.id "
                f"WHERE t.run_id = '{run_id}' ORDER BY t.sample_index"
            ).fetchall()
    finally:
        store.close()
    return [tuple(r) for r in rows]


# ---- resume: the fingerprint ----------------------------------------------------------


def test_resume_refuses_another_dataset_metric_set_setting_or_judge(env, monkeypatch):
    monkeypatch.setenv("ASSAY_JUDGE_API_KEY", "sk-trust-runs-0123456789")
    rows = [{"id": f"s{i}", "response": "a", "expected": "a"} for i in range(3)]
    data = _lines(env / "d.jsonl", rows)
    db = env / "runs.db"
    base = ["evaluate", str(data), "-m", "exact_match", "--db", str(db), "--format", "json"]
    first = runner.invoke(app, [*base, "--no-judge"])
    assert first.exit_code == 0, first.output
    run_id = json.loads(first.stdout)["run_id"]
    old_sha = hashlib.sha256(data.read_bytes()).hexdigest()

    # the same file with one answer changed
    _lines(data, [*rows[:2], {"id": "s2", "response": "b", "expected": "a"}])
    new_sha = hashlib.sha256(data.read_bytes()).hexdigest()
    other_data = runner.invoke(app, [*base, "--no-judge", "--resume", run_id])
    assert other_data.exit_code == 2
    assert _oneline(other_data.output) == (
        f"error: run {run_id} was scored on a different dataset (sha256 {old_sha[:12]}… vs "
        f"{new_sha[:12]}…); resuming it would mix two kinds of results in one run. Resume "
        "with the same dataset and options, or start a new run (leave out --resume)"
    )
    _lines(data, rows)

    other_metrics = runner.invoke(app, [*base, "-m", "rouge", "--no-judge", "--resume", run_id])
    assert other_metrics.exit_code == 2
    assert f"run {run_id} was scored with other metrics (exact_match vs exact_match, rouge);" in (
        other_metrics.output
    )
    other_threshold = runner.invoke(
        app, [*base, "--no-judge", "--threshold", "exact_match=0.5", "--resume", run_id]
    )
    assert other_threshold.exit_code == 2
    assert (
        f"run {run_id} was scored with other settings (thresholds {{}} vs "
        "{'exact_match': 0.5});" in other_threshold.output
    )
    judged = [
        *("--judge-url", "http://judge:hunter2@127.0.0.1:9/v1?api-key=hunter3"),
        *("--judge-model", "grader-2"),
    ]
    other_judge = runner.invoke(app, [*base, *judged, "--resume", run_id])
    assert other_judge.exit_code == 2
    assert (
        f"run {run_id} was scored with another judge (no judge vs model grader-2 at "
        "http://127.0.0.1:9/v1);" in other_judge.output
    )
    assert "hunter2" not in other_judge.output and "hunter3" not in other_judge.output

    # nothing was added by the refused resumes; the same dataset and options resume
    assert len(_stored(f"sqlite:///{db}", run_id)) == 3
    same = runner.invoke(app, [*base, "--no-judge", "--resume", run_id])
    assert same.exit_code == 0, same.output
    assert "resuming run " + run_id + ": 3 samples already stored, 0 to go" in same.output
    assert _summary(same)["samples"] == 3 and _summary(same)["mean"] == 1.0


def test_the_fingerprint_keeps_no_credential(env, monkeypatch):
    monkeypatch.setenv("ASSAY_JUDGE_API_KEY", "sk-trust-runs-0123456789")
    data = _lines(env / "d.jsonl", [{"response": "a", "expected": "a"}])
    result = runner.invoke(
        app,
        [
            *("evaluate", str(data), "-m", "exact_match", "--store", "--format", "json"),
            *("--judge-url", "http://judge:hunter2@127.0.0.1:9/v1?key=hunter3"),
            *("--judge-model", "grader-1", "--db", str(env / "runs.db")),
        ],
    )
    assert result.exit_code == 0, result.output
    conn = sqlite3.connect(env / "runs.db")
    (stored,) = conn.execute("SELECT fingerprint FROM runs").fetchone()
    fingerprint = json.loads(stored)
    assert fingerprint["judge"] == {"model": "grader-1", "base_url": "http://127.0.0.1:9/v1"}
    assert fingerprint["metrics"] == ["exact_match"]
    assert fingerprint["dataset_sha256"] == hashlib.sha256(data.read_bytes()).hexdigest()
    assert not {"cache_dir", "batch_size", "chunk_size", "judge_api_key"} & set(
        fingerprint["parameters"]
    )
    assert "hunter3" not in stored  # a key in the query string is not kept either
    conn.close()
    everything = b"".join(p.read_bytes() for p in env.glob("runs.db*"))
    for secret in (b"hunter2", b"sk-trust-runs-0123456789"):
        assert secret not in everything


def test_a_run_without_a_fingerprint_is_not_resumed(env):
    data = _lines(env / "d.jsonl", [{"response": "a", "expected": "a"}])
    store = Store(str(env / "runs.db"))
    store.start_run("legacy", metrics=["exact_match"])  # as an older Assay stored it
    store.close()
    result = runner.invoke(
        app,
        [
            *("evaluate", str(data), "-m", "exact_match"),
            *("--db", str(env / "runs.db"), "--resume", "legacy"),
        ],
    )
    assert result.exit_code == 2
    assert _oneline(result.output) == (
        "error: run legacy has no record of the dataset and settings it was scored on (it "
        "was not stored by `assay evaluate`, or by an older Assay), so resuming it could mix "
        "other data into it; start a new run (leave out --resume)"
    )


# ---- resume: errored samples again, the whole run reported and gated ------------------


def test_resume_scores_errored_samples_again_and_gates_the_whole_run(db_url, env, monkeypatch):
    cls = metric_class("exact_match")
    real = cls.compute

    def flaky(self, sample, res):
        if sample.id.startswith("x"):
            raise RuntimeError("backend down")
        return real(self, sample, res)

    # s0 and s1 match; x2 and x3 do not, and error on the first run
    rows = [
        {"id": "s0", "response": "a", "expected": "a"},
        {"id": "s1", "response": "b", "expected": "b"},
        {"id": "x2", "response": "c", "expected": "no"},
        {"id": "x3", "response": "d", "expected": "no"},
    ]
    data = _lines(env / "d.jsonl", rows)
    out = env / "o.jsonl"
    args = ["evaluate", str(data), "-m", "exact_match", "--db", db_url, "--format", "json"]
    args += ["-o", str(out), "--fail-under", "exact_match=0.5"]
    monkeypatch.setattr(cls, "compute", flaky)
    first = runner.invoke(app, args)
    assert first.exit_code == 3, first.output  # 2 errored samples
    run_id = json.loads(first.stdout[first.stdout.index("{") :])["run_id"]
    assert _stored(db_url, run_id) == [
        (0, 1.0, None),
        (1, 1.0, None),
        (2, None, "RuntimeError: backend down"),
        (3, None, "RuntimeError: backend down"),
    ]

    monkeypatch.setattr(cls, "compute", real)
    resumed = runner.invoke(app, [*args, "--resume", run_id])
    # the two re-scored samples alone have mean 0.0 (< 0.5); the whole run has 0.5
    assert resumed.exit_code == 0, resumed.output
    assert resumed.stderr.splitlines() == [
        f"resuming run {run_id}: 2 samples already stored, 2 to go (2 errored before)",
        f"note: {out} keeps the lines of the 2 samples that errored; their new lines follow",
    ]
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["id"], r["exact_match"]) for r in lines] == [
        ("s0", 1.0),
        ("s1", 1.0),
        ("x2", None),
        ("x3", None),
        ("x2", 0.0),
        ("x3", 0.0),
    ]
    summary = _summary(resumed)
    assert (summary["samples"], summary["n"], summary["n_error"]) == (4, 4, 0)
    assert (summary["mean"], summary["pass_rate"]) == (0.5, 0.5)
    # the error rows were replaced, not duplicated
    assert _stored(db_url, run_id) == [
        (0, 1.0, None),
        (1, 1.0, None),
        (2, 0.0, None),
        (3, 0.0, None),
    ]
    store = Store(db_url)
    (run,) = store.runs()
    store.close()
    assert (run["status"], run["samples"]) == ("finished", 4)

    # a gate the whole run fails, over values read back from the store
    gated = runner.invoke(app, [*args[:-2], "--fail-under", "exact_match=0.6", "--resume", run_id])
    assert gated.exit_code == 1
    assert "resuming run " + run_id + ": 4 samples already stored, 0 to go" in gated.output
    assert "exact_match: mean 0.5000 < 0.6" in gated.output


def test_the_table_after_resume_counts_every_sample(env):
    rows = [{"id": f"s{i}", "response": "a", "expected": "a" if i < 3 else "b"} for i in range(4)]
    data = _lines(env / "d.jsonl", rows)
    db = str(env / "runs.db")
    first = runner.invoke(app, ["evaluate", str(data), "-m", "exact_match", "--db", db])
    run_id = first.output.split("(run ")[1].split(")")[0]
    resumed = runner.invoke(
        app, ["evaluate", str(data), "-m", "exact_match", "--db", db, "--resume", run_id]
    )
    assert resumed.exit_code == 0, resumed.output
    assert "4 samples, 1 metrics" in resumed.stdout
    row = next(line for line in resumed.stdout.splitlines() if "exact_match" in line)
    # n, N/A, errors, mean, median, CI, pass rate: 3 of 4 match
    assert [c.strip() for c in row.split("│")[2:6]] == ["4", "0", "0", "0.750"]
    assert "75% (≥1)" in row


# ---- resume: the interrupt names the command that resumes -----------------------------


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def test_an_interrupt_prints_the_exact_command_that_resumes(backend, env, monkeypatch, request):
    if backend == "sqlite":
        url = f"sqlite:///{env / 'runs.db'}"
        shown = url
    else:  # trust auth: the password is not checked, only never shown
        url = request.getfixturevalue("pg_url").replace("postgres@", "postgres:hunter2@")
        shown = shlex.quote(url.replace("hunter2", "[redacted]"))
    real = interrupt_on_call(monkeypatch, "exact_match", 3)
    rows = [{"id": f"s{i}", "response": "a", "expected": "a" if i % 2 else "b"} for i in range(5)]
    data = _lines(env / "d.jsonl", rows)
    args = ["evaluate", str(data), "-m", "exact_match", "--chunk-size", "1", "-q"]
    args += ["--store", "--db", url, "--fail-under", "exact_match=0.4"]
    result = runner.invoke(app, args)
    assert result.exit_code == 130
    run_id = result.output.split("--resume ")[1].split()[0]
    lines = result.stderr.splitlines()
    assert lines == [
        f"interrupted; 2 finished samples are stored; resume with --resume {run_id}",
        f"to resume: assay evaluate {data} --metric exact_match --fail-under exact_match=0.4 "
        f"--chunk-size 1 --store --db {shown} --quiet --resume {run_id}",
    ]
    assert "hunter2" not in result.output

    monkeypatch.setattr(metric_class("exact_match"), "compute_batch", real)
    command = shlex.split(lines[1].removeprefix("to resume: "))
    assert command[:2] == ["assay", "evaluate"]
    again = [w.replace("[redacted]", "hunter2") for w in command[1:]]
    resumed = runner.invoke(app, [*again, "--format", "json"])
    assert resumed.exit_code == 0, resumed.output
    assert f"resuming run {run_id}: 2 samples already stored, 3 to go" in resumed.output
    summary = _summary(resumed)  # s1 and s3 match: 2 of 5 = 0.4, the gate's bound
    assert (summary["samples"], summary["n"], summary["mean"]) == (5, 5, 0.4)
    assert _stored(url, run_id) == [
        (0, 0.0, None),
        (1, 1.0, None),
        (2, 0.0, None),
        (3, 1.0, None),
        (4, 0.0, None),
    ]


# ---- several processes on one new store -----------------------------------------------

# each process holds at the start of the migration until all are there, so that they all
# find the database new: the race that made all but one fail before migrations were
# serialised
_AT_ONCE = """
import sys, time
from pathlib import Path
import assay.store.db as db
from assay.cli import app

real = db.Store.migrate
me, n = sys.argv[1], int(sys.argv[2])

def migrate(self):
    Path(f"ready-{me}").touch()
    deadline = time.time() + 60
    while len(list(Path().glob("ready-*"))) < n and time.time() < deadline:
        time.sleep(0.005)
    real(self)

db.Store.migrate = migrate
sys.argv = ["assay", *sys.argv[3:]]
app()
"""


def _at_once(env: Path, url: str, n: int) -> list[subprocess.CompletedProcess]:
    data = _lines(env / "d.jsonl", [{"response": "a", "expected": "a"}, {"response": "b"}])
    command = ["evaluate", str(data), "-m", "exact_match", "--store", "--db", url, "-q"]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _AT_ONCE, str(i), str(n), *command],
            cwd=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "ASSAY_CACHE_DIR": str(env / "cache")},
        )
        for i in range(n)
    ]
    done = []
    for proc in procs:
        out, err = proc.communicate(timeout=240)
        done.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return done


def test_four_processes_on_one_new_sqlite_file_all_succeed(env):
    results = _at_once(env, f"sqlite:///{env / 'new.db'}", 4)
    assert [r.returncode for r in results] == [0, 0, 0, 0], [r.stderr for r in results]
    conn = sqlite3.connect(env / "new.db")
    runs = conn.execute("SELECT status, COUNT(*) FROM runs GROUP BY status").fetchall()
    assert runs == [("finished", 4)]
    assert conn.execute("SELECT COUNT(*) FROM test_results").fetchone() == (8,)
    conn.close()
    assert stored_revisions(f"sqlite:///{env / 'new.db'}") == [head_revision()]


@pytest.mark.postgres
def test_four_processes_on_one_new_postgresql_database_all_succeed(env, pg_url):
    results = _at_once(env, pg_url, 4)
    assert [r.returncode for r in results] == [0, 0, 0, 0], [r.stderr for r in results]
    store = Store(pg_url)
    runs = store.runs()
    store.close()
    assert sorted((r["status"], r["samples"]) for r in runs) == [("finished", 2)] * 4


def test_a_store_already_migrated_opens_while_another_process_writes(env):
    Store(str(env / "busy.db")).close()
    writer = sqlite3.connect(env / "busy.db", isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # holds the write lock
    try:
        store = Store(str(env / "busy.db"))  # reads the revision only: no lock needed
        assert store.runs() == []
        store.close()
    finally:
        writer.execute("ROLLBACK")
        writer.close()


# ---- output that cannot be written ----------------------------------------------------


def test_a_full_disk_under_out_exits_2_and_the_store_keeps_every_sample(env):
    data = _lines(
        env / "d.jsonl", [{"id": f"s{i}", "response": "a", "expected": "a"} for i in range(3)]
    )
    out = env / "full.jsonl"
    out.symlink_to("/dev/full")
    result = runner.invoke(
        app,
        [
            *("evaluate", str(data), "-m", "exact_match", "-o", str(out), "--chunk-size", "1"),
            *("--store", "--db", str(env / "runs.db"), "--format", "json"),
        ],
    )
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert result.stderr.splitlines() == [
        f"error: writing {out} failed: No space left on device; scoring goes on, every "
        "sample still goes to the results store",
        f"error: some results were not saved to {out}; the results store holds every sample",
    ]
    run_id = json.loads(result.stdout)["run_id"]
    assert _stored(f"sqlite:///{env / 'runs.db'}", run_id) == [
        (0, 1.0, None),
        (1, 1.0, None),
        (2, 1.0, None),
    ]


def test_a_full_disk_under_a_csv_out_exits_2_with_one_line(env):
    data = _lines(env / "d.jsonl", [{"response": "a", "expected": "a"}])
    out = env / "full.csv"
    out.symlink_to("/dev/full")
    result = runner.invoke(app, ["evaluate", str(data), "-m", "exact_match", "-o", str(out)])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"error: writing {out} failed: No space left on device",
        f"error: some results were not saved to {out}",
    ]


def test_an_out_folder_without_permission_exits_2_before_scoring(env, monkeypatch):
    data = _lines(env / "d.jsonl", [{"response": "a", "expected": "a"}])
    out = env / "locked" / "o.jsonl"
    real_open = Path.open

    def refuse(self, *args, **kwargs):  # root ignores chmod: refuse as the OS would
        if self == out:
            raise PermissionError(13, "Permission denied", str(self))
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", refuse)
    result = runner.invoke(app, ["evaluate", str(data), "-m", "exact_match", "-o", str(out)])
    assert result.exit_code == 2
    assert result.stderr == f"error: {out}: cannot write: Permission denied\n"


_CLI = "from assay.cli import app; app()"  # what the `assay` script runs


def _evaluate_process(env: Path, *extra: str, stdout) -> subprocess.Popen:
    data = _lines(env / "d.jsonl", [{"id": "s0", "response": "a", "expected": "a"}])
    return subprocess.Popen(
        [sys.executable, "-c", _CLI, "evaluate", str(data), "-m", "exact_match", *extra],
        cwd=env,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "ASSAY_CACHE_DIR": str(env / "cache")},
    )


@pytest.mark.parametrize("output_format", ["table", "json"])
def test_a_closed_stdout_pipe_exits_2_with_one_line_and_the_store_keeps_the_run(env, output_format):
    proc = _evaluate_process(
        env, "--format", output_format, "--store", "--db", "runs.db", stdout=subprocess.PIPE
    )
    proc.stdout.close()  # like `assay evaluate ... | head -0`: the reader is gone
    stderr = proc.stderr.read()
    assert proc.wait(timeout=120) == 2
    assert stderr == "error: writing the results to standard output failed: Broken pipe\n"
    conn = sqlite3.connect(env / "runs.db")
    assert conn.execute("SELECT status FROM runs").fetchall() == [("finished",)]
    assert conn.execute("SELECT COUNT(*) FROM test_results").fetchone() == (1,)
    conn.close()


def test_stdout_on_a_full_disk_exits_2_with_one_line(env):
    with open("/dev/full", "w") as full:
        proc = _evaluate_process(env, stdout=full)
        stderr = proc.stderr.read()
    assert proc.wait(timeout=120) == 2
    assert (
        stderr == "error: writing the results to standard output failed: No space left on device\n"
    )


# ---- store URLs ------------------------------------------------------------------------

_SCHEMES = (
    "unsupported database URL scheme 'mysql': the results store is SQLite (sqlite:///PATH, "
    "or a plain file path) or PostgreSQL (postgresql://USER@HOST:PORT/DATABASE)"
)


def test_an_unsupported_store_url_names_the_schemes_and_hides_the_password(env, monkeypatch):
    data = _lines(env / "d.jsonl", [{"response": "a", "expected": "a"}])
    url = "mysql://user:hunter2@db.example/assay"
    result = runner.invoke(app, ["evaluate", str(data), "-m", "exact_match", "--db", url])
    assert result.exit_code == 2
    assert result.output == f"error: the results store cannot be used: {_SCHEMES}\n"
    monkeypatch.setenv("ASSAY_DATABASE_URL", url)
    stored = runner.invoke(app, ["evaluate", str(data), "-m", "exact_match", "--store"])
    assert stored.exit_code == 2 and "hunter2" not in stored.output and _SCHEMES in stored.output
    served = runner.invoke(app, ["serve", "--db", url])
    assert served.exit_code == 2
    assert _oneline(served.output) == f"error: {_SCHEMES}"


def test_an_unreachable_postgresql_url_never_shows_its_password(env):
    data = _lines(env / "d.jsonl", [{"response": "a", "expected": "a"}])
    url = "postgresql://user:hunter2@127.0.0.1:1/assay"
    result = runner.invoke(app, ["evaluate", str(data), "-m", "exact_match", "--db", url])
    assert result.exit_code == 2
    assert "the results store cannot be used: cannot open the results store" in result.output
    assert "postgresql+psycopg://user:[redacted]@127.0.0.1:1/assay" in result.output
    assert "hunter2" not in result.output


def test_store_results_reads_back_what_was_stored(env):
    store = Store(str(env / "r.db"))
    store.start_run("r")
    store.record(
        "r",
        0,
        Sample(id="a"),
        {"m": MetricResult("m", 0.25, details={"label": "OK"}, method="llm", reason="fine")},
        status="passed",
    )
    store.record(
        "r", 1, Sample(id="b"), {"m": MetricResult("m", None, error="boom")}, status="error"
    )
    store.record("r", 2, Sample(id="c"), {}, status="skipped")
    # index 1 errored: it is left out (scored again on resume)
    assert store.stored_results("r") == {
        0: {"m": MetricResult("m", 0.25, details={"label": "OK"}, method="llm", reason="fine")},
        2: {},
    }
    store.record(
        "r", 1, Sample(id="b"), {"m": MetricResult("m", 1.0)}, status="passed", replace=True
    )
    assert store.done_indices("r") == {0, 1, 2}
    with store.engine.connect() as conn:
        counts = conn.exec_driver_sql(
            "SELECT (SELECT COUNT(*) FROM test_results), (SELECT COUNT(*) FROM scoring_details)"
        ).fetchone()
    assert tuple(counts) == (3, 2)
    store.close()
