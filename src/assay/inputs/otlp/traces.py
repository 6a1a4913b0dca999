"""Spans grouped into traces, and a trace turned into one sample record.

A trace becomes one sample (an agent run, or a plain chat when it holds one LLM call):

* ``query`` / ``response``: the root span's own input and output when it has them (an
  agent or chain span's ``input.value`` is the user's question, before any prompt
  template); else the first LLM span's last user message and the last LLM span's answer.
* ``contexts``: the documents of the retriever spans, in start order, each span's
  documents in rank order.
* ``trace``: the steps in start order, LLM calls (kind ``llm``) and tool calls (kind
  ``tool``, with arguments, result, outcome and latency); ``tools_used``,
  ``tools_succeeded``, ``tool_call_count`` and ``errors_encountered`` (spans whose status
  is ERROR) are counted from them.
* timings in seconds: ``duration`` (the root span), ``llm_latency`` and ``tool_latency``
  (sums over the LLM and tool spans); ``response_tokens`` sums the LLM spans' output
  tokens.
* ``tags``: ``model`` (of the last LLM call) and ``service`` (``service.name``).
* ``metadata["otel"]``: the trace id, the root span's name, the resource's attributes and
  every root-span attribute that no rule above read; each step keeps its own unread
  attributes under ``attributes``.

Spans arrive in any order. A trace is complete when its root span has been read and no
span of it came in the next ``window`` spans (exporters send a trace's spans close
together, the root last); the rest are completed at the end of the file. A span that
arrives for a trace already completed is reported, never dropped silently.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from assay.inputs.otlp.conventions import (
    ROLE_KEYS,
    documents,
    llm_exchange,
    model_name,
    output_tokens,
    span_role,
    tool_call,
)
from assay.inputs.otlp.reader import MalformedSpan, Span

__all__ = ["DEFAULT_WINDOW", "assemble_traces", "trace_record"]

#: spans read after a trace's root before the trace is taken as complete
DEFAULT_WINDOW = 10_000
_SWEEP_EVERY = 1_000


def assemble_traces(
    spans: Iterator[Span | MalformedSpan], window: int = DEFAULT_WINDOW
) -> Iterator[list[Span] | MalformedSpan]:
    """Group a stream of spans into whole traces (each a list of its spans), passing the
    malformed ones through, with memory bounded by the spans of unfinished traces."""
    pending: dict[str, dict[str, Span]] = {}
    rooted: set[str] = set()
    last_seen: dict[str, int] = {}
    done: set[str] = set()
    count = 0
    for span in spans:
        if isinstance(span, MalformedSpan):
            yield span
            continue
        count += 1
        if span.trace_id in done:
            yield MalformedSpan(
                span.line,
                span.span_id,
                f"arrived more than {window} spans after the rest of trace {span.trace_id}, "
                "which was already evaluated; export the trace's spans together",
            )
            continue
        members = pending.setdefault(span.trace_id, {})
        if span.span_id in members:
            yield MalformedSpan(span.line, span.span_id, "the same span id appears twice")
            continue
        members[span.span_id] = span
        last_seen[span.trace_id] = count
        if not span.parent_id:
            rooted.add(span.trace_id)
        if count % _SWEEP_EVERY == 0:
            finished = [t for t in rooted if count - last_seen[t] >= window]
            for trace_id in sorted(finished, key=last_seen.__getitem__):
                yield _take(trace_id, pending, rooted, last_seen, done)
    for trace_id in sorted(pending, key=last_seen.__getitem__):
        yield _take(trace_id, pending, rooted, last_seen, done)


def _take(
    trace_id: str,
    pending: dict[str, dict[str, Span]],
    rooted: set[str],
    last_seen: dict[str, int],
    done: set[str],
) -> list[Span]:
    rooted.discard(trace_id)
    last_seen.pop(trace_id, None)
    done.add(trace_id)
    return list(pending.pop(trace_id).values())


def _root(spans: list[Span]) -> Span:
    ids = {s.span_id for s in spans}
    roots = [s for s in spans if not s.parent_id or s.parent_id not in ids]
    return min(roots or spans, key=lambda s: (s.start_ns, -s.end_ns))


def trace_record(spans: list[Span]) -> dict[str, Any]:
    """One sample record (Assay's field names) for the spans of one trace."""
    ordered = sorted(spans, key=lambda s: (s.start_ns, -s.end_ns))
    root = _root(ordered)
    roles = {s.span_id: span_role(s) for s in ordered}
    llm_spans = [s for s in ordered if roles[s.span_id] == "llm"]

    record: dict[str, Any] = {"id": root.trace_id}
    # each span's messages are read once: the root's, and every LLM span's
    exchanges = {s.span_id: llm_exchange(s) for s in [root, *llm_spans]}
    root_question, root_answer, root_used = exchanges[root.span_id]
    first_question = last_answer = None
    if llm_spans:
        first_question = exchanges[llm_spans[0].span_id][0]
        last_answer = exchanges[llm_spans[-1].span_id][1]
    _put(record, "query", root_question or first_question)
    _put(record, "response", root_answer or last_answer)

    contexts: list[str] = []
    steps: list[dict[str, Any]] = []
    tokens: list[int] = []
    model = None
    for span in ordered:
        role = roles[span.span_id]
        if role == "retriever":
            texts, used = documents(span)
            contexts.extend(texts)
        elif role == "tool":
            step, used = tool_call(span)
            steps.append(_with_unread(step, span, used))
        elif role == "llm":
            used = exchanges[span.span_id][2]
            name, model_keys = model_name(span)
            n_tokens, token_keys = output_tokens(span)
            model = name or model
            if n_tokens is not None:
                tokens.append(n_tokens)
            step = {
                "name": name or span.name,
                "ok": span.error is None,
                "error": span.error,
                "latency": span.seconds,
                "kind": "llm",
            }
            steps.append(_with_unread(step, span, used | model_keys | token_keys))
    _put(record, "contexts", contexts or None)
    if steps:
        tools = [s for s in steps if s["kind"] == "tool"]
        record["trace"] = steps
        record["tool_call_count"] = len(tools)
        record["tools_used"] = [s["name"] for s in tools]
        record["tools_succeeded"] = [s["name"] for s in tools if s["ok"]]
        record["llm_latency"] = sum(s["latency"] for s in steps if s["kind"] == "llm")
        record["tool_latency"] = sum(s["latency"] for s in tools)
    record["errors_encountered"] = sum(1 for s in ordered if s.error is not None)
    record["duration"] = root.seconds
    if tokens:
        record["response_tokens"] = sum(tokens)
    tags = {"model": model, "service": root.resource.get("service.name")}
    record["tags"] = {k: str(v) for k, v in tags.items() if v is not None}
    unread = {k: v for k, v in root.attributes.items() if k not in root_used | ROLE_KEYS}
    record["metadata"] = {
        "otel": {
            "trace_id": root.trace_id,
            "root_span": root.name,
            "spans": len(ordered),
            "resource": root.resource,
            "attributes": unread,
        }
    }
    return record


def _put(record: dict[str, Any], key: str, value: Any) -> None:
    if value is not None:
        record[key] = value


def _with_unread(step: dict[str, Any], span: Span, used: set[str]) -> dict[str, Any]:
    unread = {k: v for k, v in span.attributes.items() if k not in used | ROLE_KEYS}
    if unread:
        step["attributes"] = unread
    return {k: v for k, v in step.items() if v is not None}
