"""Scoring on Ray: worker scaling, Ray's overhead, and the cluster-wide judge budget.

``python benchmarks/scale.py`` measures, on this machine:

1. ``semantic``: the semantic suite (embeddings, BERTScore and the similarity metrics)
   over STS-B dev sentence pairs (response = sentence 1, expected answer and context =
   sentence 2), samples/s with 1 and then 2 Ray workers, each reserving one CPU (so its
   models use one thread) on a local Ray instance of 2 CPUs; goal: 2 workers >= 1.7 x 1.
   Each rate is given end to end (actors starting and loading their models included)
   and steady (from the first chunk back to the last: the models loaded).
2. ``overhead``: the same suite and samples on the local executor in a process with one
   thread per model (``OMP_NUM_THREADS=1``, as Ray gives a one-CPU worker) against Ray
   with one one-CPU worker; goal: Ray <= 15 % slower, steady.
3. ``judged``: the judged suite over 10,000 RAG samples (the 50 of ``rag-bench-50.jsonl``,
   each text made distinct per copy, so nothing is answered twice) against the test judge
   server in its own process answering each call after 200 ms, with a cluster-wide limit
   of 64 concurrent calls (``judge_concurrency=64``) and no cache: judge calls/s against
   the ceiling 64 / 0.2 s = 320/s (goal >= 80 %), the most calls the server saw in
   flight at once (goal: never above 64), and the budget's counters (its own peak, the
   slots granted, the actor calls asking for and giving back slots).

4. ``reading``: ``--read-samples`` RAG samples (rag-bench-50.jsonl, each copy distinct)
   written as one JSONL file with a broken line in the middle, read (a) by the local
   reader from its path, (b) by its file:// URL in pieces in this process
   (`assay.inputs.locations.read_location`) and (c) by Ray tasks on a local instance of 2 CPUs
   (`RayExecutor.read_samples`, the instance started before the clock): seconds and
   samples/s of each, and whether (b) and (c) give (a)'s samples and messages.

The values of the semantic suite's Ray runs are compared with the local run of part 2
(the same samples and chunks, one thread per model): the number of differing results is
printed (0 expected; float32 embeddings computed with another number of BLAS threads
differ in the 7th digit, on one machine as much as on Ray). The machine's load
average is printed with each number: it is shared, and a loaded machine gives lower
rates.

    python benchmarks/scale.py                      # everything
    python benchmarks/scale.py semantic judged      # some parts
    python benchmarks/scale.py --samples 600 --judged-samples 2000
    python benchmarks/scale.py reading --read-samples 100000
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

DATA = Path(os.environ.get("ASSAY_DEV_DATA", "/work/shared/data"))
SERVER = Path(__file__).resolve().parent.parent / "tests" / "judge_server.py"


def load() -> str:
    return f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"


def sts_samples(n: int) -> list[dict[str, Any]]:
    """The first ``n`` STS-B dev pairs as samples (repeated with a suffix past 1,500)."""
    with (DATA / "stsb-dev.tsv").open(encoding="utf-8") as handle:
        pairs = [
            (row[5], row[6]) for row in csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
        ]
    out = []
    for i in range(n):
        first, second = pairs[i % len(pairs)]
        tail = f" ({i // len(pairs)})" if i >= len(pairs) else ""
        out.append(
            {"id": f"sts{i}", "response": first + tail, "expected": second, "contexts": [second]}
        )
    return out


def rag_samples(n: int) -> list[dict[str, Any]]:
    """``n`` samples from rag-bench-50.jsonl, copy k's question and answer marked "(k)"."""
    base = [json.loads(line) for line in (DATA / "rag-bench-50.jsonl").read_text().splitlines()]
    out = []
    for i in range(n):
        row = dict(base[i % len(base)])
        copy = i // len(base)
        row["id"] = f"{row['id']}-{copy}"
        row["question"] = f"{row['question']} ({copy})"
        row["answer"] = f"{row['answer']} ({copy})"
        row.pop("kind", None)
        out.append(row)
    return out


def timed_run(
    samples: list[dict[str, Any]], suites: list[str], config: Any, executor: Any = None
) -> tuple[Any, float, float]:
    """(evaluation, end-to-end seconds, steady samples/s from the first chunk back)."""
    import assay

    arrived: list[float] = []
    started = time.perf_counter()
    evaluation = assay.evaluate(
        samples,
        suites=suites,
        config=config,
        executor=executor,
        on_sample=lambda *_: arrived.append(time.perf_counter()),
    )
    total = time.perf_counter() - started
    first_chunk = min(config.chunk_size, len(samples))
    steady = (len(samples) - first_chunk) / max(1e-9, arrived[-1] - arrived[first_chunk - 1])
    return evaluation, total, steady


