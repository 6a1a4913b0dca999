"""A target's reply read within limits and shape by shape (`assay.inputs.target_replies`),
against a real HTTP server on 127.0.0.1 (``tests/target_server.py``): an odd reply is
that sample's error with a reason and the others go on; a reply past a limit (decoded
bytes, a stream's line, a stream in all, its text in UTF-8) stops being read, names the
limit, and memory stays bounded."""

from __future__ import annotations

import json
import sqlite3
import sys
import textwrap
import tracemalloc
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from assay.cli import app
from assay.core.sample import Sample
from assay.inputs.target_kinds import Reply
from assay.inputs.targets import TargetSettings, call_target, parse_target
from target_server import TargetServer

#: one call at a time: the server's script answers the samples in order
ONE_BY_ONE = TargetSettings(timeout=10.0, concurrency=1, retries=0)
SSE = {"content-type": "text/event-stream"}
JSON = {"content-type": "application/json"}
MiB = 2**20


@pytest.fixture
def server() -> Iterator[TargetServer]:
    with TargetServer() as srv:
        yield srv


def _events(*payloads: Any) -> list[bytes]:
    return [b"data: " + json.dumps(p).encode() + b"\n\n" for p in payloads] + [b"data: [DONE]\n\n"]


def _delta(text: Any) -> dict[str, Any]:
    return {"choices": [{"delta": {"content": text}}]}


def _outcomes(done: list[Sample]) -> list[tuple[str, str | None, str | None]]:
    return [(d.target_call.status, d.target_call.reason, d.response) for d in done]  # type: ignore[union-attr]


def test_an_odd_stream_event_is_that_samples_error_and_the_others_go_on(
    server: TargetServer,
) -> None:
    server.script = [
        ("reply", SSE, _events(_delta("Hel"), _delta("lo"), [1])),
        ("reply", SSE, _events(_delta(5))),
        ("reply", SSE, _events({"choices": "many"})),
        ("reply", SSE, _events({"choices": [{"delta": "x"}]})),
        ("reply", SSE, [b"data: " + b"[" * 100_000 + b"\n\n"]),
        ("reply", SSE, _events(_delta("a"), {"error": {"message": "the model is overloaded"}})),
        ("reply", SSE, _events({"choices": []}, _delta("Fine"), {"usage": 3})),
    ]
    target = parse_target(f"openai:{server.url}/v1", model="m")
    done = call_target([Sample(id=str(i), query="q") for i in range(7)], target, ONE_BY_ONE)
    assert _outcomes(done) == [
        ("error", "the stream's event 3 is a list, not an object", None),
        ("error", "the stream's event 1 has delta content that is a number, not text", None),
        ("error", "the stream's event 1 has choices that are text, not a list", None),
        ("error", "the stream's event 1 has a delta that is text, not an object", None),
        ("error", f"the stream's event 1 is not JSON: {'[' * 200!r}", None),
        ("error", "the stream's event 2 is an error: the model is overloaded", None),
        ("ok", None, "Fine"),
    ]
    assert done[0].target_call.http_status == 200


def test_an_odd_whole_chat_completion_is_that_samples_error(server: TargetServer) -> None:
    def whole(reply: Any) -> tuple[Any, ...]:
        return ("reply", JSON, [json.dumps(reply).encode()])

    server.script = [
        whole([1]),
        whole({"choices": [{"message": {"content": 5}}]}),
        whole({"choices": {"0": {}}}),
        whole({"choices": [7]}),
        whole({"error": {"message": "quota exceeded"}}),
        ("reply", JSON, [b"[" * 100_000]),
        whole({"choices": [{"message": {"content": "Fine"}}], "usage": {"total_tokens": True}}),
    ]
    target = parse_target(f"openai:{server.url}/v1", model="m")
    done = call_target([Sample(id=str(i), query="q") for i in range(7)], target, ONE_BY_ONE)
    assert _outcomes(done) == [
        ("error", "the reply is a list, not a chat completion", None),
        ("error", "the reply has message content that is a number, not text", None),
        ("error", "the reply has choices that are an object, not a list", None),
        ("error", "the reply has choice 0 that is a number", None),
        ("error", "the reply is an error: quota exceeded", None),
        ("error", f"the reply is not JSON: {'[' * 200!r}", None),
        ("ok", None, "Fine"),
    ]
    assert done[-1].target_call.usage == {}  # a count that is not a whole number is left out


