"""Judge panels (``judge_models``, ``panel``) against one real test judge server acting as
three judges that disagree, told apart by model name (``JudgeServer.by_model``): the
panel's mean, majority and min worked by hand from the scripted verdicts, each judge's
verdict in the evidence, Krippendorff's alpha between the judges worked by hand, calls
and tokens per judge, a failing judge, every judge failing, each judge's cache, a panel
of one equal to the single judge, one concurrency budget, the Batch API per judge, the
settings' errors, and no key in anything written (SQLite and PostgreSQL stores)."""

from __future__ import annotations

import base64
import json
import socket
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from assay.cli import app
from assay.core.config import AssayConfig, ConfigError, load_config
from assay.core.version import __version__
from assay.engine.resources import Resources
from assay.evaluation.runner import Evaluation, evaluate
from assay.judge.client import JudgeUnreachable
from assay.judge.panel_rules import combine
from assay.judge.prompts import RELEVANCE
from judge_server import JudgeServer
from live_stores import sqlite_or_postgres  # noqa: F401  (the store_url fixture)

#: each judge's relevance score of samples 0..3 (a judge reads the sample's number from
#: the query "question N here?")
SCORES = {
    "alpha": [0.9, 0.8, 0.3, 0.6],
    "beta": [0.7, 0.4, 0.2, 0.6],
    "gamma": [0.2, 0.6, 0.1, 0.6],
}
SAMPLES = [
    {"id": f"s{i}", "query": f"question {i} here?", "response": f"answer {i}"} for i in range(4)
]
METRIC = "judged_relevance"
#: the relevance prompt's signature part (``prompt=`` is the template's hash)
PROMPT_HASH = RELEVANCE.signature.rpartition("#")[2]


def _script(model: str) -> Any:
    def script(task: str, blocks: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
        i = int(blocks["query"].split()[1])
        return {"score": SCORES[model][i], "reason": f"{model} read sample {i}"}

    return script


@pytest.fixture(scope="module")
def running() -> Iterator[JudgeServer]:
    with JudgeServer() as srv:  # one for the module: stopping one takes 0.5 s
        yield srv


@pytest.fixture
def server(running: JudgeServer) -> JudgeServer:
    """The module's server, reset, as the three judges."""
    running.reset()
    running.delay = 0.0
    running.by_model = {model: _script(model) for model in SCORES}
    return running


def _config(server: JudgeServer, tmp_path: Path, *models: str, **settings: Any) -> AssayConfig:
    values: dict[str, Any] = {
        "cache_dir": str(tmp_path / "cache"),
        "judge_model": None,
        "judge_api_key": None,
        "judge_base_url": server.url,
        "judge_max_retries": 0,
        "thresholds": {METRIC: 0.5},
        "judge_models": [{"model": m} for m in models],
    }
    values.update(settings)
    return AssayConfig(**values)


def _run(config: AssayConfig) -> Evaluation:
    return evaluate(SAMPLES, [METRIC], config=config)


def _values(evaluation: Evaluation) -> list[float | None]:
    return [row[METRIC].value for row in evaluation.results]


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        # the mean of the three judges: (0.9+0.7+0.2)/3, (0.8+0.4+0.6)/3, ...
        ("mean", [0.6, 0.6, 0.2, 0.6]),
        # votes at 0.5: s0 alpha, beta pass -> (0.9+0.7)/2; s1 alpha, gamma pass ->
        # (0.8+0.6)/2; s2 all fail -> (0.3+0.2+0.1)/3; s3 all pass -> 0.6
        ("majority", [0.8, 0.7, 0.2, 0.6]),
        # the strictest judge (higher is better: the lowest value)
        ("min", [0.2, 0.4, 0.1, 0.6]),
    ],
)
def test_the_panel_combines_three_disagreeing_judges_by_its_rule(
    server: JudgeServer, tmp_path: Path, rule: str, expected: list[float]
) -> None:
    evaluation = _run(_config(server, tmp_path, *SCORES, panel=rule, use_cache=False))
    assert _values(evaluation) == pytest.approx(expected, abs=1e-12)
    assert server.calls_by_model() == {"alpha": 4, "beta": 4, "gamma": 4}
    first = evaluation.results[0][METRIC]
    assert first.method == "llm"
    assert first.signature == (
        f"assay={__version__}|metric={METRIC}@1|method=llm|judge=panel(alpha,beta,gamma)|"
        f"prompt={PROMPT_HASH}|panel={rule}"
    )


