"""Smaller traps in what a run reports and where it is kept: a run id shown for a run
that was not stored (``assay compare`` rejected it), the count of a replayed
conversation's calls ("1 calls" for 2 requests), a store path in a missing folder (the
folders were made), and ``create_app`` given a path (500 on every request). The target is
a real loopback server (tests/target_server.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from assay.cli import app
from target_server import TargetServer


def flat(text: str) -> str:
    return " ".join(text.split())


def test_a_run_not_stored_shows_no_run_id_and_a_stored_one_shows_one_compare_accepts(
    env: Path,
) -> None:
    data = env / "d.jsonl"
    data.write_text(json.dumps({"id": "a", "response": "x", "expected": "x"}) + "\n")
    args = ["evaluate", str(data), "-m", "exact_match"]
    table = CliRunner().invoke(app, args)
    assert table.exit_code == 0, table.output
    assert "(not stored: --store keeps it)" in flat(table.output)
    assert "(run " not in table.output
    as_json = CliRunner().invoke(app, [*args, "--format", "json"])
    payload = json.loads(as_json.stdout)
    assert (payload["run_id"], payload["stored"]) == (None, False)

    db = str(env / "runs.db")
    ids = []
    for _ in range(2):
        stored = CliRunner().invoke(app, [*args, "--db", db, "--format", "json"])
        payload = json.loads(stored.stdout)
        assert payload["stored"] is True
        ids.append(payload["run_id"])
    compared = CliRunner().invoke(app, ["compare", *ids, "--db", db, "--format", "json"])
    assert compared.exit_code == 0, compared.output


def test_a_replayed_conversation_counts_its_requests(env: Path) -> None:
    """Two user turns are two requests: "2 calls for 1 sample (1 ok)" (it said "1
    calls"); one sample, one request: "1 call (1 ok)"."""
    turns = [{"role": "user", "content": "Hello"}, {"role": "user", "content": "And then?"}]
    chat, single = env / "chat.jsonl", env / "one.jsonl"
    chat.write_text(json.dumps({"id": "c", "turns": turns}) + "\n")
    single.write_text(json.dumps({"id": "q", "query": "Hello"}) + "\n")
    with TargetServer() as server:
        target = ["--target", f"openai:{server.url}/v1", "--target-model", "m"]
        replayed = CliRunner().invoke(app, ["run", str(chat), "-m", "exact_match", *target])
        requests = len(server.requests)
        one = CliRunner().invoke(app, ["run", str(single), "-m", "exact_match", *target])
        url = server.url
    assert requests == 2
    assert f"target openai:{url}/v1 (model m): 2 calls for 1 sample (1 ok)" in flat(replayed.output)
    assert f"target openai:{url}/v1 (model m): 1 call (1 ok)" in flat(one.output)


def test_a_conversation_stopped_by_a_failed_turn_counts_the_turns_before_it(env: Path) -> None:
    """The second turn is refused with 400: two requests were sent, not one, and the
    run, whose only sample failed, measured nothing (exit 2, one line)."""
    turns = [{"role": "user", "content": "Hello"}, {"role": "user", "content": "And then?"}]
    chat = env / "chat.jsonl"
    chat.write_text(json.dumps({"id": "c", "turns": turns}) + "\n")
    with TargetServer() as server:
        server.script = [None, ("status", 400, '{"error": "no"}', {})]  # type: ignore[list-item]
        target = ["--target", f"openai:{server.url}/v1", "--target-model", "m"]
        result = CliRunner().invoke(app, ["run", str(chat), "-m", "exact_match", *target])
        url = server.url
    said = flat(result.output)
    assert result.exit_code == 2, result.output
    assert f"target openai:{url}/v1 (model m): 2 calls for 1 sample (1 error)" in said
    assert (
        f"nothing measured: target openai:{url}/v1 (model m): every sample's call failed "
        "(1 sample, 2 calls); first: turn 2: "
    ) in said


def test_assay_evaluate_refuses_a_store_in_a_missing_folder_and_makes_none(env: Path) -> None:
    data = env / "d.jsonl"
    data.write_text(json.dumps({"id": "a", "response": "x", "expected": "x"}) + "\n")
    db = env / "nonexistent" / "dir" / "x.db"
    result = CliRunner().invoke(app, ["evaluate", str(data), "-m", "exact_match", "--db", str(db)])
    assert result.exit_code == 2
    assert flat(result.output) == (
        f"error: the results store cannot be used: cannot open the results store "
        f"sqlite:///{db}: the folder {db.parent} does not exist (the results store creates "
        "no folders: create it, or check the path)"
    )
    assert not (env / "nonexistent").exists()


def test_create_app_opens_a_path_or_url_and_refuses_anything_else(
    env: Path,
) -> None:
    """create_app("assay.db") was taken as the store and every request answered 500."""
    from fastapi.testclient import TestClient

    from assay.server.app import create_app
    from assay.store.db import StoreError

    for store in ("runs.db", env / "runs2.db", f"sqlite:///{env / 'runs3.db'}"):
        client = TestClient(create_app(store, token=""), base_url="http://localhost")
        response = client.get("/api/runs")
        assert (response.status_code, response.json()) == (200, [])
    assert {p.name for p in env.glob("runs*.db")} == {"runs.db", "runs2.db", "runs3.db"}
    with pytest.raises(TypeError, match="store must be a Store, a path or a database URL, not int"):
        create_app(42)  # type: ignore[arg-type]
    with pytest.raises(StoreError, match="unsupported database URL scheme 'mysql'"):
        create_app("mysql://u@h/db")
