"""Live evaluation's rates: ``python benchmarks/live_ingest.py [--store sqlite|postgres|both]
[--seconds 10] [--lag-seconds 20]``.

Runs ``assay serve`` in a child process on a fresh store and sends it OTLP/HTTP
protobuf exports (what an SDK's exporter sends: 10 traces of 5 spans each, a RAG answer
with OpenInference attributes, every trace's question, answer and document its own)
from 4 client threads, and prints:

1. spans per second acknowledged (200) with scoring off (``--no-live-scoring``: the
   receiver only stores), and with the worker on but no live metrics (each trace still
   becomes a stored sample, in the same process);
2. traces per second scored with the lexical suite (``bleu,chrf,exact_match,rouge``) and
   with ``faithfulness``: 500 traces sent as fast as they are taken, from the first
   export until ``GET /api/live`` has none waiting;
3. the lag from a trace's acknowledgement to its stored score, p50 and p95, with
   ``faithfulness`` at 50 traces per second for ``--lag-seconds``;
4. 2 and 3 for ``faithfulness`` by a judge: the scripted OpenAI-compatible test server
   (``tests/judge_server.py``) answering each call in ``--judge-delay`` seconds (0.2).

The offline ``faithfulness`` (its models on these 2 cores, beside the server) and the
judged one are different workloads: both are printed.

PostgreSQL: a throwaway database on 127.0.0.1:5432 (``ASSAY_TEST_POSTGRES_URL``, as the
tests use), dropped afterwards.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC
from pathlib import Path

import httpx
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

PG_ADMIN_URL = os.environ.get(
    "ASSAY_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
LEXICAL = "bleu,chrf,exact_match,rouge"
HEADERS = {"content-type": "application/x-protobuf"}
#: the spans of one trace: (OpenInference kind, name), the root first
SPANS = [("CHAIN", "rag"), ("RETRIEVER", "retrieve"), ("TOOL", "lookup"), ("LLM", "llm")]
SPANS.append(("CHAIN", "format"))


def _attribute(span: object, key: str, value: str) -> None:
    kv = span.attributes.add()  # type: ignore[attr-defined]
    kv.key = key
    kv.value.string_value = value


def export(traces: int, seed: int) -> tuple[bytes, list[str]]:
    """One protobuf export of ``traces`` traces (root, retriever, tool, LLM, answer)."""
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    _attribute(resource_spans.resource, "service.name", "bench-rag")
    spans = resource_spans.scope_spans.add().spans
    ids = []
    now = time.time_ns()
    for t in range(traces):
        trace_id = uuid.uuid4().bytes
        ids.append(trace_id.hex())
        root_id = os.urandom(8)
        # every trace's texts differ: no embedding or judge cache answers for another
        name = f"{seed}-{t}-{trace_id.hex()[:6]}"
        question = f"What is the capital of country {name}?"
        answer = f"Its capital is city {name}, on river {t * 7 + seed}; it has {t} parks."
        document = (
            f"Country {name} has its capital at city {name}, on river {t * 7 + seed}, "
            f"founded in year {1000 + seed + t}."
        )
        for n, (kind, name) in enumerate(SPANS):
            span = spans.add()
            span.trace_id = trace_id
            span.span_id = root_id if n == 0 else os.urandom(8)
            if n:
                span.parent_span_id = root_id
            span.name = name
            span.start_time_unix_nano = now + n * 1_000_000
            span.end_time_unix_nano = now + (n + 1) * 1_000_000 if n else now + 9_000_000
            _attribute(span, "openinference.span.kind", kind)
            if kind == "CHAIN" and n == 0:
                _attribute(span, "input.value", question)
                _attribute(span, "output.value", answer)
            if kind == "RETRIEVER":
                _attribute(span, "retrieval.documents.0.document.content", document)
            if kind == "LLM":
                _attribute(span, "llm.model_name", "toy-1")
    return request.SerializeToString(), ids


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def judge(delay: float) -> Iterator[str]:
    """The scripted OpenAI-compatible test server (``tests/judge_server.py``) in its own
    process, answering each call after ``delay`` seconds; yields its base URL."""
    server = Path(__file__).resolve().parent.parent / "tests" / "judge_server.py"
    command = [sys.executable, str(server), "--delay", str(delay)]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        url = child.stdout.readline().strip() if child.stdout else ""
        if not url.startswith("http://127.0.0.1:"):
            raise SystemExit(f"the test judge did not start: {url!r}")
        yield url
    finally:
        child.kill()
        child.wait()


@contextmanager
def serving(
    db: str,
    metrics: str | None,
    cache: str,
    judge_url: str | None = None,
    scoring: bool = True,
) -> Iterator[str]:
    port = _free_port()
    command = ["assay", "serve", "--port", str(port), "--db", db, "--log-level", "warning"]
    if metrics:
        command += ["--live-metrics", metrics]
    if not scoring:
        command.append("--no-live-scoring")
    command += ["--live-grace", "0.5"]
    env = dict(os.environ, ASSAY_CACHE_DIR=cache)
    env.pop("ASSAY_JUDGE_BASE_URL", None)
    if judge_url is not None:
        env |= {"ASSAY_JUDGE_BASE_URL": f"{judge_url}/v1", "ASSAY_JUDGE_MODEL": "test-judge"}
    child = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{url}/api/live", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline or child.poll() is not None:
                raise SystemExit("assay serve did not start")
            time.sleep(0.2)
        yield url
    finally:
        child.terminate()
        child.wait(30)


def _send(client: httpx.Client, url: str, body: bytes) -> bool:
    """Send one export until it is taken (a 503 waits its Retry-After)."""
    while True:
        answer = client.post(f"{url}/v1/traces", content=body, headers=HEADERS)
        if answer.status_code == 200:
            return True
        if answer.status_code != 503:
            raise SystemExit(f"export refused: {answer.status_code} {answer.text[:200]}")
        time.sleep(float(answer.headers.get("retry-after", "1")))


def ingest_rate(url: str, seconds: float, exports: int = 1_000) -> float:
    """Spans acknowledged per second by 4 threads sending 50-span exports (each one new:
    a retried export's spans are not stored twice), for ``seconds`` or until the
    ``exports`` made beforehand are sent."""
    bodies = [export(10, seed)[0] for seed in range(exports)]
    taken = [0] * 4
    stop = time.monotonic() + seconds

    def sender(k: int) -> None:
        with httpx.Client(timeout=30) as client:
            for body in bodies[k::4]:
                if time.monotonic() >= stop:
                    return
                _send(client, url, body)
                taken[k] += 50

    started = time.monotonic()
    threads = [threading.Thread(target=sender, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(taken) / (time.monotonic() - started)


def drained(url: str, timeout: float = 900) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if httpx.get(f"{url}/api/live", timeout=10).json()["pending"] == 0:
            return
        time.sleep(0.1)
    raise SystemExit("the live worker did not drain in time")


def scoring_rate(url: str, traces: int = 500) -> float:
    """Traces scored per second: ``traces`` sent at once, until none waits."""
    bodies = [export(10, seed)[0] for seed in range(traces // 10)]
    started = time.monotonic()
    with httpx.Client(timeout=30) as client:
        for body in bodies:
            _send(client, url, body)
    drained(url)
    return traces / (time.monotonic() - started)


def lag(url: str, db: str, seconds: float, per_second: int = 50) -> tuple[float, float]:
    """p50 and p95 seconds from a trace's acknowledgement to its stored score."""
    from sqlalchemy import select

    from assay.core.stats import percentile
    from assay.store.db import Store
    from assay.store.models import TestResult

    acked: dict[str, float] = {}
    with httpx.Client(timeout=30) as client:
        started = time.monotonic()
        sent = 0
        while time.monotonic() - started < seconds:
            body, ids = export(5, sent)
            _send(client, url, body)
            now = time.time()
            acked.update(dict.fromkeys(ids, now))
            sent += 5
            time.sleep(max(0.0, started + sent / per_second - time.monotonic()))
    drained(url)
    store = Store(db)
    with store.session() as session:
        rows = session.execute(
            select(TestResult.sample_id, TestResult.timestamp).where(
                TestResult.sample_id.in_(list(acked))
            )
        ).all()
    store.close()
    # the store's timestamps are naive UTC
    lags = [ts.replace(tzinfo=UTC).timestamp() - acked[trace] for trace, ts in rows]
    return percentile(lags, 50) or 0.0, percentile(lags, 95) or 0.0


@contextmanager
def database(kind: str, folder: str) -> Iterator[str]:
    if kind == "sqlite":
        yield f"sqlite:///{Path(folder) / f'live-{uuid.uuid4().hex[:6]}.db'}"
        return
    import psycopg

    name = f"live_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--lag-seconds", type=float, default=20.0)
    parser.add_argument("--judge-delay", type=float, default=0.2, help="judge seconds a call")
    args = parser.parse_args()
    kinds = ["sqlite", "postgres"] if args.store == "both" else [args.store]
    with tempfile.TemporaryDirectory() as folder:
        cache = str(Path(folder, "cache"))
        for kind in kinds:
            with database(kind, folder) as db, serving(db, None, cache, scoring=False) as url:
                rate = ingest_rate(url, args.seconds)
                print(f"{kind}: {rate:,.0f} spans/s acknowledged, scoring off", flush=True)
            with database(kind, folder) as db, serving(db, None, cache) as url:
                rate = ingest_rate(url, args.seconds)
                print(
                    f"{kind}: {rate:,.0f} spans/s acknowledged while the worker makes each "
                    "trace a sample (no live metrics)",
                    flush=True,
                )
            for label, metrics in (("lexical suite", LEXICAL), ("faithfulness", "faithfulness")):
                with database(kind, folder) as db, serving(db, metrics, cache) as url:
                    rate = scoring_rate(url)
                    print(f"{kind}: {rate:,.1f} traces/s scored with the {label}", flush=True)
            with database(kind, folder) as db, serving(db, "faithfulness", cache) as url:
                p50, p95 = lag(url, db, args.lag_seconds)
                print(
                    f"{kind}: acknowledgement to score at 50 traces/s with faithfulness "
                    f"(offline): p50 {p50:.2f} s, p95 {p95:.2f} s",
                    flush=True,
                )
            with judge(args.judge_delay) as judge_url:
                with (
                    database(kind, folder) as db,
                    serving(db, "faithfulness", cache, judge_url) as url,
                ):
                    rate = scoring_rate(url)
                    print(
                        f"{kind}: {rate:,.1f} traces/s scored with faithfulness by a judge "
                        f"answering in {args.judge_delay:g} s",
                        flush=True,
                    )
                with (
                    database(kind, folder) as db,
                    serving(db, "faithfulness", cache, judge_url) as url,
                ):
                    p50, p95 = lag(url, db, args.lag_seconds)
                    print(
                        f"{kind}: acknowledgement to score at 50 traces/s with faithfulness "
                        f"by that judge: p50 {p50:.2f} s, p95 {p95:.2f} s",
                        flush=True,
                    )
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
