"""API fuzz run: 10,000 generated requests against a real uvicorn, counting 5xx answers.

The script starts the app on 127.0.0.1 (a free port) over a temporary SQLite store
seeded with a few runs (extreme and missing values included) and a field-strategy
config, then sends requests to every operation of the OpenAPI document, an equal share
each, from two generators:

- **schemathesis**: cases generated from the schema, positive (valid per schema) and
  negative (violating it), sent with `requests`;
- **hostile**: `tests/test_api_fuzz.py`'s hypothesis strategies (deep JSON, 10**5000,
  1e309, NaN tokens, invalid UTF-8, NUL, lone surrogates, long and look-alike text,
  ``../`` and ``%00`` path segments), sent byte for byte over a socket.

It prints requests sent, 5xx seen and contract violations (a body that is not standard
JSON, or an error not in its declared shape) by operation and generator, and the wall
time. Loopback only; it stops when the count is reached or after ``--max-seconds``.

    python benchmarks/api_fuzz.py [--requests 10000] [--seed 0] [--max-seconds 1500]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import http.client
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as with_seed
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from assay.server.app import create_app  # noqa: E402
from assay.server.live import running_server  # noqa: E402
from assay.store.db import Store  # noqa: E402
from test_api_fuzz import (  # noqa: E402  (tests/ is not a package)
    HostileRequest,
    Operation,
    api_operations,
    check_response,
    hostile_requests,
    seed_store,
)

GENERATORS = ("schemathesis+", "schemathesis-", "hostile")
# numpy's overflow warnings on the seeded 1e308 latencies (the compare endpoint): expected
warnings.filterwarnings("ignore", r"(overflow|invalid value) encountered", RuntimeWarning)


@dataclass
class Tally:
    """What one (operation, generator) pair got back."""

    sent: int = 0
    statuses: collections.Counter[int] = field(default_factory=collections.Counter)
    violations: int = 0
    transport_errors: int = 0
    seconds: float = 0.0


@dataclass
class Report:
    tallies: dict[tuple[str, str], Tally] = field(
        default_factory=lambda: collections.defaultdict(Tally)
    )
    examples: list[str] = field(default_factory=list)

    def record(
        self, key: tuple[str, str], status: int, content_type: str, text: str, what: str
    ) -> None:
        tally = self.tallies[key]
        tally.sent += 1
        tally.statuses[status] += 1
        try:
            check_response(status, content_type, text)
        except (AssertionError, ValueError) as exc:
            tally.violations += 1
            if len(self.examples) < 20:
                self.examples.append(f"{key[0]} [{key[1]}] {what} -> {status}: {exc}"[:600])

    def transport_error(self, key: tuple[str, str], what: str, exc: Exception) -> None:
        tally = self.tallies[key]
        tally.sent += 1
        tally.transport_errors += 1
        if len(self.examples) < 20:
            self.examples.append(f"{key[0]} [{key[1]}] {what} -> no answer: {exc!r}"[:600])

    @property
    def sent(self) -> int:
        return sum(t.sent for t in self.tallies.values())


class RawClient:
    """One keep-alive connection to the server; reopened after the server closes it."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.conn: http.client.HTTPConnection | None = None

    def send(self, request: HostileRequest) -> tuple[int, str, str]:
        if self.conn is None:
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        try:
            self.conn.putrequest(request.method, request.url, skip_accept_encoding=True)
            if request.body is not None:
                self.conn.putheader("Content-Type", "application/json")
                self.conn.putheader("Content-Length", str(len(request.body)))
            self.conn.endheaders(request.body)
            response = self.conn.getresponse()
            text = response.read().decode("utf-8")
            if response.getheader("connection", "").lower() == "close":
                self.close()
            return response.status, response.getheader("content-type", ""), text
        except Exception:
            self.close()
            raise

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def _run_examples(strategy: st.SearchStrategy[Any], count: int, seed: int, send: Callable) -> None:
    """Draw up to ``count`` examples of ``strategy`` with hypothesis and ``send`` each."""

    @settings(
        max_examples=count,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.generate],
    )
    @with_seed(seed)
    @given(example=strategy)
    def run(example: Any) -> None:
        send(example)

    with contextlib.suppress(Unsatisfiable):  # no such case (negative: nothing to break)
        run()


def _schemathesis_cases(url: str) -> Iterator[tuple[str, Any, GenerationMode]]:
    schema = schemathesis.openapi.from_url(f"{url}/openapi.json")
    for result in schema.get_all_operations():
        operation = result.ok()
        key = f"{operation.method.upper()} {operation.path}"
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            yield key, operation.as_strategy(generation_mode=mode), mode


TRANSPORT_ERRORS = (
    OSError,
    http.client.HTTPException,
    UnicodeDecodeError,
    requests.RequestException,
)


