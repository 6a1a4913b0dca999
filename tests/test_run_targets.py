"""``assay run`` and its targets (`assay.inputs.targets`) against a real HTTP server on
127.0.0.1 (``tests/target_server.py``) and real Python functions: what is sent, what is
read back, the timing, retries, timeouts and errors, and the CLI end to end."""

from __future__ import annotations

import json
import re
import socket
import sqlite3
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from assay.cli import app
from assay.core.sample import Sample
from assay.inputs.targets import (
    TargetError,
    TargetSettings,
    TargetUnreachable,
    call_target,
    parse_target,
)
from inner_sessions import PLAIN
from target_server import TargetServer

FAST = TargetSettings(timeout=5.0, retries=2, backoff_base=0.01, backoff_max=0.05)


@pytest.fixture
def server() -> Iterator[TargetServer]:
    with TargetServer() as srv:
        yield srv


def test_an_openai_target_is_streamed_and_timed_to_the_first_token(
    server: TargetServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("APP_KEY", "sk-app-Pq7secret")
    server.first_token_delay, server.rest_delay = 0.2, 0.3
    target = parse_target(f"openai:{server.url}/v1", model="app-model", key_env="APP_KEY")
    [done] = call_target([Sample(id="q1", query="Where is Lyon?")], target, FAST)
    assert done.response == "Answer: Where is Lyon?"
    assert done.target_call is not None and done.target_call.status == "ok"
    # the first word comes after 0.2 s, the rest after 0.3 s more: the stream's timing
    assert done.first_token_time is not None and 0.2 <= done.first_token_time < 0.45
    assert done.duration is not None and 0.5 <= done.duration < 1.5
    assert done.first_token_time < done.duration
    assert done.target_call.usage == {"prompt_tokens": 7, "completion_tokens": 4, "total_tokens": 9}
    assert done.response_tokens == 4
    [request] = server.requests
    body = json.loads(request["body"])
    assert body["stream"] is True and body["model"] == "app-model"
    assert body["messages"] == [{"role": "user", "content": "Where is Lyon?"}]
    assert request["headers"]["Authorization"] == "Bearer sk-app-Pq7secret"
    assert "sk-app" not in target.name


def test_an_openai_target_gets_the_conversation_up_to_the_last_user_message(
    server: TargetServer,
) -> None:
    turns = [
        {"role": "user", "content": "Hi, I am Lena."},
        {"role": "assistant", "content": "Hello Lena!"},
        {"role": "user", "content": "What is my name?"},
        {"role": "assistant", "content": "an old reply, not sent"},
    ]
    target = parse_target(f"openai:{server.url}/v1", model="m")
    [done] = call_target([Sample(turns=turns)], target, FAST)
    sent = json.loads(server.requests[0]["body"])["messages"]
    assert sent == turns[:3]
    assert done.response == "Answer: What is my name?"


def test_an_http_target_fills_the_template_json_escaped_and_picks_with_jmespath(
    server: TargetServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("APP_TOKEN", "tok-Zz9secret")
    query = 'He said "stop"\nthen {left}'
    target = parse_target(
        f"{server.url}/rag",
        request='{"question": "{query}", "ref": "{id}", "team": "{team}"}',
        response_path="answer",
        contexts_path="sources[*].text",
        headers=["Authorization: Bearer $APP_TOKEN"],
    )
    sample = Sample(id="s-1", query=query, metadata={"team": "blue"})
    [done] = call_target([sample], target, FAST)
    request = server.requests[0]
    assert json.loads(request["body"]) == {"question": query, "ref": "s-1", "team": "blue"}
    assert request["headers"]["Authorization"] == "Bearer tok-Zz9secret"
    assert done.response == "Answer: " + query
    assert done.contexts == [f"source about {query}", "more"]


@pytest.mark.parametrize(
    ("step", "status", "reason"),
    [
        (("status", 400, '{"error": "bad field"}', {}), 400, 'HTTP 400: {"error": "bad field"}'),
        (("text", "<html>oops</html>"), 200, "the reply is not JSON: '<html>oops</html>'"),
    ],
)
def test_a_client_error_or_a_reply_that_is_not_json_is_the_samples_error_not_retried(
    server: TargetServer, step: tuple, status: int | None, reason: str
) -> None:
    server.script = [step]
    target = parse_target(
        f"{server.url}/rag", request='{"question": "{query}"}', response_path="answer"
    )
    one_at_a_time = TargetSettings(timeout=5.0, concurrency=1, backoff_base=0.01)
    [failed, fine] = call_target([Sample(query="a"), Sample(query="b")], target, one_at_a_time)
    assert failed.target_call is not None
    assert (failed.target_call.status, failed.target_call.http_status) == ("error", status)
    assert failed.target_call.reason == reason and failed.target_call.attempts == 1
    assert failed.response is None
    assert fine.target_call is not None and fine.target_call.status == "ok"
    assert len(server.requests) == 2


def test_503_with_retry_after_is_retried_and_answered(server: TargetServer) -> None:
    server.script = [("status", 503, "busy", {"Retry-After": "0.2"})]
    target = parse_target(
        f"{server.url}/rag", request='{"question": "{query}"}', response_path="answer"
    )
    settings = TargetSettings(timeout=5.0, retries=2, backoff_base=0.01, backoff_max=1.0)
    started = time.perf_counter()
    [done] = call_target([Sample(query="q")], target, settings)
    assert time.perf_counter() - started >= 0.2  # the server's Retry-After
    assert done.target_call is not None
    assert (done.target_call.status, done.target_call.attempts) == ("ok", 2)
    assert done.response == "Answer: q"


def test_a_path_that_finds_nothing_and_a_missing_field_are_errors(server: TargetServer) -> None:
    target = parse_target(
        f"{server.url}/rag", request='{"question": "{query}"}', response_path="reply.text"
    )
    [done] = call_target([Sample(query="q")], target, FAST)
    assert done.target_call is not None
    assert done.target_call.reason == "--response-path 'reply.text' found nothing in the reply"
    target = parse_target(f"{server.url}/rag", request='{"question": "{nothing}"}')
    [done] = call_target([Sample(query="q")], target, FAST)
    assert done.target_call is not None
    assert (
        done.target_call.reason == "--request names {nothing}, which this sample has no value for"
    )
    assert len(server.requests) == 1  # the second was never sent


def test_a_call_past_the_timeout_is_a_timeout_with_the_timeout_as_its_duration(
    server: TargetServer,
) -> None:
    server.script = [("hang", 2.0)]
    target = parse_target(f"{server.url}/rag", request='{"question": "{query}"}')
    settings = TargetSettings(timeout=0.3, retries=2, backoff_base=0.01)
    started = time.perf_counter()
    [done] = call_target([Sample(query="q")], target, settings)
    assert time.perf_counter() - started < 1.5  # not retried: a hang would multiply
    assert done.target_call is not None
    assert (done.target_call.status, done.target_call.reason) == (
        "timeout",
        "no reply within 0.3 s",
    )
    assert done.duration == 0.3 and done.response is None


@pytest.mark.parametrize(
    ("spec", "options", "message"),
    [
        ("ftp://x", {}, "unknown target 'ftp://x': use openai:BASE_URL"),
        ("openai:http://x/v1", {}, "an openai: target needs --target-model NAME"),
        (
            "openai:http://x/v1",
            {"model": "m", "key_env": "NO_SUCH_VAR_9"},
            "--target-key-env NO_SUCH_VAR_9: the variable is not set",
        ),
        ("http://x", {"request": '{"q": {query}'}, "--request is not a JSON template"),
        (
            "http://x",
            {"response_path": "a[?"},
            "--response-path 'a[?' is not a JMESPath expression",
        ),
        (
            "http://x",
            {"headers": ["X-Key: $NO_SUCH_VAR_9"]},
            "--header X-Key: $NO_SUCH_VAR_9 is not set",
        ),
        ("http://x", {"headers": ["no colon"]}, "--header 'no colon'...: expected 'Name: value'"),
        ("python:nosuchmodule_9:f", {}, "python:nosuchmodule_9:f: cannot import nosuchmodule_9"),
        (
            "python:json:no_function",
            {},
            "python:json:no_function: json has no function 'no_function'",
        ),
    ],
)
def test_a_target_that_cannot_be_called_as_given_is_refused_before_any_call(
    spec: str, options: dict, message: str
) -> None:
    with pytest.raises(TargetError) as refused:
        parse_target(spec, **options)
    assert str(refused.value).startswith(message)


def answer_upper(sample: dict) -> dict:
    if sample["query"] == "boom":
        raise ValueError("the app broke")
    return {"response": sample["query"].upper(), "contexts": ["c1"], "first_token_time": 0.01}


async def answer_async(sample: dict) -> str:
    return "async " + sample["query"]


def test_python_targets_sync_and_async_and_a_raising_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "app_under_test", sys.modules[__name__])
    target = parse_target("python:app_under_test:answer_upper")
    ok, broke = call_target([Sample(query="paris"), Sample(query="boom")], target, FAST)
    assert (ok.response, ok.contexts, ok.first_token_time) == ("PARIS", ["c1"], 0.01)
    assert ok.duration is not None and ok.duration >= 0
    assert broke.target_call is not None
    assert broke.target_call.reason == (
        "python:app_under_test:answer_upper raised ValueError: the app broke"
    )
    [done] = call_target([Sample(query="q")], parse_target("python:app_under_test:answer_async"))
    assert done.response == "async q"


# ---- the command ----------------------------------------------------------------------


def test_assay_run_scores_the_replies_stores_timings_and_keeps_secrets_out(
    server: TargetServer, env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "tok-Qq4secret"
    monkeypatch.setenv("APP_TOKEN", secret)
    data = env / "d.jsonl"
    rows = [
        {"id": "a", "query": "paris", "expected": "Answer: paris"},
        {"id": "b", "query": "lyon", "expected": "Answer: paris"},
        {"id": "c", "query": "slow", "expected": "x"},
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    server.script = [("hang", 2.0)]  # the first request to arrive hangs
    db, out = env / "runs.db", env / "out.jsonl"
    args = [
        "run",
        str(data),
        "--target",
        f"{server.url}/rag",
        "--request",
        '{"question": "{query}"}',
    ]
    args += ["--response-path", "answer", "--header", "Authorization: Bearer $APP_TOKEN"]
    args += ["--timeout", "0.5", "--concurrency", "1", "-m", "exact_match", "--out", str(out)]
    args += ["--store", "--db", str(db), "--format", "json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "3 calls (2 ok, 1 timeout)" in result.output
    written = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert written["a"]["target.status"] == "timeout"  # concurrency 1: "a" went first
    assert written["a"]["exact_match"] is None
    assert written["a"]["evidence"]["exact_match"]["reason"] == (
        "the target call failed (timeout: no reply within 0.5 s)"
    )
    assert (written["b"]["target.status"], written["b"]["exact_match"]) == ("ok", 0.0)
    assert written["c"]["exact_match"] == 0.0
    stored = sqlite3.connect(db).execute("SELECT status, duration FROM test_results ORDER BY id")
    statuses = [row[0] for row in stored]
    assert statuses[0] == "skipped" and len(statuses) == 3  # the hub counts it as a timeout
    for path in (out, db):
        assert secret.encode() not in path.read_bytes()
    assert secret not in result.output


def test_assay_run_refuses_a_malformed_target_with_one_line_and_exit_2(env: Path) -> None:
    data = env / "d.jsonl"
    data.write_text(json.dumps({"query": "q"}) + "\n")
    result = CliRunner().invoke(
        app, ["run", str(data), "--target", "http://127.0.0.1:9/x", "--request", "{oops"]
    )
    assert result.exit_code == 2
    assert result.output.startswith("error: --request is not a JSON template")


def _closed_port() -> int:
    with socket.socket() as probe:  # free a moment ago: nothing listens there
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_target_that_cannot_be_reached_stops_the_calls(env: Path) -> None:
    """Nothing listens: the first call spends its retries, then the calls stop (100
    samples do not each wait out their retries), and assay run exits 2 with one line."""
    url = f"http://127.0.0.1:{_closed_port()}/ask"
    samples = [Sample(query=f"q{i}") for i in range(100)]
    started = time.perf_counter()
    with pytest.raises(
        TargetUnreachable,
        match=r"the target .* cannot be reached \(connection failed \(ConnectError",
    ):
        call_target(samples, parse_target(url), FAST)
    assert time.perf_counter() - started < 2.0
    data = env / "d.jsonl"
    data.write_text("".join(json.dumps({"query": f"q{i}"}) + "\n" for i in range(20)))
    result = CliRunner().invoke(
        app, ["run", str(data), "--target", url, "--retries", "0", "-m", "exact_match"]
    )
    assert result.exit_code == 2, result.output
    assert f"error: the target {url} cannot be reached" in " ".join(result.output.split())


def test_a_conversation_with_empty_assistant_slots_is_replayed_turn_by_turn(
    server: TargetServer,
) -> None:
    """Each user turn goes to the target with the conversation so far, the earlier
    replies in it; the replies fill the slots, each with its timing."""
    server.first_token_delay = 0.05
    turns = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi, I am Lena."},
        {"role": "assistant", "content": None},
        {"role": "user", "content": "What is my name?"},
    ]
    target = parse_target(f"openai:{server.url}/v1", model="m")
    [done] = call_target([Sample(id="chat", turns=turns)], target, FAST)
    first, second = (json.loads(r["body"])["messages"] for r in server.requests)
    assert first == turns[:2]
    assert second == [
        *turns[:2],
        {"role": "assistant", "content": "Answer: Hi, I am Lena."},
        turns[3],
    ]
    assert [(t.role, t.content) for t in done.turns or []] == [
        ("system", "Be brief."),
        ("user", "Hi, I am Lena."),
        ("assistant", "Answer: Hi, I am Lena."),
        ("user", "What is my name?"),
        ("assistant", "Answer: What is my name?"),
    ]
    replies = [t for t in done.turns or [] if t.role == "assistant"]
    assert all(t.first_token_time >= 0.05 for t in replies)
    assert done.duration == pytest.approx(sum(t.duration for t in replies))
    assert done.response == "Answer: What is my name?"
    assert done.target_call is not None
    assert (done.target_call.status, done.target_call.attempts) == ("ok", 2)
    assert done.target_call.usage == {
        "prompt_tokens": 14,
        "completion_tokens": 10,
        "total_tokens": 18,
    }


def test_a_failed_turn_ends_the_replay_there(server: TargetServer) -> None:
    server.script = [("status", 400, "no", {})]
    turns = [{"role": "user", "content": "one"}, {"role": "user", "content": "two"}]
    [done] = call_target(
        [Sample(turns=turns)], parse_target(f"openai:{server.url}/v1", model="m"), FAST
    )
    assert done.target_call is not None
    assert (done.target_call.status, done.target_call.reason) == ("error", "turn 0: HTTP 400: no")
    assert len(server.requests) == 1


def test_assay_run_from_python_returns_the_evaluation(monkeypatch: pytest.MonkeyPatch) -> None:
    import assay

    monkeypatch.setitem(sys.modules, "app_under_test", sys.modules[__name__])
    rows = [{"query": "paris", "expected": "PARIS"}, {"query": "lyon", "expected": "PARIS"}]
    run = assay.run(rows, "python:app_under_test:answer_upper", metrics=["exact_match"])
    assert run.values("exact_match") == [1.0, 0.0]
    assert [s.response for s in run.samples] == ["PARIS", "LYON"]
    assert all(s.target_call is not None and s.target_call.status == "ok" for s in run.samples)


def test_the_docs_python_example_runs(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    root = Path(__file__).resolve().parent.parent
    text = (root / "docs" / "run.md").read_text(encoding="utf-8")
    (block,) = re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
    monkeypatch.chdir(root)  # the example's target is examples/support_app.py
    namespace: dict = {}
    exec(compile(block, "docs/run.md", "exec"), namespace)
    run = namespace["run"]
    # the toy bot's answer: the help-centre passage that shares "parcel" with the question
    assert run.samples[0].response == (
        "You can change the delivery address on the Orders page until the parcel has shipped."
    )
    assert capsys.readouterr().out.split() == ["ok", str(run.summary()[0].mean)]


def test_the_pytest_fixture_asks_the_configured_target(pytester, cache_dir, monkeypatch) -> None:
    """``--assay-target`` gives tests the application under test: ``ask`` returns the
    answered sample, which ``assay.check`` scores; without a target the test fails,
    saying how to give one."""
    monkeypatch.setenv("ASSAY_CACHE_DIR", cache_dir)
    pytester.makepyfile(
        bot="def answer(sample):\n    return sample['query'].upper()\n",
        test_bot="""
def test_paris(assay_target, assay):
    answered = assay_target.ask("paris", expected="PARIS")
    assert answered.target_call.status == "ok" and answered.duration >= 0
    assay.check(answered, metrics=["exact_match"])

def test_lyon(assay_target, assay):
    assay.check(assay_target.ask("lyon", expected="PARIS"), metrics=["exact_match"])
""",
    )
    monkeypatch.syspath_prepend(str(pytester.path))
    result = pytester.runpytest_subprocess(*PLAIN, "--assay-target", "python:bot:answer")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*exact_match = 0.0000 (needs >= 1) missed its threshold*"])
    missing = pytester.runpytest_subprocess(*PLAIN, "-k", "paris")
    missing.assert_outcomes(errors=1)
    missing.stdout.fnmatch_lines(["*the assay_target fixture needs a target: --assay-target SPEC*"])


def timed_answer(sample: dict) -> dict:
    """Reports its own timings: duration 0.1 s x the query's number, first token a tenth."""
    n = int(sample["query"])
    return {"response": str(n), "duration": 0.1 * n, "first_token_time": 0.01 * n}


def test_a_stored_run_page_shows_duration_and_first_token_percentiles_and_timeouts(
    env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fastapi.testclient import TestClient

    from assay.server import create_app
    from assay.store.db import Store

    monkeypatch.setitem(sys.modules, "timed_app", sys.modules[__name__])
    data = env / "d.jsonl"
    data.write_text("".join(json.dumps({"query": str(n)}) + "\n" for n in range(1, 6)))
    db = env / "runs.db"
    args = ["run", str(data), "--target", "python:timed_app:timed_answer", "-m", "exact_match"]
    result = CliRunner().invoke(app, [*args, "--store", "--db", str(db)])
    assert result.exit_code == 0, result.output
    store = Store(str(db))
    [run] = store.runs()
    timings = store.run_detail(run["id"])["timings"]
    # durations 0.1 .. 0.5: p50 0.3, p95 at rank 0.95 * 4 = 3.8: 0.4 + 0.8 * 0.1 = 0.48
    assert timings["duration_p50"] == pytest.approx(0.3)
    assert timings["duration_p95"] == pytest.approx(0.48)
    assert timings["first_token_p50"] == pytest.approx(0.03)
    assert timings["first_token_p95"] == pytest.approx(0.048)
    assert timings["timeouts"] == 0
    page = TestClient(create_app(store, token=""), base_url="http://localhost").get(
        f"/runs/{run['id']}"
    )
    text = " ".join(page.text.split())
    assert 'Duration p50 / p95</div> <div class="card-value">0.30 s / 0.48 s' in text
    assert 'First token p50 / p95</div> <div class="card-value">0.03 s / 0.05 s' in text
    assert "0 timed out" in text


def test_a_reply_over_the_size_limit_is_the_samples_error(
    server: TargetServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reply past MAX_REPLY_BYTES is not read further (memory stays bounded); the other
    samples go on."""
    monkeypatch.setattr("assay.inputs.target_replies.MAX_REPLY_BYTES", 1_000)
    server.answer_prefix = "x" * 2_000
    rag = parse_target(f"{server.url}/rag", request='{"question": "{query}"}')
    chat = parse_target(f"openai:{server.url}/v1", model="m")
    for target, what in ((rag, "the reply"), (chat, "the streamed text")):
        [done] = call_target([Sample(query="q")], target, FAST)
        assert done.target_call is not None
        assert (done.target_call.status, done.target_call.reason) == (
            "error",
            f"{what} is over 1,000 bytes: not read further",
        )
    server.answer_prefix = ""
    [fine] = call_target([Sample(query="q")], rag, FAST)
    assert fine.target_call is not None and fine.target_call.reason == (
        "--response-path 'response' found nothing in the reply"  # /rag answers 'answer'
    )


def test_an_http_target_gets_the_conversation_as_history(server: TargetServer) -> None:
    """``{history}`` (outside quotes) is the conversation so far as a JSON array; with a
    replayed conversation the target's earlier reply is in it."""
    target = parse_target(
        f"{server.url}/rag",
        request='{"question": "{query}", "history": {history}}',
        response_path="answer",
    )
    turns = [{"role": "user", "content": "Hi"}, {"role": "user", "content": 'Say "bye"'}]
    [done] = call_target([Sample(turns=turns)], target, FAST)
    first, second = (json.loads(r["body"]) for r in server.requests)
    assert first == {"question": "Hi", "history": [{"role": "user", "content": "Hi"}]}
    assert second == {
        "question": 'Say "bye"',
        "history": [
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Answer: Hi"},
            {"role": "user", "content": 'Say "bye"'},
        ],
    }
    assert done.response == 'Answer: Say "bye"'
    with pytest.raises(TargetError, match=r"and \{history\} \(the conversation, a JSON array\)"):
        parse_target("http://x", request='{"h": {history}')


def test_a_targets_credentials_are_cut_out_of_every_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The key of an openai target, what a header reads from the environment and the value
    of a credential header (which the shell may have expanded into the command line)
    join the secrets every redaction cuts out: messages, the resume command, the store."""
    from assay.core.redaction import known_secrets, redact_text

    monkeypatch.setenv("APP_KEY_FOR_TEST", "sk-app-Rr5secret")
    monkeypatch.setenv("APP_SESSION", "sess-Tt6secret")
    parse_target("openai:http://127.0.0.1:9/v1", model="m", key_env="APP_KEY_FOR_TEST")
    parse_target(
        "http://127.0.0.1:9/x",
        headers=["Authorization: Bearer tok-Uu7secret", "X-Session: $APP_SESSION", "X-Team: blue"],
    )
    line = (
        "assay run d.jsonl --header 'Authorization: Bearer tok-Uu7secret' "
        "--header 'X-Session: sess-Tt6secret' key sk-app-Rr5secret --header 'X-Team: blue'"
    )
    shown = redact_text(line, known_secrets())
    for secret in ("tok-Uu7secret", "sess-Tt6secret", "sk-app-Rr5secret"):
        assert secret not in shown
    assert "X-Team: blue" in shown
