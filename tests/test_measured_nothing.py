"""Nothing that measured nothing looks like a result: a run whose target calls all failed,
or whose judge failed every question its metrics asked, exits 2 with one line saying why
(it exited 0, every metric N/A, the reason only in --out). Real loopback servers play the
target (tests/target_server.py) and the judge (tests/judge_server.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from assay.cli import app
from judge_server import JudgeServer
from target_server import TargetServer


def flat(text: str) -> str:
    """The CLI's output on one line (the console wraps long lines)."""
    return " ".join(text.split())


def questions(path: Path, n: int) -> Path:
    path.write_text(
        "".join(
            json.dumps({"id": f"s{i}", "query": f"question {i}", "expected": "x"}) + "\n"
            for i in range(n)
        )
    )
    return path


def rag_samples(path: Path) -> Path:
    """Two RAG samples (query, response, contexts) written to ``path`` as JSONL."""
    rows = [
        {"query": "Capital of France?", "response": "Paris.", "contexts": ["Paris is in France."]},
        {"query": "Who wrote Hamlet?", "response": "Shakespeare.", "contexts": ["By Shakespeare."]},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize("answered", [0, 1])
def test_a_run_whose_target_calls_all_fail_exits_2_with_one_line(env: Path, answered: int) -> None:
    """A JSON target whose replies lack the --response-path: 8 calls, 8 errors, exit 2
    and the reason in one line; with one call answered the run measured something and
    exits 0."""
    data = questions(env / "q.jsonl", 8)
    with TargetServer() as server:
        server.script = [("status", 200, json.dumps({"reply": "x"}), {})] * answered
        args = ["run", str(data), "-m", "exact_match", "--target", f"{server.url}/rag"]
        args += ["--request", '{"question": "{query}"}', "--response-path", "reply"]
        result = CliRunner().invoke(app, args)
        url = server.url
    said = flat(result.output)
    if answered:
        assert result.exit_code == 0, result.output
        assert f"target {url}/rag: 8 calls (7 error, 1 ok)" in said
        assert "nothing measured" not in said
        return
    assert result.exit_code == 2, result.output
    assert f"target {url}/rag: 8 calls (8 error)" in said
    line = [ln for ln in result.output.splitlines() if ln.startswith("nothing measured")]
    assert len(line) == 1
    assert said.endswith(
        f"nothing measured: target {url}/rag: every sample's call failed (8 samples, 8 "
        "calls); first: "
        "--response-path 'reply' found nothing in the reply"
    )


@pytest.mark.parametrize("garbage", [1000, 2])
def test_an_evaluation_whose_judge_replies_all_fail_exits_2_with_one_line(
    env: Path, monkeypatch: pytest.MonkeyPatch, garbage: int
) -> None:
    """Every judge reply unparsable (and unparsable again after the JSON-only retry):
    no judged metric has a value, exit 2 (it was 3, or 0 with --max-errors 100%) and one
    line naming the judge, the metrics and the first error. With garbage for the first 2
    requests only, at least one question is answered (the retry of the first, or the
    second): the run measured something, exit 0 (errors within --max-errors), no such
    line."""
    monkeypatch.setenv("ASSAY_JUDGE_API_KEY", "test-key")
    data = rag_samples(env / "d.jsonl")
    with JudgeServer() as server:
        server.garbage = garbage
        args = ["evaluate", str(data), "-m", "faithfulness", "--no-cache", "--max-errors", "100%"]
        args += ["--judge-url", server.url, "--judge-model", "scripted"]
        result = CliRunner().invoke(app, [*args, "--judge-concurrency", "1"])
    said = flat(result.output)
    if garbage == 2:
        assert result.exit_code == 0, result.output
        assert "nothing measured" not in said
        return
    assert result.exit_code == 2, result.output
    assert said.endswith(
        "nothing measured: judge scripted: 2 questions failed and no judged metric has a "
        "value (faithfulness); first error: JudgeError: judge reply to grounding_rubrics@1 "
        "unparsable after a JSON-only retry: no JSON found in reply: 'I am unable to comply "
        "with the requested format today.'"
    )


def test_a_composite_from_some_of_its_parts_says_how_many_in_the_table(
    env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The judge's RAG verdicts never parse, its generated questions do: ragas_score is
    answer_relevance alone on both samples (it printed mean 0.8, 0 errors, the 3 missing
    parts only in details.unavailable). The table's partial column, the line under it
    and the JSON summary say: 2 values, from 1 of 4 parts."""
    monkeypatch.setenv("ASSAY_JUDGE_API_KEY", "test-key")
    data = rag_samples(env / "d.jsonl")
    out = env / "out.jsonl"
    with JudgeServer() as server:
        server.script = lambda task, blocks, body: "no verdict" if task == "rag_verdicts" else None
        args = ["evaluate", str(data), "-m", "ragas_score", "--no-cache", "--out", str(out)]
        args += ["--judge-url", server.url, "--judge-model", "scripted"]
        table = CliRunner().invoke(app, args)
        as_json = CliRunner().invoke(app, [*args, "--format", "json"])
    assert table.exit_code == 0, table.output
    results = [json.loads(line) for line in out.read_text().splitlines()]
    for row in results:
        evidence = row["evidence"]["ragas_score"]["details"]
        assert sorted(evidence["unavailable"]) == [
            "context_precision",
            "context_recall",
            "faithfulness",
        ]
        assert evidence["weights"] == {"answer_relevance": 1.0}
    said = flat(table.output)
    assert "│ partial │" in said.replace("┃", "│")
    assert "│ 2 (1 of 4) │" in said
    assert (
        "composites built from some of their parts (details.unavailable names the others "
        "and why): ragas_score 2 of 2 values (2 from 1 of 4 parts)"
    ) in said
    payload = json.loads(as_json.stdout[as_json.stdout.index("{") :])
    [summary] = payload["metrics"]
    assert (summary["n"], summary["n_error"], summary["n_partial"]) == (2, 0, 2)
    assert summary["partial_parts"] == {"1 of 4": 2}
