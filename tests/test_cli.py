"""`assay evaluate` and `assay metrics` through typer's runner (the real command code)."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from assay.cli import app

runner = CliRunner()


def _write(path, rows):
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


def test_evaluate_writes_rows_with_id_and_values_and_skips_bad_lines(env):
    data = _write(
        env / "d.jsonl",
        [
            {"id": "a", "response": "Paris is the capital.", "expected": "paris is the capital."},
            "{broken",
            {"id": "b", "response": "Lyon", "expected": "Paris"},
        ],
    )
    out = env / "out.jsonl"
    result = runner.invoke(
        app, ["evaluate", str(data), "-m", "exact_match", "--out", str(out), "--format", "json"]
    )
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["id"], r["exact_match"]) for r in rows] == [("a", 1.0), ("b", 0.0)]
    assert rows[0]["evidence"]["exact_match"]["method"] == "pattern"
    assert "line 2: not valid JSON" in result.output
    summary = json.loads(result.stdout[result.stdout.index("{") :])
    (metric,) = summary["metrics"]
    assert metric["name"] == "exact_match" and metric["mean"] == 0.5 and metric["pass_rate"] == 0.5


def test_fail_under_gate_exit_codes(env):
    data = _write(
        env / "d.jsonl", [{"response": "a", "expected": "a"}, {"response": "b", "expected": "c"}]
    )
    ok = runner.invoke(
        app, ["evaluate", str(data), "-m", "exact_match", "--fail-under", "exact_match=0.5"]
    )
    assert ok.exit_code == 0, ok.output
    failed = runner.invoke(
        app, ["evaluate", str(data), "-m", "exact_match", "--fail-under", "exact_match=0.6"]
    )
    assert failed.exit_code == 1
    assert "exact_match: mean 0.5000 < 0.6" in failed.output


def test_unusable_input_exits_2_with_a_clear_message(env):
    missing = runner.invoke(app, ["evaluate", str(env / "nope.jsonl")])
    assert missing.exit_code == 2 and "no such file" in missing.output
    data = _write(env / "d.jsonl", [{"response": "a"}, {"response": ["x"]}])
    strict = runner.invoke(app, ["evaluate", str(data), "-m", "exact_match", "--strict"])
    assert strict.exit_code == 2 and "line 2, field 'response'" in strict.output
    unknown = runner.invoke(app, ["evaluate", str(data), "-m", "exact_mach"])
    assert unknown.exit_code == 2 and "Did you mean: exact_match" in unknown.output
    bad_gate = runner.invoke(app, ["evaluate", str(data), "--fail-under", "exact_match"])
    assert bad_gate.exit_code == 2 and "METRIC=VALUE" in bad_gate.output


def test_csv_and_parquet_outputs(env):
    import pandas as pd

    data = _write(env / "d.jsonl", [{"id": "x", "response": "a", "expected": "a"}])
    for name in ("o.csv", "o.parquet"):
        result = runner.invoke(
            app, ["evaluate", str(data), "-m", "exact_match", "-o", str(env / name)]
        )
        assert result.exit_code == 0, result.output
        frame = pd.read_csv(env / name) if name.endswith("csv") else pd.read_parquet(env / name)
        assert frame.to_dict(orient="records") == [
            {"id": "x", "response": "a", "expected": "a", "exact_match": 1.0}
        ]


def test_group_by_prints_a_table_per_tag_value(env):
    data = _write(
        env / "d.jsonl",
        [
            {"response": "a", "expected": "a", "method": "local_search"},
            {"response": "b", "expected": "c", "method": "basic_search"},
        ],
    )
    result = runner.invoke(
        app,
        ["evaluate", str(data), "-m", "exact_match", "--group-by", "method", "--format", "json"],
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout[result.stdout.index("{") :])
    means = {g["group"]["method"]: g["metrics"][0]["mean"] for g in payload["groups"]}
    assert means == {"basic_search": 0.0, "local_search": 1.0}


def test_metrics_catalogue_lists_every_metric_as_json():
    from assay.metrics.registry import list_metrics

    result = runner.invoke(app, ["metrics", "--format", "json"])
    assert result.exit_code == 0
    listed = {m["name"] for m in json.loads(result.stdout)}
    assert listed == {c.name for c in list_metrics()}


def test_store_writes_each_sample_and_resume_scores_only_the_rest(env):
    import sqlite3

    from assay.core.result import MetricResult
    from assay.core.sample import Sample
    from assay.store.db import Store

    rows = [{"id": f"s{i}", "response": "a", "expected": "a" if i % 2 else "b"} for i in range(4)]
    data = _write(env / "d.jsonl", rows)
    db = env / "runs.db"
    first = runner.invoke(
        app, ["evaluate", str(data), "-m", "exact_match", "--store", "--db", str(db)]
    )
    assert first.exit_code == 0, first.output
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT status FROM runs").fetchone() == ("finished",)
    statuses = conn.execute(
        "SELECT sample_id, status FROM test_results ORDER BY sample_index"
    ).fetchall()
    # exact_match threshold 1.0: s1 and s3 match, s0 and s2 do not
    assert statuses == [("s0", "failed"), ("s1", "passed"), ("s2", "failed"), ("s3", "passed")]

    # an interrupted run: two samples stored, then resumed (with the fingerprint that
    # `assay evaluate` records: a run without one is refused, see test_trust_runs.py)
    from assay.cli.resume import fingerprint
    from assay.core.config import load_config
    from assay.metrics.registry import resolve_metrics

    store = Store(str(db))
    metrics = resolve_metrics(["exact_match"])
    store.start_run(
        "halfway", metrics=["exact_match"], fingerprint=fingerprint(data, metrics, load_config())
    )
    for i in (0, 1):
        store.record(
            "halfway",
            i,
            Sample(id=f"s{i}"),
            {"exact_match": MetricResult("exact_match", 0.5)},
            status="passed",
        )
    store.close()
    resumed = runner.invoke(
        app, ["evaluate", str(data), "-m", "exact_match", "--db", str(db), "--resume", "halfway"]
    )
    assert resumed.exit_code == 0, resumed.output
    assert "2 samples already stored, 2 to go" in resumed.output
    values = conn.execute(
        "SELECT t.sample_index, s.metric_value FROM test_results t JOIN scoring_details s "
        "ON s.test_result_id = t.id WHERE t.run_id = 'halfway' ORDER BY t.sample_index"
    ).fetchall()
    assert values == [(0, 0.5), (1, 0.5), (2, 0.0), (3, 1.0)]  # stored rows kept, the rest scored
    missing = runner.invoke(app, ["evaluate", str(data), "--db", str(db), "--resume", "nope"])
    assert missing.exit_code == 2 and "no run 'nope'" in missing.output


def test_judged_suite_through_the_cli_uses_the_judge_then_its_cache(env, monkeypatch):
    from judge_server import JudgeServer

    monkeypatch.setenv("ASSAY_JUDGE_API_KEY", "test-key")
    rag = Path(__file__).resolve().parent.parent / "examples" / "rag.jsonl"
    with JudgeServer() as server:
        args = ["evaluate", str(rag), "--suite", "judged", "--format", "json"]
        args += ["--group-by", "method", "--judge-url", server.url, "--judge-model", "scripted"]
        first = runner.invoke(app, args)
        assert first.exit_code == 0, first.output
        payload = json.loads(first.stdout[first.stdout.index("{") :])
        calls = server.calls
        assert calls > 0 and payload["judge_usage"]["calls"] == calls
        methods = {m["name"]: m["methods"] for m in payload["metrics"]}
        assert methods["ragas_faithfulness"] == {"llm": 8}
        # the "I don't know." answer is classified by the uncertainty phrases, no judge
        assert payload["labels"]["answer_classification"]["DON'T KNOW"] == 1
        assert (
            sum(sum(g["labels"]["answer_classification"].values()) for g in payload["groups"]) == 8
        )
        again = runner.invoke(app, args)
        assert again.exit_code == 0, again.output
        assert server.calls == calls  # the re-run is answered from the cache
        offline = runner.invoke(app, [*args, "--no-judge"])
        payload = json.loads(offline.stdout[offline.stdout.index("{") :])
        assert {m["name"]: m["methods"] for m in payload["metrics"]}["ragas_faithfulness"] == {
            "local": 8
        }
        assert server.calls == calls


def test_version_flag():
    import assay

    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout.strip() == f"assay {assay.__version__}"


def test_metrics_catalogue_shows_the_aliases():
    table = runner.invoke(app, ["metrics", "--family", "semantic"])
    assert table.exit_code == 0, table.output
    line = next(ln for ln in table.stdout.splitlines() if "semantic_similarity " in ln)
    assert "accuracy," in line  # the aliases column, beside the metric's own name
    listed = json.loads(runner.invoke(app, ["metrics", "--format", "json"]).stdout)
    aliases = {m["name"]: m["aliases"] for m in listed if m["aliases"]}
    assert aliases == {
        "semantic_similarity": ["accuracy", "factual_consistency", "truthfulness"],
        "bertscore": ["f1"],
    }


def test_an_alias_is_reported_gated_and_written_under_its_name(env, resources):
    pairs = [
        ("Paris is the capital of France.", "The capital of France is Paris."),
        ("I like cheese.", "The bridge opened in 1932."),
    ]
    vectors = resources.embedder.embed([t for pair in pairs for t in pair])  # L2-normalised
    cosines = [float(vectors[0] @ vectors[1]), float(vectors[2] @ vectors[3])]
    expected = [max(0.0, min(1.0, c)) for c in cosines]  # clamped cosine of each pair
    mean = sum(expected) / 2
    data = _write(env / "d.jsonl", [{"response": r, "expected": e} for r, e in pairs])
    out = env / "out.jsonl"
    ok = runner.invoke(
        app,
        ["evaluate", str(data), "-m", "accuracy", "--out", str(out), "--fail-under",
         f"accuracy={mean - 0.01:.4f}"],
    )  # fmt: skip
    assert ok.exit_code == 0, ok.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["accuracy"] for r in rows] == pytest.approx(expected, abs=1e-6)
    assert all("semantic_similarity" not in r for r in rows)
    failed = runner.invoke(
        app, ["evaluate", str(data), "-m", "accuracy", "--fail-under", f"accuracy={mean + 0.01}"]
    )
    assert failed.exit_code == 1
    assert f"accuracy: mean {mean:.4f} < " in failed.output


def test_judge_concurrency_and_rate_limit_flags_override_the_environment(env, monkeypatch):
    """12 distinct asks (one judged_relevance ask each, one chunk) against the test server
    answering after 0.1 s. The environment says 1 in flight and 100 requests a second;
    ``--judge-concurrency 3`` wins: the server sees at most 3 at once, and 3 (the limit
    is used). ``--judge-rate-limit 10`` wins over the environment's 100: the bucket
    sends one request every 0.1 s from the first, so the 12th arrives at least
    11 * 0.1 = 1.1 s after the first (checked against 1.0 s: the first request can reach
    the server a little after its token)."""
    from judge_server import JudgeServer

    monkeypatch.setenv("ASSAY_JUDGE_API_KEY", "test-key")
    monkeypatch.setenv("ASSAY_JUDGE_CONCURRENCY", "1")
    monkeypatch.setenv("ASSAY_JUDGE_RATE_LIMIT", "100")
    rows = [
        {"query": f"What is item {i} made of?", "response": f"Item {i} is wood."} for i in range(12)
    ]
    data = _write(env / "d.jsonl", rows)
    with JudgeServer(delay=0.1) as server:
        args = ["evaluate", str(data), "-m", "judged_relevance", "--no-cache", "--format", "json"]
        args += ["--judge-url", server.url, "--judge-model", "scripted"]
        capped = runner.invoke(app, [*args, "--judge-concurrency", "3"])
        assert capped.exit_code == 0, capped.output
        assert (server.calls, server.max_in_flight) == (12, 3)
        server.reset()
        paced = runner.invoke(app, [*args, "--judge-concurrency", "12", "--judge-rate-limit", "10"])
        assert paced.exit_code == 0, paced.output
        arrivals = sorted(server.arrivals)
    assert len(arrivals) == 12
    assert 1.0 <= arrivals[-1] - arrivals[0] < 3.0
    report = json.loads(paced.stdout[paced.stdout.index("{") :])
    assert report["judge_usage"]["calls"] == 12


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--judge-concurrency", "0", "Input should be greater than or equal to 1"),
        ("--judge-concurrency", "two", "Input should be a valid integer"),
        ("--judge-rate-limit", "0", "must be a positive number of requests a second"),
        ("--judge-rate-limit", "-2.5", "got -2.5"),
        ("--judge-rate-limit", "inf", "got inf"),
    ],
)
def test_judge_flags_refuse_values_that_are_not_positive(env, flag, value, message):
    data = _write(env / "d.jsonl", [{"response": "a", "expected": "a"}])
    args = ["evaluate", str(data), "-m", "exact_match", flag, value]
    result = runner.invoke(app, args, env={"COLUMNS": "200"})  # one line per message
    assert result.exit_code == 2
    assert f"Invalid value for '{flag}'" in result.output
    assert message in result.output


def test_the_report_shows_the_time_of_the_shared_model_calls(env):
    data = _write(env / "d.jsonl", [{"response": "Paris is in France.", "expected": "Paris."}])
    # a metric with a model: its calls are made once for every metric, timed on their own
    modelled = runner.invoke(app, ["evaluate", str(data), "-m", "semantic_similarity"])
    assert modelled.exit_code == 0, modelled.output
    (line,) = [s for s in modelled.output.splitlines() if s.startswith("model and judge calls")]
    assert line.startswith("model and judge calls, made once for all metrics: ")
    assert line.endswith("s") and float(line.rsplit(": ", 1)[1][:-1]) > 0
    # no metric plans a call: no such line
    plain = runner.invoke(app, ["evaluate", str(data), "-m", "exact_match"])
    assert plain.exit_code == 0 and "model and judge calls" not in plain.output


def test_one_cause_that_fails_many_metrics_and_samples_is_printed_once(env, monkeypatch):
    monkeypatch.setenv("ASSAY_MAX_FIELD_CHARS", "15")
    data = _write(
        env / "d.jsonl",
        [
            {"id": "a", "response": "x" * 20, "expected": "y"},
            {"id": "b", "response": "Paris", "expected": "Paris"},
            {"id": "c", "response": "z" * 30, "expected": "y"},
        ],
    )
    result = runner.invoke(app, ["evaluate", str(data), "-m", "exact_match", "-m", "rouge"])
    assert result.exit_code == 3
    lines = [" ".join(line.split()) for line in result.stderr.splitlines() if line.strip()]
    hint = "raise it with ASSAY_MAX_FIELD_CHARS or max_field_chars in [tool.assay]"
    assert lines == [
        "metric errors: exact_match, rouge (2 metrics) failed on 2 of 3 samples: response has "
        f"20 characters, over the limit of 15 (max_field_chars); {hint}",
        "errors over the limit: 2 metrics errored on more of the 3 samples than --max-errors 0 "
        "allows (0): exact_match 2, rouge 2",
    ]


def test_two_causes_are_two_lines_each_naming_the_metrics_it_failed(env, monkeypatch):
    monkeypatch.setenv("ASSAY_MAX_FIELD_CHARS", "15")
    data = _write(
        env / "d.jsonl",
        [
            {"id": "a", "response": "Paris", "expected": "x" * 20},
            {"id": "b", "response": "y" * 16, "expected": "Paris"},
        ],
    )
    result = runner.invoke(
        app, ["evaluate", str(data), "-m", "exact_match", "-m", "fallback_detection"]
    )
    notes = [
        " ".join(line.split())
        for line in result.stderr.splitlines()
        if line.startswith("metric errors:")
    ]
    # fallback_detection reads only the response: the over-long reference fails exact_match
    # alone, the over-long response both metrics: two causes, in the order first met
    assert notes == [
        "metric errors: exact_match failed on 1 of 2 samples: expected has 20 "
        "characters, over the limit of 15 (max_field_chars); raise it with "
        "ASSAY_MAX_FIELD_CHARS or max_field_chars in [tool.assay]",
        "metric errors: exact_match, fallback_detection (2 metrics) failed on 1 of 2 samples: "
        "response has 16 characters, over the limit of 15 (max_field_chars); raise it with "
        "ASSAY_MAX_FIELD_CHARS or max_field_chars in [tool.assay]",
    ]
