"""OTLP JSON traces into samples: hand-built traces in both conventions, both file layouts,
malformed spans reported with their span id, late spans never dropped silently."""

from __future__ import annotations

import json
from typing import Any

import pytest

from assay.inputs.otlp import is_otlp, read_otlp
from assay.inputs.records import InputErrors

TRACE_A = "a" * 32
TRACE_B = "b" * 32
SEC = 1_000_000_000


def attr(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        wrapped: dict[str, Any] = {"boolValue": value}
    elif isinstance(value, int):
        wrapped = {"intValue": str(value)}
    elif isinstance(value, float):
        wrapped = {"doubleValue": value}
    else:
        wrapped = {"stringValue": value}
    return {"key": key, "value": wrapped}


def span(
    trace: str,
    span_id: str,
    parent: str | None,
    name: str,
    start: float,
    end: float,
    attrs: dict[str, Any],
    error: str | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "traceId": trace,
        "spanId": span_id,
        "name": name,
        "kind": 1,
        "startTimeUnixNano": str(int(start * SEC)),
        "endTimeUnixNano": str(int(end * SEC)),
        "attributes": [attr(k, v) for k, v in attrs.items()],
    }
    if parent:
        out["parentSpanId"] = parent
    if error is not None:
        out["status"] = {"code": 2, "message": error}
    return out


def request(spans: list[dict[str, Any]], service: str = "weather-bot") -> dict[str, Any]:
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [attr("service.name", service)]},
                "scopeSpans": [{"scope": {"name": "test"}, "spans": spans}],
            }
        ]
    }


def genai_agent_trace() -> list[dict[str, Any]]:
    """An agent run in the GenAI conventions: chat -> tool (fails) -> tool -> chat."""
    user = json.dumps(
        [{"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]}]
    )
    answer = json.dumps(
        [{"role": "assistant", "parts": [{"type": "text", "content": "18 C and sunny."}]}]
    )
    return [
        span(
            TRACE_A,
            "c1",
            "r1",
            "chat gpt-x",
            0.1,
            1.1,
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "gpt-x",
                "gen_ai.input.messages": user,
                "gen_ai.usage.output_tokens": 12,
            },
        ),
        span(
            TRACE_A,
            "t1",
            "r1",
            "execute_tool get_weather",
            1.2,
            1.45,
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "get_weather",
                "gen_ai.tool.call.arguments": '{"city": "Paris"}',
            },
            error="timeout",
        ),
        span(
            TRACE_A,
            "t2",
            "r1",
            "execute_tool get_weather",
            1.5,
            2.0,
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "get_weather",
                "gen_ai.tool.call.arguments": '{"city": "Paris"}',
                "gen_ai.tool.call.result": "18C sunny",
                "gen_ai.tool.call.id": "call_2",
            },
        ),
        span(
            TRACE_A,
            "c2",
            "r1",
            "chat gpt-x",
            2.1,
            2.9,
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.response.model": "gpt-x-2025",
                "gen_ai.output.messages": answer,
                "gen_ai.usage.output_tokens": 8,
            },
        ),
        span(
            TRACE_A,
            "r1",
            None,
            "invoke_agent weather",
            0.0,
            3.0,
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": "weather",
                "app.release": "2026.11",
            },
        ),
    ]


def openinference_rag_trace() -> list[dict[str, Any]]:
    """A RAG chain in OpenInference attributes; documents numbered past 9 (rank order is
    numeric, not textual)."""
    docs = {f"retrieval.documents.{i}.document.content": f"doc {i}" for i in (0, 1, 2, 10)}
    return [
        span(
            TRACE_B,
            "q1",
            None,
            "rag",
            0.0,
            2.0,
            {
                "openinference.span.kind": "CHAIN",
                "input.value": "Who wrote Hamlet?",
                "output.value": "Shakespeare wrote Hamlet.",
                "session.id": "s-9",
            },
        ),
        span(
            TRACE_B,
            "q2",
            "q1",
            "retrieve",
            0.1,
            0.4,
            {
                "openinference.span.kind": "RETRIEVER",
                "input.value": "Who wrote Hamlet?",
                **docs,
            },
        ),
        span(
            TRACE_B,
            "q3",
            "q1",
            "llm",
            0.5,
            1.9,
            {
                "openinference.span.kind": "LLM",
                "llm.model_name": "mini-1",
                "llm.input_messages.0.message.role": "system",
                "llm.input_messages.0.message.content": "Answer from the documents.",
                "llm.input_messages.1.message.role": "user",
                "llm.input_messages.1.message.content": "Docs: ... Question: Who wrote Hamlet?",
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.content": "Shakespeare wrote Hamlet.",
                "llm.token_count.completion": 5,
            },
        ),
    ]