def test_each_judges_verdict_and_reason_is_the_evidence(server: JudgeServer, tmp_path: Path):
    evaluation = _run(_config(server, tmp_path, *SCORES, panel="majority", use_cache=False))
    details = evaluation.results[1][METRIC].details
    assert details["judges"] == {
        "alpha": {"value": 0.8, "reason": "alpha read sample 1"},
        "beta": {"value": 0.4, "reason": "beta read sample 1"},
        "gamma": {"value": 0.6, "reason": "gamma read sample 1"},
    }
    assert details["panel"] == "majority"
    assert details["panel_threshold"] == 0.5
    # the majority side is alpha (0.8) and gamma (0.6), mean 0.7: both 0.1 from it, the
    # first in the configured order gives the rest of the evidence
    assert details["panel_evidence"] == "alpha"
    assert details["judge_reason"] == "alpha read sample 1"


def test_agreement_and_calls_and_tokens_per_judge(server: JudgeServer, tmp_path: Path) -> None:
    evaluation = _run(_config(server, tmp_path, *SCORES, use_cache=False))
    usage = evaluation.judge_usage
    assert usage is not None
    # Krippendorff's alpha (interval) by hand: the observed disagreement sums, per sample,
    # the squared differences of its ordered pairs over (values - 1): s0 2*(0.04+0.49+
    # 0.25)/2 = 0.78, s1 0.24, s2 0.06, s3 0 -> 1.08; the expected one, over the 12 pooled
    # values (mean 0.5, squared deviations summing to 0.72), is 2*12*0.72 = 17.28;
    # alpha = 1 - (12 - 1) * 1.08 / 17.28 = 1 - 0.6875 = 0.3125
    assert usage["agreement"] == {METRIC: {"alpha": 0.3125, "samples": 4}}
    assert usage["panel"] == "mean"
    for model in SCORES:
        mine = usage["judges"][model]
        assert mine["calls"] == 4
        prompt, completion = server.tokens_by_model[model]
        assert (mine["prompt_tokens"], mine["completion_tokens"]) == (prompt, completion)
    assert usage["calls"] == 12
    assert usage["calls_by_prompt"] == {"relevance_rubric": 12}
    assert usage["prompt_tokens"] == server.prompt_tokens


def test_a_failing_judge_leaves_the_others_to_decide(server: JudgeServer, tmp_path: Path) -> None:
    server.unknown_models = {"gamma"}  # 404: the model does not exist
    evaluation = _run(_config(server, tmp_path, *SCORES, use_cache=False))
    # the mean of alpha and beta alone
    assert _values(evaluation) == pytest.approx([0.8, 0.6, 0.25, 0.6], abs=1e-12)
    gamma = evaluation.results[0][METRIC].details["judges"]["gamma"]
    assert gamma["value"] is None
    assert "does not exist" in gamma["error"]
    usage = evaluation.judge_usage
    assert usage is not None
    assert usage["judges"]["gamma"]["failures"] == 4
    # alpha between alpha and beta by hand: observed 2*(0.04+0.16+0.01+0) = 0.42; the 8
    # pooled values (mean 0.5625) have squared deviations summing to 0.41875, expected
    # 2*8*0.41875 = 6.7; alpha = 1 - 7 * 0.42 / 6.7 = 0.56119...
    assert usage["agreement"][METRIC] == {"alpha": 0.5612, "samples": 4}


