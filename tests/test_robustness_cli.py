"""Bad input to the CLI gets a clear error and loses nothing: an output that cannot be
written, gates, thresholds and comma-separated metric names checked before scoring, a
gate on a metric that was N/A everywhere, unusable data paths, an interrupted run that
keeps its JSONL, a results store that fails mid-run or cannot be opened, metric errors
shown with their reason, the metrics command's bad options, and every subcommand's help."""

from __future__ import annotations

import json

from tests.robustness_helpers import _lines, runner

from assay.cli import app
from fakes import interrupt_on_call

# ---- the CLI ---------------------------------------------------------------------------


def test_out_that_cannot_be_written_fails_before_scoring(env):
    data = _lines(env / "d.jsonl", [{"response": "a", "expected": "a"}])
    blocker = env / "file.txt"
    blocker.write_text("x")
    for name in ("o.jsonl", "o.csv"):
        result = runner.invoke(
            app, ["evaluate", str(data), "-m", "exact_match", "-o", str(blocker / name)]
        )
        assert result.exit_code == 2, result.output
        assert f"{blocker / name}: cannot create the folder {blocker}" in result.output
    same = runner.invoke(app, ["evaluate", str(data), "-m", "exact_match", "-o", str(data)])
    assert same.exit_code == 2 and "--out is the input file" in same.output
    assert json.loads(data.read_text()) == {"response": "a", "expected": "a"}  # untouched
    made = runner.invoke(
        app, ["evaluate", str(data), "-m", "exact_match", "-o", str(env / "new" / "o.csv")]
    )
    assert made.exit_code == 0 and (env / "new" / "o.csv").read_text().startswith("id,")


def test_gates_and_thresholds_are_checked_before_scoring(env):
    data = _lines(env / "d.jsonl", [{"response": "a", "expected": "a"}])
    cases = {
        ("--fail-under", "exact_match=nan"): "'nan' is not a finite number",
        ("--fail-under", "exact_match=70"): "outside the range of exact_match (0..1); scores "
        "are 0..1 in Assay: did you mean 0.7?",
        ("--fail-under", "bleu=0.3"): "bleu is not among the metrics of this run; add "
        "--metric bleu",
        ("--fail-over", "nope=1"): "unknown metric 'nope'",
        ("--threshold", "exact_match=1.5"): "threshold exact_match=1.5: outside the range",
        ("--threshold", "exact_mach=0.5"): "threshold for an unknown metric 'exact_mach'. "
        "Did you mean: exact_match?",
        ("--format", "xml"): "--format must be table or json, got 'xml'",
    }
    for (option, value), message in cases.items():
        result = runner.invoke(app, ["evaluate", str(data), "-m", "exact_match", option, value])
        assert result.exit_code == 2, (option, value, result.output)
        assert message in " ".join(result.output.split()), (option, value, result.output)


def test_comma_separated_metric_names(env):
    data = _lines(env / "d.jsonl", [{"response": "the cat", "expected": "the cat"}])
    result = runner.invoke(
        app, ["evaluate", str(data), "-m", "exact_match, bleu", "--format", "json"]
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout[result.stdout.index("{") :])
    assert [(m["name"], m["mean"]) for m in payload["metrics"]] == [
        ("exact_match", 1.0),
        ("bleu", 1.0),  # identical strings
    ]


def test_a_gate_on_a_metric_that_was_na_everywhere_says_why(env):
    data = _lines(env / "d.jsonl", [{"response": "a"}, {"response": "b"}])
    result = runner.invoke(
        app, ["evaluate", str(data), "-m", "exact_match", "--fail-under", "exact_match=0.5"]
    )
    assert result.exit_code == 1
    assert (
        "exact_match: no value to compare with --fail-under 0.5 (N/A on all 2 samples; 2 say: "
        "missing input: expected)"
    ) in result.output


def test_unusable_data_paths_exit_2(env):
    folder = env / "folder.jsonl"
    folder.mkdir()
    result = runner.invoke(app, ["evaluate", str(folder)])
    assert result.exit_code == 2 and "is a directory" in result.output
    empty = env / "empty.csv"
    empty.write_text("id,answer\n", encoding="utf-8")
    result = runner.invoke(app, ["evaluate", str(empty)])
    assert result.exit_code == 2
    assert "no samples in the file (it is empty, or holds only a header)" in result.output


