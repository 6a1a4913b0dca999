"""The judge through the OpenAI Batch API (``--judge-batch``), against the test judge
server's ``/v1/files`` and ``/v1/batches`` (tests/judge_batch_api.py) on loopback: the
values and evidence of a direct run, the cache on a re-run, a stopped run's batch
collected and not paid again, failed and missing lines asked directly, the cost at half
price, and the output file read with the reply bound."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from itertools import islice
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from assay.cli import app
from assay.judge.batch import BatchLedger, BatchTransport, poll_delays
from assay.judge.client import JudgeClient, JudgeError
from assay.judge.panel import judge_from_config
from assay.judge.prompts import RELEVANCE
from judge_server import JudgeServer

RAG = Path(__file__).resolve().parents[1] / "examples" / "rag.jsonl"
#: four relevance questions: the scripted judge scores each by the share of the query's
#: content words in the response
QUESTIONS = [
    (RELEVANCE, {"query": "Where is the Eiffel Tower?", "response": "The tower is in Paris."}),
    (RELEVANCE, {"query": "Who wrote Hamlet?", "response": "Shakespeare wrote it."}),
    (RELEVANCE, {"query": "What is the boiling point of water?", "response": "Water boils."}),
    (RELEVANCE, {"query": "How tall is Everest?", "response": "Everest is tall: 8,849 m."}),
]
#: what the scripted judge gives them (content words shared / the query's content words)
SCORES = [0.5, 0.5, 0.33, 1.0]


@pytest.fixture
def server() -> Iterator[JudgeServer]:
    with JudgeServer() as srv:
        yield srv


def batch_client(server: JudgeServer, ledger: BatchLedger | None = None, **kw: Any) -> JudgeClient:
    """A judge client that sends through the server's Batch API, polling fast."""
    ledger = BatchLedger(None) if ledger is None else ledger
    transport = BatchTransport(ledger, poll=0.01, wait=kw.pop("wait", 30.0))
    return JudgeClient("scripted", server.url, batch=transport, **kw)


def scores(replies: list[Any]) -> list[float]:
    return [r.output.score for r in replies]


def means(report: dict[str, Any]) -> dict[str, Any]:
    """Each metric's mean and value count in a JSON report."""
    return {m["name"]: (m["mean"], m["n"]) for m in report["metrics"]}


def flat(text: str) -> str:
    return " ".join(text.split())


def test_poll_schedule_doubles_to_a_minute() -> None:
    """5 s first, then twice as long each time, never more than 60 s (or the first
    pause when that is longer)."""
    assert list(islice(poll_delays(5.0), 7)) == [5, 10, 20, 40, 60, 60, 60]
    assert list(islice(poll_delays(0.01), 3)) == [0.01, 0.02, 0.04]
    assert list(islice(poll_delays(100.0), 2)) == [100, 100]


def test_the_batch_api_of_the_test_server_has_openais_shapes(server: JudgeServer) -> None:
    """Upload (multipart, purpose batch), create, poll through validating -> in_progress
    -> completed with request_counts, and an output line {id, custom_id, response:
    {status_code, request_id, body}, error} whose body is a chat completion."""
    line = {
        "custom_id": "q1",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
    }
    with httpx.Client(base_url=server.url + "/") as http:
        files = {"file": ("in.jsonl", json.dumps(line).encode() + b"\n", "application/jsonl")}
        refused = http.post("files", data={"purpose": "fine-tune"}, files=files)
        assert refused.status_code == 400
        uploaded = http.post("files", data={"purpose": "batch"}, files=files).json()
        assert (uploaded["object"], uploaded["purpose"], uploaded["filename"]) == (
            "file",
            "batch",
            "in.jsonl",
        )
        create = {"input_file_id": uploaded["id"], "endpoint": "/v1/chat/completions"}
        assert http.post("batches", json={**create, "completion_window": "1h"}).status_code == 400
        batch = http.post("batches", json={**create, "completion_window": "24h"}).json()
        assert (batch["object"], batch["status"]) == ("batch", "validating")
        statuses = [http.get(f"batches/{batch['id']}").json()["status"] for _ in range(3)]
        assert statuses == ["in_progress", "completed", "completed"]
        done = http.get(f"batches/{batch['id']}").json()
        assert done["request_counts"] == {"total": 1, "completed": 1, "failed": 0}
        assert done["error_file_id"] is None
        [out] = http.get(f"files/{done['output_file_id']}/content").text.splitlines()
    answer = json.loads(out)
    assert sorted(answer) == ["custom_id", "error", "id", "response"]
    assert (answer["custom_id"], answer["error"]) == ("q1", None)
    assert sorted(answer["response"]) == ["body", "request_id", "status_code"]
    assert answer["response"]["status_code"] == 200
    assert answer["response"]["body"]["object"] == "chat.completion"
    assert (server.calls, server.batch_lines) == (0, 1)