def test_a_judge_that_cannot_be_reached_leaves_the_others_to_decide(
    server: JudgeServer, tmp_path: Path
) -> None:
    closed = socket.socket()  # a loopback port nothing listens on
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    judges = [{"model": "alpha"}, {"model": "beta", "base_url": f"http://127.0.0.1:{port}/v1"}]
    evaluation = _run(_config(server, tmp_path, use_cache=False, judge_models=judges))
    assert _values(evaluation) == SCORES["alpha"]
    beta = evaluation.results[0][METRIC].details["judges"]["beta"]
    assert "cannot be reached" in beta["error"]
    # with no judge to reach, the run stops as it does with one judge
    down = [{"model": "alpha", "base_url": f"http://127.0.0.1:{port}/v1"}, judges[1]]
    res = Resources(_config(server, tmp_path, use_cache=False, judge_models=down))
    try:
        with pytest.raises(JudgeUnreachable, match=r"alpha: the judge at .* cannot be reached"):
            evaluate(SAMPLES, [METRIC], resources=res)
    finally:
        res.close()


def test_every_judge_failing_is_the_samples_error(server: JudgeServer, tmp_path: Path) -> None:
    server.unknown_models = {"alpha", "beta"}
    evaluation = _run(_config(server, tmp_path, "alpha", "beta", use_cache=False))
    for row in evaluation.results:
        result = row[METRIC]
        assert result.value is None
        assert result.reason == "judge call failed"
        assert result.error is not None
        assert result.error.startswith("every judge of the panel failed (alpha: JudgeError: ")
        assert "; beta: JudgeError: " in result.error
        assert "judge=panel(alpha,beta)" in result.signature


def test_each_judges_answers_are_cached_apart(server: JudgeServer, tmp_path: Path) -> None:
    _run(_config(server, tmp_path, "alpha", "beta"))
    assert server.calls_by_model() == {"alpha": 4, "beta": 4}
    server.calls, server.requests = 0, []
    # a third judge joins: only it is asked; the two others answer from the cache
    evaluation = _run(_config(server, tmp_path, "alpha", "beta", "gamma"))
    assert server.calls_by_model() == {"gamma": 4}
    usage = evaluation.judge_usage
    assert usage is not None
    assert [usage["judges"][m]["cache_hits"] for m in SCORES] == [4, 4, 0]
    assert _values(evaluation) == pytest.approx([0.6, 0.6, 0.2, 0.6], abs=1e-12)


def test_a_panel_of_one_is_the_single_judge(server: JudgeServer, tmp_path: Path) -> None:
    single = _config(server, tmp_path, judge_model="alpha")
    alone = _run(single)
    assert server.calls_by_model() == {"alpha": 4}
    first = alone.results[0][METRIC]
    assert first.signature == (
        f"assay={__version__}|metric={METRIC}@1|method=llm|judge=alpha|prompt={PROMPT_HASH}"
    )
    assert "judges" not in first.details
    assert alone.judge_usage is not None and "judges" not in alone.judge_usage
    server.calls, server.requests = 0, []
    one = _run(_config(server, tmp_path, "alpha"))
    assert server.calls == 0  # the same cache keys: every answer from the cache
    for a, b in zip(alone.results, one.results, strict=True):
        assert (a[METRIC].value, a[METRIC].signature) == (b[METRIC].value, b[METRIC].signature)
        assert {**a[METRIC].details, "judge_source": "cache"} == b[METRIC].details


def test_the_judges_share_one_concurrency_budget(server: JudgeServer, tmp_path: Path) -> None:
    server.delay = 0.05
    _run(_config(server, tmp_path, *SCORES, judge_concurrency=2, use_cache=False))
    assert server.calls == 12
    assert server.max_in_flight == 2


def test_the_batch_api_per_judge(server: JudgeServer, tmp_path: Path) -> None:
    config = _config(
        server, tmp_path, *SCORES, use_cache=False, judge_batch=True, judge_batch_poll=0.01
    )
    evaluation = _run(config)
    assert _values(evaluation) == pytest.approx([0.6, 0.6, 0.2, 0.6], abs=1e-12)
    assert (server.calls, server.batch_lines) == (0, 12)
    usage = evaluation.judge_usage
    assert usage is not None
    assert usage["batches"] == 3  # one per judge, each to its judge's server
    assert {m: u["batch_calls"] for m, u in usage["judges"].items()} == dict.fromkeys(SCORES, 4)


