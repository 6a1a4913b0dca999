"""Speed of ``assay run``'s target calls against a local JSON server (``python
benchmarks/run_target.py [--samples 1000] [--delay 0.2] [--concurrency 64]``).

The server (127.0.0.1, a process of its own, a thread per connection) answers
``POST /ask`` after ``delay``
seconds and says in its reply how long it held the request (``held``, its own clock,
from reading the body to writing the reply). Printed:

1. calls a second for ``samples`` calls at ``concurrency``, against the ideal
   ``concurrency / delay``;
2. the client's own cost per call against a 0 ms server, one call at a time (the mean
   duration minus the server's held time) and at ``concurrency``;
3. the timing error of ``duration``: duration minus the server's held time, p50 and p95.

Numbers vary with the machine's load: run it alone.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from assay.core.sample import Sample
from assay.core.stats import percentile
from assay.inputs.targets import TargetSettings, call_target, parse_target


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body in separate writes: no 40 ms stall
    delay = 0.0

    def log_message(self, *args: Any) -> None:
        return

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        started = time.perf_counter()
        time.sleep(self.delay)
        question = json.loads(body)["query"]
        reply = json.dumps(
            {"answer": f"echo {question}", "held": time.perf_counter() - started}
        ).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512  # the listen backlog: 64 connections open at once


def _serve_forever(delay: float, port: Any) -> None:
    server = _Server(("127.0.0.1", 0), type("Handler", (_Handler,), {"delay": delay}))
    port.value = server.server_address[1]
    server.serve_forever()


def serve(delay: float) -> tuple[Any, str]:
    """The server in a process of its own (so it does not share this one's GIL with the
    client being measured) and its URL."""
    port = multiprocessing.Value("i", 0)
    process = multiprocessing.Process(target=_serve_forever, args=(delay, port), daemon=True)
    process.start()
    while port.value == 0:
        time.sleep(0.01)
    return process, f"http://127.0.0.1:{port.value}/ask"


def calls(url: str, n: int, concurrency: int) -> tuple[float, list[Sample]]:
    """Seconds for ``n`` calls and the answered samples (the server's held time is kept
    by reading it through a second JMESPath target: the same call, one more field)."""
    target = parse_target(url, response_path="answer", contexts_path="to_string(held)")
    samples = [Sample(id=str(i), query=f"question {i}") for i in range(n)]
    settings = TargetSettings(timeout=30.0, concurrency=concurrency, retries=0)
    started = time.perf_counter()
    done = call_target(samples, target, settings)
    return time.perf_counter() - started, done


def held(sample: Sample) -> float:
    return float((sample.contexts or ["nan"])[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--delay", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args()

    server, url = serve(args.delay)
    calls(url, args.concurrency, args.concurrency)  # warm-up: connections, imports
    seconds, done = calls(url, args.samples, args.concurrency)
    reasons: dict[str, int] = {}
    for s in done:
        if s.target_call is not None and s.target_call.status != "ok":
            reason = f"{s.target_call.status}: {s.target_call.reason}"
            reasons[reason] = reasons.get(reason, 0) + 1
    failed = sum(reasons.values())
    ideal = args.concurrency / args.delay
    rate = args.samples / seconds
    print(
        f"{args.samples} calls, {args.delay * 1000:.0f} ms each, concurrency "
        f"{args.concurrency}: {rate:.1f} calls/s, {100 * rate / ideal:.1f} % of the ideal "
        f"{ideal:.0f}/s ({failed} failed)"
    )
    for reason, n in sorted(reasons.items(), key=lambda item: -item[1]):
        print(f"  {n} x {reason}")
    errors = [s.duration - held(s) for s in done if s.duration is not None]
    server.terminate()

    fast, fast_url = serve(0.0)
    calls(fast_url, 50, 1)
    seconds, one = calls(fast_url, 500, 1)
    overhead = [s.duration - held(s) for s in one if s.duration is not None]
    print(
        f"0 ms server, one call at a time: {1000 * seconds / 500:.2f} ms a call end to end, "
        f"client and loopback {1000 * sum(overhead) / len(overhead):.2f} ms of it"
    )
    seconds, _ = calls(fast_url, 2000, args.concurrency)
    print(f"0 ms server, concurrency {args.concurrency}: {2000 / seconds:.0f} calls/s")
    fast.terminate()
    p50, p95 = percentile(errors, 50), percentile(errors, 95)
    print(
        f"duration minus the server's own held time at {args.delay * 1000:.0f} ms: "
        f"p50 {1000 * p50:.2f} ms, p95 {1000 * p95:.2f} ms"
    )


if __name__ == "__main__":
    main()