def test_batch_replies_equal_direct_ones_and_cost_half(server: JudgeServer, tmp_path: Path) -> None:
    """Four questions in one batch: no direct call, the scores and reply texts of direct
    calls, and with prices of 2 and 8 per 1M tokens the cost is half the direct cost."""
    prices = {"price_prompt": 2.0, "price_completion": 8.0}
    batched = batch_client(server, **prices)
    by_batch = batched.run(batched.ask_all(QUESTIONS))
    assert (server.calls, server.batch_lines, server.batch.created) == (0, 4, 1)
    tokens = (server.prompt_tokens, server.completion_tokens)
    direct = JudgeClient("scripted", server.url, **prices)
    by_call = direct.run(direct.ask_all(QUESTIONS))
    assert server.calls == 4
    assert scores(by_batch) == scores(by_call) == SCORES
    assert [r.content for r in by_batch] == [r.content for r in by_call]
    assert [r.source for r in by_batch] == ["call"] * 4
    usage = batched.usage.to_dict()
    assert (usage["calls"], usage["batch_calls"], usage["batches"]) == (0, 4, 1)
    assert (usage["batch_prompt_tokens"], usage["batch_completion_tokens"]) == tokens
    full = (tokens[0] * 2.0 + tokens[1] * 8.0) / 1_000_000
    assert direct.usage.cost == pytest.approx(full)
    assert batched.usage.cost == pytest.approx(full / 2)
    assert "batch_calls" not in direct.usage.to_dict()  # a direct client reports none
    batched.close()
    direct.close()


def test_an_error_line_and_a_missing_line_are_asked_directly(server: JudgeServer) -> None:
    """The batch leaves the first line out of its files and answers the second with an
    error line: those two questions are asked directly (2 calls), the other two come
    from the batch, and all four have the direct scores."""
    server.batch.drop_lines = 1
    server.batch.error_lines = 1
    client = batch_client(server)
    replies = client.run(client.ask_all(QUESTIONS))
    assert scores(replies) == SCORES
    assert (server.calls, server.batch_lines) == (2, 2)
    usage = client.usage.to_dict()
    assert (usage["batch_calls"], usage["batch_failed"], usage["calls"]) == (2, 2, 2)
    client.close()


def test_a_line_the_server_failed_is_asked_directly(server: JudgeServer) -> None:
    """A line answered HTTP 500 inside the batch (in its error file) is asked again
    directly and gets the direct score."""
    server.faults = ["500"]  # the first line the batch runs
    client = batch_client(server)
    replies = client.run(client.ask_all(QUESTIONS))
    assert scores(replies) == SCORES
    assert (server.calls, server.batch_lines) == (1, 4)
    assert client.usage.batch_failed == 1
    client.close()


def test_an_output_file_over_the_reply_bound_is_not_read(server: JudgeServer) -> None:
    """max_reply_bytes 1,500: one reply (about 600 bytes) is under it, the output file
    of four lines (about 2,600) is not: it is not read, and the four questions are
    asked directly."""
    client = batch_client(server, max_reply_bytes=1500)
    replies = client.run(client.ask_all(QUESTIONS))
    assert scores(replies) == SCORES
    assert (server.batch.created, server.batch_lines, server.calls) == (1, 4, 4)
    assert (client.usage.batch_calls, client.usage.batch_failed) == (0, 4)
    client.close()


