"""The judge's transport (`assay.core.http_aiohttp.AiohttpTransport`: aiohttp under
httpx's client) against real servers on 127.0.0.1: the judge's test server with many
requests at once, and a raw TCP server that answers each request with scripted bytes
(chunked bodies cut anywhere, bodies to the end of the connection, interim replies, gzip,
a server that closes, one that is not HTTP, malformed chunked bodies, connections that
must not be reused). Its parser is fuzzed against h11's in test_judge_transport_fuzz."""

from __future__ import annotations

import asyncio
import gzip
import json
import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.core.http_aiohttp import AiohttpTransport
from assay.judge.http import ChatCompletions
from judge_server import JudgeServer
from raw_http import RequestReader, accept_in_background, self_signed

#: a reply: the request's bytes -> the chunks to send (with a pause between), then
#: whether to close the connection (True; "reset": with a TCP RST)
Script = Callable[[bytes], tuple[list[bytes], bool | str]]


@contextmanager
def raw_server(script: Script) -> Iterator[dict[str, Any]]:
    """A TCP server answering each request on a connection by ``script``; yields its
    facts (``url``, ``connections`` made so far)."""
    facts: dict[str, Any] = {"connections": 0}
    listener = socket.create_server(("127.0.0.1", 0))
    facts["url"] = f"http://127.0.0.1:{listener.getsockname()[1]}"

    def serve(conn: socket.socket) -> None:
        facts["connections"] += 1
        requests = RequestReader(conn)
        with conn:
            while (request := requests.next()) is not None:
                pieces, close = script(request)
                for piece in pieces:
                    conn.sendall(piece)
                    threading.Event().wait(0.002)
                if close == "reset":  # RST instead of FIN
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                if close:
                    return

    accept_in_background(listener, serve)
    try:
        yield facts
    finally:
        listener.close()


def fetch(
    url: str, count: int = 1, method: str = "POST", pause: float = 0.0, **kwargs: Any
) -> list[httpx.Response]:
    """``count`` requests one after the other through one client on the judge's
    transport, ``pause`` seconds apart (the event loop runs meanwhile)."""
    replies = outcomes(url, count, method, pause, **kwargs)
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply
    return replies  # type: ignore[return-value]


def outcomes(
    url: str, count: int = 1, method: str = "POST", pause: float = 0.0, **kwargs: Any
) -> list[httpx.Response | Exception]:
    """`fetch`, each request's failure kept in its place instead of raised."""

    async def run() -> list[httpx.Response | Exception]:
        async with httpx.AsyncClient(transport=AiohttpTransport(), timeout=5.0) as client:
            replies: list[httpx.Response | Exception] = []
            for _ in range(count):
                try:
                    response = await client.request(method, url, json={"q": 1}, **kwargs)
                    await response.aread()
                    replies.append(response)
                except httpx.TransportError as exc:
                    replies.append(exc)
                await asyncio.sleep(pause)
            return replies

    return asyncio.run(run())


def fixed(*pieces: bytes, close: bool | str = False) -> Script:
    return lambda request: (list(pieces), close)


JSON_BODY = b'{"answer": "ok", "n": 12345}'
PLAIN = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
    len(JSON_BODY),
    JSON_BODY,
)


def chunked(body: bytes, sizes: list[int]) -> bytes:
    """``body`` in chunks of ``sizes`` (the rest in one), with an extension and a trailer."""
    out, start = [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"], 0
    for size in [*sizes, len(body)]:
        part = body[start : start + size]
        if part:
            out.append(b"%x;ext=1\r\n%s\r\n" % (len(part), part))
        start += len(part)
    out.append(b"0\r\nX-Trailer: yes\r\n\r\n")
    return b"".join(out)


def test_the_judge_client_answers_many_requests_at_once_on_kept_connections() -> None:
    with JudgeServer(delay=0.05) as server:
        api = ChatCompletions(server.url, None, timeout=10.0)
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}

        async def run() -> tuple[list[Any], list[Any]]:
            try:
                first = await asyncio.gather(*(api.create(body) for _ in range(100)))
                second = await asyncio.gather(*(api.create(body) for _ in range(64)))
                return first, second
            finally:
                await api.close()

        first, second = asyncio.run(run())
        assert type(api._client._transport) is AiohttpTransport
        assert server.calls == 164
        assert all(r["choices"][0]["message"]["content"] for r in [*first, *second])