def test_interrupt_keeps_the_jsonl_and_says_where_it_is(env, monkeypatch):
    from assay.metrics.registry import metric_class

    cls = metric_class("exact_match")
    real = interrupt_on_call(monkeypatch, "exact_match", 3)
    rows = [{"id": f"s{i}", "response": "a", "expected": "a"} for i in range(5)]
    data = _lines(env / "d.jsonl", rows)
    out = env / "o.jsonl"
    args = ["evaluate", str(data), "-m", "exact_match", "--chunk-size", "1", "-o", str(out)]
    result = runner.invoke(app, [*args, "--store", "--db", str(env / "runs.db")])
    assert result.exit_code == 130
    assert f"interrupted; 2 finished samples are in {out}; resume with --resume" in result.output
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == ["s0", "s1"]
    # the resumed run appends to the same file instead of replacing it
    run_id = result.output.split("--resume ")[1].split()[0]
    monkeypatch.setattr(cls, "compute_batch", real)
    resumed = runner.invoke(
        app, [*args, "--db", str(env / "runs.db"), "--resume", run_id, "--format", "json"]
    )
    assert resumed.exit_code == 0, resumed.output
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == [
        f"s{i}" for i in range(5)
    ]
    interrupt_on_call(monkeypatch, "exact_match", 3)
    bare = runner.invoke(app, args[:-2])
    assert bare.exit_code == 130
    assert "2 samples had finished (add --out FILE or --store to keep" in bare.output


def test_a_store_that_fails_mid_run_loses_nothing(env, monkeypatch):
    from assay.store.db import Store, StoreError

    real = Store.record
    calls = {"n": 0}

    def locked_on_third(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            raise StoreError("writing to sqlite:///runs.db failed: database is locked")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Store, "record", locked_on_third)
    rows = [{"id": f"s{i}", "response": "a", "expected": "a"} for i in range(4)]
    data = _lines(env / "d.jsonl", rows)
    out = env / "o.jsonl"
    result = runner.invoke(
        app,
        [
            *("evaluate", str(data), "-m", "exact_match", "-o", str(out), "--store"),
            *("--db", str(env / "runs.db"), "--chunk-size", "1"),
        ],
    )
    assert result.exit_code == 2
    assert "writing to the results store failed: writing to sqlite:///runs.db failed: " in (
        " ".join(result.output.split())
    )
    assert "some results were not saved; resume with --resume" in result.output
    assert len(out.read_text().splitlines()) == 4  # every sample is in --out


def test_a_results_store_that_cannot_be_opened_exits_2(env):
    data = _lines(env / "d.jsonl", [{"response": "a", "expected": "a"}])
    (env / "file.txt").write_text("x")
    result = runner.invoke(
        app, ["evaluate", str(data), "-m", "exact_match", "--db", str(env / "file.txt" / "r.db")]
    )
    assert result.exit_code == 2
    assert "the results store cannot be used" in result.output


def test_metric_errors_are_shown_with_their_reason(env):
    data = _lines(env / "d.jsonl", [{"response": "a", "expected": "b"}])
    result = runner.invoke(
        app,
        [
            *("evaluate", str(data), "-m", "semantic_similarity"),
            *("--embedder", f"sentence-transformers:{env / 'no-model'}"),
        ],
    )
    assert result.exit_code == 3  # errored samples fail the run (exit 3, not 0)
    text = " ".join(result.output.split())
    assert "metric errors: semantic_similarity failed on 1 of 1 samples: ModelUnavailable: " in (
        text
    )
    assert "does not exist" in text


def test_metrics_command_rejects_unknown_suite_family_and_format():
    for args, message in (
        (["--suite", "nope"], "unknown suite 'nope'; suites: base"),
        (["--family", "nope"], "unknown family 'nope'; families: agent"),
        (["--format", "xml"], "--format must be table or json"),
    ):
        result = runner.invoke(app, ["metrics", *args])
        assert result.exit_code == 2 and message in result.output, result.output


def test_every_subcommand_help_runs():
    import typer.main

    group = typer.main.get_command(app)
    names = sorted(group.commands)
    assert {"evaluate", "metrics", "serve", "json-eval"} <= set(names)
    for name in ["", *names]:
        result = runner.invoke(app, [name, "--help"] if name else ["--help"])
        assert result.exit_code == 0, (name, result.output)
        assert "Usage:" in result.output
