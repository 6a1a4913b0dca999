"""Judge calls per sample and judge-phase wall time on the 50 RAG samples.

``python benchmarks/judge_speed.py`` starts the scripted OpenAI-compatible test server
(``tests/judge_server.py``) in its own process with a fixed delay per call (default
200 ms, like a hosted judge's latency), then scores ``rag-bench-50.jsonl`` with the
judged metrics at the default concurrency (64):

1. the four RAGAS-style metrics and ``ragas_score``, metric after metric (each metric's
   own ``score_batch``), then again from a clean state through the engine as the runner
   uses it (`assay.engine.execute`: the distinct asks of all the metrics in concurrent
   rounds, then each metric reduces inside `answered`);
2. the judge specification's metrics (the same two ways), then ``factual_accuracy`` and
   ``answer_classification``;
3. everything again on a new run sharing the judge cache: it must make 0 calls;
4. the user-visible judge time: ``assay evaluate`` with the four ragas_* metrics minus
   the same command with ``exact_match`` only (fresh processes, no cache; goal <= 1.6 s).

Start-up (loading the embedder, opening connections with one warm-up call) is not
timed. Goals: the four RAGAS metrics in <= 2 calls per sample (issue 3: < 2 s for the
50 samples), the whole judged suite in <= 5 (the engine issue); 0 calls on a re-run.
For comparison, measured on the same work: RAGAS 0.4.3 makes 8 calls per sample
(9.4-29 s), DeepEval 4.3 makes 11 (23 s).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from assay.core.config import AssayConfig
from assay.core.sample import Sample
from assay.engine import answered, execute
from assay.engine.resources import Resources
from assay.judge.prompts import RELEVANCE
from assay.metrics.base import Metric
from assay.metrics.registry import get_metric

DATA = Path(os.environ.get("ASSAY_DEV_DATA", "/work/shared/data"))
SERVER = Path(__file__).resolve().parent.parent / "tests" / "judge_server.py"

RAGAS = [
    "ragas_faithfulness",
    "ragas_context_precision",
    "ragas_context_recall",
    "ragas_answer_relevance",
    "ragas_score",
]
JUDGE_SPEC_METRICS = [
    "judged_relevance",
    "faithfulness",
    "hallucination",
    "contextual_relevance",
    "answer_correctness",
]
REFERENCE = ["factual_accuracy", "answer_classification"]


def start_server(delay: float) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "--delay", str(delay)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    if not url.startswith("http://127.0.0.1:"):
        proc.kill()
        raise RuntimeError(f"test server did not start: {url!r}")
    return proc, url


def make_resources(
    url: str, cache_dir: str, embedder: object | None, concurrency: int
) -> Resources:
    res = Resources(
        AssayConfig(
            cache_dir=cache_dir,
            judge_base_url=url,
            judge_model="bench-judge",
            judge_api_key=None,
            judge_concurrency=concurrency,
            judge_cache=True,
        )
    )
    if embedder is not None:
        res.__dict__["embedder"] = embedder  # loaded once: start-up is not measured
    else:
        # the first batches of a fresh model are slow: warm it on sentences not in the data
        res.embedder.embed([f"Warm-up sentence number {i} for the encoder." for i in range(64)])
    assert res.judge is not None
    res.judge.ask_sync(RELEVANCE, query="warm-up", response="warm-up")  # open connections
    return res


def run_metrics(
    names: Sequence[str], samples: Sequence[Sample], res: Resources, engine: bool
) -> tuple[list[tuple[str, int, float]], float, int]:
    """(per metric: name, judge calls, seconds), total seconds, total calls."""
    judge = res.judge
    assert judge is not None
    metrics: list[Metric] = [get_metric(n) for n in names]
    rows = []
    started = time.perf_counter()
    calls0 = judge.usage.calls
    answers = None
    if engine:
        t0, c0 = time.perf_counter(), judge.usage.calls
        answers = execute(metrics, samples, res)
        rows.append(("(engine asks)", judge.usage.calls - c0, time.perf_counter() - t0))
    with answered(answers):
        for metric in metrics:
            t0, c0 = time.perf_counter(), judge.usage.calls
            results = metric.score_batch(samples, res)
            errors = [r.error for r in results if r.error]
            if errors:
                raise RuntimeError(f"{metric.name}: {len(errors)} failed, first: {errors[0]}")
            rows.append((metric.name, judge.usage.calls - c0, time.perf_counter() - t0))
    return rows, time.perf_counter() - started, judge.usage.calls - calls0


def report(
    title: str, rows: list[tuple[str, int, float]], total: float, calls: int, n: int
) -> None:
    print(f"\n{title}")
    print(f"  {'metric':26s} {'calls':>6s} {'calls/sample':>13s} {'seconds':>8s}")
    for name, c, seconds in rows:
        print(f"  {name:26s} {c:6d} {c / n:13.2f} {seconds:8.2f}")
    print(f"  {'total':26s} {calls:6d} {calls / n:13.2f} {total:8.2f}")


def user_visible(url: str, data: Path, tmp: str, rounds: int) -> tuple[float, float, float]:
    """Median wall time of ``assay evaluate`` with the four ragas_* metrics and with
    ``exact_match`` only (fresh processes, no judge cache), and their difference: the time
    a user waits for the judge."""
    env = {**os.environ, "ASSAY_JUDGE_API_KEY": "bench", "ASSAY_CACHE_DIR": f"{tmp}/cli"}
    judge = ["--judge-url", url, "--judge-model", "scripted", "--no-cache", "--format", "json"]
    four = [f"-m{name}" for name in RAGAS[:4]]

    def wall(metrics: list[str]) -> float:
        times = []
        for _ in range(rounds):
            started = time.perf_counter()
            subprocess.run(
                [sys.executable, "-m", "assay.cli", "evaluate", str(data), *metrics, *judge],
                env=env,
                capture_output=True,
                check=True,
            )
            times.append(time.perf_counter() - started)
        return sorted(times)[len(times) // 2]

    wall(["-mexact_match"])  # warm the file system caches and the embedding cache's folder
    judged, plain = wall(four), wall(["-mexact_match"])
    return judged, plain, judged - plain


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Judge calls and wall time, 50 RAG samples.")
    parser.add_argument("--data", type=Path, default=DATA / "rag-bench-50.jsonl")
    parser.add_argument("--delay", type=float, default=0.2, help="server seconds per call")
    parser.add_argument("--concurrency", type=int, default=AssayConfig().judge_concurrency)
    parser.add_argument(
        "--cli-rounds", type=int, default=3, help="repeats of the user-visible CLI timing"
    )
    parser.add_argument("--json", type=Path, help="also write the numbers to this file")
    args = parser.parse_args(argv)

    samples = [
        Sample.model_validate(json.loads(line))
        for line in args.data.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    n = len(samples)
    proc, url = start_server(args.delay)
    summary: dict[str, object] = {"samples": n, "delay": args.delay}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            print(
                f"{n} samples, server delay {args.delay * 1000:.0f} ms/call, "
                f"concurrency {args.concurrency}, server {url}"
            )
            base = make_resources(url, f"{tmp}/a", None, args.concurrency)
            embedder = base.embedder
            for group, names in (("RAGAS-style", RAGAS), ("LLM judge", JUDGE_SPEC_METRICS)):
                for engine in (False, True):
                    label = "engine" if engine else "metric by metric"
                    cache = f"{tmp}/{group}-{engine}"
                    res = make_resources(url, cache, embedder, args.concurrency)
                    rows, total, calls = run_metrics(names, samples, res, engine)
                    res.close()  # its connections: left open, one hung the next group 60 s
                    report(f"{group}, {label}", rows, total, calls, n)
                    summary[f"{group} {label}"] = {"seconds": total, "calls": calls}
            res = make_resources(url, f"{tmp}/ref", embedder, args.concurrency)
            rows, total, calls = run_metrics(REFERENCE, samples, res, False)
            report("RAG evaluation, reference-based", rows, total, calls, n)
            # a re-run over everything, sharing the cache of a complete first run
            everything = RAGAS + JUDGE_SPEC_METRICS + REFERENCE
            first = make_resources(url, f"{tmp}/all", embedder, args.concurrency)
            _, first_total, first_calls = run_metrics(everything, samples, first, True)
            again = make_resources(url, f"{tmp}/all", embedder, args.concurrency)
            rows, total, calls = run_metrics(everything, samples, again, False)
            report("re-run of all judged metrics (same cache)", rows, total, calls, n)
            print(
                f"\nfirst run of all judged metrics: {first_calls} calls "
                f"({first_calls / n:.2f} per sample), {first_total:.2f} s;"
                f" re-run: {calls} calls, {total:.2f} s"
            )
            summary["all first run"] = {"seconds": first_total, "calls": first_calls}
            summary["all re-run"] = {"seconds": total, "calls": calls}
            print("usage of the first run:", json.dumps(first.judge.usage.to_dict()))
            judged, plain, extra = user_visible(url, args.data, tmp, args.cli_rounds)
            print(
                f"\nuser-visible judge time (assay evaluate, four ragas_* metrics minus "
                f"exact_match only, median of {args.cli_rounds}): {judged:.2f} s - "
                f"{plain:.2f} s = {extra:.2f} s"
            )
            summary["user-visible"] = {"ragas": judged, "exact_match": plain, "extra": extra}
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