def test_a_kept_connection_carries_the_next_requests() -> None:
    with raw_server(fixed(PLAIN)) as facts:
        replies = fetch(facts["url"] + "/v1/x", count=3)
    assert [r.json() for r in replies] == [json.loads(JSON_BODY)] * 3
    assert facts["connections"] == 1


@settings(max_examples=25, deadline=None)
@given(sizes=st.lists(st.integers(1, 9), max_size=6), cut=st.integers(1, 40))
def test_chunked_bodies_cut_anywhere_give_the_body(sizes: list[int], cut: int) -> None:
    reply = chunked(JSON_BODY, sizes)
    pieces = [reply[i : i + cut] for i in range(0, len(reply), cut)]
    with raw_server(fixed(*pieces)) as facts:
        replies = fetch(facts["url"], count=2)
    assert [r.content for r in replies] == [JSON_BODY, JSON_BODY]
    assert facts["connections"] == 1  # the trailer read, the connection kept


def test_a_body_to_the_end_of_the_connection_and_connection_close() -> None:
    to_eof = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nall of it"
    with raw_server(fixed(to_eof, close=True)) as facts:
        replies = fetch(facts["url"], count=2)
    assert [r.text for r in replies] == ["all of it"] * 2
    assert facts["connections"] == 2  # not reused
    closing = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"
    with raw_server(fixed(closing, close=True)) as facts:
        assert [r.text for r in fetch(facts["url"], count=2)] == ["ok", "ok"]
    assert facts["connections"] == 2


def test_interim_replies_no_body_statuses_and_head() -> None:
    interim = b"HTTP/1.1 100 Continue\r\n\r\n" + PLAIN
    with raw_server(fixed(interim)) as facts:
        assert fetch(facts["url"])[0].json() == json.loads(JSON_BODY)
    no_content = b"HTTP/1.1 204 No Content\r\n\r\n"
    with raw_server(fixed(no_content)) as facts:
        replies = fetch(facts["url"], count=2)
    assert [(r.status_code, r.content) for r in replies] == [(204, b"")] * 2
    assert facts["connections"] == 1
    head = b"HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n"  # HEAD: the length, no body
    with raw_server(fixed(head)) as facts:
        replies = fetch(facts["url"], count=2, method="HEAD")
    assert [(r.status_code, r.content, r.headers["content-length"]) for r in replies] == [
        (200, b"", "500")
    ] * 2


def test_a_gzip_body_is_decoded_by_httpx() -> None:
    packed = gzip.compress(JSON_BODY)
    reply = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(packed)
    with raw_server(fixed(reply + packed)) as facts:
        assert fetch(facts["url"])[0].json() == json.loads(JSON_BODY)


def test_a_connection_the_server_closed_while_idle_is_not_used() -> None:
    """The server closes each connection after its reply, without saying so; by the next
    request the end of file has arrived and a new connection is made."""
    with raw_server(fixed(PLAIN, close=True)) as facts:
        replies = fetch(facts["url"], count=3, pause=0.1)
    assert [r.status_code for r in replies] == [200, 200, 200]
    assert facts["connections"] == 3


@pytest.mark.parametrize(
    ("reply", "error", "message"),
    [
        (b"SSH-2.0-OpenSSH_9.6\r\n\r\n", httpx.RemoteProtocolError,
         "not HTTP/1.1: Bad status line"),
        (b"HTTP/1.1 200 OK\r\nbroken header\r\n\r\n", httpx.RemoteProtocolError,
         "Invalid header token"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", httpx.RemoteProtocolError,
         "Invalid character in Content-Length"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", httpx.RemoteProtocolError,
         "Invalid character in chunk size"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nhalf", httpx.RemoteProtocolError,
         r"received 4 of 100 bytes"),
        (b"HTTP/1.1 200 O", httpx.RemoteProtocolError, "closed the connection before the reply"),
    ],
)  # fmt: skip
def test_replies_that_are_not_http_or_stop_short_raise_httpx_errors(
    reply: bytes, error: type[Exception], message: str
) -> None:
    with raw_server(fixed(reply, close=True)) as facts, pytest.raises(error, match=message):
        fetch(facts["url"])


