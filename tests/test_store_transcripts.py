"""A sample's conversation turns, agent trace and reference tool calls in the store
(revision 0006), on a real SQLite file and on the real PostgreSQL server."""

from __future__ import annotations

from pathlib import Path

import pytest

from assay.core.result import MetricResult
from assay.core.sample import Sample
from assay.store.db import Store
from assay.store.transcript import MAX_STORED_CHARS, MAX_STORED_ITEMS
from pg_databases import fresh_postgres
from store_revisions import head_revision, store_at_revision, stored_revisions

SECRET = "sk-test-secret-0123456789"


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store(request, tmp_path, monkeypatch):
    monkeypatch.setenv("ASSAY_TEST_API_KEY", SECRET)  # a credential-named variable
    if request.param == "sqlite":
        s = Store(str(tmp_path / "assay.db"))
        yield s
        s.close()
    else:
        with fresh_postgres("assay_transcripts") as url:
            s = Store(url)
            yield s
            s.close()


CHAT = [
    {"role": "system", "content": "You are a travel agent."},
    {"role": "user", "content": f"Book Paris. My key is {SECRET}"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "book", "arguments": '{"city": "Paris", "nights": 2}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "booked\x00#42"},
    {"role": "assistant", "content": "Done: booking #42."},
]


def test_turns_trace_and_reference_calls_are_stored_as_dumped_and_redacted(store):
    sample = Sample(
        id="c1",
        turns=CHAT,
        expected_tool_calls=[{"name": "book", "arguments": {"city": "Paris", "nights": 2}}],
    )
    store.start_run("r")
    store.record("r", 0, sample, {"exact_match": MetricResult("exact_match", 1.0)}, status="passed")
    store.record("r", 1, Sample(id="plain", response="x"), {}, status="passed")
    got = store.sample_detail("r", 0)
    # the tool's result holds a NUL: PostgreSQL JSON cannot, so it becomes U+FFFD there
    result = "booked\x00#42" if store.dialect == "sqlite" else "booked\ufffd#42"
    call = {"name": "book", "arguments": {"city": "Paris", "nights": 2}, "ok": True}
    call |= {"kind": "tool", "call_id": "call_1"}
    assert got["turns"] == [
        {"role": "system", "content": "You are a travel agent."},
        {"role": "user", "content": "Book Paris. My key is [redacted]"},
        {"role": "assistant", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": result},
        {"role": "assistant", "content": "Done: booking #42."},
    ]
    # the trace comes from the turns' tool calls, each with its tool message's result
    assert got["trace"] == [{**call, "result": result}]
    assert got["expected_tool_calls"] == [
        {"name": "book", "arguments": {"city": "Paris", "nights": 2}, "ok": True, "kind": "tool"}
    ]
    assert got["scores"]["exact_match"]["value"] == 1.0
    plain = store.run_detail("r")["samples"][1]
    assert (plain["turns"], plain["trace"], plain["expected_tool_calls"]) == (None, None, None)
    assert store.sample_detail("r", 2) is None
    assert store.sample_detail("no-such-run", 0) is None


def test_long_turns_and_many_steps_are_cut_with_a_marker(store):
    long_text = "a" * (MAX_STORED_CHARS + 5)
    turns = [{"role": "user", "content": long_text}] + [
        {"role": "assistant", "content": f"t{i}"} for i in range(MAX_STORED_ITEMS)
    ]
    steps = [{"name": "search", "arguments": {"q": long_text}}] * 3
    store.start_run("r")
    store.record("r", 0, Sample(turns=turns, trace=steps), {}, status="passed")
    got = store.sample_detail("r", 0)
    cut = "a" * MAX_STORED_CHARS + "… [5 more characters not stored]"
    # 1,001 turns: the first 1,000 kept, then one item naming how many were left out
    assert len(got["turns"]) == MAX_STORED_ITEMS + 1
    assert got["turns"][0] == {"role": "user", "content": cut}
    assert got["turns"][MAX_STORED_ITEMS - 1] == {"role": "assistant", "content": "t998"}
    assert got["turns"][-1] == {"omitted": 1}
    assert (
        got["trace"]
        == [{"name": "search", "arguments": {"q": cut}, "ok": True, "kind": "tool"}] * 3
    )


def test_a_resumed_run_replaces_the_stored_trace(store):
    store.start_run("r")
    first = Sample(id="a", trace=[{"name": "search", "ok": False, "error": "timeout"}])
    store.record("r", 0, first, {"m": MetricResult("m", None, error="boom")}, status="error")
    again = Sample(id="a", trace=[{"name": "search", "latency": 0.25}])
    store.record("r", 0, again, {"m": MetricResult("m", 1.0)}, status="passed", replace=True)
    samples = store.run_detail("r")["samples"]
    assert len(samples) == 1
    assert samples[0]["trace"] == [{"name": "search", "ok": True, "latency": 0.25, "kind": "tool"}]
    assert samples[0]["status"] == "passed"


def test_revision_0006_adds_the_columns_to_an_existing_store(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    store_at_revision(
        path,
        "0005",
        "INSERT INTO test_results (run_id, sample_index, test_name, status, timestamp, "
        "query, tags) VALUES ('old', 0, 't', 'passed', '2026-11-24 10:00:00', 'q?', '{}')",
    )
    store = Store(str(path))  # upgrades to the newest revision on open
    old = store.sample_detail("old", 0)
    assert (old["query"], old["turns"], old["trace"], old["expected_tool_calls"]) == (
        "q?",
        None,
        None,
        None,
    )
    store.start_run("new")
    store.record("new", 0, Sample(turns=[{"role": "user", "content": "hi"}]), {}, status="passed")
    assert store.sample_detail("new", 0)["turns"] == [{"role": "user", "content": "hi"}]
    store.close()
    assert stored_revisions(f"sqlite:///{path}") == [head_revision()]


def test_the_recorder_stores_the_turns_of_what_the_runner_scored(store):
    from assay.core.config import AssayConfig
    from assay.evaluation.runner import evaluate
    from assay.metrics.registry import metric_class
    from assay.store.recorder import RunRecorder

    config = AssayConfig()
    chat = {
        "id": "c",
        "messages": [
            {"role": "user", "content": "2 + 2?"},
            {"role": "assistant", "content": "4"},
        ],
        "response": "4",
        "expected": "4",
    }
    metrics = [metric_class("exact_match")()]
    store.start_run("r", metrics=["exact_match"])
    recorder = RunRecorder(store, "r", metrics, config)
    evaluate([chat], metrics=metrics, config=config, on_sample=recorder)
    assert recorder.written == 1
    stored = store.sample_detail("r", 0)
    assert stored["turns"] == [
        {"role": "user", "content": "2 + 2?"},
        {"role": "assistant", "content": "4"},
    ]
    assert (stored["trace"], stored["scores"]["exact_match"]["value"]) == (None, 1.0)