def triples(evaluation: Any) -> list[dict[str, list[Any]]]:
    """Each sample's (value, signature, error) by metric name."""
    return [
        {name: [r.value, r.signature, r.error] for name, r in row.items()}
        for row in evaluation.results
    ]


def differing(evaluation: Any, reference: list[dict[str, list[Any]]]) -> dict[str, Any]:
    """How many results of ``evaluation`` differ from ``reference`` (`triples` of another
    run) in value, signature or error, and the largest difference between two values."""
    count, largest = 0, 0.0
    for got, want in zip(triples(evaluation), reference, strict=True):
        for name, (value, signature, error) in want.items():
            if got[name] != [value, signature, error]:
                count += 1
                if value is not None and got[name][0] is not None:
                    largest = max(largest, abs(got[name][0] - value))
    return {"results": count, "largest_value_difference": largest}


def semantic(n: int, batch: int) -> dict[str, Any]:
    """Part 1 and the Ray side of part 2 (the local side runs in `local_child`)."""
    import ray

    from assay.core.config import AssayConfig
    from assay.evaluation.scale.ray_executor import RayExecutor

    samples = sts_samples(n)
    cache = tempfile.mkdtemp(prefix="assay-scale-")
    config = AssayConfig(chunk_size=batch, cache_dir=cache, use_cache=False, device="cpu")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    runs = {}
    try:
        for workers in (1, 2):
            evaluation, total, steady = timed_run(
                samples, ["semantic"], config, RayExecutor(workers=workers)
            )
            runs[workers] = {
                "seconds": round(total, 2),
                "samples_per_s": round(n / total, 1),
                "steady_samples_per_s": round(steady, 1),
                "load": load(),
            }
            runs[workers]["evaluation"] = evaluation
    finally:
        ray.shutdown()
        shutil.rmtree(cache, ignore_errors=True)
    local, reference = local_child(n, batch)
    differences = [differing(runs[w].pop("evaluation"), reference) for w in (1, 2)]
    one, two = runs[1], runs[2]
    return {
        "samples": n,
        "one_worker": one,
        "two_workers": two,
        "speedup_steady": round(two["steady_samples_per_s"] / one["steady_samples_per_s"], 2),
        "speedup_end_to_end": round(two["samples_per_s"] / one["samples_per_s"], 2),
        "local_one_cpu": local,
        "ray_overhead_steady": round(
            local["steady_samples_per_s"] / one["steady_samples_per_s"] - 1, 3
        ),
        "ray_overhead_end_to_end": round(one["seconds"] / local["seconds"] - 1, 3),
        "values_differing_from_local": differences,
    }


