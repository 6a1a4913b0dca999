"""Where a run's model time goes: the model work counted by kind (`assay.engine.work`),
carried by the `Evaluation`, printed by ``assay evaluate`` and in its JSON."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

from rich.console import Console
from rich.progress import Progress
from typer.testing import CliRunner

from assay.cli import app
from assay.cli.report import model_work_bar
from assay.core.config import AssayConfig
from assay.engine.resources import Resources
from assay.engine.work import KindWork, ModelWork, work_line
from assay.evaluation.runner import evaluate

#: two RAG samples: distinct texts worked out by hand below
SAMPLES = [
    {
        "id": "a",
        "response": "The tower was completed in 1889.",
        "expected": "It was finished in 1889.",
        "contexts": ["The tower was completed in March 1889.", "Paris is in France."],
    },
    {
        "id": "b",
        "response": "The tower is 330 metres tall.",
        "expected": "It was finished in 1889.",
        "contexts": ["The tower was completed in March 1889."],
    },
]
# parse (anchor_hallucination: each response and each distinct passage): 2 responses +
# 2 distinct passages = 4 texts; entities (recognised in the texts whose anchors are read):
# the 2 responses. embed (semantic_similarity: response and expected):
# 2 responses + 1 distinct reference = 3 texts.


def test_a_run_counts_its_distinct_texts_by_model_kind(tmp_path: Path) -> None:
    res = Resources(AssayConfig(embedder="minilm", cache_dir=str(tmp_path), use_cache=False))
    metrics = ["anchor_hallucination", "semantic_similarity"]
    first = evaluate(SAMPLES, metrics=metrics, resources=res)
    assert {k: (w.items, w.unit) for k, w in first.model_work.items()} == {
        "parse": (4, "texts"),
        "entities": (2, "texts"),
        "embed": (3, "texts"),
    }
    # a second run on the same resources reports its own work, not the totals
    second = evaluate(SAMPLES[1:], metrics=["anchor_hallucination"], resources=res)
    assert {k: w.items for k, w in second.model_work.items()} == {"parse": 2, "entities": 1}
    totals = {k: w.items for k, w in res.model_work.totals().items()}
    assert totals == {"parse": 6, "entities": 3, "embed": 3}


def test_the_work_line_puts_the_slowest_kind_first() -> None:
    work = {
        "entail": KindWork(1444, "pairs", 2.71),
        "parse": KindWork(300, "texts", 11.44),
        "embed use-multilingual": KindWork(2100, "texts", 4.06),
    }
    assert work_line(work) == (
        "parse 300 texts 11.4s, embed use-multilingual 2,100 texts 4.1s, entail 1,444 pairs 2.7s"
    )
    assert work_line({}) == "none"


def test_since_leaves_out_what_came_before() -> None:
    work = ModelWork()
    work.add("entail", 10, 1.0)
    before = work.totals()
    work.add("entail", 5, 0.5)
    work.add("parse", 3, 0.25)
    assert work.since(before) == {
        "entail": KindWork(5, "pairs", 0.5),
        "parse": KindWork(3, "texts", 0.25),
    }


def test_the_progress_line_follows_the_model_work() -> None:
    work = ModelWork()
    work.add("parse", 7, 1.0)  # before the bar: not shown
    bar = Progress(console=Console(file=StringIO()), disable=True)
    with model_work_bar(bar, work):
        work.add("parse", 4, 0.5)
        work.add("entail", 9, 2.0)
    work.add("entail", 1, 0.1)  # after the block: the bar no longer follows
    [task] = bar.tasks
    assert task.description == "model work: entail 9 pairs 2.0s, parse 4 texts 0.5s"
    assert task.completed == 13


def test_evaluate_prints_the_model_work_and_puts_it_in_json(tmp_path: Path) -> None:
    data = tmp_path / "rag.jsonl"
    data.write_text("\n".join(json.dumps(s) for s in SAMPLES) + "\n", encoding="utf-8")
    env = {"ASSAY_CACHE_DIR": str(tmp_path / "cache")}
    args = ["evaluate", str(data), "-m", "anchor_hallucination"]
    result = CliRunner().invoke(app, [*args, "--format", "json"], env=env)
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["model_work"]["parse"]["items"] == 4
    assert payload["model_work"]["parse"]["unit"] == "texts"
    table = CliRunner().invoke(app, args, env=env)
    assert table.exit_code == 0, table.output
    [line] = [x for x in table.stdout.splitlines() if x.startswith("model work:")]
    assert line.startswith("model work: parse 4 texts ")