def test_a_reset_connection_is_an_incomplete_body() -> None:
    half = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nhalf"
    with (
        raw_server(fixed(half, close="reset")) as facts,
        pytest.raises(httpx.RemoteProtocolError, match="received 4 of 100 bytes"),
    ):
        fetch(facts["url"])


def test_timeouts_and_refused_connections() -> None:
    with raw_server(fixed()) as facts, pytest.raises(httpx.ReadTimeout):  # never answers
        fetch(facts["url"], timeout=0.3)
    unused = socket.socket()
    unused.bind(("127.0.0.1", 0))
    port = unused.getsockname()[1]
    unused.close()
    with pytest.raises(
        httpx.ConnectError, match=f"connect to 127.0.0.1:{port}: Connection refused"
    ):
        fetch(f"http://127.0.0.1:{port}/")


def test_a_proxied_url_goes_through_httpx_own_proxy_transport(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:3128")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    api = ChatCompletions("https://api.openai.com/v1", "key", timeout=5.0)
    local = ChatCompletions("http://127.0.0.1:8000/v1", "key", timeout=5.0)
    try:
        proxied = api._client._transport_for_url(httpx.URL("https://api.openai.com/v1/x"))
        direct = local._client._transport_for_url(httpx.URL("http://127.0.0.1:8000/v1/x"))
        assert not isinstance(proxied, AiohttpTransport)
        assert isinstance(direct, AiohttpTransport)
    finally:
        asyncio.run(api.close())
        asyncio.run(local.close())


def test_https_verifies_the_server_and_keeps_the_connection(tmp_path: Any) -> None:
    """A TLS server with a self-signed certificate: refused with the default authorities,
    answered over one kept connection with a context that trusts it."""
    cert, key = self_signed(tmp_path)
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(cert, key)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    connections = []

    def serve(raw: socket.socket) -> None:
        connections.append(raw)
        try:
            conn = server_context.wrap_socket(raw, server_side=True)
        except (ssl.SSLError, OSError):  # the client refused the certificate
            return
        requests = RequestReader(conn)
        with conn:
            while requests.next() is not None:
                conn.sendall(PLAIN)

    accept_in_background(listener, serve)
    url = f"https://127.0.0.1:{port}/v1/x"

    async def run(context: ssl.SSLContext | None, count: int) -> list[Any]:
        transport = AiohttpTransport(ssl_context=context)
        async with httpx.AsyncClient(transport=transport, timeout=5.0) as client:
            return [(await client.post(url, json={"q": 1})).json() for _ in range(count)]

    try:
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            asyncio.run(run(None, 1))
        trusting = ssl.create_default_context(cafile=str(cert))
        assert asyncio.run(run(trusting, 3)) == [json.loads(JSON_BODY)] * 3
        assert len(connections) == 2  # the refused one, then one for the three requests
    finally:
        listener.close()


# ---- malformed chunked bodies, connections that must not be reused, smaller faults ----


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"-1\r\nx\r\n0\r\n\r\n", "Invalid character in chunk size: b'-1'"),
        (b"+0\r\n\r\n", "Invalid character in chunk size: b'+0'"),
        (b"0x5\r\nhello\r\n0\r\n\r\n", "Invalid character in chunk size: b'0x5'"),
        # no CRLF after the 5 bytes of the first chunk ("helloabc" once read as the body)
        (b"5\r\nhelloXY3\r\nabc\r\n0\r\n\r\n", "Expected LF after chunk data"),
    ],
)
def test_malformed_chunked_bodies_are_refused_and_the_connection_dropped(
    body: bytes, message: str
) -> None:
    reply = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + body
    with raw_server(fixed(reply)) as facts:
        replies = outcomes(facts["url"], count=2)
    assert [type(r) for r in replies] == [httpx.RemoteProtocolError] * 2
    assert all(message in str(r) for r in replies)
    assert facts["connections"] == 2  # the connection that sent it is not used again