def test_a_jmespath_that_fails_on_a_reply_is_that_samples_error(server: TargetServer) -> None:
    def whole(reply: Any) -> tuple[Any, ...]:
        return ("reply", JSON, [json.dumps(reply).encode()])

    server.script = [
        whole({"answer": 5, "sources": ["s"]}),
        whole({"answer": "abc", "sources": ["s", 2]}),
        whole({"answer": "abc", "sources": [{"t": [1]}, "x"]}),
        whole({"answer": "abcd", "sources": "one"}),
    ]
    target = parse_target(
        f"{server.url}/rag",
        response_path="to_string(length(answer))",
        contexts_path="sort(sources)",
    )
    done = call_target([Sample(id=str(i), query="q") for i in range(4)], target, ONE_BY_ONE)
    assert _outcomes(done) == [
        (
            "error",
            "--response-path 'to_string(length(answer))' failed on the reply: In function "
            "length(), invalid type for value: 5, expected one of: ['string', 'array', "
            "'object'], received: \"number\"",
            None,
        ),
        (
            "error",
            "--contexts-path 'sort(sources)' failed on the reply: In function sort(), "
            "invalid type for value: 2, expected one of: ['array-string', "
            "'array-number'], received: \"int\"",
            None,
        ),
        (
            "error",
            "--contexts-path 'sort(sources)' failed on the reply: In function sort(), "
            "invalid type for value: {'t': [1]}, expected one of: ['array-string', "
            "'array-number'], received: \"dict\"",
            None,
        ),
        (
            "error",
            "--contexts-path 'sort(sources)' failed on the reply: In function sort(), "
            "invalid type for value: one, expected one of: ['array-string', 'array-number'], "
            'received: "string"',
            None,
        ),
    ]


def test_a_response_path_that_finds_another_type_names_it(server: TargetServer) -> None:
    server.script = [("reply", JSON, [b'{"answer": [1, 2]}'])]
    target = parse_target(f"{server.url}/rag", response_path="answer")
    [done] = call_target([Sample(query="q")], target, ONE_BY_ONE)
    assert _outcomes([done]) == [("error", "--response-path 'answer' found a list, not text", None)]


def odd_replies(sample: dict) -> Any:
    return {
        "list": ["a"],
        "nan": {"response": "x", "duration": float("nan")},
        "bool": {"response": "x", "first_token_time": True},
        "huge": {"response": "x", "duration": 10**5000},
        "negative": {"response": "x", "duration": -1},
        "text": {"response": "x", "first_token_time": "0.5"},
        "contexts": {"response": "x", "contexts": "c"},
        "usage": {"response": "x", "usage": {"completion_tokens": 10**30, "prompt_tokens": 4}},
    }.get(sample["query"]) or sys.exit(3)


def test_a_python_target_returning_odd_types_or_exiting_is_that_samples_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "odd_app", sys.modules[__name__])
    target = parse_target("python:odd_app:odd_replies")
    queries = ["list", "nan", "bool", "huge", "negative", "text", "contexts", "exit", "usage"]
    done = call_target([Sample(query=q) for q in queries], target, ONE_BY_ONE)
    name = "python:odd_app:odd_replies"
    assert _outcomes(done) == [
        ("error", f"{name} returned a list; expected text or a dict with 'response'", None),
        ("error", f"{name} returned duration nan; expected seconds", None),
        ("error", f"{name} returned first_token_time True; expected seconds", None),
        ("error", f"{name} returned duration a number; expected seconds", None),
        ("error", f"{name} returned duration -1; expected seconds", None),
        ("error", f"{name} returned first_token_time text; expected seconds", None),
        ("error", f"{name} returned contexts that are not a list of texts", None),
        ("error", f"{name} raised SystemExit: 3", None),
        ("ok", None, "x"),
    ]
    assert done[-1].target_call.usage == {"prompt_tokens": 4}  # 10**30 does not fit a count


class _Broken:
    """A target whose call fails in a way no check foresaw."""

    name = "broken"

    async def call(self, sample: Sample, client: Any) -> Reply:
        if sample.query == "odd":
            raise KeyError("the field 'x'")
        return Reply("fine")


