"""Assay's own cost per sample: ``python benchmarks/overhead.py [--large 100000]
[--small 1000]``.

Runs ``assay evaluate DATA -m exact_match`` (a metric that costs next to nothing, so what
is measured is the run around it: reading, planning, reducing, summarising) in a fresh
process on ``small`` and ``large`` generated samples, with and without ``--out
results.jsonl``, and prints the marginal cost per sample, ``(t_large - t_small) /
(large - small)``, and each run's peak RSS (the child's ``ru_maxrss``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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


def run(data: Path, out: Path | None) -> tuple[float, float]:
    """Seconds and peak RSS (MB) of one ``assay evaluate`` in a fresh process."""
    command = ["assay", "evaluate", str(data), "-m", "exact_match", "--quiet", "--format", "json"]
    if out is not None:
        command += ["--out", str(out)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=dict(os.environ))
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return seconds, max(peak, before) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", type=int, default=1_000)
    parser.add_argument("--large", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        small, large = Path(folder, "small.jsonl"), Path(folder, "large.jsonl")
        write_samples(small, args.small)
        write_samples(large, args.large)
        for label, out in (("without --out", None), ("with --out", Path(folder, "out.jsonl"))):
            t_small, _ = run(small, out)
            t_large, rss = run(large, out)
            per_sample = (t_large - t_small) / (args.large - args.small)
            print(
                f"{label}: {1e6 * per_sample:.1f} µs a sample ({args.small:,}: {t_small:.2f} s, "
                f"{args.large:,}: {t_large:.2f} s; peak RSS so far {rss:.0f} MB)",
                flush=True,
            )
    print(f"python {sys.version.split()[0]}")


if __name__ == "__main__":
    main()
