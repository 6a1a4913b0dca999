"""A stored conversation run and a stored agent run, shared by tests/test_transcript_views.py
and tests/test_dashboard_transcripts.py. Their stored text carries script payloads.

chat-run, sample 0 (turns 0..6), per-turn scores written by hand in the conversation
metrics' evidence contract (``details["turns"]`` / ``details["intentions"]``):

    turn  role       knowledge_retention  role_adherence   conversation_completeness
    1     user                                              "book dinner for 2": satisfied
    2     assistant  1.0                  1.0
    4     assistant  1.0                  1.0
    5     user                                              "steak?": not satisfied
    6     assistant  0.0 (asks again)     0.5
    value            2/3 = 66.67%         2.5/3 = 83.33%    1/2 = 50.00%

turn_relevancy has one entry for turn 9 (not stored: 7 turns) and one for turn 2 with no
score (N/A).

agent-run, sample 0: trace [plan (llm), search_flights, book_flight (failed), send_email],
reference [search_flights, book_flight, cancel_hold], all arguments compared EXACT, scored
by the real tool-call metrics. The made calls are the tool steps 1, 2, 3:

    search_flights ↔ step 1: from, to, date all equal        agreement 3/3 = 1
    book_flight    ↔ step 2: flight equal, seats 2 ≠ 1         agreement 1/2 = 0.5
    cancel_hold: not made;  send_email (step 3): not expected
    tool_call_accuracy = (1 + 0.5) / max(3, 3) = 0.5
    tool_call_f1: one call fully right: P = 1/3, R = 1/3, F1 = 1/3
"""

from __future__ import annotations

import json
from typing import Any

from assay.core.result import MetricResult
from assay.core.sample import Sample
from assay.engine.resources import Resources
from assay.metrics.registry import metric_class
from assay.store.db import Store

TURN_XSS = "<script>window.__xss='turn'</script>"
ARGUMENT_XSS = "<img src=x onerror=\"window.__xss='argument'\">"
ERROR_XSS = "declined <script>window.__xss='step'</script>"
REASON_XSS = "asks again <b onmouseover=\"window.__xss='reason'\">diet</b>"

CHAT_TURNS: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a booking assistant."},
    {"role": "user", "content": f"I'm vegetarian. Book dinner for 2. {TURN_XSS}"},
    {
        "role": "assistant",
        "content": "Booking Green Table.",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {
                    "name": "book_table",
                    "arguments": json.dumps(
                        {"restaurant": "Green Table", "people": 2, "note": ARGUMENT_XSS}
                    ),
                },
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "confirmed #7"},
    {"role": "assistant", "content": "Your table at Green Table is booked (#7)."},
    {"role": "user", "content": "Do they have steak?"},
    {"role": "assistant", "content": "What is your diet?"},
]

CHAT_SCORES = {
    "knowledge_retention": MetricResult(
        "knowledge_retention",
        2 / 3,
        method="llm",
        details={
            "turns": [
                {"turn": 2, "score": 1.0, "reason": "keeps the diet"},
                {"turn": 4, "score": 1.0, "reason": "keeps the booking"},
                {"turn": 6, "score": 0.0, "reason": REASON_XSS, "forgotten": ["vegetarian"]},
            ]
        },
    ),
    "role_adherence": MetricResult(
        "role_adherence",
        2.5 / 3,
        method="llm",
        details={
            "turns": [
                {"turn": 2, "score": 1.0, "reason": "books as asked"},
                {"turn": 4, "score": 1.0, "reason": "confirms the booking"},
                {"turn": 6, "score": 0.5, "reason": "a booking assistant should know the diet"},
            ]
        },
    ),
    "conversation_completeness": MetricResult(
        "conversation_completeness",
        0.5,
        method="llm",
        details={
            "intentions": [
                {
                    "turn": 1,
                    "intention": "book dinner for 2",
                    "satisfied": True,
                    "reason": "booked at turn 4",
                },
                {
                    "turn": 5,
                    "intention": "learn whether steak is served",
                    "satisfied": False,
                    "reason": "never answered",
                },
            ]
        },
    ),
    "turn_relevancy": MetricResult(
        "turn_relevancy",
        1.0,
        method="llm",
        details={
            "turns": [
                {"turn": 2, "score": None, "reason": "no judge answer"},
                {"turn": 9, "score": 1.0, "reason": "beyond the stored turns"},
            ]
        },
    ),
}

AGENT_TRACE: list[dict[str, Any]] = [
    {"name": "plan", "kind": "llm", "latency": 0.5},
    {
        "name": "search_flights",
        "arguments": {"from": "CDG", "to": "JFK", "date": "2026-12-01"},
        "latency": 1.25,
        "result": "3 flights",
    },
    {
        "name": "book_flight",
        "arguments": {"flight": "AF006", "seats": 2, "memo": ARGUMENT_XSS},
        "ok": False,
        "error": ERROR_XSS,
        "latency": 0.75,
    },
    {"name": "send_email", "arguments": {"to": "ann@example.com"}, "latency": 0.1},
]
AGENT_REFERENCE: list[dict[str, Any]] = [
    {"name": "search_flights", "arguments": {"from": "CDG", "to": "JFK", "date": "2026-12-01"}},
    {"name": "book_flight", "arguments": {"flight": "AF006", "seats": 1}},
    {"name": "cancel_hold", "arguments": {"hold": 3}},
]
#: every argument compared EXACT: no embedding model needed
EXACT_ARGUMENTS = {p: "EXACT" for p in ("from", "to", "date", "flight", "seats", "hold")}


def agent_scores(sample: Sample) -> dict[str, MetricResult]:
    """The real tool-call metrics on ``sample``."""
    resources = Resources()
    return {
        name: metric_class(name)(argument_strategies=EXACT_ARGUMENTS).compute(sample, resources)
        for name in ("tool_call_accuracy", "tool_call_f1")
    }


def store_transcript_runs(store: Store) -> None:
    """Write chat-run and agent-run (module docstring)."""
    store.start_run("chat-run", name="conversations")
    chat = Sample(id="chat-1", turns=CHAT_TURNS)
    store.record("chat-run", 0, chat, CHAT_SCORES, status="passed", duration=3.0)
    store.finish_run("chat-run")
    store.start_run("agent-run", name="agents")
    agent = Sample(
        id="agent-1",
        query="Fly me to New York",
        trace=AGENT_TRACE,
        expected_tool_calls=AGENT_REFERENCE,
    )
    store.record("agent-run", 0, agent, agent_scores(agent), status="failed", duration=2.6)
    store.finish_run("agent-run")