def by_id(samples):
    return {s.id: s for s in samples}


def test_genai_agent_trace_becomes_an_agent_run(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps(request(genai_agent_trace())))
    samples, errors = read_otlp(path)
    assert errors == []
    (s,) = samples
    assert s.id == TRACE_A
    assert (s.query, s.response) == ("Weather in Paris?", "18 C and sunny.")
    assert [(t.kind, t.name, t.ok) for t in s.trace] == [
        ("llm", "gpt-x", True),
        ("tool", "get_weather", False),
        ("tool", "get_weather", True),
        ("llm", "gpt-x-2025", True),
    ]
    failed, succeeded = s.trace[1], s.trace[2]
    assert failed.arguments == {"city": "Paris"} and failed.error == "timeout"
    assert succeeded.model_extra == {"result": "18C sunny", "call_id": "call_2"}
    # latencies by hand: chats 1.0 + 0.8, tools 0.25 + 0.5, root 3.0
    assert s.llm_latency == pytest.approx(1.8)
    assert s.tool_latency == pytest.approx(0.75)
    assert s.duration == pytest.approx(3.0)
    assert (s.tool_call_count, s.errors_encountered, s.response_tokens) == (2, 1, 20)
    assert s.tools_used == ["get_weather", "get_weather"]
    assert s.tools_succeeded == ["get_weather"]
    assert s.tags == {"model": "gpt-x-2025", "service": "weather-bot"}
    otel = s.metadata["otel"]
    assert otel["attributes"] == {"gen_ai.agent.name": "weather", "app.release": "2026.11"}
    assert (otel["root_span"], otel["spans"]) == ("invoke_agent weather", 5)


def test_openinference_rag_trace_gives_question_contexts_in_rank_order(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps(request(openinference_rag_trace()), indent=2))
    (s,), errors = read_otlp(path)
    assert errors == []
    assert s.query == "Who wrote Hamlet?"  # the chain's input, not the prompt template
    assert s.response == "Shakespeare wrote Hamlet."
    assert s.contexts == ["doc 0", "doc 1", "doc 2", "doc 10"]
    assert [(t.kind, t.name) for t in s.trace] == [("llm", "mini-1")]
    assert s.response_tokens == 5
    assert s.metadata["otel"]["attributes"] == {"session.id": "s-9"}


def test_json_lines_and_one_document_give_the_same_samples(tmp_path):
    a, b = genai_agent_trace(), openinference_rag_trace()
    lines = tmp_path / "t.jsonl"
    # one trace split over two requests (lines), as batching exporters do
    lines.write_text(
        "\n".join(json.dumps(request(part)) for part in (a[:2] + b[:1], a[2:] + b[1:])) + "\n"
    )
    document = tmp_path / "doc.json"
    document.write_text(json.dumps(request(a + b), indent=1))
    from_lines, e1 = read_otlp(lines)
    from_doc, e2 = read_otlp(document)
    assert e1 == e2 == []
    assert by_id(from_lines).keys() == {TRACE_A, TRACE_B}
    for trace_id in (TRACE_A, TRACE_B):
        assert by_id(from_lines)[trace_id] == by_id(from_doc)[trace_id]


def test_malformed_spans_are_reported_with_their_span_id_and_skipped(tmp_path):
    good = openinference_rag_trace()
    no_span_id = span(TRACE_A, "x", None, "n", 0, 1, {})
    del no_span_id["spanId"]
    backwards = span(TRACE_A, "back", None, "n", 2, 1, {})
    bad_attrs = span(TRACE_A, "attrs", None, "n", 0, 1, {})
    bad_attrs["attributes"] = {"not": "a list"}
    bad_time = span(TRACE_A, "time", None, "n", 0, 1, {})
    bad_time["startTimeUnixNano"] = "soon"
    path = tmp_path / "t.jsonl"
    path.write_text(
        json.dumps(request(good))
        + "\n{not json\n"
        + json.dumps(request([no_span_id, backwards, bad_attrs, bad_time]))
        + "\n"
    )
    samples, errors = read_otlp(path)
    assert [s.id for s in samples] == [TRACE_B]
    assert [str(e) for e in errors] == [
        f"{path} line 2: not valid JSON (Expecting property name enclosed in double quotes: "
        "line 1 column 2 (char 1))",
        f"{path} line 3: span has no spanId",
        f"{path} line 3, field 'span back': ends ({SEC}) before it starts ({2 * SEC})",
        f"{path} line 3, field 'span attrs': attributes are not a list of key/value pairs",
        f"{path} line 3, field 'span time': startTimeUnixNano is not an integer: 'soon'",
    ]
    with pytest.raises(InputErrors, match="not valid JSON"):
        read_otlp(path, strict=True)


