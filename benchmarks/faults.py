"""A judged run under judge faults: nothing lost, nothing invented, the gate decided right.

``python benchmarks/faults.py`` starts the fault-injecting OpenAI-compatible test server
(``tests/judge_server.py``) on 127.0.0.1 and runs the real CLI (``assay evaluate``, in
this process) on 100 samples of ``judged_relevance`` with a gate (``--fail-under
judged_relevance=0.5``, default ``--max-errors 0``), once per scenario:

- ``clean``: no faults (the reference values and exit code);
- ``10 %``, ``30 %``, ``50 %``: that share of requests gets a fault drawn uniformly from
  every kind the server has (429, 500, hang, reset mid-body, slow drip, prose, ambiguous
  prose, empty choices, no message, null content, refusal, truncated reply, content
  filter), seeded;
- ``50 % rcv``: half the requests get a recoverable fault (429, 500, hang, reset, drip,
  prose, ambiguous prose): all of them should end in the right value;
- ``429 storm``: after the first 20 requests, every request is answered 429 with
  ``Retry-After: 1`` for a second (all those in flight meet it), then the server
  recovers.

The judge runs with its defaults (16 concurrent requests, 4 retries with backoff) but a
1 s per-call timeout, so a hang or a drip costs 1 s, not a minute. For each scenario it
prints: samples; faults injected; samples lost (neither a value nor an error; goal 0);
samples with an error instead of a value; wrong values (a value that differs from the
clean run's: a number made up from a faulty reply; goal 0); the exit code and the one
expected (3 when errored samples exceed ``--max-errors``, else the clean run's gate
outcome, 0); whether they match; extra calls (requests the server received beyond one per
sample: retries, JSON-only re-asks, the format probe); wall time. Then the errors by
reason. Loopback only; it stops by itself in well under 2 minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from typer.testing import CliRunner

from assay.cli import app
from judge_server import FAULTS, JudgeServer

METRIC = "judged_relevance"
GATE = 0.5
EXIT_ERRORS = 3
#: faults a retry or the JSON-only re-ask gets past (the others repeat if asked again)
RECOVERABLE = ("429", "500", "hang", "reset", "drip", "prose", "ambiguous")


@dataclass
class Outcome:
    scenario: str
    samples: int
    faults: int
    lost: int
    errored: int
    wrong: int
    exit_code: int
    expected: int
    extra_calls: int
    seconds: float
    reasons: Counter[str]


def write_samples(path: Path, n: int) -> None:
    """``n`` questions whose scripted scores are 1.0, 0.33 or 0.0 (mean about 0.6)."""
    answers = ["Lima is the capital of region {i}.", "The capital is Lima.", "Lima."]
    rows = [
        {
            "id": f"s{i}",
            "question": f"What is the capital of region {i}?",
            "response": answers[(0, 0, 1, 2, 0)[i % 5]].format(i=i),
        }
        for i in range(n)
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def read_results(path: Path) -> dict[str, tuple[float | None, str | None]]:
    """(value, error) of the metric by sample id, from the CLI's ``--out`` file."""
    out = {}
    for line in path.read_text().splitlines():
        record = json.loads(line)
        out[record["id"]] = (record[METRIC], record["evidence"][METRIC]["error"])
    return out


