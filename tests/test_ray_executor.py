"""The Ray executor: the same values and signatures as the local executor, one judge
budget for the cluster, nothing lost when a worker dies or the driver is interrupted.

Every test but the head-node one shares one local Ray instance (``ray.init(num_cpus=2)``,
started once for the module); the head-node test starts its own head with ``ray start
--head --block`` in a temporary directory on a free port, runs ``assay evaluate
--ray-address`` against it in a fresh process and stops it by ending that ``ray start``
process (which stops the processes of its head, and only those).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

import assay
from assay.cli import app
from assay.core.agreement_stats import krippendorff_alpha
from assay.core.config import AssayConfig, AssayWarning
from assay.core.extras import MissingExtra
from assay.core.sample import Sample
from assay.evaluation.runner import Evaluation
from assay.evaluation.scale import resolve_executor
from assay.evaluation.scale.budget import JudgeBudget
from assay.evaluation.scale.ray_executor import RayExecutor, merge_usage
from assay.inputs.read import read_samples
from assay.metrics.registry import resolve_metrics
from assay.outputs.sinks import output_row, write_table
from fakes import interrupt_on_store
from judge_server import JudgeServer

ray = pytest.importorskip("ray")

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
WORDS = "the a cat dog sat ran on under mat log red blue quickly slowly big small".split()


@pytest.fixture(scope="module", autouse=True)
def local_ray() -> Iterator[None]:
    """One local Ray instance with two CPUs for the module's tests."""
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def generated(n: int, seed: int = 13) -> list[Sample]:
    """``n`` samples of random words from `WORDS` (a fixed RNG): responses, expected
    answers that share some of their words, some equal, and a tag."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        response = " ".join(rng.choices(WORDS, k=rng.randint(3, 12)))
        expected = response if i % 7 == 0 else " ".join(rng.choices(WORDS, k=rng.randint(3, 12)))
        out.append(Sample(id=f"g{i}", response=response, expected=expected, tags={"k": str(i % 3)}))
    return out


def assert_same(ray_run: Evaluation, local: Evaluation) -> None:
    """Every result equal (value, components, method, error, signature, details) and
    every summary equal, mean and bootstrap CI included."""
    assert len(ray_run.results) == len(local.results)
    for i, (got, want) in enumerate(zip(ray_run.results, local.results, strict=True)):
        assert got.keys() == want.keys(), i
        for name in want:
            a, b = got[name], want[name]
            assert (a.value, a.components, a.method, a.error, a.signature) == (
                b.value,
                b.components,
                b.method,
                b.error,
                b.signature,
            ), (i, name)
            assert json.dumps(a.details, sort_keys=True, default=str) == json.dumps(
                b.details, sort_keys=True, default=str
            ), (i, name)
    strip = ("seconds",)
    for got, want in zip(ray_run.summary(), local.summary(), strict=True):
        g, w = got.to_dict(), want.to_dict()
        for key in strip:
            g.pop(key), w.pop(key)
        assert g == w


# ---- same values ---------------------------------------------------------------------------


def test_every_example_dataset_scores_the_same_on_ray(tmp_path: Path) -> None:
    """All offline metrics that need no spaCy, BERTScore or toxicity model (75: lexical,
    pattern, embedding, agent, RAG, local estimators of the judged ones) over every
    example dataset, in chunks of 4 on two actors, against the local executor; the Ray
    run's samples are read by Ray tasks from each file's file:// URL, the local run's by
    the local reader from its path."""
    config = AssayConfig(chunk_size=4, cache_dir=str(tmp_path))
    metrics = [
        m for m in resolve_metrics(None, ["all-offline"]) if m.needs <= {"embedder", "judge"}
    ]
    assert len(metrics) > 60
    files = sorted(EXAMPLES.glob("*.jsonl"))
    assert {f.name for f in files} >= {
        "agent_chats.jsonl",
        "chatbot.jsonl",
        "multilingual.jsonl",
        "rag.jsonl",
        "redteam.jsonl",
    }
    samples: list[Sample] = []
    by_ray: list[Sample] = []
    spans = {}
    executor = RayExecutor(workers=2)
    for path in files:
        found, problems = read_samples(path)
        assert problems == []
        assert executor.read_samples(path.as_uri(), piece_bytes=1500) == (found, [])
        by_ray += executor.read_samples(path.as_uri())[0]
        spans[path.name] = list(range(len(samples), len(samples) + len(found)))
        samples += found
    local = assay.evaluate(samples, metrics=metrics, config=config)
    scaled = assay.evaluate(by_ray, metrics=metrics, config=config, executor=executor)
    assert_same(scaled, local)
    for name, indices in spans.items():  # each dataset's own summary too
        got = [s.to_dict() | {"seconds": 0} for s in scaled.summary(indices)]
        want = [s.to_dict() | {"seconds": 0} for s in local.summary(indices)]
        assert got == want, name


def test_2000_generated_samples_score_the_same_and_stream_each_once(tmp_path: Path) -> None:
    config = AssayConfig(chunk_size=200, cache_dir=str(tmp_path))
    samples = generated(2000)
    local = assay.evaluate(samples, suites=["lexical"], config=config)
    seen: list[int] = []
    ticks: list[int] = []
    scaled = assay.evaluate(
        samples,
        suites=["lexical"],
        config=config,
        executor="ray",
        on_sample=lambda i, sample, row: seen.append(i) or (sample.id == f"g{i}" or 1 / 0),
        progress=ticks.append,
    )
    assert sorted(seen) == list(range(2000))  # every sample handed on once, as its chunk came
    assert ticks == [200] * 10
    assert_same(scaled, local)
    exact = [r["exact_match"].value for r in scaled.results]
    assert exact.count(1.0) == sum(s.response == s.expected for s in samples) >= 2000 // 7


# ---- reading by Ray tasks ------------------------------------------------------------------


def test_a_file_url_read_by_ray_tasks_gives_the_local_samples_and_errors(tmp_path: Path) -> None:
    """chatbot.jsonl (10 lines), a broken line (line 11) and rag.jsonl (8 lines), 6,522
    bytes, read by its file:// URL in pieces of 1,000 bytes: 7 Ray tasks, the 18 samples
    of the local reader in its order, the broken line reported at line 11 (the values
    of samples read by Ray tasks: the first test). A Parquet copy in row groups of 4
    reads the same as from its path; the OTLP example is read by the driver."""
    text = (EXAMPLES / "chatbot.jsonl").read_text() + "{broken\n"
    data = tmp_path / "d.jsonl"
    data.write_text(text + (EXAMPLES / "rag.jsonl").read_text())
    url = data.as_uri()
    executor = RayExecutor(workers=2)
    samples, errors = executor.read_samples(url, piece_bytes=1000)
    assert executor.read_by == "7 Ray tasks"  # ceil(6522 / 1000)
    local_samples, local_errors = read_samples(data)
    assert samples == local_samples and len(samples) == 18
    broken = "not valid JSON: Expecting property name enclosed in double quotes at column 2"
    assert [str(e) for e in errors] == [f"{url} line 11: {broken}"]
    assert [str(e) for e in local_errors] == [f"{data} line 11: {broken}"]
    table = tmp_path / "d.parquet"
    fields = ("id", "query", "response", "expected", "contexts")
    rows = [{k: getattr(s, k) for k in fields} for s in local_samples]
    pq = pytest.importorskip("pyarrow.parquet")
    pq.write_table(pytest.importorskip("pyarrow").Table.from_pylist(rows), table, row_group_size=4)
    assert executor.read_samples(table.as_uri(), piece_bytes=1) == read_samples(table)
    assert executor.read_by == "5 Ray tasks"  # 18 rows in row groups of 4
    traces = EXAMPLES / "traces.otlp.json"  # an OTLP export: read whole, on the driver
    assert executor.read_samples(traces) == read_samples(traces)
    assert executor.read_by == "the driver (an OTLP export: read_otlp)"


def test_through_ray_client_a_local_file_is_read_by_the_driver_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text('{"response": "a"}\n{broken\n')
    monkeypatch.setattr(ray.util.client.ray, "is_connected", lambda: True)  # as via ray://
    executor = RayExecutor()
    with pytest.warns(AssayWarning, match="through Ray Client"):
        assert executor.read_samples(data) == read_samples(data)
    assert executor.read_by == "the driver (Ray Client cannot read local files)"


# ---- one judge budget ----------------------------------------------------------------------


def judged_samples(n: int) -> list[Sample]:
    return [
        Sample(id=f"j{i}", query=f"What is item {i} made of?", response=f"Item {i} is wood.")
        for i in range(n)
    ]


def judge_config(server: JudgeServer, tmp_path: Path, **settings: object) -> AssayConfig:
    return AssayConfig(
        judge_model="test-judge",
        judge_base_url=server.url,
        use_cache=False,
        cache_dir=str(tmp_path),
        **settings,
    )


def test_two_workers_share_one_judge_concurrency_limit(tmp_path: Path) -> None:
    """48 distinct asks, chunks of 8, two workers: alone each worker would keep 4 in
    flight (8 at the server); with the shared budget the server never sees more than 4,
    and sees exactly 4 (the budget is used, not undershot)."""
    with JudgeServer(delay=0.1) as server:
        config = judge_config(server, tmp_path, judge_concurrency=4, chunk_size=8)
        executor = RayExecutor(workers=2)
        scaled = assay.evaluate(
            judged_samples(48), metrics=["judged_relevance"], config=config, executor=executor
        )
        assert server.max_in_flight == 4
        assert server.calls == 48
        assert executor.budget_stats is not None
        stats = dict(executor.budget_stats)
        stats.pop("calls")  # how many slots come per call depends on timing: see test_judge_budget
        assert stats == {"limit": 4, "rate_limit": None, "peak": 4, "in_flight": 0, "granted": 48}
        usage = scaled.judge_usage
        assert usage is not None and usage["calls"] == 48 and usage["failures"] == 0
        server.reset()
        local = assay.evaluate(judged_samples(48), metrics=["judged_relevance"], config=config)
    assert_same(scaled, local)


def test_a_retry_after_from_one_worker_pauses_every_worker() -> None:
    """The budget's pause: after hold_off(0.3) no slot is handed out for 0.3 s, to any
    holder; slots of a forgotten holder come back and its queued requests are refused."""

    async def scenario() -> tuple[float, int, dict[str, object]]:
        budget = JudgeBudget(2)
        assert await budget.acquire_many("a", 1) == await budget.acquire_many("b", 1) == 1
        waiting = asyncio.ensure_future(budget.acquire_many("a", 1))  # no slot free: waits
        await asyncio.sleep(0.01)
        assert not waiting.done()
        assert budget.forget("a") == 1  # a died holding one: its slot goes back ...
        refused = await waiting  # ... and its queued request is refused
        budget.release_many("b", 1)
        budget.hold_off(0.3)
        started = time.monotonic()
        assert await budget.acquire_many("c", 1) == 1
        return time.monotonic() - started, refused, budget.stats()

    paused, refused, stats = asyncio.run(scenario())
    assert 0.29 <= paused < 0.6
    assert refused == 0
    assert stats == {
        "limit": 2,
        "rate_limit": None,
        "peak": 2,
        "in_flight": 1,
        "granted": 3,
        "calls": {"acquire": 4, "release": 1},
    }


def test_two_workers_share_one_judge_rate_limit(tmp_path: Path) -> None:
    """40 distinct asks, chunks of 4, two workers, a cluster rate of 20/s: one bucket at
    the budget, one token at the first request and one more every 0.05 s, so the 40th
    is sent 39 * 0.05 = 1.95 s after the first, and a one-second window holds at most 21
    (a bucket of 20/s per worker would send the 40 in about 0.95 s, 40 a second). At the
    server the first requests of each fresh worker arrive late (its HTTP client and
    connections are made then; 0.13-0.15 s measured), so the span is checked against
    1.5 s, and the windows are counted from 0.25 s on, once both workers send on open
    connections, allowing one more for a send delayed under 0.1 s: at most 22."""
    with JudgeServer() as server:
        config = judge_config(server, tmp_path, judge_rate_limit=20.0, chunk_size=4)
        executor = RayExecutor(workers=2)
        scaled = assay.evaluate(
            judged_samples(40), metrics=["judged_relevance"], config=config, executor=executor
        )
        arrivals = sorted(server.arrivals)
    assert len(arrivals) == 40
    assert 1.5 <= arrivals[-1] - arrivals[0] < 3.0
    steady = [t for t in arrivals if t >= arrivals[0] + 0.25]
    assert max(sum(1 for t in steady if s <= t <= s + 1.0) for s in steady) <= 22
    assert executor.budget_stats is not None
    assert (executor.budget_stats["rate_limit"], executor.budget_stats["granted"]) == (20.0, 40)
    usage = scaled.judge_usage
    assert usage is not None and usage["calls"] == 40 and usage["failures"] == 0


def test_a_judge_panel_on_ray_reports_each_judge_and_their_agreement(tmp_path: Path) -> None:
    """Two judges (one server, told apart by model name) over 12 samples in chunks of 4 on
    two workers: each judge's calls and the judges' agreement are those of the same run
    in one process (the agreement over all 12 samples, not one worker's share)."""

    def judge(step: int, scale: float) -> object:
        """A judge scoring item i as ((step * i) mod 5) / 4 * scale."""

        def script(task: str, blocks: dict, body: dict) -> dict:
            i = int(blocks["query"].split()[3])  # "What is item {i} made of?"
            return {"score": round((step * i) % 5 / 4 * scale, 2), "reason": f"item {i}"}

        return script

    with JudgeServer() as server:
        server.by_model = {"a": judge(1, 0.8), "b": judge(3, 1.0)}
        config = AssayConfig(
            judge_model=None,
            judge_base_url=server.url,
            judge_models=[{"model": "a"}, {"model": "b"}],
            use_cache=False,
            cache_dir=str(tmp_path),
            chunk_size=4,
        )
        samples = judged_samples(12)
        scaled = assay.evaluate(
            samples, metrics=["judged_relevance"], config=config, executor=RayExecutor(workers=2)
        )
        local = assay.evaluate(samples, metrics=["judged_relevance"], config=config)
    got, want = scaled.judge_usage, local.judge_usage
    assert got is not None and want is not None
    assert {k: v["calls"] for k, v in got["judges"].items()} == {"a": 12, "b": 12}
    assert got["calls"] == 24 and got["panel"] == want["panel"] == "mean"
    assert got["agreement"] == want["agreement"]
    table = [[round(i % 5 / 4 * 0.8, 2), round(3 * i % 5 / 4, 2)] for i in range(12)]
    alpha = round(krippendorff_alpha(table, level="interval"), 4)  # type: ignore[arg-type]
    assert got["agreement"]["judged_relevance"] == {"alpha": alpha, "samples": 12}
    assert "new_ratings" not in got
    assert_same(scaled, local)


def test_merge_usage_sums_counters_and_recomputes_the_mean() -> None:
    one = {"calls": 3, "latency_seconds": 0.6, "max_latency_seconds": 0.3, "cost": 0.5}
    two = {"calls": 1, "latency_seconds": 0.2, "max_latency_seconds": 0.2, "cost": 0.25}
    one["calls_by_prompt"], two["calls_by_prompt"] = {"p@1": 3}, {"p@1": 1}
    merged = merge_usage([one, two])
    assert merged is not None
    assert (merged["calls"], merged["max_latency_seconds"], merged["cost"]) == (4, 0.3, 0.75)
    assert merged["mean_latency_seconds"] == pytest.approx((0.6 + 0.2) / 4)
    assert merge_usage([one, {**two, "cost": None}])["cost"] is None  # type: ignore[index]
    assert merge_usage([]) is None


# ---- nothing lost --------------------------------------------------------------------------


def test_a_worker_killed_mid_run_has_its_chunks_scored_again(tmp_path: Path) -> None:
    """SIGKILL one of two workers when the first chunk comes back (the other chunks are
    in flight, each worker holding judge slots of a budget of 2): its chunks go to a new
    worker, the budget gets its slots back (else the run would hang), and the results
    equal a local run's, every sample exactly once."""
    with JudgeServer(delay=0.05) as server:
        config = judge_config(server, tmp_path, judge_concurrency=2, chunk_size=4)
        executor = RayExecutor(workers=2)
        seen: list[int] = []
        killed: list[int] = []

        def kill_one(index: int, sample: Sample, row: dict) -> None:
            seen.append(index)
            if not killed:
                pid = next(iter(executor.started.values()))[0]
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)

        with pytest.warns(AssayWarning, match=r"died while scoring samples \d+-\d+") as caught:
            scaled = assay.evaluate(
                judged_samples(40),
                metrics=["judged_relevance", "exact_match"],
                config=config,
                executor=executor,
                on_sample=kill_one,
            )
        # pytest.warns records every warning: an unclosed socket of an earlier test
        # collected meanwhile (a ResourceWarning) can come first
        retries = [w for w in caught if issubclass(w.category, AssayWarning)]
        assert str(killed[0]) in str(retries[0].message)
        assert sorted(seen) == list(range(40))
        assert len(executor.started) == 3  # the two first workers and one replacement
        assert executor.budget_stats is not None and executor.budget_stats["peak"] <= 2
        # the dead worker's requests (at most its slots) can still be open at the server
        # when its slots are handed on: the budget never exceeds 2, the server may see 4
        assert server.max_in_flight <= 4
        local = assay.evaluate(
            judged_samples(40), metrics=["judged_relevance", "exact_match"], config=config
        )
    assert_same(scaled, local)