def _case_answer(case: Any, url: str, session: requests.Session) -> tuple[int, str, str]:
    response = case.call(base_url=url, session=session, timeout=120)
    # schemathesis' responses list each header's values
    return response.status_code, response.headers.get("content-type", [""])[0], response.text


def fuzz(url: str, operations: list[Operation], total: int, seed: int, deadline: float) -> Report:
    """Rounds of generated requests (each operation's share from each generator, a new
    seed each round) until ``total`` are sent or the deadline passes."""
    report = Report()
    raw = RawClient(int(url.rsplit(":", 1)[1]))
    session = requests.Session()
    share = max(1, total // (len(operations) * 2))  # per operation: half each generator

    def sender(key: tuple[str, str], describe: Callable, answer: Callable) -> Callable:
        def send(example: Any) -> None:
            if report.sent >= total or time.monotonic() > deadline:
                return
            try:
                status, content_type, text = answer(example)
            except TRANSPORT_ERRORS as exc:
                report.transport_error(key, describe(example), exc)
                return
            report.record(key, status, content_type, text, describe(example))

        return send

    def run(key: tuple[str, str], strategy: Any, count: int, send: Callable) -> None:
        started = time.monotonic()
        _run_examples(strategy, count, seed + round_, send)
        report.tallies[key].seconds += time.monotonic() - started

    round_ = 0
    while report.sent < total and time.monotonic() < deadline:
        for name, strategy, mode in _schemathesis_cases(url):
            key = (name, "schemathesis" + ("+" if mode is GenerationMode.POSITIVE else "-"))
            send = sender(
                key,
                lambda case: case.as_curl_command()[:300],
                lambda case: _case_answer(case, url, session),
            )
            run(key, strategy, share // 2, send)
        for operation in operations:
            key = (f"{operation.method} {operation.template}", "hostile")
            send = sender(key, HostileRequest.describe, raw.send)
            run(key, hostile_requests(operation), share, send)
        round_ += 1
    raw.close()
    return report


def print_report(report: Report, seconds: float) -> None:
    width = max(len(key) for key, _ in report.tallies) + 2
    print(
        f"{'operation':<{width}}{'generator':<15}{'sent':>7}{'2xx':>7}{'4xx':>7}{'5xx':>6}"
        f"{'bad body':>9}{'no answer':>10}{'seconds':>9}"
    )
    totals = Tally()
    by_generator: dict[str, Tally] = collections.defaultdict(Tally)
    for (key, generator), tally in sorted(report.tallies.items()):
        s = tally.statuses
        ok = sum(n for c, n in s.items() if c < 400)
        client = sum(n for c, n in s.items() if 400 <= c < 500)
        server = sum(n for c, n in s.items() if c >= 500)
        print(
            f"{key:<{width}}{generator:<15}{tally.sent:>7}{ok:>7}{client:>7}{server:>6}"
            f"{tally.violations:>9}{tally.transport_errors:>10}{tally.seconds:>9.1f}"
        )
        for sink in (totals, by_generator[generator]):
            sink.sent += tally.sent
            sink.statuses.update(s)
            sink.violations += tally.violations
            sink.transport_errors += tally.transport_errors
    print()
    for generator in GENERATORS:
        t = by_generator[generator]
        fives = sum(n for c, n in t.statuses.items() if c >= 500)
        print(f"{generator:<15} sent {t.sent:>6}   5xx {fives}")
    fives = sum(n for c, n in totals.statuses.items() if c >= 500)
    print(f"\nrequests sent: {totals.sent}")
    print(f"5xx seen: {fives}")
    print(f"contract violations (non-standard JSON or undeclared error shape): {totals.violations}")
    print(f"requests without an answer: {totals.transport_errors}")
    print(f"statuses: {dict(sorted(totals.statuses.items()))}")
    print(f"wall time: {seconds:.1f} s ({totals.sent / seconds:.0f} requests/s)")
    for line in report.examples:
        print("  example:", line)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=10_000, help="requests to send")
    parser.add_argument("--seed", type=int, default=0, help="hypothesis seed of the first round")
    parser.add_argument("--max-seconds", type=float, default=1500, help="stop after this long")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        store = Store(str(Path(folder) / "fuzz.db"))
        seed_store(store)
        app = create_app(store, token="", max_samples=5)
        operations = api_operations(app)
        started = time.monotonic()
        with running_server(app) as url:
            report = fuzz(url, operations, args.requests, args.seed, started + args.max_seconds)
        seconds = time.monotonic() - started
        store.close()
    print_report(report, seconds)
    fives = sum(n for t in report.tallies.values() for c, n in t.statuses.items() if c >= 500)
    return 1 if fives or any(t.transport_errors for t in report.tallies.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