def test_a_broken_document_keeps_the_spans_before_the_break(tmp_path):
    text = json.dumps(request(openinference_rag_trace() + genai_agent_trace()))
    path = tmp_path / "t.json"
    cut = text.index('"spanId": "t2"')
    path.write_text(text[:cut])
    samples, errors = read_otlp(path)
    assert [s.id for s in samples] == [TRACE_B, TRACE_A]
    assert len(by_id(samples)[TRACE_A].trace) == 2  # c1 and t1 were read; the rest was cut
    (error,) = errors
    assert "the JSON document breaks off" in error.message


def test_a_span_arriving_after_its_trace_was_completed_is_reported(tmp_path):
    a = genai_agent_trace()
    root, children = a[-1], a[:-1]
    filler = [span(f"{i:032x}", f"{i:016x}", None, "other", 0, 1, {}) for i in range(1, 1001)]
    path = tmp_path / "t.jsonl"
    path.write_text(
        "\n".join(json.dumps(request(part)) for part in ([root], filler, children[:1])) + "\n"
    )
    samples, errors = read_otlp(path, window=500)
    assert len(samples) == 1001
    assert [s.trace for s in samples if s.id == TRACE_A] == [None]
    (late,) = errors
    assert late.field == "span c1" and late.line == 3
    assert f"arrived more than 500 spans after the rest of trace {TRACE_A}" in late.message


def test_otlp_files_are_recognised_and_sample_files_are_not(tmp_path):
    otlp = tmp_path / "t.json"
    otlp.write_text("\ufeff  " + json.dumps(request(openinference_rag_trace()), indent=2))
    samples = tmp_path / "s.jsonl"
    samples.write_text(json.dumps({"question": "q", "answer": "a"}) + "\n")
    assert is_otlp(otlp) is True
    assert is_otlp(samples) is False


def test_non_finite_doubles_stay_text_and_values_of_every_type_decode(tmp_path):
    root = span(TRACE_B, "q1", None, "rag", 0.0, 2.0, {"openinference.span.kind": "CHAIN"})
    root["attributes"] += [
        {"key": "d", "value": {"doubleValue": "NaN"}},
        {"key": "i", "value": {"intValue": "7"}},
        {"key": "b", "value": {"boolValue": True}},
        {"key": "arr", "value": {"arrayValue": {"values": [{"stringValue": "x"}]}}},
        {"key": "kv", "value": {"kvlistValue": {"values": [attr("k", "v")]}}},
        {"key": "raw", "value": {"bytesValue": "aGk="}},
        {"key": "empty", "value": {}},
    ]
    root["attributes"].append(attr("input.value", "q?"))
    path = tmp_path / "t.json"
    path.write_text(json.dumps(request([root])))
    (s,), errors = read_otlp(path)
    assert errors == []
    assert s.metadata["otel"]["attributes"] == {
        "d": "NaN",
        "i": 7,
        "b": True,
        "arr": ["x"],
        "kv": {"k": "v"},
        "raw": "hi",
        "empty": None,
    }


def test_assay_evaluate_reads_an_otlp_export_by_its_content_or_when_told(env):
    from typer.testing import CliRunner

    from assay.cli import app

    path = env / "traces.json"
    path.write_text(json.dumps(request(genai_agent_trace() + openinference_rag_trace())))
    args = ["-m", "tool_usage_accuracy", "-m", "exact_match", "--format", "json"]
    result = CliRunner().invoke(app, ["evaluate", str(path), *args])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout[result.stdout.index("{") :])
    by_name = {m["name"]: m for m in payload["metrics"]}
    # trace A used get_weather twice, once successfully: 1 distinct tool, succeeded -> 1.0;
    # trace B used no tool: N/A. exact_match has no expected answer in either: N/A
    assert (by_name["tool_usage_accuracy"]["n"], by_name["tool_usage_accuracy"]["mean"]) == (1, 1.0)
    assert (by_name["exact_match"]["n"], by_name["exact_match"]["n_na"]) == (0, 2)

    renamed = env / "traces.log"
    renamed.write_text(path.read_text())
    told = CliRunner().invoke(app, ["evaluate", str(renamed), "--input-format", "otlp", *args])
    assert told.exit_code == 0, told.output
    unknown = CliRunner().invoke(app, ["evaluate", str(renamed), "--input-format", "xml", *args])
    assert unknown.exit_code == 2
    assert "unknown input format 'xml': use jsonl, csv, json, parquet, otlp" in unknown.output