def test_an_interrupted_ray_run_resumes_with_only_the_unfinished_samples(
    env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from assay.store.recorder import RunRecorder

    rows = [{"id": f"s{i}", "response": f"r {i % 5}", "expected": "r 1"} for i in range(30)]
    data = env / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = ["evaluate", str(data), "-m", "exact_match,bleu", "--chunk-size", "5"]
    args += ["--executor", "ray", "--db", str(env / "runs.db"), "--out", str(env / "r.jsonl")]
    real = interrupt_on_store(monkeypatch, 12)
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 130, first.output
    run_id = first.output.split("--resume ")[-1].split()[0]
    monkeypatch.setattr(RunRecorder, "__call__", real)
    resumed = CliRunner().invoke(app, [*args, "--resume", run_id, "--format", "json"])
    assert resumed.exit_code == 0, resumed.output
    assert "11 samples already stored, 19 to go" in resumed.output
    ids = [json.loads(line)["id"] for line in (env / "r.jsonl").read_text().splitlines()]
    # the first run wrote 12 lines (the 12th sample's line went out before its store
    # write was interrupted), then only the 19 samples not stored were scored again
    assert len(ids) == 12 + 19
    assert sorted(ids[:11] + ids[12:]) == sorted(r["id"] for r in rows)
    report = json.loads(resumed.stdout[resumed.stdout.index("{") :])
    mean = {m["name"]: m["mean"] for m in report["metrics"]}
    # exact_match: "r 1" == "r 1" for i % 5 == 1, 6 of the 30 samples
    assert mean["exact_match"] == pytest.approx(6 / 30)


def test_a_local_run_of_a_file_url_resumes_on_ray_from_its_relative_path(
    env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Interrupted at the 8th stored sample of a local run of the file by its file:// URL;
    resumed with --executor ray by its path relative to the working folder (the same
    bytes, so the same run; the Ray tasks get it made absolute): the broken line 4 is
    skipped with its line number by both, the 7 stored samples are not scored again, the
    report covers all 20. An http:// URL is refused before any scoring."""
    from assay.store.recorder import RunRecorder

    rows = [
        json.dumps({"id": f"s{i}", "response": f"r {i % 5}", "expected": "r 1"}) for i in range(20)
    ]
    data = env / "d.jsonl"
    data.write_text("\n".join([*rows[:3], "{broken", *rows[3:]]) + "\n")
    tail = ["-m", "exact_match", "--chunk-size", "4", "--db", str(env / "runs.db")]
    real = interrupt_on_store(monkeypatch, 8)
    first = CliRunner().invoke(app, ["evaluate", data.as_uri(), *tail], env={"COLUMNS": "300"})
    assert first.exit_code == 130, first.output
    assert f"skipped: {data.as_uri()} line 4: not valid JSON" in first.output
    run_id = first.output.split("--resume ")[-1].split()[0]
    monkeypatch.setattr(RunRecorder, "__call__", real)
    args = ["evaluate", "d.jsonl", *tail, "--executor", "ray", "--format", "json"]
    resumed = CliRunner().invoke(app, [*args, "--resume", run_id], env={"COLUMNS": "300"})
    assert resumed.exit_code == 0, resumed.output
    assert "skipped: d.jsonl line 4: not valid JSON" in resumed.output
    assert "7 samples already stored, 13 to go" in resumed.output
    report = json.loads(resumed.stdout[resumed.stdout.index("{") :])
    # exact_match: "r 1" == "r 1" for i % 5 == 1, 4 of the 20 samples
    assert report["metrics"][0]["mean"] == pytest.approx(4 / 20)
    refused = CliRunner().invoke(app, ["evaluate", "http://example.com/d.jsonl", *args[2:]])
    assert refused.exit_code == 2
    assert "http://example.com/d.jsonl: cannot be read: pyarrow has no" in refused.output


# ---- a cluster started with `ray start --head` ---------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_cli_joins_a_head_started_with_ray_start(tmp_path: Path) -> None:
    """``ray start --head`` in a temporary directory on a free port; ``assay evaluate
    --executor ray --ray-address`` in another process joins it and writes the same
    results as a local run; ending the ``ray start --block`` process stops that head."""
    ray_bin = Path(sys.executable).with_name("ray")
    temp = Path(tempfile.mkdtemp(prefix="ray", dir="/tmp"))  # short: Ray's socket paths
    port = free_port()
    head = subprocess.Popen(
        [
            str(ray_bin),
            "start",
            "--head",
            "--block",
            f"--port={port}",
            f"--temp-dir={temp}",
            "--num-cpus=2",
            "--include-dashboard=false",
            "--disable-usage-stats",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        data = tmp_path / "d.jsonl"
        data.write_text(
            "".join(
                json.dumps({"id": s.id, "response": s.response, "expected": s.expected}) + "\n"
                for s in generated(200)
            )
        )
        joined = subprocess.run(
            [
                *(sys.executable, "-m", "assay.cli", "evaluate", str(data), "-s", "lexical"),
                *("--executor", "ray", "--ray-address", f"127.0.0.1:{port}", "--workers", "2"),
                *("--chunk-size", "25", "--format", "json", "-q"),
                *("--out", str(tmp_path / "ray.csv")),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "ASSAY_CACHE_DIR": str(tmp_path / "cache")},
        )
        assert joined.returncode == 0, joined.stderr
    finally:
        head.send_signal(signal.SIGTERM)
        try:
            head.wait(timeout=30)
        except subprocess.TimeoutExpired:
            head.kill()
            head.wait()
        shutil.rmtree(temp, ignore_errors=True)
    samples, _ = read_samples(data)
    local = assay.evaluate(samples, suites=["lexical"], config=AssayConfig(chunk_size=25))
    rows = [output_row(s, r) for s, r in zip(local.samples, local.results, strict=True)]
    write_table(rows, tmp_path / "local.csv")
    assert (tmp_path / "ray.csv").read_text() == (tmp_path / "local.csv").read_text()
    report = json.loads(joined.stdout)
    assert [{k: v for k, v in m.items() if k != "seconds"} for m in report["metrics"]] == [
        {k: v for k, v in m.to_dict().items() if k != "seconds"} for m in local.summary()
    ]


# ---- options and errors --------------------------------------------------------------------


def test_unknown_executor_and_stray_ray_options_are_refused(env: Path) -> None:
    data = env / "d.jsonl"
    data.write_text('{"response": "a", "expected": "a"}\n')
    runner = CliRunner()
    bad = runner.invoke(app, ["evaluate", str(data), "-m", "exact_match", "--executor", "spark"])
    assert bad.exit_code == 2
    assert "--executor must be local or ray, got 'spark'" in bad.output
    stray = runner.invoke(app, ["evaluate", str(data), "-m", "exact_match", "--workers", "2"])
    assert stray.exit_code == 2
    assert "--ray-address and --workers go with --executor ray" in stray.output
    with pytest.raises(ValueError, match="unknown executor 'dask'; executors: local, ray"):
        resolve_executor("dask")
    with pytest.raises(ValueError, match=r"workers must be at least 1\. Got 0\."):
        RayExecutor(workers=0)


def test_without_the_ray_extra_the_error_names_the_pip_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # "import ray" fails as if not installed
    with pytest.raises(MissingExtra) as caught:
        assay.evaluate([{"response": "a"}], metrics=["exact_match"], executor="ray")
    assert str(caught.value) == (
        'the Ray executor (--executor ray) needs the ray extra: pip install "assay-eval[ray]"'
    )


# ---- device --------------------------------------------------------------------------------


def test_device_auto_follows_torch_and_cuda_without_a_gpu_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    torch = pytest.importorskip("torch")
    from assay.core.extras import ModelUnavailable
    from assay.models.device import available_cores, model_threads, torch_device

    gpu = torch.cuda.is_available()
    assert torch_device("cpu") == "cpu"
    assert torch_device("auto") == ("cuda" if gpu else "cpu")
    if not gpu:
        with pytest.raises(ModelUnavailable, match="torch sees no CUDA GPU"):
            torch_device("cuda")
        with pytest.raises(ModelUnavailable, match="the Ray cluster has no GPU"):
            assay.evaluate(
                [{"response": "a", "expected": "a"}],
                metrics=["exact_match"],
                config=AssayConfig(device="cuda"),
                executor=RayExecutor(),
            )
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # what Ray sets for a one-CPU worker
    assert model_threads() == 1
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert model_threads() == available_cores()  # the cores allowed, not the host's
