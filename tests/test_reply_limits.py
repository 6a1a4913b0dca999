"""Replies read with a bound (``max_reply_bytes``): the judge's and the OpenAI-compatible
embedder's replies are counted on decoded bytes as they arrive, and one over the limit
is that call's error naming the limit, not read further, its connection closed. Real
servers on 127.0.0.1 send bodies of a given length, endless bodies (chunked, and to the
connection's end) and gzip bombs; `assay evaluate` against an endless judge finishes
with the judged metric's error and stays under 1 GB."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import threading
import tracemalloc
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from assay.core.config import DEFAULT_MAX_REPLY_BYTES, AssayConfig
from assay.core.http import ReplyTooLarge
from assay.judge.http import ChatCompletions
from assay.models.embedders import EmbeddingServerError, OpenAICompatibleEmbedder
from raw_http import RequestReader, accept_in_background

COMPLETION = {"choices": [{"message": {"role": "assistant", "content": "ok"}}]}
ZEROS = bytes(2**20)


def endless(kind: str) -> Iterator[bytes]:
    """An endless reply: ``chunked`` (64 KiB chunks), ``eof`` (no length: the body runs
    to the connection's end) or ``gzip`` (chunked gzip of zeros, 1 MiB per ~1 KB)."""
    if kind == "eof":
        yield b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n"
        while True:
            yield b"[" * 65536
    encoding = b"Content-Encoding: gzip\r\n" if kind == "gzip" else b""
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n%sTransfer-Encoding: chunked"
    yield head % encoding + b"\r\n\r\n"
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    while True:
        data = packer.compress(ZEROS) + packer.flush(zlib.Z_SYNC_FLUSH) if kind == "gzip" else ZEROS
        yield b"%x\r\n%s\r\n" % (len(data), data)


@contextmanager
def reply_server(reply: bytes | str) -> Iterator[dict[str, Any]]:
    """A server answering every request with ``reply`` (bytes), or an endless reply of
    that kind (`endless`); yields its facts: ``url``, ``connections``, ``requests``, and
    ``sent``, the bytes each endless reply got out before the client went away."""
    facts: dict[str, Any] = {"connections": 0, "requests": 0, "sent": []}
    listener = socket.create_server(("127.0.0.1", 0))
    facts["url"] = f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    done = threading.Event()

    def serve(conn: socket.socket) -> None:
        facts["connections"] += 1
        requests = RequestReader(conn)
        with conn:
            while requests.next() is not None:
                facts["requests"] += 1
                if isinstance(reply, bytes):
                    try:
                        conn.sendall(reply)
                    except OSError:  # the client closed a reply it would not read whole
                        return
                    continue
                sent = 0
                try:
                    for piece in endless(reply):
                        conn.sendall(piece)
                        sent += len(piece)
                except OSError:  # the client closed the connection
                    facts["sent"].append(sent)
                    done.set()
                    return

    accept_in_background(listener, serve)
    facts["done"] = done
    try:
        yield facts
    finally:
        listener.close()


def reply_of(body: bytes, extra: bytes = b"") -> bytes:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n" % len(
        body
    )
    return head + extra + b"\r\n" + body


def ask(url: str, limit: int, count: int = 1) -> list[Any]:
    """``count`` chat completions through one `ChatCompletions`; failures kept."""
    api = ChatCompletions(url, None, timeout=10.0, max_reply_bytes=limit)

    async def run() -> list[Any]:
        out: list[Any] = []
        try:
            for _ in range(count):
                try:
                    out.append(await api.create({"model": "m", "messages": []}))
                except ReplyTooLarge as exc:
                    out.append(exc)
        finally:
            await api.close()
        return out

    return asyncio.run(run())


def padded(size: int) -> bytes:
    """A chat completion of exactly ``size`` bytes (JSON with trailing spaces)."""
    body = json.dumps(COMPLETION).encode()
    return body + b" " * (size - len(body))


def test_the_default_limit_and_its_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    assert DEFAULT_MAX_REPLY_BYTES == 16_777_216 == AssayConfig().max_reply_bytes
    monkeypatch.setenv("ASSAY_MAX_REPLY_BYTES", "5000")
    assert AssayConfig().max_reply_bytes == 5000


def test_a_judge_reply_at_the_limit_is_read_and_one_byte_over_is_refused() -> None:
    with reply_server(reply_of(padded(1000))) as facts:
        assert ask(facts["url"], limit=1000, count=2) == [COMPLETION, COMPLETION]
    assert facts["connections"] == 1
    with reply_server(reply_of(padded(1001))) as facts:
        replies = ask(facts["url"], limit=1000, count=2)
    assert [type(r) for r in replies] == [ReplyTooLarge] * 2
    assert str(replies[0]) == (
        "the reply's body is over the limit of 1,000 bytes (max_reply_bytes) and was not "
        "read further; raise it with ASSAY_MAX_REPLY_BYTES or max_reply_bytes in [tool.assay]"
    )
    with reply_server(reply_of(padded(4 * 2**20))) as facts:
        replies = ask(facts["url"], limit=1000, count=2)
    assert [type(r) for r in replies] == [ReplyTooLarge] * 2
    assert facts["connections"] == 2  # a reply left half read: its connection is closed


