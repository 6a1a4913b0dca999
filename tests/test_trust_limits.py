"""Numbers and sizes: aggregates near the float limit stay finite and exact, JSON out is
strict, and every input limit (field size, JSON depth, number of contexts) works at the
limit and gives a clear per-sample (or per-record) error one past it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from assay.core.config import AssayConfig, ConfigError, load_config
from assay.core.jsonout import dumps
from assay.core.sample import Sample, limit_problems
from assay.core.stats import summarize
from assay.engine.resources import Resources
from assay.evaluation.runner import evaluate
from assay.inputs.read import read_samples
from assay.metrics.base import Metric
from assay.metrics.registry import get_metric
from assay.outputs.sinks import JsonlSink
from assay.structured import evaluate_json
from assay.structured.batch import evaluate_pairs, pairs_from_jsonl
from judge_server import JudgeServer

FIELD_HINT = "raise it with ASSAY_MAX_FIELD_CHARS or max_field_chars in [tool.assay]"
DEPTH_HINT = "raise it (up to 800) with ASSAY_MAX_JSON_DEPTH or max_json_depth in [tool.assay]"
CONTEXTS_HINT = "raise it with ASSAY_MAX_CONTEXTS or max_contexts in [tool.assay]"


def _refuse(token: str) -> None:
    raise AssertionError(f"non-standard JSON token {token}")


def _strict(text: str) -> Any:
    return json.loads(text, parse_constant=_refuse)


def _arrays(depth: int) -> Any:
    """``depth`` nested arrays around 1: ``[[...[1]...]]`` (depth levels)."""
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


class Given(Metric):
    """Test metric: the number in ``metadata["v"]``, unbounded, no model."""

    name = "given"
    family = "performance"
    value_range = (0.0, None)
    unit = "ms"

    def compute(self, sample: Sample, res: Resources) -> Any:
        return self.result(sample.metadata["v"], method="measurement")


@pytest.fixture()
def plain(tmp_path, monkeypatch) -> Resources:
    """Resources for metrics that load no model, built from the environment as it is."""
    monkeypatch.chdir(tmp_path)
    return Resources(AssayConfig(cache_dir=str(tmp_path / "cache")))


def _limited(tmp_path: Path, **limits: int) -> Resources:
    return Resources(AssayConfig(cache_dir=str(tmp_path / "cache"), **limits))


# ---- 1. aggregates near the float limit -----------------------------------------------------
def test_a_summary_of_values_near_the_float_limit_is_finite_and_exact(plain, tmp_path) -> None:
    # sum() of 1.7e308 + 1.7e308 overflowed to inf, so the mean was inf (null in JSON)
    run = evaluate(
        [{"response": "a", "metadata": {"v": 1.7e308}}] * 2, metrics=[Given()], resources=plain
    )
    (summary,) = run.summary()
    assert (summary.n, summary.mean, summary.median) == (2, 1.7e308, 1.7e308)
    assert (summary.ci_low, summary.ci_high, summary.p90, summary.p99) == (1.7e308,) * 4
    text = dumps([s.to_dict() for s in run.summary()])
    assert _strict(text)[0]["mean"] == 1.7e308

    # (1.7 - 1.7 + 1.7 + 1.7) / 4 = 0.85 (x 1e308); sorted -1.7, 1.7, 1.7, 1.7: the median
    # sits at h = 1.5, between two 1.7s
    values = [1.7e308, -1.7e308, 1.7e308, 1.7e308]
    run = evaluate(
        [{"response": "a", "metadata": {"v": v}} for v in values],
        metrics=[Given()],
        resources=plain,
    )
    (summary,) = run.summary()
    assert (summary.mean, summary.median, summary.p90) == (8.5e307, 1.7e308, 1.7e308)
    assert _strict(dumps(summary.to_dict()))["mean"] == 8.5e307

    # the per-sample JSONL holds the values too, as standard JSON
    out = tmp_path / "out.jsonl"
    sink = JsonlSink(out)
    evaluate(
        [{"response": "a", "metadata": {"v": 1.7e308}}],
        metrics=[Given()],
        resources=plain,
        on_sample=lambda i, s, r: sink.write(run.row(i), s, r),
    )
    sink.close()
    assert _strict(out.read_text(encoding="utf-8"))["given"] == 1.7e308


def test_a_spread_past_the_float_range_is_none_with_the_reason() -> None:
    # deviations of [-1.7, 1.7] (x 1e308) from 0 are 1.7e308 each: the sample std is
    # sqrt(2 * 1.7e308^2 / 1) = 2.4e308, past the largest float (1.8e308)
    summary = summarize([-1.7e308, 1.7e308])
    assert (summary.mean, summary.std) == (0.0, None)
    assert summary.reasons == {"std": "exceeds the largest float (1.8e308)"}
    assert summarize([1.0, 3.0]).reasons == {}
    assert _strict(dumps(summary.to_dict()))["reasons"] == {
        "std": "exceeds the largest float (1.8e308)"
    }


# ---- 2. field size --------------------------------------------------------------------------
def test_a_field_at_the_size_limit_is_scored_and_one_past_it_fails_only_its_readers(
    tmp_path,
) -> None:
    res = _limited(tmp_path, max_field_chars=1000)
    at_limit = "ab " * 333 + "a"  # 1,000 characters
    data = [
        {"id": "at", "response": at_limit, "expected": at_limit, "duration": 1.5},
        {"id": "past", "response": at_limit + "b", "expected": at_limit, "duration": 2.0},
        {"id": "after", "response": "x", "expected": "x", "duration": 0.25},
    ]
    run = evaluate(data, metrics=["exact_match", "e2e_latency"], resources=res)
    at, past, after = run.results
    assert (at["exact_match"].value, at["e2e_latency"].value) == (1.0, 1500.0)
    # exact_match reads response: an error naming the field, its size, the limit, the fix
    assert past["exact_match"].value is None
    assert past["exact_match"].reason == "input over a limit"
    assert past["exact_match"].error == (
        f"response has 1,001 characters, over the limit of 1,000 (max_field_chars); {FIELD_HINT}"
    )
    assert past["e2e_latency"].value == 2000.0  # does not read response: scored as usual
    assert (after["exact_match"].value, after["e2e_latency"].value) == (1.0, 250.0)
    (exact, latency) = run.summary()
    assert (exact.n, exact.n_error, exact.mean) == (2, 1, 1.0)
    assert (latency.n, latency.n_error) == (3, 0)


def test_a_list_field_counts_all_its_items_and_metric_score_is_limited_too(tmp_path) -> None:
    res = _limited(tmp_path, max_field_chars=1000)
    metric = get_metric("exact_match")
    # 600 + 401 = 1,001 characters over two reasoning steps; the response is fine
    sample = Sample(response="x", expected="x", reasoning_steps=["a" * 600, "b" * 401])
    assert metric.score(sample, res).value == 1.0  # exact_match does not read the steps
    steps = get_metric("cot_validity").score(sample, res)
    assert steps.error == (
        "reasoning_steps has 1,001 characters, over the limit of 1,000 (max_field_chars); "
        + FIELD_HINT
    )
    at_limit = Sample(response="x", expected="x", reasoning_steps=["a" * 600, "b" * 400])
    assert get_metric("cot_validity").score(at_limit, res).error is None


def test_the_default_field_limit_is_100_000_characters(plain) -> None:
    # 20,000 x "word " = 100,000 characters: scored. rouge-L against "word": LCS 1,
    # precision 1/20,000, recall 1 -> F1 = 2 * (1/20000) / (1/20000 + 1) = 2 / 20,001
    at = "word " * 20_000
    past = at + "x"
    run = evaluate(
        [
            {"response": at, "expected": "word", "duration": 1.0},
            {"response": past, "expected": "word", "duration": 1.0},
        ],
        metrics=["rouge", "e2e_latency"],
        resources=plain,
    )
    at_row, past_row = run.results
    assert at_row["rouge"].value == pytest.approx(2 / 20_001)
    assert past_row["rouge"].error == (
        "response has 100,001 characters, over the limit of 100,000 (max_field_chars); "
        + FIELD_HINT
    )
    assert past_row["e2e_latency"].value == 1000.0


def test_the_runner_measures_each_sample_once_not_once_per_metric(plain, monkeypatch) -> None:
    import assay.metrics.base

    calls: list[str | None] = []

    def counting(sample: Sample, config: AssayConfig) -> dict[str, str]:
        calls.append(sample.id)
        return limit_problems(sample, config)

    monkeypatch.setattr(assay.metrics.base, "limit_problems", counting)
    data = [{"id": "a", "response": "x", "expected": "x"}, {"id": "b", "response": "y"}]
    evaluate(data, metrics=["exact_match", "bleu", "rouge"], resources=plain)
    assert calls == ["a", "b"]  # 2 samples x 3 metrics, measured once each
    get_metric("exact_match").score(Sample(id="c", response="x", expected="x"), plain)
    assert calls == ["a", "b", "c"]  # outside a run, score_batch measures itself


def test_a_sample_past_a_limit_asks_the_judge_nothing(tmp_path) -> None:
    with JudgeServer() as server:
        res = _limited(
            tmp_path,
            max_field_chars=200,
            judge_model="test-judge",
            judge_base_url=server.url,
            judge_cache=False,
        )
        data = [{"query": "Why?", "response": "Because."}, {"query": "Why?", "response": "x" * 201}]
        run = evaluate(data, metrics=["judged_relevance"], resources=res)
        assert server.calls == 1  # the first sample's question only
    assert run.results[0]["judged_relevance"].method == "llm"
    assert run.results[1]["judged_relevance"].error == (
        f"response has 201 characters, over the limit of 200 (max_field_chars); {FIELD_HINT}"
    )


def test_limits_follow_the_config_precedence(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert (AssayConfig().max_field_chars, AssayConfig().max_json_depth) == (100_000, 500)
    assert AssayConfig().max_contexts == 1_000
    monkeypatch.setenv("ASSAY_MAX_FIELD_CHARS", "2000")
    monkeypatch.setenv("ASSAY_MAX_JSON_DEPTH", "600")
    monkeypatch.setenv("ASSAY_MAX_CONTEXTS", "20")
    config = load_config()
    assert (config.max_field_chars, config.max_json_depth, config.max_contexts) == (2000, 600, 20)
    (tmp_path / "assay.toml").write_text("max_field_chars = 3000\n", encoding="utf-8")
    assert load_config().max_field_chars == 3000  # the project file beats the environment
    assert load_config({"max_field_chars": 4000}).max_field_chars == 4000  # flags beat both
    with pytest.raises(ConfigError, match="max_json_depth"):
        load_config({"max_json_depth": 801})  # past what Python's parser can hold


# ---- 3. JSON depth --------------------------------------------------------------------------
def test_input_lines_nesting_to_the_depth_limit_read_and_one_past_is_a_record_error(
    tmp_path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "deep.jsonl"
    lines = [
        {"response": "a", "output_json": _arrays(500), "expected_json": _arrays(500)},
        {"response": "b", "output_json": _arrays(501)},
        {"response": "c"},
    ]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    samples, errors = read_samples(path)
    assert [s.response for s in samples] == ["a", "c"]
    assert [str(e) for e in errors] == [
        f"{path} line 2, field 'output_json': nests 501 levels deep, over the limit of 500 "
        f"(max_json_depth); {DEPTH_HINT}"
    ]
    # at the limit the comparison and the JSON written of it work (arrays of 499 levels
    # raised RecursionError in the canonical form and in the output serialiser)
    run = evaluate(samples[:1], metrics=["json_accuracy", "json_completeness"])
    assert [r.value for r in run.results[0].values()] == [1.0, 1.0]
    written = _strict(dumps(evaluate_json(_arrays(500), _arrays(500)).to_dict()))
    assert (written["accuracy"], written["fields"][0]["expected"]) == (1.0, _arrays(500))
    monkeypatch.setenv("ASSAY_MAX_JSON_DEPTH", "501")
    assert len(read_samples(path)[0]) == 3  # the limit is configurable


def test_json_eval_compares_to_the_depth_limit_and_one_past_is_an_error_row(
    tmp_path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "pairs.jsonl"
    lines = [
        {"id": "at", "expected_json": _arrays(500), "output_json": _arrays(500)},
        {"id": "past", "expected_json": {"a": 1}, "output_json": _arrays(501)},
    ]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    at, past = evaluate_pairs(pairs_from_jsonl(path))
    assert (at.error, at.result.accuracy) == (None, 1.0)
    # the path shown is the first 40 and last 19 characters of $[0][0]...[0]
    shown = "$" + "[0]" * 13 + "…" + "]" + "[0]" * 6
    assert past.error == (
        f"{path}:2: output JSON nests deeper than 500 levels (at {shown}), the limit of "
        f"max_json_depth; {DEPTH_HINT}"
    )
    assert past.result is None
    assert evaluate_pairs(pairs_from_jsonl(path), max_depth=501)[1].error is None
    monkeypatch.setenv("ASSAY_MAX_JSON_DEPTH", "501")
    assert evaluate_pairs(pairs_from_jsonl(path))[1].error is None


def test_a_sample_nesting_past_the_depth_limit_fails_the_metrics_that_read_it(tmp_path) -> None:
    res = _limited(tmp_path, max_json_depth=3)
    sample = Sample(response="x", expected_json={"a": [[1]]}, output_json={"a": [[[1]]]})
    result = get_metric("json_completeness").score(sample, res)
    assert (result.value, result.reason) == (None, "input over a limit")
    assert result.error == (
        f"output_json nests 4 levels deep, over the limit of 3 (max_json_depth); {DEPTH_HINT}"
    )
    assert get_metric("exact_match").score(sample, res).reason == "missing input: expected"
    within = Sample(expected_json={"a": [[1]]}, output_json={"a": [[1]]})
    assert get_metric("json_completeness").score(within, res).value == 1.0


# ---- 4. number of contexts
# ------------------------------------------------------------------ context_intrusion: the
# response's content words {river, stone, cloud, paper} meet the contexts' in {river}:
# overlap r = 1/4; the RAG specification's curve (r - 0.15) / 0.15 * 20 = 13.33 -> /100
INTRUSION = (0.25 - 0.15) / 0.15 * 20 / 100  # 2 / 15
RESPONSE = "river stone cloud paper"


def test_contexts_up_to_the_limit_are_scored_and_one_more_is_a_per_sample_error(
    tmp_path,
) -> None:
    res = _limited(tmp_path, max_contexts=3)
    metric = get_metric("context_intrusion")
    at = Sample(response=RESPONSE, contexts=["river", "lake", "sea"])
    assert metric.score(at, res).value == pytest.approx(INTRUSION)
    past = Sample(response=RESPONSE, contexts=["river", "lake", "sea", "pond"], duration=0.5)
    assert metric.score(past, res).error == (
        f"contexts holds 4 items, over the limit of 3 (max_contexts); {CONTEXTS_HINT}"
    )
    assert get_metric("e2e_latency").score(past, res).value == 500.0


def test_the_default_contexts_limit_is_one_thousand(plain) -> None:
    metric = get_metric("context_intrusion")
    contexts = ["river"] + ["lake"] * 999
    at = Sample(response=RESPONSE, contexts=contexts)
    assert metric.score(at, plain).value == pytest.approx(INTRUSION)
    past = metric.score(Sample(response=RESPONSE, contexts=[*contexts, "sea"]), plain)
    assert past.error == (
        f"contexts holds 1,001 items, over the limit of 1,000 (max_contexts); {CONTEXTS_HINT}"
    )


# ---- 5. documented --------------------------------------------------------------------------
def test_the_limits_are_documented_with_their_defaults_and_settings() -> None:
    docs = (Path(__file__).resolve().parent.parent / "docs" / "input.md").read_text("utf-8")
    limits = docs.split("## Limits", 1)[1].split("\n## ", 1)[0]
    for setting, env, default in (
        ("max_field_chars", "ASSAY_MAX_FIELD_CHARS", "100,000"),
        ("max_json_depth", "ASSAY_MAX_JSON_DEPTH", "500"),
        ("max_contexts", "ASSAY_MAX_CONTEXTS", "1,000"),
    ):
        row = next(line for line in limits.splitlines() if f"`{setting}`" in line)
        assert f"`{env}`" in row and default in row


# ---- evidence as deep as the depth limit, and text that is not UTF-8, reach the files ------
class DeepEvidence(Metric):
    """Test metric: 1.0, with evidence nesting a known secret 600 arrays deep."""

    name = "deep_evidence"
    family = "structured"

    def compute(self, sample: Sample, res: Resources) -> Any:
        return self.result(1.0, method="measurement", nested=_deep("key sk-deep-secret-1", 600))


def _deep(value: Any, depth: int) -> Any:
    for _ in range(depth):
        value = [value]
    return value


def test_deep_evidence_and_lone_surrogates_are_written_as_utf8_json(
    plain, tmp_path, monkeypatch
) -> None:
    # redaction walked evidence recursively (RecursionError near 500 levels), and a lone
    # surrogate in a Sample made in Python (the readers refuse them) could not be encoded
    # into the UTF-8 file
    monkeypatch.setenv("ASSAY_JUDGE_API_KEY", "sk-deep-secret-1")
    out = tmp_path / "out.jsonl"
    sink = JsonlSink(out)
    run = evaluate(
        [Sample(id="s\udcff1", response="caf\udce9")],
        metrics=[DeepEvidence()],
        resources=plain,
        on_sample=lambda i, s, r: sink.write({"id": s.id, "deep_evidence": 1.0}, s, r),
    )
    sink.close()
    row = _strict(out.read_bytes().decode("utf-8"))
    assert row["id"] == "s\ufffd1"
    assert row["evidence"]["deep_evidence"]["details"]["nested"] == _deep("key [redacted]", 600)
    assert run.results[0]["deep_evidence"].value == 1.0


def test_a_line_nested_millions_deep_is_a_record_error_not_a_crash(tmp_path) -> None:
    """orjson 3.8 parsed without a depth limit and crashed the process (SIGSEGV) on a
    JSONL line of 2,000,000 ``[`` read in a thread (200,000 were enough there); the
    reader runs in a child process so that a crash fails this test instead of pytest."""
    path = tmp_path / "bomb.jsonl"
    depth = 2_000_000
    path.write_text(
        '{"response": "a"}\n{"response": "b", "x": ' + "[" * depth + "]" * depth + "}\n",
        encoding="utf-8",
    )
    script = (
        "import sys, threading\n"
        "from assay.inputs.read import read_samples\n"
        "out = {}\n"
        "def read(): out['r'] = read_samples(sys.argv[1])\n"
        "t = threading.Thread(target=read); t.start(); t.join()\n"
        "samples, errors = out['r']\n"
        "print([s.response for s in samples]); print([str(e) for e in errors])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == [
        "['a']",
        repr([f"{path} line 2: not usable JSON: nested too deeply"]),
    ]
