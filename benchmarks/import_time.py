"""Start-up cost: ``import assay``, ``assay --help`` and a lexical run, in fresh processes.

Each case runs ``--runs`` times (default 5) in a new interpreter and the median wall time is
printed, next to the median of an empty interpreter (``python -c pass``) so that a loaded
machine can be told from a slow import. The lexical case also prints the seconds spent in
the process from ``import assay`` through the first ``assay.evaluate`` of 3 samples with
rouge, bleu and exact_match (the imports that run needs), and which packages of the extras
it loaded.

    python benchmarks/import_time.py [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

LEXICAL = """
import json, sys, time
t0 = time.perf_counter()
import assay
rows = [{"response": "the cat sat", "expected": "the cat sat on the mat"}] * 3
assay.evaluate(rows, metrics=["rouge", "bleu", "exact_match"])
seconds = time.perf_counter() - t0
extras = ("torch", "transformers", "sentence_transformers", "spacy", "sklearn", "scipy",
          "fastapi", "sqlalchemy", "pandas", "pyarrow", "nltk", "rouge_score")
print(json.dumps({"seconds": seconds, "loaded": [m for m in extras if m in sys.modules]}))
"""

CASES: dict[str, list[str]] = {
    "python -c pass (baseline)": ["-c", "pass"],
    "import assay": ["-c", "import assay"],
    "assay --help": ["-m", "assay.cli", "--help"],
    "lexical run (3 samples)": ["-c", LEXICAL],
}


def _time(args: list[str]) -> tuple[float, str]:
    """Wall seconds of one fresh interpreter running ``args``, and its standard output."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, check=True, timeout=600
    )
    return time.perf_counter() - start, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per case")
    runs = parser.parse_args().runs
    for name, args in CASES.items():
        timings = [_time(args) for _ in range(runs)]
        median = statistics.median(seconds for seconds, _ in timings)
        print(f"{name:28s} {median:6.3f} s  (median of {runs})")
        if args[-1] == LEXICAL:
            reports = [json.loads(out.strip().splitlines()[-1]) for _, out in timings]
            inside = statistics.median(r["seconds"] for r in reports)
            print(f"{'  import + first evaluate':28s} {inside:6.3f} s  (in the process)")
            print(f"{'  extras packages loaded':28s} {reports[0]['loaded'] or 'none'}")


if __name__ == "__main__":
    main()
