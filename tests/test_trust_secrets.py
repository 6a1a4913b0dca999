"""Secrets never rest: with distinctive credentials configured, every byte Assay writes
(store, --out files, caches, terminal output, API and dashboard) is searched for them."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from assay.cli import app
from assay.core.redaction import REDACTED, redact, redact_text, redact_url
from assay.server.app import create_app
from assay.store.db import Store
from judge_server import JudgeServer
from pg_databases import fresh_postgres

runner = CliRunner()
RAG = Path(__file__).resolve().parent.parent / "examples" / "rag.jsonl"
SECRETS = {
    "ASSAY_JUDGE_API_KEY": "sk-judge-Zq81kTT4secret",
    "OPENAI_API_KEY": "sk-openai-Wm27pXX9secret",
    "ASSAY_EMBEDDING_API_KEY": "emb-key-Hh55rQQ2secret",
}
URL_PASSWORD = "urlpass-Kk19vBB7secret"


def _leaks(blob: bytes) -> list[str]:
    """The secrets found in ``blob``, as written or as the base64 an HTTP client sends
    for a URL's user:password (Basic authorization)."""
    basic = base64.b64encode(f"assay:{URL_PASSWORD}".encode()).decode()
    return [s for s in [*SECRETS.values(), URL_PASSWORD, basic] if s.encode() in blob]


def _all_bytes(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())


@pytest.fixture
def secret_env(env, monkeypatch):
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("ASSAY_CACHE_DIR", str(env / "cache"))  # a cache of this run only
    monkeypatch.setenv("ASSAY_JUDGE_MAX_RETRIES", "0")
    return env


def _judge_url(server: JudgeServer) -> str:
    return server.url.replace("http://", f"http://assay:{URL_PASSWORD}@")


def _evaluate(server: JudgeServer, db: str, out: Path, *extra: str):
    args = ["evaluate", str(RAG), "-m", "judged_relevance", "-m", "exact_match"]
    args += ["--judge-url", _judge_url(server), "--judge-model", "scripted"]
    args += ["--store", "--db", db, "--out", str(out), "--format", "json", *extra]
    return runner.invoke(app, args)


def _exercise_every_write_path(env: Path, db: str) -> bytes:
    """Runs that write the store, every --out format, both caches and an error path in
    which the judge quotes the request's Authorization header; returns the terminal
    output of all of them."""
    printed = b""
    with JudgeServer() as server:
        for suffix in ("jsonl", "csv", "parquet"):
            result = _evaluate(server, db, env / f"out.{suffix}")
            assert result.exit_code == 0, result.output
            printed += result.output.encode()
        server.echo_auth = True  # 401 quoting "Bearer <key>" back
        result = _evaluate(server, db, env / "errors.jsonl", "--no-cache")
        assert result.exit_code == 2, result.output  # the judge measured nothing
        assert "nothing measured: judge " in result.output
        assert "invalid credentials: Basic [redacted]" in result.output
        printed += result.output.encode()
    return printed


def test_no_secret_in_any_byte_written_with_a_sqlite_store(secret_env):
    db = str(secret_env / "assay.db")
    printed = _exercise_every_write_path(secret_env, db)
    assert _leaks(printed) == []
    store = Store(db)
    try:
        client = TestClient(create_app(store, token=""), base_url="http://localhost")
        pages = [client.get(p) for p in ("/", "/history", "/runs", "/api/runs")]
        run_ids = [r["id"] for r in client.get("/api/runs").json()]
        assert len(run_ids) == 4
        pages += [client.get(f"/runs/{run_id}") for run_id in run_ids]
        pages += [client.get(f"/api/runs/{run_id}") for run_id in run_ids]
        assert all(p.status_code == 200 for p in pages)
        assert _leaks(b"".join(p.content for p in pages)) == []
        # the stored config says what ran, without the credentials
        config = store.engine.connect().exec_driver_sql("SELECT config FROM runs").fetchone()[0]
        snapshot = json.loads(config) if isinstance(config, str) else config
        assert snapshot["judge_api_key"] == REDACTED
        assert snapshot["judge_model"] == "scripted"
        assert snapshot["judge_base_url"].startswith(f"http://assay:{REDACTED}@127.0.0.1:")
    finally:
        store.close()
    written = _all_bytes(secret_env)  # store, WAL, --out files, judge and embedding caches
    assert (secret_env / "cache" / "judge.sqlite").is_file()
    assert _leaks(written) == []