def test_an_unforeseen_failure_is_that_samples_error_not_the_runs() -> None:
    done = call_target([Sample(query="odd"), Sample(query="q")], _Broken(), ONE_BY_ONE)
    assert _outcomes(done) == [
        ("error", "the reply could not be read (KeyError: \"the field 'x'\")", None),
        ("ok", None, "fine"),
    ]


# ---- limits ----------------------------------------------------------------------------


def _gzip_of_zeros(total: int) -> bytes:
    """``total`` zero bytes, gzip-compressed (a body that inflates about 1,000 times)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    block = bytes(MiB)
    packed = [packer.compress(block) for _ in range(total // MiB)]
    return b"".join(packed) + packer.flush()


@pytest.fixture(scope="module")
def bomb() -> bytes:
    """200 MB of zeros in about 0.2 MB of gzip."""
    return _gzip_of_zeros(200 * 10**6)


def _peak_while(run: Any) -> tuple[Any, int]:
    """What ``run()`` returns and the peak of the memory allocated meanwhile (bytes)."""
    tracemalloc.start()
    try:
        outcome = run()
        return outcome, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_gzip_body_is_counted_decompressed_and_stops_at_the_limit(
    server: TargetServer, bomb: bytes
) -> None:
    assert len(bomb) < 250_000
    headers = {**JSON, "content-encoding": "gzip", "content-length": str(len(bomb))}
    server.script = [("reply", headers, [bomb]), ("reply", headers, [bomb])]
    rag = parse_target(f"{server.url}/rag", response_path="answer")
    chat = parse_target(f"openai:{server.url}/v1", model="m")
    for target in (rag, chat):
        [done], peak = _peak_while(lambda t=target: call_target([Sample(query="q")], t, ONE_BY_ONE))
        assert _outcomes([done]) == [
            ("error", "the reply is over 16,777,216 bytes: not read further", None)
        ]
        assert peak < 60 * MiB  # the 16 MiB read, not 200 MB
    # the request says which codings it reads
    assert server.requests[0]["headers"]["accept-encoding"] == "gzip, deflate"
    # a gzip (and a deflate) reply under the limit reads as the text it holds
    reply = json.dumps({"answer": "é" * 1000}).encode()
    raw_deflate = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    server.script = [
        ("reply", {**JSON, "content-encoding": "gzip"}, [_gzip(reply)]),
        ("reply", {**JSON, "content-encoding": "deflate"}, [zlib.compress(reply)]),
        (
            "reply",
            {**JSON, "content-encoding": "deflate"},
            [raw_deflate.compress(reply) + raw_deflate.flush()],
        ),
        ("reply", {**JSON, "content-encoding": "gzip"}, [b"not gzip"]),
    ]
    done = call_target([Sample(id=str(i), query="q") for i in range(4)], rag, ONE_BY_ONE)
    assert _outcomes(done) == [("ok", None, "é" * 1000)] * 3 + [
        (
            "error",
            "the reply's gzip body cannot be decoded: Error -3 while decompressing data: "
            "incorrect header check",
            None,
        )
    ]


def _gzip(data: bytes) -> bytes:
    packer = zlib.compressobj(6, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    return packer.compress(data) + packer.flush()


def _endless(chunk: bytes, total: int) -> Iterator[bytes]:
    for _ in range(total // len(chunk)):
        yield chunk


def test_an_endless_body_stops_at_the_limit_with_memory_bounded(server: TargetServer) -> None:
    server.script = [("reply", JSON, _endless(b" " * 65536, 200 * MiB))]
    rag = parse_target(f"{server.url}/rag", response_path="answer")
    [done], peak = _peak_while(lambda: call_target([Sample(query="q")], rag, ONE_BY_ONE))
    assert _outcomes([done]) == [
        ("error", "the reply is over 16,777,216 bytes: not read further", None)
    ]
    assert peak < 60 * MiB
    # a declared length past the limit is refused before reading
    server.script = [("reply", {**JSON, "content-length": str(17 * MiB)}, [b"{}"])]
    [done] = call_target([Sample(query="q")], rag, ONE_BY_ONE)
    assert _outcomes([done]) == [
        ("error", "the reply is over 16,777,216 bytes: not read further", None)
    ]


def _long_line() -> Iterator[bytes]:
    """A stream whose first event's ``data:`` line is 200 MiB long."""
    yield b'data: {"choices": [{"delta": {"content": "'
    yield from _endless(b"a" * 65536, 200 * MiB)