def run(
    scenario: str,
    server: JudgeServer,
    data: Path,
    workdir: Path,
    n: int,
    reference: dict[str, tuple[float | None, str | None]] | None,
    clean_exit: int | None,
) -> tuple[Outcome, dict[str, tuple[float | None, str | None]]]:
    out = workdir / f"{scenario.replace(' ', '_').replace('%', 'pct')}.jsonl"
    args = ["evaluate", str(data), "-m", METRIC, "--no-cache", "--quiet", "--out", str(out)]
    args += ["--judge-url", server.url, "--judge-model", "bench-judge"]
    args += ["--fail-under", f"{METRIC}={GATE}", "--format", "json"]
    env = {
        "ASSAY_JUDGE_API_KEY": "bench",
        "ASSAY_JUDGE_TIMEOUT": "1",
        "ASSAY_CACHE_DIR": str(workdir / "cache"),
    }
    calls_before = server.calls
    started = time.perf_counter()
    result = CliRunner().invoke(app, args, env=env)
    seconds = time.perf_counter() - started
    calls = server.calls - calls_before
    got = read_results(out) if out.exists() else {}
    ids = [f"s{i}" for i in range(n)]
    lost = sum(1 for i in ids if i not in got or got[i] == (None, None))
    errors = [got[i][1] for i in ids if i in got and got[i][1] is not None]
    wrong = 0
    if reference is not None:
        wrong = sum(
            1 for i in ids if i in got and got[i][0] is not None and got[i][0] != reference[i][0]
        )
    errored = len(errors)
    expected = EXIT_ERRORS if errored > 0 else (clean_exit if clean_exit is not None else 0)
    reasons = Counter(_reason(e) for e in errors)
    outcome = Outcome(
        scenario,
        n,
        sum(server.faults_served.values()),
        lost,
        errored,
        wrong,
        result.exit_code,
        expected,
        calls - n,
        seconds,
        reasons,
    )
    return outcome, got


def _reason(error: str) -> str:
    """An error message without its sample-specific tail."""
    text = error.removeprefix("JudgeError: ")
    text = text.replace("judge reply to relevance_rubric@1 unparsable after a JSON-only ", "")
    return text.split(" (")[0].split(": I can")[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    n = args.samples
    outcomes: list[Outcome] = []
    total = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp, JudgeServer() as server:
        workdir = Path(tmp)
        data = workdir / "samples.jsonl"
        write_samples(data, n)
        server.hang_seconds, server.drip_seconds = 60.0, 5.0
        clean, reference = run("clean", server, data, workdir, n, None, None)
        outcomes.append(clean)
        scenarios: list[tuple[str, float, tuple[str, ...]]] = [
            ("10 %", 0.1, FAULTS),
            ("30 %", 0.3, FAULTS),
            ("50 %", 0.5, FAULTS),
            ("50 % rcv", 0.5, RECOVERABLE),
            ("429 storm", 0.0, ()),
        ]
        for name, rate, kinds in scenarios:
            server.reset()
            server.hang_seconds, server.drip_seconds = 60.0, 5.0
            if rate:
                server.inject(rate, kinds, seed=args.seed)
            else:
                server.storm(1.0, retry_after="1", after=20)
            outcome, _ = run(name, server, data, workdir, n, reference, clean.exit_code)
            outcomes.append(outcome)
    print_table(outcomes)
    print(f"total {time.perf_counter() - total:.1f} s")
    ok = all(o.lost == 0 and o.wrong == 0 and o.exit_code == o.expected for o in outcomes)
    return 0 if ok else 1


def print_table(outcomes: list[Outcome]) -> None:
    head = (
        f"{'scenario':<10} {'samples':>7} {'faults':>6} {'lost':>4} {'errored':>7} "
        f"{'wrong':>5} {'exit':>4} {'expected':>8} {'gate ok':>7} {'extra calls':>11} "
        f"{'wall s':>6}"
    )
    print(head)
    print("-" * len(head))
    for o in outcomes:
        print(
            f"{o.scenario:<10} {o.samples:>7} {o.faults:>6} {o.lost:>4} {o.errored:>7} "
            f"{o.wrong:>5} {o.exit_code:>4} {o.expected:>8} "
            f"{'yes' if o.exit_code == o.expected else 'NO':>7} {o.extra_calls:>11} "
            f"{o.seconds:>6.1f}"
        )
    print()
    for o in outcomes:
        if o.reasons:
            shown = "; ".join(f"{count} x {reason}" for reason, count in o.reasons.most_common())
            print(f"{o.scenario} errors: {shown}")


if __name__ == "__main__":
    sys.exit(main())
