"""The judge engine against a real HTTP test server on 127.0.0.1 (production client path):
requests, cache and memo, concurrency, retries and timeouts, broken replies, usage,
event loops and configuration (prompts: tests/test_judge_prompts.py; reply parsing:
tests/test_judge_parsing.py)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from assay.core.config import AssayConfig
from assay.engine.resources import Resources
from assay.judge.aio import run_sync
from assay.judge.cache import JudgeCache
from assay.judge.client import JudgeClient, JudgeError, JudgeUnreachable
from assay.judge.panel import judge_from_config
from assay.judge.prompts import FAITHFULNESS, RELEVANCE
from assay.judge.rate import TokenBucket
from judge_server import JudgeServer

#: the clients a test made, closed after it (their connections and aiohttp sessions)
_MADE: list[JudgeClient] = []


@pytest.fixture(autouse=True)
def close_made_clients() -> Iterator[None]:
    yield
    while _MADE:
        _MADE.pop().close()


@pytest.fixture
def server() -> Iterator[JudgeServer]:
    with JudgeServer() as srv:
        yield srv


def make_client(server: JudgeServer, cache: Path | None = None, **kwargs: object) -> JudgeClient:
    options: dict[str, object] = {"backoff_base": 0.01, "backoff_max": 0.05}
    options.update(kwargs)
    client = JudgeClient(
        "test-judge",
        server.url,
        cache=JudgeCache(cache) if cache is not None else None,
        **options,  # type: ignore[arg-type]
    )
    _MADE.append(client)
    return client


def ask_relevance(client: JudgeClient, i: int = 0):
    return client.ask_sync(
        RELEVANCE,
        query=f"What is the capital of France? ({i})",
        response=f"Paris is the capital of France ({i}).",
    )


# ---- requests ------------------------------------------------------------------------------


def test_request_shape(server: JudgeServer) -> None:
    client = make_client(server)
    reply = ask_relevance(client)
    body = server.requests[0]
    assert body["model"] == "test-judge"
    assert body["temperature"] == 0
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["strict"] is True
    assert body["response_format"]["json_schema"]["schema"] == RELEVANCE.json_schema
    assert reply.source == "call" and reply.output.score == 1.0  # scripted: all words covered


def test_structured_output_falls_back_to_json_object_then_text(server: JudgeServer) -> None:
    server.reject_formats = {"json_schema"}
    client = make_client(server)
    ask_relevance(client, 1)
    assert [(b.get("response_format") or {}).get("type") for b in server.requests] == [
        "json_schema",
        "json_object",
    ]
    assert client.mode == "json_object"
    ask_relevance(client, 2)  # the working mode is remembered: one request
    assert server.calls == 3
    server.reject_formats = {"json_schema", "json_object"}
    ask_relevance(client, 3)
    assert "response_format" not in server.requests[-1]
    assert client.mode == "text"


# ---- cache and memo ------------------------------------------------------------------------


def test_cache_second_run_makes_zero_calls(server: JudgeServer, tmp_path: Path) -> None:
    first = make_client(server, tmp_path / "judge.sqlite")
    first.gather(first.ask(RELEVANCE, query=f"q{i}?", response="an answer") for i in range(5))
    assert server.calls == 5
    second = make_client(server, tmp_path / "judge.sqlite")  # a new run, same cache file
    replies = second.gather(
        second.ask(RELEVANCE, query=f"q{i}?", response="an answer") for i in range(5)
    )
    assert server.calls == 5
    assert second.usage.calls == 0 and second.usage.cache_hits == 5
    assert {r.source for r in replies} == {"cache"}


def test_the_cache_is_per_endpoint(server: JudgeServer, tmp_path: Path) -> None:
    ask_relevance(make_client(server, tmp_path / "judge.sqlite"))
    with JudgeServer() as other:  # the same model name served elsewhere
        ask_relevance(make_client(other, tmp_path / "judge.sqlite"))
        assert other.calls == 1  # not answered from the first server's cached reply
    assert server.calls == 1


def test_disabled_cache_calls_again(server: JudgeServer) -> None:
    for _ in range(2):
        ask_relevance(make_client(server))  # JudgeCache(None): nothing stored
    assert server.calls == 2


def test_memo_shares_identical_questions(server: JudgeServer) -> None:
    server.delay = 0.1
    client = make_client(server)
    replies = client.gather(
        client.ask(FAITHFULNESS, contexts=["c"], response="r") for _ in range(10)
    )
    assert server.calls == 1
    assert client.usage.memo_hits == 9
    assert sorted(r.source for r in replies).count("memo") == 9


# ---- concurrency, retries, timeouts --------------------------------------------------------


def test_concurrent_calls_finish_well_under_serial_time(server: JudgeServer) -> None:
    # each reply takes 1 s: long enough for all 64 connections to open and their requests
    # to arrive while the first are still in the server (at 0.2 s, a slow 2-core machine
    # opened about 38 before the first replies came back)
    server.delay = 1.0
    client = make_client(server)
    ask_relevance(client, -1)  # connection warm-up, not measured
    started = time.perf_counter()
    client.gather(client.ask(RELEVANCE, query=f"q{i}?", response="a") for i in range(96))
    elapsed = time.perf_counter() - started
    # serial: 96 x 1 = 96 s; at the default concurrency 64: 2 rounds = 2 s plus overhead
    assert elapsed < 4.0
    assert server.max_in_flight == 64


def test_concurrency_bound_is_respected(server: JudgeServer) -> None:
    server.delay = 0.05
    client = make_client(server, concurrency=4)
    client.gather(client.ask(RELEVANCE, query=f"q{i}?", response="a") for i in range(12))
    assert server.max_in_flight == 4


def most_in_one_second(arrivals: list[float]) -> int:
    """The most arrival times in any closed window of one second."""
    return max(sum(1 for t in arrivals if start <= t <= start + 1.0) for start in arrivals)


def test_rate_limit_spaces_the_requests_evenly(server: JudgeServer) -> None:
    """20 questions at 10/s, after one that opens the connection (so that no connection
    setup bunches the first arrivals) and a fresh bucket: it holds one token at the first
    request and gains one every 0.1 s, so the k-th request is sent 0.1 * k s after the
    first: the last 1.9 s after it (the run takes at least 1.9 s), and a one-second
    window at the server holds at most 11 (requests 0..10). Without a limit the same 20
    go at once (concurrency 64, an instant server, a connection already open): well
    under 0.5 s."""
    client = make_client(server, rate_limit=10.0)
    ask_relevance(client, -1)
    server.reset()
    client._bucket = TokenBucket(10.0)
    started = time.perf_counter()
    client.gather(client.ask(RELEVANCE, query=f"q{i}?", response="a") for i in range(20))
    limited = time.perf_counter() - started
    arrivals = server.arrivals
    assert len(arrivals) == 20
    assert 1.89 <= limited < 2.6
    assert most_in_one_second(arrivals) <= 11
    server.reset()
    unlimited = make_client(server)
    ask_relevance(unlimited, -1)
    server.reset()
    started = time.perf_counter()
    unlimited.gather(unlimited.ask(RELEVANCE, query=f"q{i}?", response="a") for i in range(20))
    assert time.perf_counter() - started < 0.5
    assert most_in_one_second(server.arrivals) == 20


def test_every_retry_takes_a_token(server: JudgeServer) -> None:
    """Two 500s then an answer at 5/s: three attempts, each 0.2 s after the one before
    (the backoff alone would be 0.01-0.05 s), less a few ms of loopback HTTP. A first
    question opens the connection (and takes the first token)."""
    client = make_client(server, rate_limit=5.0)
    ask_relevance(client, -1)
    server.reset()
    server.fail_500 = 2
    assert ask_relevance(client).output.score == 1.0
    first, second, third = server.arrivals
    assert 0.18 <= second - first < 0.3 and 0.18 <= third - second < 0.3


def test_token_bucket_refills_up_to_one_seconds_worth() -> None:
    """rate 2/s: one token at the first request, then each reservation waits 0.5 s
    more; after 10 idle seconds the bucket holds capacity = max(1, 2) = 2 tokens, not
    20. Rate 0.5/s: capacity max(1, 0.5) = 1."""
    now = [100.0]
    bucket = TokenBucket(2.0, clock=lambda: now[0])
    assert [bucket.reserve() for _ in range(3)] == [0.0, 0.5, 1.0]
    now[0] += 10.0  # tokens: -2 + 10 * 2 = 18, capped at 2
    assert [bucket.reserve() for _ in range(3)] == [0.0, 0.0, 0.5]
    slow = TokenBucket(0.5, clock=lambda: now[0])
    assert slow.capacity == 1.0
    assert [slow.reserve() for _ in range(2)] == [0.0, 2.0]
    for rate in (0.0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="rate limit must be a positive number"):
            TokenBucket(rate)


@pytest.mark.parametrize("mode", ["fail_429", "fail_500"])
def test_retries_on_rate_limit_and_server_errors(server: JudgeServer, mode: str) -> None:
    setattr(server, mode, 2)
    client = make_client(server)
    reply = ask_relevance(client)
    assert reply.output.score == 1.0
    assert server.calls == 3  # two failures, one success
    assert client.usage.calls == 3 and client.usage.retries == 2


def test_gives_up_after_max_retries(server: JudgeServer) -> None:
    server.fail_500 = 10
    client = make_client(server, max_retries=2)
    with pytest.raises(JudgeError, match="after 2 retries: HTTP 500"):
        ask_relevance(client)
    assert server.calls == 3
    assert client.usage.failures == 1


def test_timeout_is_retried_then_fails(server: JudgeServer) -> None:
    server.delay = 1.0
    client = make_client(server, timeout=0.2, max_retries=1)
    started = time.perf_counter()
    with pytest.raises(JudgeError, match="timed out"):
        ask_relevance(client)
    assert time.perf_counter() - started < 0.9  # 2 x 0.2 s + backoff, not 2 x 1.0 s
    assert client.usage.calls == 2


@pytest.mark.parametrize("header", ["soon", "Wed, 21 Oct 2015 07:28:00 GMT", "nan", "-3"])
def test_any_retry_after_header_is_retried_not_raised(server: JudgeServer, header: str) -> None:
    server.fail_429 = 1
    server.retry_after = header  # unreadable, a past HTTP date, not finite, negative
    client = make_client(server)
    started = time.perf_counter()
    assert ask_relevance(client).output.score == 1.0
    assert server.calls == 2 and client.usage.retries == 1
    assert time.perf_counter() - started < 1.0  # none of them means "wait long"


def test_retry_after_seconds_are_honoured_up_to_the_cap(server: JudgeServer) -> None:
    server.fail_429 = 1
    server.retry_after = "0.3"
    client = make_client(server, backoff_max=5.0)
    started = time.perf_counter()
    ask_relevance(client)
    assert time.perf_counter() - started >= 0.3


def test_server_down_fails_after_the_retries_and_opens_the_circuit(server: JudgeServer) -> None:
    """The client's first request finds nothing listening: after its retries the circuit
    opens, and every later question fails at once, without a request."""
    url = server.url
    server.stop()  # nothing listens on the port any more: connection refused
    client = JudgeClient("test-judge", url, max_retries=2, backoff_base=0.01, backoff_max=0.02)
    with pytest.raises(JudgeUnreachable, match="after 2 retries: CouldNotConnect: ConnectError"):
        client.ask_sync(RELEVANCE, query="q?", response="r")
    assert client.usage.calls == 3 and client.usage.failures == 1
    assert client.unreachable is not None
    assert client.unreachable.startswith(
        f"the judge at {url} cannot be reached (after 2 retries: CouldNotConnect: ConnectError"
    )
    with pytest.raises(JudgeUnreachable, match=f"the judge at {url} cannot be reached"):
        client.ask_sync(RELEVANCE, query="another?", response="r")
    assert client.usage.calls == 3  # no request: the circuit is open
    client.close()


def test_the_circuit_opens_after_three_questions_in_a_row_fail_to_connect() -> None:
    """A judge that answered once and then goes away: each question spends its retries
    until 3 in a row have failed to connect; the 4th sends nothing."""
    with JudgeServer() as first:
        client = make_client(first, max_retries=1)
        assert ask_relevance(client, 0).output.score == 1.0  # the probe: answered
        # the server goes away: nothing listens at its port, and the client's pooled
        # connection (which the test server's stop leaves open) is dropped
        first.stop()
        run_sync(client._api.close())
        client._api = None
        for i in (1, 2):
            with pytest.raises(JudgeError, match="after 1 retries: CouldNotConnect") as failed:
                ask_relevance(client, i)
            assert not isinstance(failed.value, JudgeUnreachable)
        assert client.unreachable is None
        with pytest.raises(JudgeUnreachable, match="cannot be reached"):
            ask_relevance(client, 3)
        calls = client.usage.calls
        assert calls == 1 + 3 * 2  # the probe, then 3 questions of 2 attempts each
        with pytest.raises(JudgeUnreachable):
            ask_relevance(client, 4)
        assert client.usage.calls == calls
        client.close()


def test_html_instead_of_a_chat_completion_fails_at_once_saying_so(server: JudgeServer) -> None:
    server.html = 10
    client = make_client(server)
    with pytest.raises(JudgeError, match=r"did not answer with a chat completion.*nginx"):
        ask_relevance(client)
    assert server.calls == 1  # no "answer only with JSON" retry of a web page


def test_a_prompt_over_the_context_length_does_not_switch_structured_output_off(
    server: JudgeServer,
) -> None:
    server.max_prompt_chars = 20_000
    client = make_client(server)
    with pytest.raises(JudgeError, match=r"HTTP 400.*maximum context length"):
        client.ask_sync(RELEVANCE, query="q?", response="word " * 40_000)  # a 200 kB answer
    assert client.mode == "json_schema"
    reply = ask_relevance(client)  # the next, normal question keeps JSON-schema output
    assert reply.output.score == 1.0
    assert server.requests[-1]["response_format"]["type"] == "json_schema"


def test_client_errors_are_not_retried(server: JudgeServer) -> None:
    server.reject_formats = {"json_schema", "json_object", None}  # type: ignore[arg-type]
    client = make_client(server, structured="text")
    with pytest.raises(JudgeError, match="HTTP 400"):
        ask_relevance(client)
    assert server.calls == 1


# ---- broken replies ------------------------------------------------------------------------


def test_broken_json_is_repaired_without_another_call(server: JudgeServer) -> None:
    server.broken_json = 1
    client = make_client(server)
    reply = ask_relevance(client)
    assert reply.content.startswith("Sure, here is my evaluation")
    assert reply.output.score == 1.0
    assert server.calls == 1 and client.usage.reparse_calls == 0


def test_unparsable_reply_gets_one_json_only_retry(server: JudgeServer) -> None:
    server.garbage = 1
    client = make_client(server)
    reply = ask_relevance(client)
    assert reply.output.score == 1.0
    assert server.calls == 2 and client.usage.reparse_calls == 1
    retry_messages = server.requests[1]["messages"]
    assert retry_messages[-2]["role"] == "assistant"
    assert "ONLY the JSON" in retry_messages[-1]["content"]


def test_unparsable_twice_fails(server: JudgeServer) -> None:
    server.garbage = 2
    client = make_client(server)
    with pytest.raises(JudgeError, match="unparsable after a JSON-only retry"):
        ask_relevance(client)
    assert server.calls == 2


def test_failed_question_is_not_asked_again_in_the_same_run(server: JudgeServer) -> None:
    server.fail_500 = 10
    client = make_client(server, max_retries=0)
    for _ in range(2):
        with pytest.raises(JudgeError):
            ask_relevance(client)
    assert server.calls == 1


# ---- usage ---------------------------------------------------------------------------------


def test_usage_accounting_matches_the_server(server: JudgeServer) -> None:
    server.fail_429 = 1
    client = make_client(server)
    client.usage.price_prompt, client.usage.price_completion = 2.0, 8.0  # per 1M tokens
    client.gather(client.ask(RELEVANCE, query=f"q{i}?", response="a b c") for i in range(4))
    client.gather(client.ask(RELEVANCE, query=f"q{i}?", response="a b c") for i in range(4))
    usage = client.usage
    assert usage.calls == server.calls == 5  # 4 questions + 1 retry; repeats hit the memo
    assert usage.retries == 1 and usage.memo_hits == 4
    assert usage.prompt_tokens == server.prompt_tokens > 0
    assert usage.completion_tokens == server.completion_tokens > 0
    expected_cost = (server.prompt_tokens * 2.0 + server.completion_tokens * 8.0) / 1e6
    assert usage.cost == pytest.approx(expected_cost)
    summary = usage.to_dict()
    assert summary["calls_by_prompt"] == {"relevance_rubric": 4}
    assert summary["total_tokens"] == server.prompt_tokens + server.completion_tokens
    assert 0 < summary["mean_latency_seconds"] <= summary["max_latency_seconds"]


# ---- event loops ---------------------------------------------------------------------------


def test_sync_helper_works_inside_a_running_event_loop(server: JudgeServer) -> None:
    client = make_client(server)

    async def main() -> tuple[float, float]:
        from_sync = ask_relevance(client, 1).output.score  # sync call inside a running loop
        awaited = await client.ask(RELEVANCE, query="Capital?", response="Paris")
        return from_sync, awaited.output.score

    assert asyncio.run(main()) == (1.0, 0.0)


# ---- configuration -------------------------------------------------------------------------


def test_judge_from_config(server: JudgeServer, tmp_path: Path) -> None:
    base = {"cache_dir": str(tmp_path)}
    none = AssayConfig(**base, judge_model=None, judge_base_url=None, judge_api_key=None)
    assert judge_from_config(none) is None
    key_only = AssayConfig(**base, judge_model=None, judge_api_key="sk-test")
    assert judge_from_config(key_only) is None
    openai_proper = AssayConfig(
        **base, judge_model="gpt-4o-mini", judge_api_key="sk-test", judge_base_url=None
    )
    client = judge_from_config(openai_proper)
    assert client is not None and client.base_url is None and client.model == "gpt-4o-mini"
    local = AssayConfig(
        **base,
        judge_model="test-judge",
        judge_base_url=server.url,
        judge_concurrency=3,
        judge_rate_limit=7.5,
        judge_timeout=5,
        judge_max_retries=1,
        judge_price_prompt=0.5,
        judge_price_completion=1.5,
    )
    res = Resources(local)
    judge = res.judge
    assert judge is not None and res.judge is judge  # one client per run
    assert (judge.concurrency, judge.timeout, judge.max_retries) == (3, 5.0, 1)
    assert judge.rate_limit == 7.5
    assert judge.cache.path == tmp_path / "judge.sqlite"
    assert res.judge_usage() is not None and res.judge_usage()["calls"] == 0
    res.close()
    no_cache = Resources(AssayConfig(**{**local.model_dump(), "use_cache": False}))
    assert no_cache.judge is not None and not no_cache.judge.cache.enabled


def test_judge_environment_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("ASSAY_JUDGE_MODEL", "llama3")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    config = AssayConfig()
    assert (config.judge_base_url, config.judge_model, config.judge_api_key) == (
        "http://127.0.0.1:9/v1",
        "llama3",
        "sk-env",
    )
    monkeypatch.setenv("ASSAY_JUDGE_BASE_URL", "http://127.0.0.1:8/v1")
    assert AssayConfig().judge_base_url == "http://127.0.0.1:8/v1"


def test_invalid_client_settings_are_explained() -> None:
    with pytest.raises(ValueError, match=r"concurrency must be at least 1\. Got 0"):
        JudgeClient("m", "http://127.0.0.1:1/v1", concurrency=0)
    with pytest.raises(ValueError, match="structured must be 'auto'"):
        JudgeClient("m", "http://127.0.0.1:1/v1", structured="yaml")
