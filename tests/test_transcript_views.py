"""The read models of a stored conversation and agent run (`assay.server.transcripts`),
the API's sample endpoint and the run page's HTML, over tests/transcript_runs.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from assay.server import create_app
from assay.server.transcripts import (
    MAX_EVIDENCE_DEPTH,
    MAX_EVIDENCE_ITEMS,
    agent_view,
    conversation_view,
    page_sample,
    readable,
)
from assay.store.db import Store
from transcript_runs import ARGUMENT_XSS, ERROR_XSS, REASON_XSS, TURN_XSS, store_transcript_runs


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    s = Store(str(tmp_path_factory.mktemp("transcripts") / "t.db"))
    store_transcript_runs(s)
    yield s
    s.close()


@pytest.fixture(scope="module")
def client(store: Store) -> TestClient:
    return TestClient(create_app(store, token="", allowed_hosts=["testserver"]))


def test_each_per_turn_score_sits_at_its_turn(store: Store) -> None:
    view = conversation_view(store.sample_detail("chat-run", 0))
    turns = view["turns"]
    assert [t["role"] for t in turns] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
    ]
    at = {t["index"]: [(s["metric"], s["score"], s["display"]) for s in t["scores"]] for t in turns}
    assert at[2] == [
        ("knowledge_retention", 1.0, 100.0),
        ("role_adherence", 1.0, 100.0),
        ("turn_relevancy", None, None),  # no score: N/A, not 0
    ]
    assert at[6] == [("knowledge_retention", 0.0, 0.0), ("role_adherence", 0.5, 50.0)]
    assert at[0] == at[1] == at[3] == at[5] == []
    retention = turns[6]["scores"][0]
    assert retention["reason"] == REASON_XSS
    assert retention["evidence"] == {"forgotten": ["vegetarian"]}  # the entry's other keys
    intentions = {t["index"]: t["intentions"] for t in turns if t["intentions"]}
    assert [(i["intention"], i["satisfied"]) for i in intentions[1]] == [
        ("book dinner for 2", True)
    ]
    assert [(i["intention"], i["satisfied"]) for i in intentions[5]] == [
        ("learn whether steak is served", False)
    ]
    # turn 9 is past the 7 stored turns: listed apart, not dropped
    assert [(u["metric"], u["turn"]) for u in view["unplaced"]] == [("turn_relevancy", 9)]
    call = turns[2]["tool_calls"][0]
    assert (call["name"], call["arguments"]["note"], call["extra"]) == (
        "book_table",
        ARGUMENT_XSS,
        {"call_id": "call_1"},
    )
    assert view["omitted"] == 0


def test_matches_point_at_the_trace_steps(store: Store) -> None:
    view = agent_view(store.sample_detail("agent-run", 0))
    assert [(s["index"], s["kind"], s["name"], s["ok"]) for s in view["steps"]] == [
        (0, "llm", "plan", True),
        (1, "tool", "search_flights", True),
        (2, "tool", "book_flight", False),
        (3, "tool", "send_email", True),
    ]
    assert view["steps"][2]["error"] == ERROR_XSS
    accuracy = {m["metric"]: m for m in view["matchings"]}["tool_call_accuracy"]
    assert accuracy["value"] == 0.5  # (1 + 0.5) / max(3, 3)
    # made calls 0, 1 are trace steps 1, 2 (step 0 is the LLM's)
    assert [(p["reference"], p["step"], p["agreement"]) for p in accuracy["pairs"]] == [
        (0, 1, 1.0),
        (1, 2, 0.5),
    ]
    seats = [a for a in accuracy["pairs"][1]["arguments"] if a["argument"] == "seats"]
    assert [(a["score"], a["display"]) for a in seats] == [(0.0, 0.0)]
    memo = [a for a in accuracy["pairs"][1]["arguments"] if a["argument"] == "memo"]
    assert [(a["score"], a["reason"]) for a in memo] == [(None, "not in the reference")]
    assert accuracy["unmatched_reference"] == [{"reference": 2, "tool": "cancel_hold"}]
    assert accuracy["unmatched_made"] == [{"made": 2, "tool": "send_email", "step": 3}]
    assert [e["name"] for e in view["expected"]] == ["search_flights", "book_flight", "cancel_hold"]


def test_samples_without_turns_or_trace_have_no_views() -> None:
    plain = {"scores": {"rouge": {"details": {"turns": 3}}}, "turns": None, "trace": None}
    assert conversation_view(plain) is None
    assert agent_view({**plain, "expected_tool_calls": None}) is None


def test_stored_omission_marker_is_counted_not_shown() -> None:
    sample = {
        "turns": [{"role": "user", "content": "hi"}, {"omitted": 5}],
        "trace": [{"omitted": 2}],
        "expected_tool_calls": None,
        "scores": {},
    }
    assert [t["content"] for t in conversation_view(sample)["turns"]] == ["hi"]
    assert conversation_view(sample)["omitted"] == 5
    assert (agent_view(sample)["steps"], agent_view(sample)["omitted"]) == ([], 2)


def test_readable_evidence_nests_lists_and_bounds_depth_and_length() -> None:
    assert readable({"label": "CORRECT", "ok": True, "n": 0.666666, "none": None}) == [
        {"key": "label", "text": "CORRECT", "children": None},
        {"key": "ok", "text": "yes", "children": None},
        {"key": "n", "text": "0.6667", "children": None},
        {"key": "none", "text": "none", "children": None},
    ]
    assert readable({"claims": ["a", "b"]}) == [
        {
            "key": "claims",
            "text": None,
            "children": [
                {"key": None, "text": "a", "children": None},
                {"key": None, "text": "b", "children": None},
            ],
        }
    ]
    deep: object = "x"
    for _ in range(MAX_EVIDENCE_DEPTH + 3):
        deep = [deep]
    node = readable(deep)[0]
    depth = 1
    while node["children"] is not None:
        node = node["children"][0]
        depth += 1
    # 8 nested lists: the outer 5 are shown as lists (the returned list and 4 nodes with
    # children), the node at the 5th level holds the inner 3 as one line of JSON
    assert depth == MAX_EVIDENCE_DEPTH
    assert node["text"] == '[[["x"]]]'
    many = readable(list(range(MAX_EVIDENCE_ITEMS + 7)))
    assert len(many) == MAX_EVIDENCE_ITEMS + 1
    assert many[-1]["text"] == "… 7 more"


def test_page_evidence_leaves_out_what_the_views_show(store: Store) -> None:
    chat = page_sample(store.sample_detail("chat-run", 0))
    assert chat["scores"]["knowledge_retention"]["evidence"] == {}
    assert chat["scores"]["knowledge_retention"]["shown_above"] == ["turns"]
    agent = page_sample(store.sample_detail("agent-run", 0))
    f1 = agent["scores"]["tool_call_f1"]
    assert f1["evidence"] == {"correct": 1}
    assert f1["shown_above"] == [
        "reference_calls",
        "made_calls",
        "matches",
        "unmatched_reference",
        "unmatched_made",
    ]


def test_api_sample_endpoint_returns_the_views(client: TestClient) -> None:
    body = client.get("/api/runs/chat-run/samples/0").json()
    assert body["id"] == "chat-1"
    assert body["conversation"]["turns"][1]["content"].endswith(TURN_XSS)
    assert body["agent"]["steps"][0]["name"] == "book_table"  # the chat's tool call
    agent = client.get("/api/runs/agent-run/samples/0").json()
    assert agent["conversation"] is None
    assert agent["scores"]["tool_call_f1"]["value"] == pytest.approx(1 / 3)  # F1 of 1/3, 1/3
    missing = client.get("/api/runs/agent-run/samples/1")
    assert (missing.status_code, missing.json()) == (
        404,
        {"detail": "no sample 1 in run 'agent-run'"},
    )


def test_run_page_escapes_every_transcript_payload(client: TestClient) -> None:
    html = client.get("/runs/chat-run").text + client.get("/runs/agent-run").text
    for payload in (TURN_XSS, ARGUMENT_XSS, ERROR_XSS, REASON_XSS):
        assert payload not in html
    assert "&lt;script&gt;window.__xss=&#39;turn&#39;&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=&#34;window.__xss=&#39;argument&#39;&#34;&gt;" in html