def test_connection_close_on_either_side_and_http_1_0_end_the_connection() -> None:
    ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    with raw_server(fixed(ok)) as facts:  # the request says close
        replies = fetch(facts["url"], count=2, headers={"Connection": "close"})
    assert [r.content for r in replies] == [b"ok", b"ok"]
    assert facts["connections"] == 2
    with raw_server(fixed(ok.replace(b"HTTP/1.1", b"HTTP/1.0"))) as facts:  # no keep-alive
        assert [r.content for r in fetch(facts["url"], count=2)] == [b"ok", b"ok"]
    assert facts["connections"] == 2
    kept = ok.replace(b"HTTP/1.1 200 OK", b"HTTP/1.0 200 OK\r\nConnection: keep-alive")
    with raw_server(fixed(kept)) as facts:  # HTTP/1.0 that asks to keep it: kept
        assert [r.content for r in fetch(facts["url"], count=2)] == [b"ok", b"ok"]
    assert facts["connections"] == 1


def test_two_thousand_interim_replies_then_the_reply() -> None:
    interim = b"HTTP/1.1 100 Continue\r\n\r\n" * 2000
    with raw_server(fixed(interim + PLAIN)) as facts:
        replies = fetch(facts["url"], count=2)
    assert [r.json() for r in replies] == [json.loads(JSON_BODY)] * 2
    assert facts["connections"] == 1


def test_a_reply_with_bare_line_feeds_is_read_as_h11_reads_it() -> None:
    import h11

    reply = b"HTTP/1.1 200 OK\nContent-Type: application/json\nContent-Length: %d\n\n%s" % (
        len(JSON_BODY),
        JSON_BODY,
    )
    reference = h11.Connection(h11.CLIENT)
    reference.send(h11.Request(method="POST", target="/", headers=[("Host", "x")]))
    reference.receive_data(reply)
    head, data = reference.next_event(), reference.next_event()
    assert (head.status_code, data.data) == (200, JSON_BODY)
    with raw_server(fixed(reply)) as facts:
        started = time.perf_counter()
        replies = fetch(facts["url"], count=2)
    assert time.perf_counter() - started < 2.0  # no wait for a read timeout
    assert [(r.status_code, r.content) for r in replies] == [(200, JSON_BODY)] * 2
    assert replies[0].headers["content-type"] == "application/json"


def test_a_host_that_does_not_resolve_is_named() -> None:
    with pytest.raises(httpx.ConnectError, match=r"^could not resolve host nosuch\.invalid: "):
        fetch("http://nosuch.invalid/v1/chat/completions")
    api = ChatCompletions("http://nosuch.invalid/v1", None, timeout=5.0)

    async def ask() -> None:
        try:
            await api.create({"model": "m", "messages": []})
        finally:
            await api.close()

    from assay.judge.http import CouldNotConnect

    with pytest.raises(CouldNotConnect, match="ConnectError: could not resolve host nosuch"):
        asyncio.run(ask())


def test_a_reason_phrase_that_is_not_utf8_is_read() -> None:
    """httpx-aiohttp had let it escape as a UnicodeEncodeError, past httpx's errors."""
    with raw_server(fixed(b"HTTP/1.1 200 \xff\xfe\r\nContent-Length: 2\r\n\r\nok")) as facts:
        (reply,) = fetch(facts["url"])
    assert (reply.status_code, reply.content) == (200, b"ok")


def test_a_user_and_password_in_the_url_are_sent_as_basic_authorization() -> None:
    seen: list[bytes] = []

    def answer(request: bytes) -> tuple[list[bytes], bool]:
        seen.append(request)
        return [PLAIN], False

    with raw_server(answer) as facts:
        url = facts["url"].replace("http://", "http://assay:s3cret@") + "/v1/x"
        (reply,) = fetch(url)
    assert reply.json() == json.loads(JSON_BODY)
    head = seen[0].split(b"\r\n\r\n")[0].split(b"\r\n")
    assert head[0] == b"POST /v1/x HTTP/1.1"
    assert b"Authorization: Basic YXNzYXk6czNjcmV0" in head  # base64 of assay:s3cret