def test_a_batch_still_running_is_the_samples_error_and_collected_later(
    server: JudgeServer, tmp_path: Path
) -> None:
    """The server holds the batch in progress past the client's wait (0.2 s): each
    question fails saying the batch is kept, and nothing is asked directly; a new client
    (a re-run) on the same ledger polls that batch once it completes: no second upload
    or batch, and the scores."""
    ledger_path = tmp_path / "judge_batches.sqlite"
    server.batch.hold = True
    first = batch_client(server, BatchLedger(ledger_path), wait=0.2)
    failed = first.run(first.ask_all(QUESTIONS))
    assert all(isinstance(f, JudgeError) for f in failed)
    assert "batch_0001 still in_progress after 0.2 s; the batch is kept: run again" in str(
        failed[0]
    )
    assert (server.calls, server.batch.uploads, server.batch.created) == (0, 1, 1)
    assert first.usage.batch_pending == 4
    first.close()
    server.batch.hold = False
    again = batch_client(server, BatchLedger(ledger_path))
    replies = again.run(again.ask_all(QUESTIONS))
    assert scores(replies) == SCORES
    assert (server.calls, server.batch.uploads, server.batch.created) == (0, 1, 1)
    assert (again.usage.batches, again.usage.batches_resumed, again.usage.batch_calls) == (0, 1, 4)
    assert BatchLedger(ledger_path).count() == 0  # collected: forgotten
    again.close()


def _evaluate(data: Path, server: JudgeServer, cache: Path, *extra: str) -> dict[str, Any]:
    """``assay evaluate DATA --format json`` on the scripted judge; its JSON report."""
    args = ["evaluate", str(data), "--judge-url", server.url, "--judge-model", "scripted"]
    env = {"ASSAY_CACHE_DIR": str(cache), "ASSAY_JUDGE_BATCH_POLL": "0.01"}
    result = CliRunner().invoke(app, [*args, "--format", "json", *extra], env=env)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout[result.stdout.index("{") :])


def test_a_rag_run_by_batch_equals_the_direct_run_and_a_rerun_is_cached(
    server: JudgeServer, tmp_path: Path
) -> None:
    """The rag suite on examples/rag.jsonl (8 samples): directly, 24 calls (3 prompts a
    sample); with --judge-batch, one batch of the same 24 requests (its judged metrics
    ask in one round), no call, and --out rows equal to the direct run's in every value
    and every evidence field. A re-run is answered by the cache: no batch, no call."""
    direct = _evaluate(
        RAG,
        server,
        tmp_path / "c0",
        "--suite",
        "rag",
        "--no-cache",
        "--out",
        str(tmp_path / "direct.jsonl"),
    )
    assert (direct["judge_usage"]["calls"], server.calls) == (24, 24)
    by_batch = _evaluate(
        RAG,
        server,
        tmp_path / "c1",
        "--suite",
        "rag",
        "--judge-batch",
        "--out",
        str(tmp_path / "batch.jsonl"),
    )
    usage = by_batch["judge_usage"]
    assert (usage["calls"], usage["batch_calls"], usage["batches"]) == (0, 24, 1)
    assert (server.calls, server.batch_lines, server.batch.created) == (24, 24, 1)
    assert sorted(_task(b) for b in server.batch_requests) == sorted(
        _task(b) for b in server.requests
    )
    rows = (tmp_path / "direct.jsonl").read_text(), (tmp_path / "batch.jsonl").read_text()
    assert rows[0] == rows[1]
    assert means(by_batch) == means(direct)
    again = _evaluate(RAG, server, tmp_path / "c1", "--suite", "rag", "--judge-batch")
    usage = again["judge_usage"]
    assert (usage["calls"], usage["batch_calls"], usage["batches"], usage["cache_hits"]) == (
        0,
        0,
        0,
        24,
    )
    assert (server.calls, server.batch_lines, server.batch.created) == (24, 24, 1)


def _task(body: dict[str, Any]) -> str:
    """A request's task and data, to compare the requests of two runs."""
    return json.dumps(body["messages"], sort_keys=True)


def test_the_report_says_what_went_by_batch_and_its_cost(
    server: JudgeServer, tmp_path: Path
) -> None:
    """The table report's line: requests by batch, batches, direct calls, and the cost
    with the batch lines at half price when prices are set."""
    args = ["evaluate", str(RAG), "-m", "faithfulness", "--judge-batch", "--judge-url", server.url]
    env = {
        "ASSAY_CACHE_DIR": str(tmp_path),
        "ASSAY_JUDGE_BATCH_POLL": "0.01",
        "ASSAY_JUDGE_PRICE_PROMPT": "2",
        "ASSAY_JUDGE_PRICE_COMPLETION": "8",
    }
    result = CliRunner().invoke(app, [*args, "--judge-model", "scripted"], env=env)
    assert result.exit_code == 0, result.output
    cost = (server.prompt_tokens * 2 + server.completion_tokens * 8) / 1_000_000 / 2
    assert (
        "judge batch: 8 requests by batch in 1 batches (0 collected from a stopped run), "
        f"0 directly (0 failed in a batch); cost {cost:.6g}, the batch lines at half price"
    ) in flat(result.output)


