"""Parquet input: each row a sample, with the JSONL/CSV aliases and per-row error reports;
without pyarrow, reading a .parquet names the one pip command."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from assay.cli import app
from assay.core.sample import ToolCall, Turn
from assay.inputs.read import read_samples
from assay.inputs.records import InputErrors
from fresh_interpreter import run_fresh

#: the two rows, column by column, as a pipeline would log them (alias names included)
COLUMNS = {
    "question": ["What is 2+2?", "Capital of France?"],
    "ground_truth": ["4", None],
    "answer": ["4", "Paris"],
    "contexts": [["two plus two", "is four"], ["Paris is the capital"]],
    "turns": [
        [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}],
        None,
    ],
    "expected_tool_calls": [[{"name": "add", "arguments": {"a": 2, "b": 2}}], None],
    "method": ["rag", "plain"],
}

#: the same rows as JSONL, written by hand: a null cell is a key left out
JSONL_ROWS = [
    {
        "question": "What is 2+2?",
        "ground_truth": "4",
        "answer": "4",
        "contexts": ["two plus two", "is four"],
        "turns": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}],
        "expected_tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 2}}],
        "method": "rag",
    },
    {
        "question": "Capital of France?",
        "answer": "Paris",
        "contexts": ["Paris is the capital"],
        "method": "plain",
    },
]


def _parquet(path: Path, columns: dict, batch_rows: int | None = None) -> Path:
    pq.write_table(pa.table(columns), path, row_group_size=batch_rows)
    return path


def test_parquet_rows_are_the_samples_the_same_rows_give_as_jsonl(tmp_path: Path) -> None:
    from_parquet, errors = read_samples(_parquet(tmp_path / "d.parquet", COLUMNS))
    assert errors == []
    jsonl = tmp_path / "d.jsonl"
    jsonl.write_text("".join(json.dumps(row) + "\n" for row in JSONL_ROWS))
    from_jsonl, jsonl_errors = read_samples(jsonl)
    assert jsonl_errors == []
    # the same samples; the ids of rows without one say where each came from
    assert [s.id for s in from_parquet] == ["row-1", "row-2"]
    assert [s.id for s in from_jsonl] == ["line-1", "line-2"]
    assert [s.model_copy(update={"id": None}) for s in from_parquet] == [
        s.model_copy(update={"id": None}) for s in from_jsonl
    ]
    first, second = from_parquet
    assert (first.query, first.response, first.expected) == ("What is 2+2?", "4", "4")
    assert first.contexts == ["two plus two", "is four"]
    assert first.turns == [
        Turn(role="user", content="2+2?"),
        Turn(role="assistant", content="4"),
    ]
    assert first.expected_tool_calls == [ToolCall(name="add", arguments={"a": 2, "b": 2})]
    assert first.tags == {"method": "rag"}
    # the null ground_truth, turns and expected_tool_calls cells are missing fields
    assert (second.expected, second.turns, second.expected_tool_calls) == (None, None, None)
    assert second.contexts == ["Paris is the capital"]


def test_rows_of_many_record_batches_keep_their_order_and_numbers(tmp_path: Path) -> None:
    # 2,500 rows: three record batches of the reader (1,024 rows each); row 2,100 is bad
    answers = [f"answer {i}" for i in range(1, 2501)]
    contexts = [["c"] for _ in answers]
    contexts[2099] = ["c", None]
    path = _parquet(tmp_path / "big.parquet", {"answer": answers, "contexts": contexts}, 700)
    samples, errors = read_samples(path)
    assert [s.response for s in samples] == answers[:2099] + answers[2100:]
    assert [(e.line, e.unit, e.field) for e in errors] == [(2100, "row", "contexts.1")]


def test_a_row_of_the_wrong_type_is_reported_with_its_row_and_field(tmp_path: Path) -> None:
    path = _parquet(
        tmp_path / "bad.parquet",
        {
            "question": ["q1", "q2", "q3"],
            "answer": ["a", "b", "c"],
            "duration_ms": [1200.0, -5.0, None],
            "task_completed": [None, None, "yes please"],
        },
    )
    samples, errors = read_samples(path)
    assert [s.response for s in samples] == ["a"]
    assert samples[0].duration == 1.2  # 1200 ms
    assert [(e.line, e.unit, e.field) for e in errors] == [
        (2, "row", "duration_ms"),  # named as the file names it
        (3, "row", "task_completed"),
    ]
    assert str(errors[0]).startswith(f"{path} row 2, field 'duration_ms': ")
    with pytest.raises(InputErrors) as stopped:
        read_samples(path, strict=True)
    assert [(e.line, e.field) for e in stopped.value.errors] == [(2, "duration_ms")]


def test_a_file_that_is_not_parquet_is_one_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "notes.parquet"
    path.write_text('{"answer": "a"}\n')
    with pytest.raises(InputErrors, match=r"notes\.parquet: not a Parquet file"):
        read_samples(path)


def test_assay_evaluate_scores_a_parquet_file(env: Path) -> None:
    path = _parquet(
        env / "d.parquet",
        {
            "response": ["Paris is the capital.", "Lyon"],
            "expected": ["paris is the capital.", "Paris"],
        },
    )
    result = CliRunner().invoke(
        app, ["evaluate", str(path), "-m", "exact_match", "--format", "json"]
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout[result.stdout.index("{") :])
    (metric,) = summary["metrics"]
    # exact_match after normalisation: 1 for row 1 (case only differs), 0 for row 2
    assert (metric["name"], metric["mean"], metric["n"]) == ("exact_match", 0.5, 2)


def test_without_pyarrow_a_parquet_input_names_the_pip_command(tmp_path: Path) -> None:
    _parquet(tmp_path / "d.parquet", {"response": ["a"], "expected": ["a"]})
    out = run_fresh(
        """
        import json
        from typer.testing import CliRunner
        from assay.cli import app
        from assay.core.extras import MissingExtra
        from assay.inputs.read import read_samples
        try:
            read_samples("d.parquet")
            raised = None
        except MissingExtra as exc:
            raised = str(exc)
        result = CliRunner().invoke(app, ["evaluate", "d.parquet", "-m", "exact_match"])
        print(json.dumps({"raised": raised, "code": result.exit_code, "output": result.output}))
        """,
        tmp_path,
        blocked=("pyarrow",),  # refused, as if it were not installed
    )
    command = 'reading .parquet needs the pandas extra: pip install "assay-eval[pandas]"'
    assert out["raised"] == command
    assert out["code"] == 2
    # the error is all there is: nothing was scored, no table printed
    assert " ".join(out["output"].split()) == f"error: {command}"