@pytest.mark.postgres
def test_no_secret_in_a_postgresql_store(secret_env):
    psycopg = pytest.importorskip("psycopg")
    with fresh_postgres("assay_secrets") as url:
        _exercise_every_write_path(secret_env, url)
        with psycopg.connect(url) as conn:
            tables = [
                row[0]
                for row in conn.execute(
                    "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
                )
            ]
            assert "runs" in tables and "scoring_details" in tables
            dump = "".join(
                str(row) for table in tables for row in conn.execute(f'SELECT * FROM "{table}"')
            )
        assert _leaks(dump.encode()) == []
        assert "sk-" not in dump


def test_redaction_by_name_by_value_and_in_urls():
    secrets = ["abcdef123456"]
    data = {
        "judge_api_key": "whatever",
        "password": "pw",
        "Authorization": "Bearer x",
        "nested": [{"url": "postgresql://bob:hunter22@db:5432/x", "note": "key abcdef123456"}],
        "model": "gpt",
        "empty_token": None,
    }
    assert redact(data, secrets) == {
        "judge_api_key": REDACTED,
        "password": REDACTED,
        "Authorization": REDACTED,
        "nested": [{"url": f"postgresql://bob:{REDACTED}@db:5432/x", "note": f"key {REDACTED}"}],
        "model": "gpt",
        "empty_token": None,
    }
    # evidence keeps the user's own field names ("key" of a JSON document)
    assert redact({"key": "user.name"}, secrets, by_name=False) == {"key": "user.name"}
    assert redact_text("Authorization: Bearer sk-1234567890", []) == (
        f"Authorization: Bearer {REDACTED}"
    )
    assert redact_url("https://host/v1") == "https://host/v1"
    assert redact_url("https://u@host/v1") == "https://u@host/v1"


def test_bearer_and_basic_credentials_are_redacted_in_any_case():
    """The text is searched for bearer tokens only when it holds "ba" or "bea" lower-cased;
    every spelling the case-blind pattern matches does (the long s of "baſic" included)."""
    token = "dXNlcjpwYXNzd29yZA=="
    for word in ("Bearer", "BEARER", "bEaReR", "basic", "BASIC", "baſic"):
        assert redact_text(f"sent {word} {token} back", []) == f"sent {word} {REDACTED} back"
    assert redact_text(f"no credential {token} here", []) == f"no credential {token} here"
    assert redact_text("see ?token=t0k3n and a://u:pw@h", []) == (
        f"see ?token={REDACTED} and a://u:{REDACTED}@h"
    )


def test_a_secret_set_after_the_first_result_is_cut_from_the_next_results_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from assay.core.redaction import known_secrets
    from assay.core.result import MetricResult

    monkeypatch.delenv("LATE_JUDGE_TOKEN", raising=False)
    reason = "judge said: late-Qq4secret"
    assert MetricResult("m", None, reason=reason).reason == reason
    monkeypatch.setenv("LATE_JUDGE_TOKEN", "late-Qq4secret")
    assert MetricResult("m", None, reason=reason).reason == f"judge said: {REDACTED}"
    listed = known_secrets()
    listed.clear()  # the caller's copy: the next call lists the secret again
    assert "late-Qq4secret" in known_secrets()


def test_credential_query_parameters_in_urls_are_redacted_and_others_kept():
    url = "https://judge.example/v1?api-version=2024&key=AIza123&access_token=t0k&x=1#top"
    assert redact_url(url) == (
        f"https://judge.example/v1?api-version=2024&key={REDACTED}&access_token={REDACTED}&x=1#top"
    )
    assert redact_text(f"calling {url} failed", []) == f"calling {redact_url(url)} failed"


def test_a_secret_set_or_changed_in_the_environment_is_known_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The environment's secrets are read once and kept while nothing changes (a scan per
    written sample cost about 200 µs); a variable set, changed or removed afterwards, or
    a secret registered, is seen by the next call."""
    from assay.core.redaction import known_secrets, register_secret

    monkeypatch.delenv("LATE_API_KEY", raising=False)
    before = known_secrets()
    assert known_secrets() == before  # nothing changed: the same list
    monkeypatch.setenv("LATE_API_KEY", "late-Vv8secret")
    assert "late-Vv8secret" in known_secrets()
    monkeypatch.setenv("LATE_API_KEY", "later-Ww9secret")
    secrets = known_secrets()
    assert "later-Ww9secret" in secrets and "late-Vv8secret" not in secrets
    monkeypatch.delenv("LATE_API_KEY")
    assert "later-Ww9secret" not in known_secrets()
    register_secret("registered-Xx0secret")
    assert "registered-Xx0secret" in known_secrets()