@pytest.mark.parametrize("kind", ["chunked", "eof", "gzip"])
def test_an_endless_judge_reply_stops_at_the_limit(kind: str) -> None:
    """1 MiB limit: the endless body (a gzip one: 1 MiB of zeros per ~1 KB sent) is cut
    once 1 MiB has been decoded, and the connection is closed: the server's writes fail
    after at most the limit plus what the sockets' buffers hold (a few MiB)."""
    with reply_server(kind) as facts:
        (reply,) = ask(facts["url"], limit=2**20)
        assert facts["done"].wait(10.0)
    assert isinstance(reply, ReplyTooLarge) and reply.limit == 2**20
    assert "over the limit of 1,048,576 bytes (max_reply_bytes)" in str(reply)
    assert facts["sent"][0] < 16 * 2**20


def test_a_gzip_bomb_with_a_length_is_counted_after_decompression() -> None:
    bomb = zlib.compressobj(9, zlib.DEFLATED, 31)
    packed = b"".join(bomb.compress(ZEROS) for _ in range(64)) + bomb.flush()  # 64 MiB
    assert len(packed) < 100_000
    with reply_server(reply_of(packed, b"Content-Encoding: gzip\r\n")) as facts:
        (reply,) = ask(facts["url"], limit=4 * 2**20)
    assert isinstance(reply, ReplyTooLarge) and reply.limit == 4 * 2**20


def test_a_gzip_bomb_is_cut_having_held_about_the_limit() -> None:
    """The judge's and the embedder's replies are decoded by pieces of 64 KiB
    (`assay.core.http_codings`), as a target's are: a 64 MiB gzip bomb against a 1 MiB
    limit is cut having held a few MiB (httpx's own decoder had inflated each 64 KiB
    read whole: 141 MiB traced at the peak, past the limit before any count)."""
    bomb = zlib.compressobj(9, zlib.DEFLATED, 31)
    packed = b"".join(bomb.compress(ZEROS) for _ in range(64)) + bomb.flush()
    with reply_server(reply_of(packed, b"Content-Encoding: gzip\r\n")) as facts:
        ask(facts["url"], limit=2**20)  # the pool and the parser made before tracing
        tracemalloc.start()
        try:
            (reply,) = ask(facts["url"], limit=2**20)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert isinstance(reply, ReplyTooLarge) and reply.limit == 2**20
        assert peak < 4 * 2**20
        tracemalloc.start()
        try:
            embedder = OpenAICompatibleEmbedder("e", facts["url"], max_reply_bytes=2**20)
            with pytest.raises(EmbeddingServerError, match=r"limit of 1,048,576 bytes"):
                embedder._encode(["a text"])
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 4 * 2**20


def test_an_embedding_reply_over_the_limit_is_the_calls_error_and_not_retried() -> None:
    rows = {"data": [{"index": 0, "embedding": [0.5] * 300}]}
    with reply_server(reply_of(json.dumps(rows).encode())) as facts:
        small = OpenAICompatibleEmbedder("e", facts["url"], max_reply_bytes=1000)
        with pytest.raises(EmbeddingServerError, match=r"limit of 1,000 bytes \(max_reply"):
            small._encode(["a text"])
        assert facts["requests"] == 1  # the same request would get the same reply
        roomy = OpenAICompatibleEmbedder("e", facts["url"], max_reply_bytes=10_000)
        assert roomy._encode(["a text"]).shape == (1, 300)
    with reply_server("chunked") as facts:
        endless_server = OpenAICompatibleEmbedder("e", facts["url"], max_reply_bytes=2**20)
        with pytest.raises(EmbeddingServerError, match=r"over the limit of 1,048,576"):
            endless_server._encode(["a text"])


#: the child runs `assay evaluate` and prints its own peak resident memory in KiB
_MEASURED = (
    "import resource, subprocess, sys\n"
    "code = subprocess.run(sys.argv[1:]).returncode\n"
    "print('peak_kib', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, code)\n"
)


@pytest.mark.parametrize("kind", ["chunked", "eof"])
def test_assay_evaluate_with_an_endless_judge_reply_ends_with_the_metrics_error(
    kind: str, tmp_path: Path
) -> None:
    """The endless judge reply at the default 16 MiB limit: `assay evaluate` ends (it had
    read for 60 s to 15.7 GB), judged_relevance is that sample's error naming the limit,
    the run's peak memory stays under 1 GB."""
    data = tmp_path / "data.jsonl"
    data.write_text(json.dumps({"id": "s1", "query": "What is 2+2?", "response": "4"}) + "\n")
    out = tmp_path / "out.jsonl"
    with reply_server(kind) as facts:
        command = [sys.executable, "-c", "from assay.cli import app; app()", "evaluate"]
        command += [str(data), "-m", "judged_relevance", "--judge-url", facts["url"]]
        command += ["--judge-model", "m", "--no-cache", "--out", str(out)]
        child = subprocess.run(
            [sys.executable, "-c", _MEASURED, *command],
            capture_output=True,
            text=True,
            timeout=120,
        )
    peak_line = [line for line in child.stdout.splitlines() if line.startswith("peak_kib")]
    assert peak_line, child.stdout + child.stderr
    _, peak_kib, _code = peak_line[0].split()
    print(f"assay evaluate, endless {kind} judge reply: peak {int(peak_kib) // 1024} MiB")
    assert int(peak_kib) < 1024 * 1024  # KiB: under 1 GB
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    error = json.dumps(row)
    assert "over the limit of 16,777,216 bytes (max_reply_bytes)" in error, error
    assert facts["requests"] == 1  # not retried: the same request would get the same reply
