"""How long ``assay calibrate`` takes on 1,000 labelled samples, offline scoring included.

Writes 1,000 labelled samples of the development data to a temporary JSONL file and
times the whole command (reading, offline scoring, the fits and the k-fold
out-of-fold report with its bootstrap intervals, writing the file):

- ``toxicity_score`` on 1,000 Davidson tweets (label 1 = hate or offensive), method
  auto: the evidence fit and the toxicity head refit on the 512-dimensional embeddings,
  each with 5 folds;
- ``faithfulness`` on 1,000 summary or dialogue sentences with their contexts (the 430
  BEGIN dev responses and the first 570 QAGS CNN/DM sentences).

    python benchmarks/calibration_speed.py [--data /work/shared/data]
        [--cases toxicity,faithfulness]

The goal (issue 33) is under 60 s on 2 cores. Threads follow the cores the process may
use; run it on an otherwise idle machine. It also prints the CPU seconds the process
used (all threads): on a shared machine the wall time includes waiting for the cores.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from typer.testing import CliRunner

import assay.cli.calibrate_cmd  # noqa: F401  # registers `assay calibrate`
from assay.cli import app
from validity_data import begin_rows, davidson_tweets, qags_cnndm_sentences

N = 1000


def labelled_rows(case: str, data: Path) -> list[dict]:
    """1,000 labelled records for ``case``."""
    if case == "toxicity":
        samples, classes = davidson_tweets(data, 334, 0)
        return [
            {"response": s.response, "label": int(c != 2)}
            for s, c in zip(samples, classes, strict=True)
        ][:N]
    begin, begin_labels = begin_rows(data)
    qags, qags_labels, _ = qags_cnndm_sentences(data)
    pairs = [*zip(begin, begin_labels, strict=True), *zip(qags, qags_labels, strict=True)][:N]
    return [{"response": s.response, "contexts": s.contexts, "label": int(y)} for s, y in pairs]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path("/work/shared/data"))
    parser.add_argument("--cases", default="toxicity,faithfulness")
    args = parser.parse_args()
    metric = {"toxicity": "toxicity_score", "faithfulness": "faithfulness"}
    print(f"cores available: {len(os.sched_getaffinity(0))}")
    with tempfile.TemporaryDirectory() as folder:
        for case in args.cases.split(","):
            rows = labelled_rows(case, args.data)
            path = Path(folder) / f"{case}.jsonl"
            path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
            out = Path(folder) / f"{case}.calibration.json"
            command = ["calibrate", str(path), "-m", metric[case], "--out", str(out)]
            t0, c0 = time.perf_counter(), time.process_time()
            result = CliRunner().invoke(app, command)
            seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
            if result.exit_code != 0:
                raise SystemExit(f"{case}: exit {result.exit_code}: {result.output}")
            print(result.stdout, end="")
            print(
                f"{metric[case]}: {len(rows)} labelled samples calibrated in {seconds:.1f} s "
                f"wall, {cpu:.1f} s of CPU (all threads)\n"
            )


if __name__ == "__main__":
    main()
