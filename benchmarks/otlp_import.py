"""Trace import speed and memory: a generated 100,000-span OTLP file into samples.

Each trace is a RAG agent run of 10 spans (a root agent span, a retriever with 3
documents, 3 LLM calls, 5 tool calls), written the way exporters send them: children
first, the root last, a few traces interleaved. Both layouts are measured, JSON lines (one
request per 100 spans) and one pretty-printed document, each in a fresh process so that
peak RSS is the import's own; each is read twice, once keeping every sample (what
`read_otlp` returns) and once dropping each record when made (the reader's own memory).

    python benchmarks/otlp_import.py [--spans 100000]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def _attr(key: str, value: Any) -> dict[str, Any]:
    kind = "intValue" if isinstance(value, int) else "stringValue"
    return {"key": key, "value": {kind: str(value)}}


def _span(trace: int, n: int, parent: int | None, attrs: dict[str, Any]) -> dict[str, Any]:
    start = trace * 10_000_000_000 + n * 100_000_000
    out = {
        "traceId": f"{trace:032x}",
        "spanId": f"{trace * 16 + n:016x}",
        "name": f"span {n}",
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(start + (900_000_000 if parent is None else 50_000_000)),
        "attributes": [_attr(k, v) for k, v in attrs.items()],
    }
    if parent is not None:
        out["parentSpanId"] = f"{trace * 16 + parent:016x}"
    return out


def trace_spans(trace: int) -> list[dict[str, Any]]:
    words = " ".join(f"word{(trace * 7 + i) % 997}" for i in range(150))
    spans = [
        _span(
            trace,
            1,
            0,
            {
                "openinference.span.kind": "RETRIEVER",
                **{f"retrieval.documents.{d}.document.content": f"{d} {words}" for d in range(3)},
            },
        )
    ]
    for n in (2, 4, 6):
        spans.append(
            _span(
                trace,
                n,
                0,
                {
                    "openinference.span.kind": "LLM",
                    "llm.model_name": "mini-1",
                    "llm.input_messages.0.message.role": "user",
                    "llm.input_messages.0.message.content": f"question {trace}",
                    "llm.output_messages.0.message.role": "assistant",
                    "llm.output_messages.0.message.content": f"answer {trace} step {n}",
                    "llm.token_count.completion": 40,
                },
            )
        )
    for n in (3, 5, 7, 8, 9):
        spans.append(
            _span(
                trace,
                n,
                0,
                {
                    "openinference.span.kind": "TOOL",
                    "tool.name": f"tool_{n}",
                    "input.value": json.dumps({"city": "Paris", "day": n}),
                    "output.value": "ok",
                },
            )
        )
    spans.append(
        _span(
            trace,
            0,
            None,
            {
                "openinference.span.kind": "AGENT",
                "input.value": f"question {trace}",
                "output.value": f"answer {trace}",
            },
        )
    )
    return spans


def write_files(folder: Path, n_spans: int) -> None:
    spans: list[dict[str, Any]] = []
    for trace in range(n_spans // 10):
        spans.extend(trace_spans(trace))
    # interleave neighbouring traces a little, as concurrent requests do
    for i in range(0, len(spans) - 15, 20):
        spans[i + 5], spans[i + 15] = spans[i + 15], spans[i + 5]
    envelope = {"resource": {"attributes": [_attr("service.name", "bench")]}}
    lines = folder / "traces.jsonl"
    with lines.open("w") as handle:
        for i in range(0, len(spans), 100):
            part = {"resourceSpans": [{**envelope, "scopeSpans": [{"spans": spans[i : i + 100]}]}]}
            handle.write(json.dumps(part) + "\n")
    document = folder / "traces.json"
    whole = {"resourceSpans": [{**envelope, "scopeSpans": [{"spans": spans}]}]}
    document.write_text(json.dumps(whole, indent=1))


def measure(path: str, keep: bool) -> None:
    """Child process: import one file, print the figures as JSON. ``keep`` holds every
    sample in a list (what ``read_otlp`` returns); otherwise each record is dropped once
    made, which shows the reader's own memory."""
    from assay.inputs.otlp import otlp_records, read_otlp

    start = time.perf_counter()
    errors: list[Any] = []
    if keep:
        samples, errors = read_otlp(path)
        traces, spans = len(samples), sum(s.metadata["otel"]["spans"] for s in samples)
    else:
        traces = spans = 0
        for _, record in otlp_records(path, errors):
            traces, spans = traces + 1, spans + record["metadata"]["otel"]["spans"]
    seconds = time.perf_counter() - start
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        json.dumps(
            {
                "traces": traces,
                "spans": spans,
                "errors": len(errors),
                "seconds": seconds,
                "peak_mb": peak_mb,
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=100_000)
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    parser.add_argument("--write", help=argparse.SUPPRESS)
    parser.add_argument("--keep", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.write:
        write_files(Path(args.write), args.spans)
        return
    if args.measure:
        measure(args.measure, args.keep)
        return
    with tempfile.TemporaryDirectory() as tmp:
        # the files are written by a child: a parent that held them would hand its peak
        # RSS down to the measuring processes (Linux keeps it across fork and exec)
        subprocess.run(
            [sys.executable, __file__, "--write", tmp, "--spans", str(args.spans)], check=True
        )
        lines, document = Path(tmp) / "traces.jsonl", Path(tmp) / "traces.json"
        baseline = subprocess.run(
            [
                sys.executable,
                "-c",
                "import resource, assay.inputs.otlp; "
                "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        print(
            f"{args.spans:,} spans; Python with assay.inputs.otlp imported: "
            f"{float(baseline.stdout):.0f} MB peak RSS"
        )
        print(
            f"{'layout':<20}{'kept':<9}{'file MB':>8}{'traces':>8}{'errors':>7}"
            f"{'spans/s':>9}{'peak RSS MB':>13}"
        )
        for label, path in (("JSON lines", lines), ("one JSON document", document)):
            for keep in (False, True):
                out = subprocess.run(
                    [sys.executable, __file__, "--measure", str(path)]
                    + (["--keep"] if keep else []),
                    capture_output=True,
                    text=True,
                    check=True,
                )
                r = json.loads(out.stdout)
                size = path.stat().st_size / 1e6
                kept = "samples" if keep else "none"
                print(
                    f"{label:<20}{kept:<9}{size:>8.1f}{r['traces']:>8,}{r['errors']:>7}"
                    f"{r['spans'] / r['seconds']:>9,.0f}{r['peak_mb']:>13.0f}"
                )


if __name__ == "__main__":
    main()