def test_a_killed_run_leaves_its_batch_to_the_next_run(server: JudgeServer, tmp_path: Path) -> None:
    """assay evaluate --judge-batch is killed (SIGKILL) while the server holds its batch
    in progress; the re-run polls that batch: the server sees one upload and one batch
    in all, no direct call, and the values of a direct run."""
    cache = tmp_path / "cache"
    server.batch.hold = True
    args = ["-m", "assay", "evaluate", str(RAG), "-m", "faithfulness", "--judge-batch"]
    args += ["--judge-url", server.url, "--judge-model", "scripted", "--quiet"]
    env = {**os.environ, "ASSAY_CACHE_DIR": str(cache), "ASSAY_JUDGE_BATCH_POLL": "0.01"}
    child = subprocess.Popen(
        [sys.executable, *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 120
        while server.batch.polls < 3 and time.monotonic() < deadline and child.poll() is None:
            time.sleep(0.05)
        assert server.batch.polls >= 3, "the run never polled its batch"
        assert (server.batch.uploads, server.batch.created) == (1, 1)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    server.batch.hold = False
    resumed = _evaluate(RAG, server, cache, "-m", "faithfulness", "--judge-batch")
    usage = resumed["judge_usage"]
    assert (usage["batches"], usage["batches_resumed"], usage["batch_calls"]) == (0, 1, 8)
    assert (server.batch.uploads, server.batch.created, server.calls) == (1, 1, 0)
    direct = _evaluate(RAG, server, tmp_path / "direct", "-m", "faithfulness", "--no-cache")
    assert means(resumed) == means(direct)


def test_a_follow_up_round_is_a_second_batch(server: JudgeServer, tmp_path: Path) -> None:
    """ragas_answer_relevance asks the judge for questions, and when none comes back
    (the Eiffel sample here) asks the direct rubric in a follow-up round: by batch, the
    first round's 8 requests are one batch and the follow-up's 1 a second; the means
    are the direct run's (9 calls)."""

    def no_questions_for_eiffel(task: str, blocks: dict[str, Any], body: dict[str, Any]) -> Any:
        if task == "answer_questions" and "Eiffel" in (blocks.get("answer") or ""):
            return {"questions": []}
        return None

    server.script = no_questions_for_eiffel
    metric = ["-m", "ragas_answer_relevance"]
    direct = _evaluate(RAG, server, tmp_path / "c0", *metric, "--no-cache")
    assert server.calls == 9
    by_batch = _evaluate(RAG, server, tmp_path / "c1", *metric, "--judge-batch")
    usage = by_batch["judge_usage"]
    assert (usage["calls"], usage["batch_calls"], usage["batches"]) == (0, 9, 2)
    assert [len(server.batch.files[f"file-{n:04d}"][1].splitlines()) for n in (1, 3)] == [8, 1]
    assert means(by_batch) == means(direct)


def test_judge_batch_in_the_project_file_makes_a_batch_client(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``judge_batch = true`` in [tool.assay] (and ASSAY_JUDGE_BATCH_POLL from the
    environment) gives the judge a batch transport with those settings and its ledger
    next to the cache; without it the judge calls directly. A poll of 0 is refused."""
    from assay.core.config import ConfigError, load_config

    monkeypatch.setenv("ASSAY_JUDGE_BATCH_POLL", "0.5")
    (tmp_path / "pyproject.toml").write_text(
        '[tool.assay]\njudge_batch = true\njudge_batch_wait = 600\njudge_model = "m"\n'
        f'judge_base_url = "http://127.0.0.1:9/v1"\ncache_dir = "{tmp_path / "cache"}"\n'
    )
    config = load_config(project_dir=tmp_path)
    client = judge_from_config(config)
    assert client is not None and client.batch is not None
    assert (client.batch.poll, client.batch.wait) == (0.5, 600.0)
    assert client.batch.ledger.path == tmp_path / "cache" / "judge_batches.sqlite"
    client.close()
    direct = judge_from_config(config.model_copy(update={"judge_batch": False}))
    assert direct is not None and direct.batch is None
    direct.close()
    monkeypatch.setenv("ASSAY_JUDGE_BATCH_POLL", "0")
    with pytest.raises(ConfigError) as refused:
        load_config(project_dir=tmp_path)
    assert str(refused.value) == (
        "invalid configuration: environment variable 'ASSAY_JUDGE_BATCH_POLL': Input should "
        "be greater than 0"
    )


def test_usage_of_ray_workers_sums_the_batch_counters() -> None:
    """Two workers' batch usage: requests, tokens and batches summed, and the cost of
    each (its batch lines at half price) added."""
    from assay.evaluation.scale.ray_executor import merge_usage
    from assay.judge.usage import JudgeUsage

    usages = []
    for lines in (3, 5):
        usage = JudgeUsage(price_prompt=2.0, price_completion=8.0, batch_mode=True)
        for _ in range(lines):
            usage.record_batch_line(100, 10)
        usage.add("batches")
        usages.append(usage.to_dict())
    merged = merge_usage(usages)
    assert merged is not None
    assert (merged["batch_calls"], merged["batches"], merged["batch_prompt_tokens"]) == (8, 2, 800)
    assert merged["prompt_tokens"] == 800
    # 800 prompt tokens at 2 and 80 completion tokens at 8 per 1M, half price
    assert merged["cost"] == pytest.approx((800 * 2 + 80 * 8) / 1_000_000 / 2)


def test_a_ledger_that_cannot_be_opened_is_kept_in_memory(tmp_path: Path) -> None:
    """A cache folder that is a file: the ledger cannot be made there, the run goes on
    with one in memory and a warning saying what is lost."""
    from assay.core.config import AssayWarning

    blocked = tmp_path / "not-a-folder"
    blocked.write_text("x")
    with pytest.warns(AssayWarning) as caught:
        ledger = BatchLedger.opened(blocked / "judge_batches.sqlite")
    assert ledger.path is None
    ledger.record("batch_1", ["a", "b"])
    assert ledger.batches_of(["a", "c"]) == {"a": "batch_1"}
    [warning] = caught
    assert str(warning.message) == (
        f"the judge batch ledger {blocked / 'judge_batches.sqlite'} cannot be opened: File "
        "exists; a batch of this run that is stopped will not be collected by the next (set "
        "ASSAY_CACHE_DIR to a writable folder)"
    )


def test_a_server_without_the_batch_api_is_asked_directly(server: JudgeServer) -> None:
    """The upload answered 404 (a server with no /v1/files): no batch, the four
    questions asked directly with their scores."""
    posted = server.batch.post

    def no_files(path: str, content_type: str, raw: bytes) -> Any:
        if path.rstrip("/").endswith("/files"):
            return 404, {"error": {"message": f"no route {path}"}}
        return posted(path, content_type, raw)

    server.batch.post = no_files  # type: ignore[method-assign]
    client = batch_client(server)
    replies = client.run(client.ask_all(QUESTIONS))
    assert scores(replies) == SCORES
    assert (server.batch.created, server.calls) == (0, 4)
    assert (client.usage.batches, client.usage.batch_failed) == (0, 4)
    client.close()


def test_a_batch_that_cannot_be_polled_is_kept_for_the_next_run(
    server: JudgeServer, tmp_path: Path
) -> None:
    """Every poll answered 503: after five the questions fail saying the batch is kept,
    nothing is asked directly, and the ledger still holds the four requests."""
    got = server.batch.get

    def unavailable(path: str) -> Any:
        if "/batches/" in path:
            return 503, {"error": {"message": "overloaded"}}
        return got(path)

    server.batch.get = unavailable  # type: ignore[method-assign]
    ledger = BatchLedger(tmp_path / "ledger.sqlite")
    client = batch_client(server, ledger)
    failed = client.run(client.ask_all(QUESTIONS))
    assert str(failed[0]) == (
        "judge batch not collected: batch batch_0001 could not be polled (HTTP 503: Error "
        "code: 503 - overloaded); the batch is kept: run again to collect it"
    )
    assert (server.calls, ledger.count()) == (0, 4)
    client.close()
