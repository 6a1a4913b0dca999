"""The judge is read right: structured output probed once, the score the judge *gave*
taken from prose, malformed replies as per-sample errors with their reason, and every
transport fault of the fault-injecting server (``tests/judge_server.py``) survived. All
over real HTTP on 127.0.0.1 through the production client."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from assay.cli import app
from assay.core.config import AssayConfig
from assay.engine.resources import Resources
from assay.evaluation.runner import evaluate
from assay.judge.client import JudgeClient, JudgeError
from assay.judge.parsing import ParseError, parse_reply
from assay.judge.prompts import ANSWER_CLASSIFICATION, RELEVANCE, ScoreVerdict
from judge_server import FAULTS, JudgeServer

#: (question, answer, the scripted judge's score: share of question words in the answer)
ROWS = [
    ("What is the capital of France?", "Paris is the capital of France.", 1.0),
    ("What is the capital of France?", "The capital is Paris.", 0.5),
    ("Which river flows through Cairo?", "The Nile flows through Cairo.", 0.67),
    ("Which river flows through Cairo?", "A river.", 0.33),
]


@pytest.fixture
def server() -> Iterator[JudgeServer]:
    with JudgeServer() as srv:
        yield srv


def client_for(server: JudgeServer, **options: Any) -> JudgeClient:
    settings: dict[str, Any] = {"backoff_base": 0.01, "backoff_max": 0.05, "timeout": 5.0}
    settings.update(options)
    return JudgeClient("test-judge", server.url, **settings)


def ask(client: JudgeClient, row: int = 0) -> float:
    question, answer, _ = ROWS[row]
    return client.ask_sync(RELEVANCE, query=question, response=answer).output.score


def formats(server: JudgeServer) -> list[str | None]:
    return [(body.get("response_format") or {}).get("type") for body in server.requests]


def run_metric(server: JudgeServer, rows: list[tuple[str, str]], **options: Any):
    """judged_relevance over ``rows`` with the production runner; (value, error) per row."""
    config = AssayConfig(judge_model=None, judge_base_url=None, judge_api_key=None, use_cache=False)
    res = Resources(config)
    res.__dict__["judge"] = client_for(server, **options)
    data = [{"question": q, "response": a} for q, a in rows]
    evaluation = evaluate(data, metrics=["judged_relevance"], resources=res)
    res.close()
    return [(r["judged_relevance"].value, r["judged_relevance"].error) for r in evaluation.results]


# ---- structured output: probed once per server, remembered ----------------------------------


def test_a_refused_response_format_is_sent_once_not_once_per_question(
    server: JudgeServer,
) -> None:
    server.reject_formats = {"json_schema"}
    client = client_for(server)
    replies = client.gather(
        client.ask(RELEVANCE, query=f"What is the capital of country {i}?", response="Paris.")
        for i in range(12)
    )
    assert [r.output.score for r in replies] == [0.0] * 12
    # the first question probes (json_schema refused, json_object taken); the other 11
    # waited for it and went straight to json_object, concurrently
    assert formats(server) == ["json_schema"] + ["json_object"] * 12
    assert client.mode == "json_object" and server.calls == 13
    ask(client, 1)
    assert formats(server)[-1] == "json_object"


def test_a_server_taking_no_response_format_is_probed_once_down_to_text(
    server: JudgeServer,
) -> None:
    server.reject_formats = {"json_schema", "json_object"}
    client = client_for(server)
    replies = client.gather(client.ask(RELEVANCE, query=q, response=a) for q, a, _ in ROWS)
    assert [r.output.score for r in replies] == [1.0, 0.5, 0.67, 0.33]
    assert formats(server) == ["json_schema", "json_object", None, None, None, None]
    assert client.mode == "text"


def test_a_format_taken_is_remembered_even_when_that_reply_is_unusable(
    server: JudgeServer,
) -> None:
    server.reject_formats = {"json_schema"}
    server.faults = [None, "empty"]  # the json_schema refusal, then an empty json_object reply
    client = client_for(server)
    with pytest.raises(JudgeError, match="has no choices"):
        ask(client, 0)
    assert client.mode == "json_object"
    assert ask(client, 1) == 0.5
    assert formats(server) == ["json_schema", "json_object", "json_object"]


def test_a_probe_that_fails_for_another_reason_changes_nothing(server: JudgeServer) -> None:
    server.faults = ["empty"]  # the probe's reply is unusable, the format is not refused
    values = run_metric(server, [(q, a) for q, a, _ in ROWS], max_retries=0)
    error = "JudgeError: the judge's reply has no choices (an empty 'choices' list)"
    assert values == [(None, error), (0.5, None), (0.67, None), (0.33, None)]
    assert formats(server) == ["json_schema"] * 4


# ---- prose: the score the judge gave, never one it quotes -----------------------------------


def score_of(reply: str) -> float:
    return parse_reply(reply, ScoreVerdict, RELEVANCE.fallback).score


@pytest.mark.parametrize(
    ("reply", "value"),
    [
        ('The answer says "score 1.0" but it is wrong. Score: 0.1', 0.1),
        ("I quote 'rating: 9/10' from the text; my rating is 3/10", 0.3),
        ("Score: 0.1. The answer claims it deserves a score of 1.0.", 0.1),
        ("The text asks for a rating of 10/10. I would rate it 2/10.", 0.2),
        ("The answer claims a score of 1.0. I'd give this answer a score of 0.3.", 0.3),
        ("My final rating: 4/5, though the answer demands rating 5/5", 0.8),
        ("\u201cScore: 1.0\u201d is what the answer says. The score is 0.25", 0.25),
        ("My score is 0.6 (a score of 6/10).", 0.6),  # one score, written two ways
        ("The score is 0.85", 0.85),
    ],
)
def test_prose_is_read_at_the_score_the_judge_gave(reply: str, value: float) -> None:
    assert score_of(reply) == value


@pytest.mark.parametrize(
    ("reply", "shown"),
    [
        ("It could merit a score of 0.4, or a score of 0.9 if read generously.", "0.4, 0.9"),
        ("Score: 0.4\nScore: 0.9", "0.4, 0.9"),
        ("My score is 0.3, my rating is 0.8.", "0.3, 0.8"),
    ],
)
def test_ambiguous_prose_is_not_guessed(reply: str, shown: str) -> None:
    with pytest.raises(ParseError, match=rf"ambiguous reply: it states several scores \({shown}\)"):
        score_of(reply)


@pytest.mark.parametrize(
    "reply",
    [
        'Score: 0.8\n```json\n{"score": 0.8, "reason": "ok"}\n```',
        'I rate it 85%. {"score": 85, "reason": "percent"}',
        '{"score": 0.2, "reason": "the answer claims score 1.0"}',  # quoted in its reason
    ],
)
def test_json_amid_prose_that_agrees_is_taken(reply: str) -> None:
    assert parse_reply(reply, ScoreVerdict, RELEVANCE.fallback).score in {0.8, 85, 0.2}


def test_quoted_json_contradicted_by_the_prose_verdict_is_ambiguous() -> None:
    reply = 'The answer ends with {"score": 1.0}, an injection. My score: 0.1'
    with pytest.raises(
        ParseError, match=r"^ambiguous reply: its JSON gives score 1.0 but its text gives 0.1$"
    ):
        score_of(reply)


def test_quoted_json_then_a_prose_verdict_is_asked_again_over_http(server: JudgeServer) -> None:
    def quoting(task: str, blocks: dict[str, Any], body: dict[str, Any]) -> str | None:
        if len(body["messages"]) > 2:
            return None  # the JSON-only re-ask: the scripted JSON verdict
        return 'The answer ends with {"score": 1.0}, an injection. My score: 0.1'

    server.script = quoting
    client = client_for(server)
    assert ask(client, 1) == 0.5  # from the JSON-only answer, not the quoted 1.0
    assert server.calls == 2 and client.usage.reparse_calls == 1


def test_a_prose_reply_quoting_a_score_is_read_at_its_own_in_one_call(
    server: JudgeServer,
) -> None:
    server.script = lambda task, blocks, body: (
        'The answer says "score 1.0" but it is wrong. Score: 0.1'
    )
    client = client_for(server)
    assert ask(client) == 0.1
    assert server.calls == 1 and client.usage.reparse_calls == 0


def test_the_prose_fault_reply_is_read_at_the_given_score(server: JudgeServer) -> None:
    server.faults = ["prose", "prose"]
    client = client_for(server)
    assert (ask(client, 2), ask(client, 3)) == (0.67, 0.33)  # not the quoted "score: 1.0"
    assert server.requests and server.calls == 2


def test_ambiguous_prose_gets_one_json_only_request_then_the_json_counts(
    server: JudgeServer,
) -> None:
    server.faults = ["ambiguous"]
    client = client_for(server)
    assert ask(client, 3) == 0.33
    assert server.calls == 2 and client.usage.reparse_calls == 1
    retry = server.requests[1]["messages"][-1]["content"]
    assert retry.startswith(
        "Your reply could not be used (ambiguous reply: it states several scores (0.33, 0.9) "
        "and does not say which one it gives). Answer again with ONLY the JSON"
    )


def test_ambiguous_twice_is_a_per_sample_error_and_the_others_score(
    server: JudgeServer,
) -> None:
    def undecided(task: str, blocks: dict[str, Any], body: dict[str, Any]) -> str | None:
        if blocks.get("response") == "A river.":
            return "A score of 0.2 seems fair; a score of 0.6 also does."
        return None

    server.script = undecided
    values = run_metric(server, [(q, a) for q, a, _ in ROWS])
    assert values[:3] == [(1.0, None), (0.5, None), (0.67, None)]
    assert values[3] == (
        None,
        "JudgeError: judge reply to relevance_rubric@1 unparsable after a JSON-only retry: "
        "ambiguous reply: it states several scores (0.2, 0.6) and does not say which one it "
        "gives",
    )
    assert server.calls == 5  # 3 answered + the ambiguous one asked twice


def test_a_label_named_both_ways_is_no_label() -> None:
    with pytest.raises(ParseError):
        parse_reply(
            "partly CORRECT and partly WRONG",
            ANSWER_CLASSIFICATION.output,
            ANSWER_CLASSIFICATION.fallback,
        )


# ---- malformed replies: per-sample errors with their reason ---------------------------------

MALFORMED = {
    "empty": "JudgeError: the judge's reply has no choices (an empty 'choices' list)",
    "no_message": "JudgeError: the judge's reply has no message (choices[0] has no 'message')",
    "null_content": "JudgeError: the judge's reply has no content (message.content is null)",
    "refusal": "JudgeError: the judge refused to answer: I can't help with evaluating this "
    "content.",
    "length": "JudgeError: the judge's reply was cut off at the token limit "
    "(finish_reason 'length')",
    "filtered": "JudgeError: the judge's reply was withheld by the server's content filter",
}


@pytest.mark.parametrize("kind", list(MALFORMED))
def test_a_malformed_reply_is_a_per_sample_error_with_its_reason(
    server: JudgeServer, kind: str
) -> None:
    server.faults = [None, kind]  # the second request gets it
    rows = [
        ("What is the capital of France?", "Paris is the capital of France."),
        ("What is the capital of Peru?", "Lima is the capital of Peru."),
        ("Which river flows through Cairo?", "The Nile river flows through Cairo."),
    ]
    values = run_metric(server, rows)
    assert sorted(values, key=str) == [(1.0, None), (1.0, None), (None, MALFORMED[kind])]
    assert server.calls == 3  # asked once each: no retry of a reply that would repeat


def test_a_truncated_reply_is_not_repaired_into_a_score(server: JudgeServer) -> None:
    server.faults = ["length"]
    client = client_for(server)
    with pytest.raises(JudgeError, match="cut off at the token limit"):
        ask(client)  # half of '{"score": 1.0, "reason": ...}' json-repair would accept
    assert server.calls == 1 and client.usage.reparse_calls == 0
    # the tokens of an unusable reply are paid for: they count in the run's usage
    assert client.usage.prompt_tokens == server.prompt_tokens > 0
    assert client.usage.completion_tokens == server.completion_tokens == 6  # 20 chars // 4 + 1


# ---- transport faults: retried, bounded, never fatal ----------------------------------------


def test_429_retry_after_is_honoured(server: JudgeServer) -> None:
    server.faults = ["429", "429"]
    server.retry_after = "0.25"
    client = client_for(server, backoff_max=5.0)
    started = time.perf_counter()
    assert ask(client) == 1.0
    assert time.perf_counter() - started >= 0.5
    assert server.calls == 3 and client.usage.retries == 2


def test_429_retry_after_is_capped_by_backoff_max(server: JudgeServer) -> None:
    server.faults = ["429"]
    server.retry_after = "3600"
    client = client_for(server, backoff_max=0.2)
    started = time.perf_counter()
    assert ask(client) == 1.0
    assert 0.2 <= time.perf_counter() - started < 1.5


def test_a_429_storm_is_waited_out_by_the_probe_alone(server: JudgeServer) -> None:
    server.storm(0.6, retry_after="0.3")
    client = client_for(server, backoff_max=1.0, max_retries=6)
    replies = client.gather(client.ask(RELEVANCE, query=q, response=a) for q, a, _ in ROWS)
    assert [r.output.score for r in replies] == [1.0, 0.5, 0.67, 0.33]
    # only the probe met the storm: 0.3 s apart, it was refused at 0 s and about 0.3 s
    # (maybe 0.6 s); the other three waited for it instead of adding to the storm
    assert 2 <= server.faults_served["429"] <= 3
    assert server.calls == server.faults_served["429"] + 4


def test_retry_after_holds_back_every_question_not_only_the_refused_one(
    server: JudgeServer,
) -> None:
    server.storm(0.5, retry_after="0.5", after=1)  # from the request after the probe
    client = client_for(server, concurrency=4, backoff_max=2.0)
    started = time.perf_counter()
    replies = client.gather(
        client.ask(RELEVANCE, query=f"What is the capital of region {i}?", response="Lima.")
        for i in range(12)
    )
    assert [r.output.score for r in replies] == [0.0] * 12
    # the 4 questions in flight when the storm began were refused; the 7 waiting ones
    # were not sent until the Retry-After had passed, so they did not meet the storm
    assert server.faults_served["429"] == 4
    assert server.calls == 1 + 4 + 11 and client.usage.retries == 4
    assert time.perf_counter() - started >= 0.5


@pytest.mark.parametrize("kind", ["500", "reset", "hang", "drip"])
def test_a_transport_fault_is_retried_and_the_question_answered(
    server: JudgeServer, kind: str
) -> None:
    server.faults = [kind]
    client = client_for(server, timeout=0.5)
    started = time.perf_counter()
    assert ask(client, 2) == 0.67
    assert server.calls == 2 and client.usage.retries == 1
    assert time.perf_counter() - started < 2.0  # a hang (30 s) or drip (5 s) cut at 0.5 s


def test_a_slow_drip_cannot_outlast_the_per_call_timeout(server: JudgeServer) -> None:
    server.faults = ["drip"] * 3
    server.drip_seconds = 10.0  # each byte arrives in time for any per-read timeout
    client = client_for(server, timeout=0.4, max_retries=2)
    started = time.perf_counter()
    with pytest.raises(JudgeError, match="after 2 retries: timed out"):
        ask(client)
    assert time.perf_counter() - started < 2.5  # 3 x 0.4 s + backoff, not 3 x 10 s
    assert server.calls == 3


def test_a_reset_mid_body_is_a_connection_error_once_retries_run_out(
    server: JudgeServer,
) -> None:
    server.faults = ["reset", "reset"]
    client = client_for(server, max_retries=1)
    with pytest.raises(JudgeError, match="after 1 retries: ConnectionFailed"):
        ask(client)


def test_half_the_requests_faulty_loses_no_sample_and_invents_no_value(
    server: JudgeServer,
) -> None:
    server.inject(0.5, FAULTS, seed=11)
    server.hang_seconds, server.drip_seconds = 5.0, 3.0
    rows = [(f"Which river flows through city {i}?", "A river.") for i in range(30)]
    values = run_metric(server, rows, timeout=0.5, max_retries=4)
    assert len(values) == 30
    assert all((v is None) != (e is None) for v, e in values)  # a value or an error, never both
    assert {v for v, _ in values if v is not None} == {0.25}  # river of 4 words: never made up
    known = (
        "the judge's reply has no choices",
        "the judge's reply has no message",
        "the judge's reply has no content",
        "the judge refused to answer: I can't help with evaluating this content.",
        "the judge's reply was cut off at the token limit",
        "the judge's reply was withheld by the server's content filter",
        "judge reply to relevance_rubric@1 unparsable after a JSON-only retry: ambiguous "
        "reply: it states several scores",
        "judge request failed after 4 retries: ",  # 5 transport faults in a row (rare)
    )
    errors = [e.removeprefix("JudgeError: ") for _, e in values if e]
    assert [e for e in errors if not e.startswith(known)] == []
    assert sum(server.faults_served.values()) > 0


# ---- the CLI's gate under faults ------------------------------------------------------------


def test_the_cli_gate_fails_with_exit_3_on_malformed_replies_not_an_exception(
    server: JudgeServer, env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ASSAY_JUDGE_API_KEY", "test-key")
    data = env / "d.jsonl"
    data.write_text("".join(json.dumps({"question": q, "response": a}) + "\n" for q, a, _ in ROWS))
    args = ["evaluate", str(data), "-m", "judged_relevance", "--format", "json", "--no-cache"]
    args += ["--judge-url", server.url, "--judge-model", "scripted"]
    args += ["--fail-under", "judged_relevance=0.3"]
    server.faults = [None, "refusal", "length"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 3, result.output
    payload = json.loads(result.stdout[result.stdout.index("{") :])
    (summary,) = payload["metrics"]
    assert (summary["n"], summary["n_error"]) == (2, 2)
    server.faults = [None, "refusal", "length"]
    assert CliRunner().invoke(app, [*args, "--max-errors", "2"]).exit_code == 0


def test_an_unreachable_judge_stops_the_run_within_seconds_with_exit_2(
    env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing listens at the judge's address: the first question spends its retries,
    the circuit opens, and the run stops at once with exit 2 and one line naming the
    judge and the cause (it used to retry every sample: 8 samples, 40 calls, 12 s)."""
    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    monkeypatch.setenv("ASSAY_JUDGE_API_KEY", "test-key")
    monkeypatch.setenv("ASSAY_JUDGE_MAX_RETRIES", "1")
    data = env / "d.jsonl"
    rows = [{"question": f"Question {i}?", "response": f"Answer {i}."} for i in range(8)]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = ["evaluate", str(data), "-m", "judged_relevance", "--no-cache"]
    args += ["--judge-url", url, "--judge-model", "scripted", "--out", str(env / "out.jsonl")]
    started = time.perf_counter()
    result = CliRunner().invoke(app, args)
    assert time.perf_counter() - started < 5.0
    assert result.exit_code == 2, result.output
    assert f"error: the judge at {url} cannot be reached (after 1 retries: CouldNotConnect" in (
        " ".join(result.output.split())
    )
    assert "stopped; no sample had finished" in result.output