def test_the_panel_rules_by_polarity_and_ties() -> None:
    values = {"a": 0.2, "b": 0.6}
    # lower is better (e.g. hallucination): the strictest is the highest value
    assert combine(values, "min", threshold=0.5, higher_is_better=False) == (0.6, ["b"])
    # a tie goes to the failing side: higher is better, a fails; lower is better, b fails
    assert combine(values, "majority", threshold=0.5) == (0.2, ["a"])
    assert combine(values, "majority", threshold=0.5, higher_is_better=False) == (0.6, ["b"])
    with pytest.raises(ValueError, match="unknown panel rule 'median'"):
        combine(values, "median", threshold=0.5)


def test_the_settings_refuse_a_key_an_unset_variable_and_two_judge_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("ASSAY_JUDGE_MODEL", "ASSAY_JUDGE_MODELS", "ASSAY_PANEL", "NO_SUCH_KEY_VAR"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "assay.toml").write_text(
        '[tool.assay]\njudge_models = [{model = "a", api_key = "sk-in-a-file"}]\n'
    )
    with pytest.raises(ConfigError, match="never written in a file: name the environment"):
        load_config()
    (tmp_path / "assay.toml").write_text(
        '[tool.assay]\njudge_models = [{model = "a", api_key_env = "NO_SUCH_KEY_VAR"}]\n'
    )
    with pytest.raises(ConfigError, match="'NO_SUCH_KEY_VAR', which is not set"):
        load_config()
    (tmp_path / "assay.toml").write_text('[tool.assay]\njudge_models = [{model = "a"}]\n')
    with pytest.raises(ConfigError, match="judge_model and judge_models are both set"):
        load_config({"judge_model": "b"})
    (tmp_path / "assay.toml").unlink()
    monkeypatch.setenv("ASSAY_JUDGE_MODELS", "[{model: a}]")
    with pytest.raises(ConfigError, match="'ASSAY_JUDGE_MODELS': Value error, not a JSON list"):
        load_config()
    monkeypatch.setenv("ASSAY_JUDGE_MODELS", '[{"model": "a"}, {"model": "b"}]')
    monkeypatch.setenv("ASSAY_PANEL", "min")
    config = load_config()
    assert [m.label for m in config.judge_members()] == ["a", "b"]
    assert (config.panel, config.judge_configured) == ("min", True)


def _leaks(blob: bytes, secrets: list[str]) -> list[str]:
    return [s for s in secrets if s.encode() in blob or base64.b64encode(s.encode()) in blob]


def _stored(store_url: str) -> tuple[bytes, dict[str, Any]]:
    """Every row of the store as bytes, and the run's judge usage."""
    if store_url.startswith("sqlite"):
        conn = sqlite3.connect(store_url.removeprefix("sqlite:///"))
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    else:
        import psycopg

        conn = psycopg.connect(store_url)  # type: ignore[assignment]
        query = "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
        tables = [r[0] for r in conn.execute(query)]
    try:
        dump = "".join(str(row) for t in tables for row in conn.execute(f'SELECT * FROM "{t}"'))
        usage = conn.execute("SELECT judge_usage FROM runs").fetchone()[0]
    finally:
        conn.close()
    return dump.encode(), json.loads(usage) if isinstance(usage, str) else usage


