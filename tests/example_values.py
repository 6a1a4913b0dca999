"""Digests of what Assay computes on every example file, to hold a change that should move
no value to that promise, to the last bit.

For each example dataset and metric of the ``all-offline`` suite: a SHA-256 of every
sample's value (``float.hex``, so the last bit counts), method, error and evidence; for
``assay json-eval`` on ``examples/json``: a SHA-256 of its output rows. The snapshot in
``tests/data/example_values.json`` was written on the commit named in it;
``tests/test_example_values.py`` compares with it. After a change meant to move values,
write it again and read its diff (which files and metrics moved) in review:

    python tests/example_values.py --write
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from contextlib import chdir
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOT = Path(__file__).resolve().parent / "data" / "example_values.json"
DATASETS = sorted(p for p in (ROOT / "examples").glob("*.json*"))


def _value(value: float | None) -> str | None:
    return None if value is None else float(value).hex()


def _digest(rows: list[Any]) -> str:
    text = json.dumps(rows, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def example_evaluations(resources: Any = None) -> dict[str, Any]:
    """Each example dataset's name -> its `Evaluation` by the ``all-offline`` suite."""
    import assay

    out = {}
    for path in DATASETS:
        samples, _ = assay.read_samples(path)
        out[path.name] = assay.evaluate(samples, suites=["all-offline"], resources=resources)
    return out


def example_digests(evaluations: dict[str, Any]) -> dict[str, str]:
    """``"<file> <metric>"`` -> digest of that metric's results on every sample of the
    file (of `example_evaluations`), and ``"json-eval"`` -> digest of the json-eval output
    rows."""
    from assay.cli import app

    out: dict[str, str] = {}
    for name, evaluation in evaluations.items():
        for metric in evaluation.metrics:
            rows = [
                [_value(r.value), r.method, r.error, r.details, r.components, r.reason]
                for r in (row[metric.name] for row in evaluation.results)
            ]
            out[f"{name} {metric.name}"] = _digest(rows)
    # the rows name their files: relative to the checkout, so they are the same in any
    with tempfile.TemporaryDirectory() as folder, chdir(ROOT):
        written = Path(folder) / "rows.jsonl"
        json_dir = Path("examples", "json")
        result = CliRunner().invoke(
            app,
            [
                *("json-eval", str(json_dir / "gt"), str(json_dir / "out")),
                *("--strategies", str(json_dir / "strategies.json"), "--out", str(written)),
            ],
        )
        if result.exit_code != 0:
            raise RuntimeError(f"assay json-eval failed: {result.output}")
        out["json-eval"] = hashlib.sha256(written.read_bytes()).hexdigest()
    return out


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/example_values.py --write")
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
    ).stdout.strip()
    # an empty embedding cache, as the test has: a vector cached by an earlier run,
    # embedded in another batch, can differ from a fresh one in its last bits
    from assay.core.config import AssayConfig
    from assay.engine.resources import Resources

    with tempfile.TemporaryDirectory() as cache:
        os.environ["ASSAY_CACHE_DIR"] = cache
        resources = Resources(AssayConfig(cache_dir=cache))
        snapshot = {"commit": commit, "digests": example_digests(example_evaluations(resources))}
        resources.close()
    SNAPSHOT.write_text(json.dumps(snapshot, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(snapshot['digests'])} digests to {SNAPSHOT}")