def _gzipped(chunks: Iterator[bytes]) -> Iterator[bytes]:
    packer = zlib.compressobj(6, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    for chunk in chunks:
        yield packer.compress(chunk)
    yield packer.flush()


def test_a_streams_long_line_stops_at_the_line_limit_with_memory_bounded(
    server: TargetServer,
) -> None:
    """A 200 MiB ``data:`` line is not buffered: the call fails once the line passes 1 MiB
    (plain or gzip-compressed)."""
    served = [0]

    def counted(chunks: Iterator[bytes]) -> Iterator[bytes]:
        for chunk in chunks:
            served[0] += len(chunk)
            yield chunk

    server.script = [
        ("reply", SSE, counted(_long_line())),
        ("reply", {**SSE, "content-encoding": "gzip"}, _gzipped(_long_line())),
    ]
    chat = parse_target(f"openai:{server.url}/v1", model="m")
    for _ in range(2):
        [done], peak = _peak_while(lambda: call_target([Sample(query="q")], chat, ONE_BY_ONE))
        assert _outcomes([done]) == [
            ("error", "a line of the stream is over 1,048,576 bytes: not read further", None)
        ]
        assert peak < 20 * MiB
    # the client stopped reading: the server wrote what the sockets' buffers held, and
    # then its writes failed, far from the 200 MiB
    assert served[0] < 32 * MiB


def test_a_streams_text_is_counted_in_bytes_and_the_stream_in_all(server: TargetServer) -> None:
    """The streamed text's limit is 16 MiB of UTF-8, not 16 Mi characters: 20 events of
    300,000 '€' (3 bytes each) pass it at the 19th event (17.1 MB), at 5.7 M characters.
    A stream of events that carry no text stops at 64 MiB in all."""
    event = b'data: {"choices": [{"delta": {"content": "' + "€".encode() * 300_000 + b'"}}]}\n\n'
    padding = b": " + b"x" * (512 * 1024) + b"\n"
    server.script = [
        ("reply", SSE, [event] * 20),
        ("reply", SSE, _endless(padding, 100 * MiB)),
    ]
    chat = parse_target(f"openai:{server.url}/v1", model="m")
    done = call_target([Sample(id="1", query="q"), Sample(id="2", query="q")], chat, ONE_BY_ONE)
    assert _outcomes(done) == [
        ("error", "the streamed text is over 16,777,216 bytes: not read further", None),
        ("error", "the stream is over 67,108,864 bytes: not read further", None),
    ]


# ---- python: targets from a file ------------------------------------------------------


def test_a_python_file_with_postponed_annotations_and_a_dataclass_imports(
    tmp_path: Path,
) -> None:
    source = textwrap.dedent(
        """
        from __future__ import annotations

        from dataclasses import dataclass


        @dataclass
        class Answer:
            text: str
            score: float | None = None


        def answer(sample: dict) -> str:
            return Answer("echo " + sample["query"]).text
        """
    )
    (tmp_path / "bot.py").write_text(source)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "bot.py").write_text(source.replace("echo ", "other "))
    before = set(sys.modules)
    first = parse_target(f"python:{tmp_path / 'bot.py'}:answer")
    second = parse_target(f"python:{tmp_path / 'other' / 'bot.py'}:answer")
    done = call_target([Sample(query="q")], first) + call_target([Sample(query="q")], second)
    assert [d.response for d in done] == ["echo q", "other q"]
    added = sorted(set(sys.modules) - before)
    assert len(added) == 2 and all(n.startswith("assay_target_bot_") for n in added)
    # a file that fails to import leaves no module behind
    (tmp_path / "broken.py").write_text(
        "from __future__ import annotations\nraise RuntimeError('no')\n"
    )
    from assay.inputs.targets import TargetError

    with pytest.raises(TargetError, match=r"cannot import .*broken\.py: RuntimeError: no"):
        parse_target(f"python:{tmp_path / 'broken.py'}:answer")
    assert not [n for n in set(sys.modules) - before if "broken" in n]
    for name in added:
        del sys.modules[name]


def lone_surrogates(sample: dict) -> Any:
    if sample["query"] == "raise":
        raise ValueError("bad \ud800 value")
    return {"response": "bad \udfff text", "contexts": ["c \ud800"]}


