"""Results-store benchmark: write throughput and dashboard query latency.

1. Write throughput: samples/s through `Store.record` (one transaction per sample, 10
   metric values each: the way `assay evaluate --store` writes) into SQLite and PostgreSQL.
2. Query latency at 10k and 1M scoring rows (100k samples x 10 metrics spread over the
   last 30 days): every query the dashboard makes, median of 5 runs after one warm-up.
   Goal: each under 200 ms on SQLite at 1M rows. CPU time is printed next to the wall
   time and the load average with them: on a shared machine the wall time of the same
   query doubles under load (compare went from 131 to ~300 ms with no code change).

    python benchmarks/store_bench.py [--sizes 10000,1000000] [--postgres URL] [--keep DIR]

``--keep DIR`` keeps the filled query stores in DIR and reuses them on the next run
(filling 1M rows takes minutes).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path

from sqlalchemy import insert

from assay.core.result import MetricResult
from assay.core.sample import Sample
from assay.store.db import Store
from assay.store.models import Run, ScoringDetail, TestResult, utcnow

METRICS = [
    "semantic_similarity",
    "rouge",
    "bleu",
    "exact_match",
    "output_validity",
    "output_stability",
    "toxicity_score",
    "compliance_score",
    "harmfulness_score",
    "e2e_latency",
]


def write_throughput(store: Store, n: int = 1000) -> float:
    run_id = uuid.uuid4().hex[:12]
    store.start_run(run_id, metrics=METRICS)
    rng = random.Random(0)
    start = time.perf_counter()
    for i in range(n):
        results = {m: MetricResult(m, rng.random()) for m in METRICS}
        store.record(
            run_id,
            i,
            Sample(id=f"s{i}", query="q", response="an answer."),
            results,
            status="passed",
            duration=rng.random(),
        )
    return n / (time.perf_counter() - start)


def bulk_fill(store: Store, scoring_rows: int) -> None:
    """Insert scoring_rows / 10 samples with 10 metric values each, over 30 days, 100 runs."""
    rng = random.Random(1)
    n_samples = scoring_rows // len(METRICS)
    now = utcnow()
    runs = [uuid.uuid4().hex[:12] for _ in range(100)]
    with store.engine.begin() as conn:
        conn.execute(
            insert(Run),
            [
                {
                    "id": r,
                    "source": "bench",
                    "status": "finished",
                    "started_at": now - timedelta(days=30 - i * 0.3),
                    "metrics": METRICS,
                    "tags": {},
                    "config": {},
                }
                for i, r in enumerate(runs)
            ],
        )
    chunk = 5000
    next_id = 1
    for start in range(0, n_samples, chunk):
        tests, scores = [], []
        for i in range(start, min(n_samples, start + chunk)):
            when = now - timedelta(seconds=rng.uniform(0, 30 * 86400))
            run = runs[i * len(runs) // n_samples]
            tests.append(
                {
                    "id": next_id,
                    "run_id": run,
                    "sample_index": i,
                    "test_name": f"t{i}",
                    "sample_id": f"s{i % 1000}",
                    "status": rng.choice(["passed", "passed", "failed", "skipped"]),
                    "duration": rng.uniform(0.1, 40),
                    "timestamp": when,
                    "tags": {"method": rng.choice(["a", "b"])},
                }
            )
            for m in METRICS:
                scores.append(
                    {
                        "test_result_id": next_id,
                        "run_id": run,
                        "metric_name": m,
                        "metric_value": rng.random(),
                        "method": "local",
                        "details": {},
                        "signature": f"assay=0.1.0|metric={m}@1|method=local",
                        "timestamp": when,
                    }
                )
            next_id += 1
        with store.engine.begin() as conn:
            conn.execute(insert(TestResult), tests)
            conn.execute(insert(ScoringDetail), scores)
    for run in runs:  # close every run the way a real run ends (totals, snapshots, ANALYZE)
        store.finish_run(run)


def timed(fn, repeat: int = 5) -> tuple[float, float]:
    """Median wall and CPU milliseconds of ``repeat`` calls after one warm-up."""
    fn()
    wall, cpu = [], []
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    return statistics.median(wall) * 1000, statistics.median(cpu) * 1000


def query_latencies(store: Store, last_run: str, first_run: str) -> dict[str, tuple[float, float]]:
    return {
        "statistics (all time)": timed(lambda: store.statistics()),
        "statistics (24 h)": timed(lambda: store.statistics(hours=24)),
        "statistics (one run)": timed(lambda: store.statistics(run_id=last_run)),
        "history (24 h)": timed(lambda: store.history(24)),
        "history (7 days)": timed(lambda: store.history(24 * 7)),
        "runs list": timed(lambda: store.runs()),
        "run detail (200 samples)": timed(lambda: store.run_detail(last_run)),
        "compare two runs": timed(lambda: store.compare(first_run, last_run)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,1000000")
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--keep", help="folder to keep the filled query stores in and reuse")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        backends = [("sqlite", str(Path(tmp) / "w.db"))]
        if not args.no_postgres:
            backends.append(("postgresql", args.postgres))
        print("write throughput (Store.record, 10 metrics per sample, one transaction each)")
        for name, url in backends:
            try:
                store = Store(url)
            except Exception as exc:
                print(f"  {name}: unavailable ({exc})")
                continue
            print(f"  {name}: {write_throughput(store):,.0f} samples/s")
            store.close()
        for size in (int(s) for s in args.sizes.split(",")):
            path = Path(args.keep or tmp) / f"q{size}.db"
            filled = path.exists()
            store = Store(str(path))
            t = time.perf_counter()
            if not filled:
                bulk_fill(store, size)
            with store.session() as s:
                ids = [r[0] for r in s.query(Run.id).order_by(Run.started_at)]
            how = f"reused {path}" if filled else f"filled in {time.perf_counter() - t:.0f}s"
            print(f"\nSQLite, {size:,} scoring rows ({how}): median ms, wall and CPU")
            print(f"  load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
            for label, (ms, cpu) in query_latencies(store, ids[-1], ids[0]).items():
                flag = "" if ms < 200 else "  > 200 ms goal"
                print(f"  {label:<28}{ms:>9.1f}{cpu:>9.1f}{flag}")
            store.close()


if __name__ == "__main__":
    main()
