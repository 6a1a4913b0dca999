"""The README's examples run: its CLI commands and its Python snippets."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from assay.cli import app

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```(\w+)\n(.*?)```", README, flags=re.DOTALL)


def _commands() -> list[tuple[int, str]]:
    """Each command with the number of its block: a block's commands run in order in one
    folder, so one can read what an earlier one wrote (``assay generate`` then ``assay run``)."""
    out = []
    for number, (lang, body) in enumerate(BLOCKS):
        if lang != "bash" or "ASSAY_JUDGE" in body:  # the judge example needs a server
            continue
        for line in body.splitlines():
            line = line.split("  #", 1)[0].strip()
            if line.startswith("assay ") and not line.startswith("assay serve"):
                out.append((number, line))
    return out


@pytest.mark.parametrize(("block", "command"), _commands(), ids=[c for _, c in _commands()])
def test_readme_command_runs(block, command, tmp_path_factory, monkeypatch, cache_dir):
    folder = tmp_path_factory.getbasetemp() / f"readme-block-{block}"
    folder.mkdir(exist_ok=True)
    monkeypatch.chdir(folder)
    monkeypatch.setenv("ASSAY_CACHE_DIR", cache_dir)
    # the examples' paths (also inside python:examples/...:answer) from the checkout
    args = [a.replace("examples/", f"{ROOT}/examples/") for a in shlex.split(command)][1:]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, f"{command}\n{result.output}"


def test_readme_python_quick_start_runs(resources):
    (block,) = [body for lang, body in BLOCKS if lang == "python" and "get_metric" in body]
    namespace: dict = {}
    exec(compile(block, "README.md", "exec"), namespace)
    assert namespace["result"].value > 0.7  # the paraphrase pair of the example
    assert namespace["run"].summary()


def test_readme_trace_example_runs():
    (block,) = [body for lang, body in BLOCKS if lang == "python" and "assay.trace" in body]
    namespace = {
        "question": "How tall is the Eiffel Tower?",
        "answer": "330 metres.",
        "reference": "About 330 m.",
        "call_model": lambda q: "draft",
        "search": lambda q: ["hit"],
    }
    exec(compile(block, "README.md", "exec"), namespace)
    sample = namespace["sample"]
    assert sample.tool_call_count == 1 and sample.response == "330 metres."
    assert sample.llm_latency is not None and sample.duration >= sample.llm_latency


def test_the_engine_guide_example_runs(resources):
    guide = (ROOT / "docs" / "engine.md").read_text(encoding="utf-8")
    (block,) = [
        b for lang, b in re.findall(r"```(\w+)\n(.*?)```", guide, re.DOTALL) if lang == "python"
    ]
    namespace: dict = {}
    exec(compile(block, "docs/engine.md", "exec"), namespace)
    question, second = "Where is the Eiffel Tower?", "It stands in Paris, France."
    q, r = resources.embedder.embed([question, second])
    # the same text on both sides: cosine 1; else the cosine of the two vectors
    assert namespace["echo"] == pytest.approx([1.0, float(q @ r)], abs=1e-6)
    signature = namespace["run"].results[1]["question_echo"].signature
    assert f"|model={resources.embedder.name}" in signature
