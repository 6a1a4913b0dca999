"""What a run writes: ``--out`` rows (JSONL, CSV, Parquet) carry the sample's inputs and what
the target said, ``--out-fields`` trims them, the store keeps the contexts, and samples
without an id are named by their line. End to end: a real HTTP target on 127.0.0.1, the
files and the stores (SQLite, PostgreSQL) read back."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from assay.cli import app
from assay.core.sample import Sample
from assay.inputs.read import read_samples
from assay.outputs.sinks import output_row
from assay.store.db import Store
from pg_databases import fresh_postgres
from target_server import TargetServer

QUESTIONS = [
    {"query": "paris", "expected": "Answer: paris"},
    {"id": "q2", "query": "lyon", "expected": "Answer: paris"},
]


@pytest.fixture
def server() -> Iterator[TargetServer]:
    with TargetServer() as srv:
        yield srv


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, env: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{env / 'runs.db'}"
        return
    with fresh_postgres("assay_outputs") as url:
        yield url


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _run_rag(server: TargetServer, data: Path, *more: str) -> str:
    args = ["run", str(data), "--target", f"{server.url}/rag"]
    args += ["--request", '{"question": "{query}"}', "--response-path", "answer"]
    args += ["--contexts-path", "sources[*].text", "-m", "exact_match", *more]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return result.output


def test_run_rows_carry_the_answer_and_contexts_in_every_format(
    server: TargetServer, env: Path, db_url: str
) -> None:
    data = _jsonl(env / "questions.jsonl", QUESTIONS)
    _run_rag(server, data, "--out", "r.jsonl", "--store", "--db", db_url)
    _run_rag(server, data, "--out", "r.csv")
    _run_rag(server, data, "--out", "r.parquet")

    lines = [json.loads(line) for line in (env / "r.jsonl").read_text().splitlines()]
    assert [list(row)[:5] for row in lines] == [
        ["id", "query", "response", "expected", "contexts"]
    ] * 2
    first, second = lines
    assert (first["id"], first["query"], first["response"]) == ("line-1", "paris", "Answer: paris")
    assert first["expected"] == "Answer: paris"
    assert first["contexts"] == ["source about paris", "more"]
    assert (first["target.status"], first["exact_match"]) == ("ok", 1.0)
    assert first["evidence"]["exact_match"]["method"] == "pattern"
    assert (second["id"], second["response"], second["exact_match"]) == ("q2", "Answer: lyon", 0.0)
    assert second["contexts"] == ["source about lyon", "more"]

    csv = pd.read_csv(env / "r.csv")
    assert list(csv["id"]) == ["line-1", "q2"]
    assert list(csv["response"]) == ["Answer: paris", "Answer: lyon"]
    assert [json.loads(c) for c in csv["contexts"]] == [first["contexts"], second["contexts"]]
    assert list(csv["exact_match"]) == [1.0, 0.0]
    assert "evidence" not in csv.columns
    parquet = pd.read_parquet(env / "r.parquet")
    assert list(parquet["query"]) == ["paris", "lyon"]
    assert [list(c) for c in parquet["contexts"]] == [first["contexts"], second["contexts"]]
    assert list(parquet["exact_match"]) == [1.0, 0.0]

    # the store keeps the contexts the target returned, and the ids
    store = Store(db_url)
    [run] = store.runs()
    samples = store.run_detail(run["id"])["samples"]
    assert [s["id"] for s in samples] == ["line-1", "q2"]
    assert [s["response"] for s in samples] == ["Answer: paris", "Answer: lyon"]
    assert [s["contexts"] for s in samples] == [first["contexts"], second["contexts"]]
    store.close()


def test_a_replayed_conversation_keeps_its_turns_in_the_out_file(
    server: TargetServer, env: Path
) -> None:
    chats = [
        {"messages": [{"role": "user", "content": "Hi, I am Lena."}, {"role": "assistant"}]},
        {"messages": [{"role": "user", "content": "Bye."}]},
    ]
    data = _jsonl(env / "chats.jsonl", chats)
    for out in ("c.jsonl", "c.csv", "c.parquet"):
        args = ["run", str(data), "--target", f"openai:{server.url}/v1", "--target-model", "m"]
        result = CliRunner().invoke(app, [*args, "-m", "exact_match", "--out", out])
        assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (env / "c.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == ["line-1", "line-2"]
    said = [[(t["role"], t.get("content")) for t in r["turns"]] for r in rows]
    assert said == [
        [("user", "Hi, I am Lena."), ("assistant", "Answer: Hi, I am Lena.")],
        [("user", "Bye."), ("assistant", "Answer: Bye.")],
    ]
    assert rows[0]["response"] == "Answer: Hi, I am Lena."
    assert rows[0]["turns"][1]["duration"] >= 0
    table = pd.read_csv(env / "c.csv")
    assert list(table["id"]) == ["line-1", "line-2"]
    assert [t["content"] for t in json.loads(table["turns"][1])] == ["Bye.", "Answer: Bye."]
    # each --out file reads back as input: the replies can be scored again without the target
    again = {name: read_samples(env / name) for name in ("c.jsonl", "c.csv", "c.parquet")}
    for name, (samples, errors) in again.items():
        assert errors == [], name
        assert [s.id for s in samples] == ["line-1", "line-2"], name
        assert [s.response for s in samples] == ["Answer: Hi, I am Lena.", "Answer: Bye."]
        assert [[t.content for t in s.turns or []] for s in samples] == [
            ["Hi, I am Lena.", "Answer: Hi, I am Lena."],
            ["Bye.", "Answer: Bye."],
        ], name


def test_out_fields_trims_the_rows_in_the_order_given(server: TargetServer, env: Path) -> None:
    data = _jsonl(env / "questions.jsonl", QUESTIONS)
    fields = "id,response,exact_match,contexts"
    _run_rag(server, data, "--out", "t.jsonl", "--out-fields", fields)
    _run_rag(server, data, "--out", "t.csv", "--out-fields", fields)
    said = _run_rag(server, data, "--out", "e.jsonl", "--out-fields", "evidence,id,tag.none")
    assert "note: --out-fields: no sample had tag.none: written as null" in said
    rows = [json.loads(line) for line in (env / "t.jsonl").read_text().splitlines()]
    assert rows == [
        {
            "id": "line-1",
            "response": "Answer: paris",
            "exact_match": 1.0,
            "contexts": ["source about paris", "more"],
        },
        {
            "id": "q2",
            "response": "Answer: lyon",
            "exact_match": 0.0,
            "contexts": ["source about lyon", "more"],
        },
    ]
    table = pd.read_csv(env / "t.csv")
    assert list(table.columns) == ["id", "response", "exact_match", "contexts"]
    assert list(table["response"]) == ["Answer: paris", "Answer: lyon"]
    # evidence where named (last); a tag no sample has is null
    first = json.loads((env / "e.jsonl").read_text().splitlines()[0])
    assert list(first) == ["id", "tag.none", "evidence"]
    assert first["tag.none"] is None
    assert list(first["evidence"]) == ["exact_match"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--out", "x.jsonl", "--out-fields", "id,respons"],
            "--out-fields: unknown field 'respons'; valid: id, query, response, expected, "
            "contexts, turns, trace, expected_tool_calls, target.status, target.http_status, "
            "target.reason, duration, first_token_time, evidence, exact_match, tag.KEY (a tag) "
            "and METRIC.COMPONENT (a metric's component)",
        ),
        (
            ["--out", "x.csv", "--out-fields", "id,evidence"],
            "--out-fields: unknown field 'evidence' (evidence is written to .jsonl only)",
        ),
        (["--out-fields", "id"], "--out-fields chooses the fields of --out FILE: give --out too"),
        (["--out", "x.jsonl", "--out-fields", " , "], "--out-fields: give field names"),
    ],
)
def test_out_fields_that_cannot_be_written_are_refused_before_scoring(
    env: Path, args: list[str], message: str
) -> None:
    data = _jsonl(env / "d.jsonl", [{"response": "a", "expected": "a"}])
    result = CliRunner().invoke(app, ["evaluate", str(data), "-m", "exact_match", *args])
    assert result.exit_code == 2
    assert message in " ".join(result.output.split())
    assert not (env / "x.jsonl").exists() and not (env / "x.csv").exists()


def test_evaluate_names_id_less_samples_by_line_in_the_out_file_and_the_store(env: Path) -> None:
    rows = [{"response": "a", "expected": "a"}, {"response": "b", "expected": "c"}]
    data = _jsonl(env / "d.jsonl", rows)
    for _ in range(2):  # the same ids on a second run
        args = ["evaluate", str(data), "-m", "exact_match", "--out", "o.jsonl", "--store"]
        result = CliRunner().invoke(app, [*args, "--db", str(env / "s.db")])
        assert result.exit_code == 0, result.output
        written = [json.loads(line) for line in (env / "o.jsonl").read_text().splitlines()]
        assert [(r["id"], r["exact_match"]) for r in written] == [("line-1", 1.0), ("line-2", 0.0)]
    stored = sqlite3.connect(env / "s.db").execute(
        "SELECT sample_id, test_name FROM test_results ORDER BY run_id, sample_index"
    )
    ids = sorted(stored.fetchall())
    assert ids == [("line-1", "line-1")] * 2 + [("line-2", "line-2")] * 2


def test_tool_calls_are_in_the_row_once(tmp_path: Path) -> None:
    """An agent's trace is written as ``trace``; a conversation's tool calls are in its
    ``turns`` and not written again."""
    agent = Sample(
        id="a",
        query="book",
        trace=[{"name": "book_hotel", "arguments": {"nights": 2}}],
        expected_tool_calls=[{"name": "book_hotel", "arguments": {"nights": 2}}],
    )
    row = output_row(agent, {})
    call = {"name": "book_hotel", "arguments": {"nights": 2}, "ok": True, "kind": "tool"}
    assert row == {
        "id": "a",
        "query": "book",
        "trace": [call],
        "expected_tool_calls": [call],
    }
    chat = read_samples(Path(__file__).parent.parent / "examples" / "agent_chats.jsonl")[0][0]
    assert chat.trace  # the conversation's tool calls are its trace
    row = output_row(chat, {})
    assert "trace" not in row
    assert [c["name"] for t in row["turns"] for c in t.get("tool_calls", [])] == [
        c.name for c in chat.trace
    ]


def test_the_dashboard_shows_a_samples_stored_contexts(tmp_path: Path) -> None:
    """The run page's sample view lists the contexts in order, escaped; the API's sample
    holds them."""
    from fastapi.testclient import TestClient

    from assay.server import create_app

    store = Store(str(tmp_path / "d.db"))
    store.start_run("ctx")
    docs = ["Paris is the capital.", "<script>alert(1)</script> is a doc too"]
    sample = Sample(id="line-1", query="capital?", response="Paris", contexts=docs)
    store.record("ctx", 0, sample, {}, status="ungated")
    client = TestClient(create_app(store, token="", allowed_hosts=["testserver"]))
    page = client.get("/runs/ctx")
    assert page.status_code == 200
    assert "<h4>Contexts (2)</h4>" in page.text
    assert '<li class="text context-text">Paris is the capital.</li>' in page.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt; is a doc too" in page.text
    assert "<script>alert(1)" not in page.text
    assert client.get("/api/runs/ctx/samples/0").json()["contexts"] == docs
    store.close()


def test_a_jsonl_line_redacts_known_secrets_in_turns_as_the_store_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tool call that carried a configured key is written with the key cut out (as the
    store keeps turns); the response is written as the application said it."""
    from assay.core.result import MetricResult
    from assay.outputs.sinks import JsonlSink

    secret = "sk-judge-Tt38vRR1secret"
    monkeypatch.setenv("ASSAY_JUDGE_API_KEY", secret)
    turns = [
        {"role": "user", "content": "look it up"},
        {
            "role": "assistant",
            "tool_calls": [{"name": "search", "arguments": {"auth": f"key {secret}"}}],
        },
        {"role": "assistant", "content": "found"},
    ]
    sample = Sample(id="s", response="found", turns=turns)
    results = {"m": MetricResult("m", 1.0)}
    sink = JsonlSink(tmp_path / "o.jsonl")
    sink.write(output_row(sample, results), sample, results)
    sink.close()
    line = json.loads((tmp_path / "o.jsonl").read_text())
    assert secret not in json.dumps(line)
    assert line["turns"][1]["tool_calls"][0]["arguments"] == {"auth": "key [redacted]"}
    assert (line["response"], line["m"]) == ("found", 1.0)
