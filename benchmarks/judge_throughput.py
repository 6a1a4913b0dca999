"""Judge calls a second of the judged suite on the local executor, and the client's CPU a
call, against the test judge server at a given reply delay.

``python benchmarks/judge_throughput.py --delay 0.02`` starts ``tests/judge_server.py`` in
its own process answering each call after ``--delay`` seconds (20 ms: a local vLLM; 200
ms: a hosted judge), scores ``--samples`` RAG samples (rag-bench-50.jsonl, each copy
distinct, so nothing is answered twice) with the judged suite at 64 calls in flight and
no cache, and prints the calls the server answered per second, this process's CPU
seconds per call (scoring, the judge client and its HTTP), and the judge's mean call
latency. A first run of 64 samples (models loaded, connections opened) is not timed.

With a fast judge the client's own work per call bounds the rate: run it with
``PYTHONPATH=OTHER/src`` to time another checkout (e.g. before a change) the same way.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path

import assay
from assay.core.config import AssayConfig
from scale import rag_samples

SERVER = Path(__file__).resolve().parent.parent / "tests" / "judge_server.py"


def served_calls(url: str) -> int:
    with urllib.request.urlopen(url.rstrip("/") + "/stats") as reply:
        return int(json.loads(reply.read())["calls"])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Judge calls/s of the local judged suite.")
    parser.add_argument("--delay", type=float, default=0.02, help="server seconds per call")
    parser.add_argument("--samples", type=int, default=1000, help="timed samples")
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args(argv)

    server = subprocess.Popen(
        [sys.executable, str(SERVER), "--delay", str(args.delay)], stdout=subprocess.PIPE, text=True
    )
    assert server.stdout is not None
    url = server.stdout.readline().strip()
    try:
        with tempfile.TemporaryDirectory() as cache:
            config = AssayConfig(
                judge_model="test-judge",
                judge_base_url=url,
                judge_concurrency=args.concurrency,
                use_cache=False,
                cache_dir=cache,
            )
            samples = rag_samples(64 + args.samples)
            assay.evaluate(samples[:64], suites=["judged"], config=config)
            before = served_calls(url)
            wall, cpu = time.perf_counter(), time.process_time()
            evaluation = assay.evaluate(samples[64:], suites=["judged"], config=config)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            calls = served_calls(url) - before
    finally:
        server.terminate()
        server.wait()
    usage = evaluation.judge_usage or {}
    print(
        json.dumps(
            {
                "assay": str(Path(assay.__file__).parent),
                "delay_s": args.delay,
                "samples": args.samples,
                "calls": calls,
                "seconds": round(wall, 2),
                "calls_per_s": round(calls / wall, 1),
                "client_cpu_ms_per_call": round(cpu / calls * 1000, 3),
                "mean_call_latency_ms": round(1000 * usage.get("mean_latency_seconds", 0), 1),
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
