"""``python -m assay`` starts the ``assay`` command, as the installed script does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import assay
from assay.inputs.read import read_samples
from assay.metrics.lexical import ExactMatch
from fresh_interpreter import ASSAY_ROOT

REPO = Path(__file__).resolve().parent.parent
CHATBOT = REPO / "examples" / "chatbot.jsonl"


def _python_m(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m assay ARGS`` in a fresh interpreter importing this checkout's assay."""
    env = {**os.environ, "PYTHONPATH": ASSAY_ROOT, "HF_HUB_OFFLINE": "1", "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "assay", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_python_m_assay_help_lists_the_commands() -> None:
    done = _python_m("--help")
    assert done.returncode == 0, done.stderr
    assert "Usage: assay [OPTIONS] COMMAND" in done.stdout
    for command in ("evaluate", "run", "compare", "metrics", "serve"):
        assert f"│ {command} " in done.stdout


def test_python_m_assay_evaluates_the_bundled_example() -> None:
    samples, errors = read_samples(CHATBOT)
    assert errors == []
    # exact_match by hand: 1 where the normalised response is the expected answer
    expected = [ExactMatch().score(s).value for s in samples]
    table = _python_m("evaluate", str(CHATBOT.relative_to(REPO)), "-m", "exact_match")
    assert table.returncode == 0, table.stderr
    assert f"{len(samples)} samples, 1 metrics" in table.stdout
    assert "exact_match" in table.stdout
    machine = _python_m(
        "evaluate", "examples/chatbot.jsonl", "-m", "exact_match", "--format", "json"
    )
    assert machine.returncode == 0, machine.stderr
    report = json.loads(machine.stdout)
    assert report["samples"] == len(samples) == 10
    [row] = report["metrics"]
    assert row["name"] == "exact_match"
    assert row["n"] == 10
    assert row["mean"] == sum(expected) / len(expected)
    assert assay.__file__.startswith(ASSAY_ROOT)
