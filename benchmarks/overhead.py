"""Assay's own cost per sample and its memory: ``python benchmarks/overhead.py [--large
100000] [--small 1000] [--million]``.

Runs ``assay evaluate DATA -m exact_match`` (a metric that costs next to nothing, so what
is measured is the run around it: reading, planning, reducing, summarising) in a fresh
process on ``small`` and ``large`` generated samples, with and without ``--out
results.jsonl``, and prints the marginal cost per sample, ``(t_large - t_small) /
(large - small)``, in wall time and in the child's CPU time (user + system, which other
work on the machine disturbs less), and each run's own peak RSS (``ru_maxrss`` of that
child, from ``wait4``); each size runs ``--repeat`` times (default 3) and the fastest
counts. ``--million`` adds a run of 1,000,000 samples with ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def write_samples(path: Path, n: int) -> None:
    with path.open("w", encoding="utf-8") as handle:
        for i in range(n):
            row = {"id": f"s{i}", "query": f"question {i}?", "response": f"answer {i % 7}"}
            row["expected"] = f"answer {i % 5}"
            handle.write(json.dumps(row) + "\n")


def run(data: Path, out: Path | None) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds and peak RSS (MB) of one ``assay evaluate`` in a fresh
    process."""
    command = ["assay", "evaluate", str(data), "-m", "exact_match", "--quiet", "--format", "json"]
    if out is not None:
        command += ["--out", str(out)]
    started = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, env=dict(os.environ))
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{' '.join(command)} failed")
    return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def fastest(data: Path, out: Path | None, repeat: int) -> tuple[float, float, float]:
    """`run` ``repeat`` times: the least wall and CPU seconds (what the machine's other
    work added least to; on 2 cores one run's start-up varies by 0.3 s, 3 µs a sample of
    the marginal cost at 100,000) and the largest peak RSS."""
    runs = [run(data, out) for _ in range(repeat)]
    return min(r[0] for r in runs), min(r[1] for r in runs), max(r[2] for r in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", type=int, default=1_000)
    parser.add_argument("--large", type=int, default=100_000)
    parser.add_argument("--million", action="store_true", help="also run 1,000,000 samples")
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs of each size; the fastest counts"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        small, large = Path(folder, "small.jsonl"), Path(folder, "large.jsonl")
        write_samples(small, args.small)
        write_samples(large, args.large)
        for label, out in (("without --out", None), ("with --out", Path(folder, "out.jsonl"))):
            t_small, cpu_small, rss_small = fastest(small, out, args.repeat)
            t_large, cpu_large, rss_large = fastest(large, out, args.repeat)
            span = args.large - args.small
            print(
                f"{label}: {1e6 * (t_large - t_small) / span:.1f} µs a sample wall, "
                f"{1e6 * (cpu_large - cpu_small) / span:.1f} µs CPU ({args.small:,}: "
                f"{t_small:.2f} s, {rss_small:.0f} MB; {args.large:,}: {t_large:.2f} s, "
                f"{rss_large:.0f} MB peak RSS)",
                flush=True,
            )
        if args.million:
            large.unlink()
            million = Path(folder, "million.jsonl")
            write_samples(million, 1_000_000)
            seconds, cpu, rss = run(million, Path(folder, "out.jsonl"))
            print(
                f"1,000,000 samples with --out: {seconds:.1f} s wall, {cpu:.1f} s CPU, "
                f"peak RSS {rss:.0f} MB",
                flush=True,
            )
    print(f"python {sys.version.split()[0]}")


if __name__ == "__main__":
    main()