def test_no_judges_key_is_written_and_the_report_names_each_judge(
    server: JudgeServer,
    store_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    secrets = ["sk-alpha-Qp41vRR8secret", "sk-beta-Zt93mWW5secret"]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ALPHA_KEY", secrets[0])
    monkeypatch.setenv("BETA_KEY", secrets[1])
    monkeypatch.setenv("ASSAY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("ASSAY_JUDGE_MODEL", raising=False)
    judges = [
        {"model": "alpha", "base_url": server.url, "api_key_env": "ALPHA_KEY"},
        {"model": "beta", "base_url": server.url, "api_key_env": "BETA_KEY"},
    ]
    monkeypatch.setenv("ASSAY_JUDGE_MODELS", json.dumps(judges))
    data = tmp_path / "panel.jsonl"
    data.write_text("".join(json.dumps(s) + "\n" for s in SAMPLES))
    out = tmp_path / "out.jsonl"
    args = ["evaluate", str(data), "-m", METRIC, "--store", "--db", store_url, "--out", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    # each judge was sent its own key
    assert server.auth_by_model == {
        "alpha": f"Bearer {secrets[0]}",
        "beta": f"Bearer {secrets[1]}",
    }
    assert "judge alpha: calls=4, cache_hits=0, failures=0" in result.output
    # alpha and beta: observed 2*(0.04+0.16+0.01) = 0.42, expected 6.7 (see above)
    assert "Krippendorff's alpha (interval): judged_relevance 0.561 (4 samples)" in result.output
    dump, usage = _stored(store_url)
    assert usage["agreement"] == {METRIC: {"alpha": 0.5612, "samples": 4}}
    assert set(usage["judges"]) == {"alpha", "beta"}
    written = dump + result.output.encode()
    written += b"".join(p.read_bytes() for p in sorted(tmp_path.rglob("*")) if p.is_file())
    assert _leaks(written, secrets) == []


def test_a_resumed_run_must_have_the_same_judges_but_may_change_their_limits(
    tmp_path: Path,
) -> None:
    """The fingerprint of a panel run names each judge's model and plain URL (no
    credential), so resuming with another panel is refused by name, while a judge's rate
    limit or price (how the run is paid for, not what it measures) may change."""
    from assay.cli.resume import fingerprint, refusal
    from assay.metrics.registry import get_metric

    data = tmp_path / "d.jsonl"
    data.write_text('{"query": "q", "response": "r"}\n')
    url = "http://user:hunter2@127.0.0.1:9/v1?key=hunter3"

    def panel(*judges: dict[str, Any]) -> dict[str, Any]:
        config = AssayConfig(judge_model=None, judge_base_url=url, judge_models=list(judges))
        return fingerprint(data, [get_metric(METRIC)], config)

    alpha_beta = panel({"model": "alpha"}, {"model": "beta"})
    assert alpha_beta["judge"] == {
        "models": [
            {"model": "alpha", "base_url": "http://127.0.0.1:9/v1"},
            {"model": "beta", "base_url": "http://127.0.0.1:9/v1"},
        ]
    }
    assert "hunter" not in json.dumps(alpha_beta)
    paced = panel({"model": "alpha", "rate_limit": 2, "price_prompt": 0.5}, {"model": "beta"})
    assert refusal("r1", alpha_beta, paced) is None
    other = refusal("r1", alpha_beta, panel({"model": "alpha"}, {"model": "gamma"}))
    assert (
        other is not None
        and (
            "another judge (a panel of model alpha at http://127.0.0.1:9/v1, model beta at "
            "http://127.0.0.1:9/v1 vs a panel of model alpha at http://127.0.0.1:9/v1, model "
            "gamma at http://127.0.0.1:9/v1)"
        )
        in other
    )


def test_no_judge_turns_a_panel_off_too(
    server: JudgeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--no-judge`` with a panel configured: no judge is asked, the local estimator runs."""
    monkeypatch.setenv("ASSAY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("ASSAY_JUDGE_MODEL", raising=False)
    monkeypatch.setenv("ASSAY_JUDGE_BASE_URL", server.url)
    monkeypatch.setenv("ASSAY_JUDGE_MODELS", json.dumps([{"model": "alpha"}, {"model": "beta"}]))
    data = tmp_path / "panel.jsonl"
    data.write_text("".join(json.dumps(s) + "\n" for s in SAMPLES))
    args = ["evaluate", str(data), "-m", METRIC, "--no-judge", "--format", "json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert server.calls == 0
    (summary,) = json.loads(result.stdout[result.stdout.index("{") :])["metrics"]
    assert summary["methods"] == {"local": 4}
