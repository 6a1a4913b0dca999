"""Gates never pass on errors: errored samples fail the run with their own exit code (3),
distinct from a failed gate (1) and unusable input (2); ``--max-errors`` tolerates some."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from assay.cli import app
from assay.cli.report import ErrorTolerance
from judge_server import JudgeServer

runner = CliRunner()


def _refuse_bad(task: str, blocks: dict[str, Any], body: dict[str, Any]) -> Any:
    """A judge that answers prose with no score for answers containing 'bad'."""
    if "bad" in json.dumps(blocks):
        return "I would rather not grade this one."
    return None


def _data(env, n_good: int, n_bad: int):
    rows = [
        {"id": f"g{i}", "question": "What is the capital of France?", "response": "Paris."}
        for i in range(n_good)
    ] + [
        {"id": f"b{i}", "question": "What is the capital of France?", "response": f"bad {i}"}
        for i in range(n_bad)
    ]
    path = env / "d.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def _run(server: JudgeServer, data, *extra: str):
    args = ["evaluate", str(data), "-m", "judged_relevance", "--format", "json", "--no-cache"]
    args += ["--judge-url", server.url, "--judge-model", "scripted", *extra]
    return runner.invoke(app, args)


@pytest.fixture
def judge(monkeypatch):
    monkeypatch.setenv("ASSAY_JUDGE_API_KEY", "test-key")
    monkeypatch.setenv("ASSAY_JUDGE_MAX_RETRIES", "0")
    with JudgeServer(script=_refuse_bad) as server:
        yield server


def test_six_of_eight_errored_samples_fail_a_gate_that_their_mean_would_pass(env, judge):
    data = _data(env, n_good=2, n_bad=6)
    result = _run(judge, data, "--fail-under", "judged_relevance=0.1")
    assert result.exit_code == 3, result.output
    payload = json.loads(result.stdout[result.stdout.index("{") :])
    (summary,) = payload["metrics"]
    assert (summary["n"], summary["n_na"], summary["n_error"]) == (2, 0, 6)
    assert (
        "errors over the limit: 1 metric errored on more of the 8 samples than --max-errors 0 "
        "allows (0): judged_relevance 6"
    ) in " ".join(result.output.split())


def test_max_errors_tolerates_some_and_then_the_gate_decides(env, judge):
    data = _data(env, n_good=6, n_bad=2)
    assert _run(judge, data, "--max-errors", "1").exit_code == 3
    assert _run(judge, data, "--max-errors", "2").exit_code == 0
    assert _run(judge, data, "--max-errors", "25%").exit_code == 0  # 25% of 8 = 2
    assert _run(judge, data, "--max-errors", "24%").exit_code == 3  # floor(1.92) = 1
    gated = _run(judge, data, "--max-errors", "2", "--fail-under", "judged_relevance=1.01")
    assert gated.exit_code == 2  # a bound outside the metric's range is unusable input
    gated = _run(judge, data, "--max-errors", "2", "--fail-under", "judged_relevance=1.0")
    assert gated.exit_code in {0, 1}
    bad = _run(judge, data, "--max-errors", "lots")
    assert bad.exit_code == 2 and "--max-errors takes a count" in bad.output


def test_na_is_not_an_error_and_the_table_shows_both_counts(env):
    rows = [{"response": "a", "expected": "a"}, {"response": "b"}]
    path = env / "d.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    result = runner.invoke(app, ["evaluate", str(path), "-m", "exact_match"])
    assert result.exit_code == 0, result.output
    header = next(line for line in result.stdout.splitlines() if "┃ metric" in line)
    assert header.index("N/A") < header.index("errors") < header.index("mean")
    row = next(line for line in result.stdout.splitlines() if "exact_match" in line)
    assert [cell.strip() for cell in row.split("│")[2:5]] == ["1", "1", "0"]


@pytest.mark.parametrize(
    ("text", "n", "allowed"),
    [(None, 10, 0), ("0", 10, 0), ("3", 10, 3), ("10%", 10, 1), ("10%", 9, 0), ("100%", 7, 7)],
)
def test_error_tolerance_by_count_and_share(text, n, allowed):
    assert ErrorTolerance.parse(text).allowed(n) == allowed


@pytest.mark.parametrize("text", ["-1", "101%", "x", "1.5", "%"])
def test_error_tolerance_refuses_other_forms(text):
    with pytest.raises(ValueError, match="--max-errors takes"):
        ErrorTolerance.parse(text)
