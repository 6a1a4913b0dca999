"""What Assay computes on every example file, kept in a snapshot, to hold a change that
should move no value to that promise.

For each example dataset and metric of the ``all-offline`` suite, every sample's result:
value, method, error, details, components and reason; for ``assay json-eval`` on
``examples/json``: its output rows. The snapshot in ``tests/data/example_values.json``
keeps, per key (``"<file> <metric>"`` or ``"json-eval"``), a SHA-256 of those rows (values
as ``float.hex``, so the last bit counts; json-eval: of its output file) and the rows
themselves, one compact JSON line a key (floats as JSON numbers, which read back to the
same bits). It was written on the commit named in it.

``tests/test_example_values.py`` compares with it: a key whose digest is the same passes;
one whose digest moved passes only if its rows have the same structure, the same strings,
ints, bools and Nones, and floats within a small tolerance (a score the code rounded to
four decimals: one unit of the fourth). Values from neural models (embeddings, BERTScore,
cross-encoders: float32 kernels of OpenBLAS, MKL and oneDNN, chosen by the CPU) differ in
their last bits between CPU types, and CI runs on whatever machine it gets; a real change
moves a value further than that. After a change meant to move values, write the snapshot again
and read its diff (which files and metrics moved) in review:

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
JSON_EVAL = "json-eval"
# the fields of a metric's row, in the order the snapshot keeps them
FIELDS = ("value", "method", "error", "details", "components", "reason")


def _digest(rows: list[Any]) -> str:
    text = json.dumps(rows, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _plain(rows: list[Any]) -> list[Any]:
    """The rows as the snapshot reads back: JSON types only (tuples as lists)."""
    return json.loads(json.dumps(rows, default=str, ensure_ascii=False))


def example_evaluations(resources: Any = None) -> dict[str, Any]:
    """Each example dataset's name -> its `Evaluation` by the ``all-offline`` suite."""
    import assay

    out = {}
    for path in DATASETS:
        samples, _ = assay.read_samples(path)
        out[path.name] = assay.evaluate(samples, suites=["all-offline"], resources=resources)
    return out


def _json_eval(folder: Path) -> dict[str, Any]:
    """`assay json-eval` on ``examples/json``: the digest of its output file and its rows."""
    from assay.cli import app

    # the rows name their files: relative to the checkout, so they are the same in any
    with chdir(ROOT):
        written = folder / "rows.jsonl"
        json_dir = Path("examples", "json")
        result = CliRunner().invoke(
            app,
            [
                *(JSON_EVAL, str(json_dir / "gt"), str(json_dir / "out")),
                *("--strategies", str(json_dir / "strategies.json"), "--out", str(written)),
            ],
        )
    if result.exit_code != 0:
        raise RuntimeError(f"assay json-eval failed: {result.output}")
    data = written.read_bytes()
    rows = [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]
    return {"digest": hashlib.sha256(data).hexdigest(), "rows": rows}


def example_results(evaluations: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``"<file> <metric>"`` -> ``{"digest": ..., "rows": [...]}`` of that metric's results
    on every sample of the file (of `example_evaluations`), one row of `FIELDS` a sample,
    and ``"json-eval"`` -> the same of the json-eval output rows."""
    out: dict[str, dict[str, Any]] = {}
    for name, evaluation in evaluations.items():
        for metric in evaluation.metrics:
            rows = [
                [
                    None if r.value is None else float(r.value),
                    *(r.method, r.error, r.details, r.components, r.reason),
                ]
                for r in (row[metric.name] for row in evaluation.results)
            ]
            hexed = [[None if row[0] is None else row[0].hex(), *row[1:]] for row in rows]
            out[f"{name} {metric.name}"] = {"digest": _digest(hexed), "rows": _plain(rows)}
    with tempfile.TemporaryDirectory() as folder:
        out[JSON_EVAL] = _json_eval(Path(folder))
    return out


def read_snapshot() -> dict[str, Any]:
    """The snapshot: ``{"commit": ..., "results": {key: {"digest": ..., "rows": ...}}}``."""
    return json.loads(SNAPSHOT.read_text(encoding="utf-8"))


def _snapshot_text(commit: str, results: dict[str, dict[str, Any]]) -> str:
    """Valid JSON with one line a key, so a diff names the keys that moved."""
    lines = [
        f"  {json.dumps(key)}: "
        + json.dumps(results[key], sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        for key in sorted(results)
    ]
    body = ",\n".join(lines)
    return f'{{\n "commit": {json.dumps(commit)},\n "results": {{\n{body}\n }}\n}}\n'


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/example_values.py --write")
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
    ).stdout.strip()
    # an empty embedding cache, as the test has: a vector cached by an earlier run,
    # embedded in another batch, can differ from a fresh one in its last bits; float32
    # models on every machine (see the test's fixture)
    from assay.core.config import AssayConfig
    from assay.engine.resources import Resources

    with tempfile.TemporaryDirectory() as cache:
        os.environ["ASSAY_CACHE_DIR"] = cache
        resources = Resources(AssayConfig(cache_dir=cache, model_precision="float32"))
        results = example_results(example_evaluations(resources))
        resources.close()
    text = _snapshot_text(commit, results)
    SNAPSHOT.write_text(text, encoding="utf-8")
    print(f"wrote {len(results)} keys ({len(text.encode('utf-8'))} bytes) to {SNAPSHOT}")
