"""Conversation samples: OpenAI chat-format messages as logged, from JSONL, CSV and pandas;
a chat log's tool calls become the agent trace."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from assay import Sample, get_metric, read_samples
from assay.inputs.records import samples_from_dataframe

MESSAGES = [
    {"role": "system", "content": "You book hotels for Acme staff."},
    {"role": "User", "content": [{"type": "text", "text": "Book Paris"}, {"type": "image_url"}]},
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
    {"role": "tool", "tool_call_id": "call_1", "content": "booked #42"},
    {"role": "assistant", "content": "Done: booking #42."},
]


def test_logged_messages_become_turns_and_their_tool_calls_the_trace():
    s = Sample(messages=MESSAGES, chatbot_role="hotel booking assistant", topics="travel")
    assert [(t.role, t.content) for t in s.turns] == [
        ("system", "You book hotels for Acme staff."),
        ("user", "Book Paris"),
        ("assistant", None),
        ("tool", "booked #42"),
        ("assistant", "Done: booking #42."),
    ]
    (step,) = s.trace
    assert (step.name, step.arguments, step.kind) == (
        "book",
        {"city": "Paris", "nights": 2},
        "tool",
    )
    assert step.model_extra == {"call_id": "call_1", "result": "booked #42"}
    assert (s.role_description, s.allowed_topics) == ("hotel booking assistant", ["travel"])


def test_an_explicit_trace_is_kept():
    s = Sample(messages=MESSAGES, trace=[{"name": "search"}])
    assert [t.name for t in s.trace] == ["search"]


def test_tool_calls_in_a_chat_log_are_scored_against_reference_calls():
    s = Sample(
        messages=MESSAGES,
        expected_tool_calls=[{"name": "book", "arguments": {"city": "Paris", "nights": 3}}],
    )
    # city right, nights wrong: agreement 1/2 over one call each side
    assert get_metric("tool_call_accuracy").score(s).value == pytest.approx(0.5)


def test_jsonl_csv_and_pandas_read_the_same_conversation(tmp_path):
    jsonl = tmp_path / "chats.jsonl"
    jsonl.write_text(json.dumps({"id": "c1", "messages": MESSAGES}) + "\n")
    csv = tmp_path / "chats.csv"
    pd.DataFrame([{"id": "c1", "messages": json.dumps(MESSAGES)}]).to_csv(csv, index=False)
    (from_jsonl,), e1 = read_samples(jsonl)
    (from_csv,), e2 = read_samples(csv)
    (from_pandas,), e3 = samples_from_dataframe(pd.DataFrame([{"id": "c1", "messages": MESSAGES}]))
    assert e1 == e2 == e3 == []
    assert from_jsonl == from_csv == from_pandas
    assert from_jsonl.turns[-1].content == "Done: booking #42."


def test_tool_call_arguments_that_are_not_json_are_an_error_naming_the_place(tmp_path):
    broken = json.loads(json.dumps(MESSAGES))
    broken[2]["tool_calls"][0]["function"]["arguments"] = '{"city": "Par'
    path = tmp_path / "chats.jsonl"
    path.write_text(json.dumps({"messages": MESSAGES}) + "\n" + json.dumps({"messages": broken}))
    samples, (error,) = read_samples(path)
    assert len(samples) == 1
    assert (error.line, error.field) == (2, "messages.2.tool_calls.0")
    assert 'tool call arguments are not JSON: \'{"city": "Par\'' in error.message
