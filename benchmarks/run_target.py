"""Speed of ``assay run``'s target calls against a local JSON server (``python
benchmarks/run_target.py [--samples 1000] [--delay 0.2] [--concurrency 64]``).

The server (127.0.0.1, a process of its own, a thread per connection) answers
``POST /ask`` after ``delay`` seconds and says in its reply how long it held the request
(``held``, its own clock: from the kernel's receive stamp of the request's last bytes to
writing the reply). Printed:

1. calls a second for ``samples`` calls at ``concurrency``, against the ideal
   ``concurrency / delay``;
2. the client's own cost per call against a 0 ms server, one call at a time (the time
   a call minus the server's held time; ``duration`` is the network's, from the request's
   first write to the kernel's stamp of the reply's last bytes, so it leaves the
   client's work out) and the calls a second at ``concurrency``;
3. the timing error of ``duration``: duration minus the server's held time, p50 and p95.

Numbers vary with the machine's load: run it alone.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import socket
import socketserver
import time
from typing import Any

from assay.core.http_timing import RECEIVE_STAMP_SPACE, SO_TIMESTAMPNS, receive_stamp
from assay.core.sample import Sample
from assay.core.stats import percentile
from assay.inputs.targets import TargetSettings, call_target, parse_target


class _Handler(socketserver.BaseRequestHandler):
    """HTTP/1.1 with keep-alive, read with ``recvmsg``: the held time starts at the
    kernel's receive stamp of the request's last bytes (`SO_TIMESTAMPNS`), so a server
    thread that runs late (64 of them, and the client, on 2 cores) does not count its own
    wait as the client's timing error."""

    delay = 0.0

    def handle(self) -> None:
        sock = self.request
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        pending = b""
        while True:
            arrived = 0
            while b"\r\n\r\n" not in pending or len(pending) < _request_size(pending):
                data, ancillary, _, _ = sock.recvmsg(65536, RECEIVE_STAMP_SPACE)
                if not data:
                    return
                pending += data
                arrived = receive_stamp(ancillary)
            size = _request_size(pending)
            request, pending = pending[:size], pending[size:]
            time.sleep(self.delay)
            question = json.loads(request.split(b"\r\n\r\n", 1)[1])["query"]
            held = (time.time_ns() - arrived) / 1e9
            reply = json.dumps({"answer": f"echo {question}", "held": held}).encode()
            head = (
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                f"content-length: {len(reply)}\r\n\r\n"
            )
            sock.sendall(head.encode() + reply)


def _request_size(pending: bytes) -> int:
    """The bytes of the request at the start of ``pending`` (its head and body), or one
    more than ``pending`` holds while its head is incomplete."""
    head, found, _ = pending.partition(b"\r\n\r\n")
    if not found:
        return len(pending) + 1
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return len(head) + 4 + length


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
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
    network = [s.duration - held(s) for s in one if s.duration is not None]
    own = seconds / 500 - sum(held(s) for s in one) / 500
    print(
        f"0 ms server, one call at a time: {1000 * seconds / 500:.2f} ms a call end to end, "
        f"of which Assay's client {1000 * own:.2f} ms and the loopback (duration minus the "
        f"server's held time) {1000 * sum(network) / len(network):.2f} ms"
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