def local_child(n: int, batch: int) -> tuple[dict[str, Any], list[dict[str, list[Any]]]]:
    """The local executor with one thread per model (``OMP_NUM_THREADS=1``, as Ray gives a
    one-CPU worker), in a fresh process: its timings and its results (`triples`)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    with tempfile.NamedTemporaryFile(suffix=".json") as values:
        command = [sys.executable, __file__, "--child", str(n), "--batch", str(batch)]
        command += ["--values", values.name]
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
        reference = json.loads(Path(values.name).read_text())
    return json.loads(done.stdout.strip().splitlines()[-1]), reference


def child(n: int, batch: int, values: str) -> None:
    from assay.core.config import AssayConfig

    cache = tempfile.mkdtemp(prefix="assay-scale-")
    config = AssayConfig(chunk_size=batch, cache_dir=cache, use_cache=False, device="cpu")
    evaluation, total, steady = timed_run(sts_samples(n), ["semantic"], config)
    shutil.rmtree(cache, ignore_errors=True)
    Path(values).write_text(json.dumps(triples(evaluation)))
    print(
        json.dumps(
            {
                "seconds": round(total, 2),
                "samples_per_s": round(n / total, 1),
                "steady_samples_per_s": round(steady, 1),
                "load": load(),
            }
        )
    )


def judged(n: int, workers: int, cpus_per_worker: float, batch: int) -> dict[str, Any]:
    """Part 3: the judged suite against the 200 ms server, 64 calls in flight at most."""
    import ray

    from assay.core.config import AssayConfig
    from assay.evaluation.scale.ray_executor import RayExecutor

    server = subprocess.Popen(
        [sys.executable, str(SERVER), "--delay", "0.2"], stdout=subprocess.PIPE, text=True
    )
    assert server.stdout is not None
    url = server.stdout.readline().strip()
    cache = tempfile.mkdtemp(prefix="assay-scale-")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        config = AssayConfig(
            judge_model="test-judge",
            judge_base_url=url,
            judge_concurrency=64,
            use_cache=False,
            cache_dir=cache,
            chunk_size=batch,
        )
        executor = RayExecutor(workers=workers, cpus_per_worker=cpus_per_worker)
        evaluation, total, _ = timed_run(rag_samples(n), ["judged"], config, executor)
        with urllib.request.urlopen(url.rstrip("/") + "/stats") as reply:
            stats = json.loads(reply.read())
    finally:
        ray.shutdown()
        server.terminate()
        server.wait()
        shutil.rmtree(cache, ignore_errors=True)
    usage = evaluation.judge_usage or {}
    errors = sum(1 for row in evaluation.results for r in row.values() if r.error)
    calls = stats["calls"]
    return {
        "samples": n,
        "workers": workers,
        "cpus_per_worker": cpus_per_worker,
        "seconds": round(total, 1),
        "calls": calls,
        "calls_per_sample": round(calls / n, 2),
        "calls_per_s": round(calls / total, 1),
        "share_of_ceiling_320": round(calls / total / 320, 3),
        "peak_in_flight_at_server": stats["max_in_flight"],
        "budget": executor.budget_stats,
        "mean_call_latency_s": usage.get("mean_latency_seconds"),
        "judge_failures": usage.get("failures"),
        "metric_errors": errors,
        "load": load(),
    }


def reading(n: int) -> dict[str, Any]:
    """Part 4 (see the module docstring)."""
    import ray

    from assay.evaluation.scale import RayExecutor
    from assay.inputs.locations import read_location
    from assay.inputs.read import read_samples

    folder = Path(tempfile.mkdtemp(prefix="assay-read-"))
    data = folder / "rag.jsonl"
    lines = [json.dumps(row) for row in rag_samples(n)]
    lines.insert(n // 2, "{broken")
    data.write_text("\n".join(lines) + "\n")
    out: dict[str, Any] = {"samples": n, "megabytes": round(data.stat().st_size / 2**20, 1)}
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    executor = RayExecutor()
    ways = {
        "local reader, path": lambda: read_samples(data),
        "pieces in this process, file:// URL": lambda: read_location(data.as_uri()),
        "Ray tasks, file:// URL": lambda: executor.read_samples(data.as_uri()),
    }
    reference: tuple[list[Any], list[str]] | None = None
    for name, read in ways.items():
        started = time.perf_counter()
        samples, errors = read()
        seconds = time.perf_counter() - started
        got = (samples, [str(e).replace(data.as_uri(), str(data)) for e in errors])
        reference = reference or got
        out[name] = {
            "seconds": round(seconds, 2),
            "samples/s": round(len(samples) / seconds),
            "same samples and messages": got == reference,
            "load": load(),
        }
    out["Ray tasks"] = executor.read_by
    ray.shutdown()
    shutil.rmtree(folder, ignore_errors=True)
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("parts", nargs="*", default=["semantic", "judged"])
    parser.add_argument("--samples", type=int, default=1000, help="semantic suite samples")
    parser.add_argument("--batch", type=int, default=64, help="samples per chunk")
    parser.add_argument("--judged-samples", type=int, default=10_000)
    parser.add_argument("--judged-workers", type=int, default=2)
    parser.add_argument("--judged-cpus-per-worker", type=float, default=1.0)
    parser.add_argument("--read-samples", type=int, default=100_000)
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--values", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child, args.batch, args.values)
        return
    if "semantic" in args.parts:
        print(json.dumps({"semantic": semantic(args.samples, args.batch)}, indent=2), flush=True)
    if "judged" in args.parts:
        result = judged(
            args.judged_samples, args.judged_workers, args.judged_cpus_per_worker, args.batch
        )
        print(json.dumps({"judged": result}, indent=2), flush=True)
    if "reading" in args.parts:
        print(json.dumps({"reading": reading(args.read_samples)}, indent=2), flush=True)


if __name__ == "__main__":
    main()