def test_a_reply_with_lone_surrogates_is_stored_with_replacement_characters(
    server: TargetServer, env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """JSON may escape a lone surrogate ("\\ud800"), and a function may return one; no
    UTF-8 file or database takes it (the store failed with UnicodeEncodeError and a
    traceback after every call had been made). Each becomes U+FFFD, in replies, contexts
    and reasons alike."""
    server.script = [
        ("reply", JSON, [b'{"answer": "x\\ud800y", "sources": ["\\udc00"]}']),
        ("reply", JSON, [b'{"answer": "\\ud800"}']),
    ]
    rag = parse_target(f"{server.url}/rag", response_path="answer", contexts_path="sources")
    length = parse_target(f"{server.url}/rag", response_path="abs(answer)")
    [ok] = call_target([Sample(query="q")], rag, ONE_BY_ONE)
    [failed] = call_target([Sample(query="q")], length, ONE_BY_ONE)
    assert (ok.response, ok.contexts) == ("x\ufffdy", ["\ufffd"])
    assert failed.target_call.reason == (
        "--response-path 'abs(answer)' failed on the reply: In function abs(), invalid type "
        "for value: \ufffd, expected one of: ['number'], received: \"string\""
    )
    monkeypatch.setitem(sys.modules, "surrogate_app", sys.modules[__name__])
    data = env / "d.jsonl"
    data.write_text('{"query": "q", "expected": "x"}\n{"query": "raise", "expected": "x"}\n')
    db, out = env / "runs.db", env / "out.jsonl"
    args = ["run", str(data), "--target", "python:surrogate_app:lone_surrogates"]
    args += ["-m", "exact_match", "--out", str(out), "--store", "--db", str(db)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [(r.get("response"), r["target.reason"]) for r in rows] == [
        ("bad \ufffd text", None),
        (None, "python:surrogate_app:lone_surrogates raised ValueError: bad \ufffd value"),
    ]
    stored = sqlite3.connect(db).execute("SELECT COUNT(*) FROM test_results").fetchone()
    assert stored == (2,)


def test_the_documented_limits_are_the_ones_applied() -> None:
    """docs/run.md states each limit of a reply with its default and its error."""
    from assay.inputs import target_replies

    doc = (Path(__file__).parent.parent / "docs" / "run.md").read_text()
    limits = {
        "MAX_REPLY_BYTES": (16 * MiB, "the reply is over 16,777,216 bytes"),
        "MAX_STREAM_LINE_BYTES": (MiB, "a line of the stream is over 1,048,576 bytes"),
        "MAX_STREAM_BYTES": (64 * MiB, "the stream is over 67,108,864 bytes"),
    }
    for name, (default, error) in limits.items():
        assert getattr(target_replies, name) == default
        assert name in doc and f"`{error}: not read further`" in doc
    assert "`the streamed text is over 16,777,216 bytes: not read further`" in doc
    assert "| 16 MiB |" in doc and "| 1 MiB |" in doc and "| 64 MiB |" in doc


@pytest.mark.parametrize("wbits", [zlib.MAX_WBITS | 16, zlib.MAX_WBITS, -zlib.MAX_WBITS])
def test_a_coded_body_decodes_whatever_its_cuts(wbits: int) -> None:
    """gzip, zlib's deflate and raw deflate, fed a byte at a time or at once, decode to
    the same bytes, each piece at most PIECE_BYTES (deflate's kind is told by its first
    two bytes, which may arrive apart)."""
    from assay.core.http_codings import PIECE_BYTES, Inflater

    original = b"".join(b"line %d of the reply\n" % i for i in range(20_000))
    packer = zlib.compressobj(6, zlib.DEFLATED, wbits)
    coded = packer.compress(original) + packer.flush()
    coding = "gzip" if wbits > zlib.MAX_WBITS else "deflate"
    for cut in (1, 7, len(coded)):
        inflater = Inflater(coding)
        pieces = [p for i in range(0, len(coded), cut) for p in inflater.feed(coded[i : i + cut])]
        assert b"".join(pieces) == original
        assert max(len(p) for p in pieces) <= PIECE_BYTES
    # at once: 468,890 bytes in pieces of 64 KiB, the last one shorter
    assert [len(p) for p in pieces[:-1]] == [PIECE_BYTES] * (len(original) // PIECE_BYTES)
