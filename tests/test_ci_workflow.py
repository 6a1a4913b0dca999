"""The CI workflow of docs/ci.md, run locally, and ``assay compare --format markdown``.

The workflow's YAML is read out of docs/ci.md; each ``run`` step runs offline in a
temporary folder holding the bundled examples, with a temporary store, and the steps
that need GitHub or the network are left out by name: checkout, Python set-up, the JUnit
report and comment actions, and ``pip install``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml
from lxml import etree
from typer.testing import CliRunner

from assay.cli import app
from assay.core.result import MetricResult
from assay.core.sample import Sample
from assay.store.db import Store

REPO = Path(__file__).resolve().parents[1]
SCHEMA = etree.XMLSchema(etree.parse(str(REPO / "tests" / "data" / "JUnit.xsd")))
#: the steps left out: they need GitHub (an action) or the network (the install)
NEED_GITHUB = {
    "actions/checkout@v4",
    "actions/setup-python@v5",
    "mikepenz/action-junit-report@v5",
    "marocchino/sticky-pull-request-comment@v2",
}


def workflow() -> dict:
    """The one ```yaml block of docs/ci.md, parsed."""
    text = (REPO / "docs" / "ci.md").read_text(encoding="utf-8")
    [block] = re.findall(r"```yaml\n(.*?)```", text, flags=re.S)
    return yaml.safe_load(block)


def shell(command: str, folder: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", command],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_workflow_in_docs_ci_runs_locally(tmp_path, cache_dir):
    """Every ``run`` step but the install exits 0: the baseline and the candidate are
    stored, the gates pass (answer_classification 0.8 >= 0.75, fallback_detection 0 <=
    0.1), reports/assay.xml is valid JUnit with a case per sample and gated metric (10
    samples x 2), and comparison.md compares the two stored runs with the means of their
    JSON summaries. The same candidate step with a gate it misses exits 1 and still
    writes the JUnit file."""
    job = workflow()["jobs"]["assay"]
    steps = job["steps"]
    assert {s["uses"] for s in steps if "uses" in s} == NEED_GITHUB
    runs = [s for s in steps if "run" in s]
    assert runs[0]["run"].strip() == "pip install assay-eval"
    folder = tmp_path / "repo"
    folder.mkdir()
    (folder / "examples").symlink_to(REPO / "examples")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "assay"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m assay "$@"\n')
    wrapper.chmod(0o755)
    env = {
        **os.environ,
        **job["env"],
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "HF_HUB_OFFLINE": "1",
        "ASSAY_CACHE_DIR": cache_dir,
    }
    assert env["ASSAY_DATABASE_URL"] == "sqlite:///assay.db"  # in the step's folder
    for step in runs[1:]:
        done = shell(step["run"], folder, env)
        assert done.returncode == 0, (step["name"], done.stderr[-3000:])
    baseline = json.loads((folder / "baseline.json").read_text())
    candidate = json.loads((folder / "candidate.json").read_text())
    means = {
        m["name"]: (a["mean"], m["mean"])
        for a, m in zip(baseline["metrics"], candidate["metrics"], strict=True)
    }
    assert candidate["stored"] and baseline["stored"]
    assert means["answer_classification"][1] == 0.8
    assert means["fallback_detection"][1] == 0.0
    junit = etree.parse(str(folder / "reports" / "assay.xml"))
    assert SCHEMA.validate(junit), SCHEMA.error_log
    root = junit.getroot()
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("20", "2", "0")
    markdown = (folder / "comparison.md").read_text().splitlines()
    assert markdown[0] == (
        f"#### Assay: B ({candidate['run_id']}) against A ({baseline['run_id']})"
    )
    table = [line for line in markdown[4:] if line.startswith("| ")]
    rows = {line.split(" | ")[0][2:]: line.split(" | ")[1:3] for line in table}
    assert rows == {
        name.replace("_", "\\_"): [f"{a:.4f}", f"{b:.4f}"] for name, (a, b) in means.items()
    }
    # the candidate's DON'T KNOW answer was classified by a pattern (no model): the
    # metric's signatures differ between the runs, and the comment says so under the table
    blank, warning = markdown[4 + len(table) :]
    assert blank == ""
    assert warning.startswith(
        "> WARNING: answer\\_classification: the runs' signatures differ (method: local vs "
        "local, pattern; model: "
    )
    assert warning.endswith("): the difference may not be the system's")
    gate = runs[2]["run"].replace("answer_classification=0.75", "answer_classification=0.9")
    (folder / "reports" / "assay.xml").unlink()
    failed = shell(gate, folder, env)
    assert failed.returncode == 1
    assert "gate failed: answer_classification: mean 0.8000 < 0.9" in failed.stderr
    assert SCHEMA.validate(etree.parse(str(folder / "reports" / "assay.xml")))


def test_compare_markdown_is_a_table_for_a_pull_request(tmp_path):
    """Two stored runs of three samples: rouge 0.5 each in A and 0.75 each in B (B − A
    +0.25 on every pair: the bootstrap interval is that point, and the exact sign-flip
    p-value is 2 of the 2^3 sign patterns, 0.25; B above on all 3); a metric whose name
    holds ``|``, a line break and ``*`` with equal values (difference 0, p 1, level on 3).
    B's run id holds ``|``, a line break and HTML: all stay inside their cell."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    store = Store(url)
    odd = "odd|name\n*x*"
    runs = {"main": [0.5, 0.5, 0.5], "pr|7\n<b>": [0.75, 0.75, 0.75]}
    for run, rouge in runs.items():
        store.start_run(run, metrics=["rouge", odd])
        for i in range(3):
            results = {
                "rouge": MetricResult("rouge", rouge[i]),
                odd: MetricResult(odd, [1.0, 0.0, 1.0][i]),
            }
            store.record(run, i, Sample(id=f"s{i}", response="r"), results, status="passed")
    store.close()
    result = CliRunner().invoke(
        app, ["compare", "main", "pr|7\n<b>", "--db", url, "--format", "markdown"]
    )
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        "#### Assay: B (pr\\|7 \\<b\\>) against A (main)\n"
        "\n"
        "| metric | A mean | B mean | B − A | 95% CI | p | B above / level / below A "
        "| n A / n B / pairs |\n"
        "|---|--:|--:|--:|---|--:|---|---|\n"
        "| odd\\|name \\*x\\* | 0.6667 | 0.6667 | 0.0000 | 0.0000 to 0.0000 | 1.0000 "
        "| 0 / 3 / 0 | 3 / 3 / 3 |\n"
        "| rouge | 0.5000 | 0.7500 | +0.2500 | 0.2500 to 0.2500 | 0.2500 "
        "| 3 / 0 / 0 | 3 / 3 / 3 |\n"
    )
    refused = CliRunner().invoke(app, ["compare", "main", "main", "--db", url, "--format", "md"])
    assert refused.exit_code == 2
    assert "--format must be table, json or markdown" in refused.output
