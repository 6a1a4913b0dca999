"""Connections that know when their bytes arrived (`assay.core.http_timing`): a target's
duration and first-token time are the network's even while the event loop is busy."""

from __future__ import annotations

import asyncio
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from assay.core.http_pool import linear_transport
from assay.core.http_timing import ReceiveTimestampBackend, TimedStream, TimedTLSStream, call_times
from assay.core.sample import Sample
from assay.inputs.targets import TargetSettings, call_target, parse_target
from raw_http import RequestReader, accept_in_background, self_signed
from target_server import TargetServer

LIMITS = httpx.Limits(max_connections=4, max_keepalive_connections=4)


@pytest.fixture
def server() -> Iterator[TargetServer]:
    with TargetServer() as srv:
        yield srv


async def _busy_loop(after: float, seconds: float) -> None:
    """Holds the event loop (no await) for ``seconds``, ``after`` seconds from now."""
    await asyncio.sleep(after)
    time.sleep(seconds)


def _call_while_busy(
    target: Any, timed: bool, held: tuple[float, float] = (0.05, 0.4)
) -> tuple[Any, float]:
    """``target`` called for one sample while the loop is held (from ``held[0]`` seconds,
    for ``held[1]``); its reply and the seconds the call took by the loop's clock."""

    async def run() -> tuple[Any, float]:
        transport = linear_transport(LIMITS, timed=timed)
        async with httpx.AsyncClient(transport=transport, timeout=10) as client:
            blocker = asyncio.create_task(_busy_loop(*held))
            started = time.perf_counter()
            reply = await target.call(Sample(query="q"), client)
            elapsed = time.perf_counter() - started
            await blocker
            return reply, elapsed

    return asyncio.run(run())


def test_an_http_targets_duration_is_the_networks_while_the_loop_is_held(
    server: TargetServer,
) -> None:
    # the server answers after 0.15 s; the loop cannot read the reply before 0.45 s
    server.script = [("hang", 0.15)]
    target = parse_target(server.url + "/rag", response_path="to_string(length(@))")
    reply, elapsed = _call_while_busy(target, timed=True)
    assert elapsed >= 0.44
    assert 0.15 <= reply.duration < 0.25
    # an untimed connection knows no network time: the call's own clock stands
    server.script = [("hang", 0.15)]
    untimed, _ = _call_while_busy(target, timed=False)
    assert untimed.duration is None


def test_a_streamed_first_token_and_duration_are_the_networks(server: TargetServer) -> None:
    server.first_token_delay, server.rest_delay = 0.1, 0.15
    target = parse_target(f"openai:{server.url}/v1", model="m")
    # the first token arrives at 0.1 s while the loop is held (0.05 to 0.18 s); the rest
    # at 0.25 s, read at once
    reply, elapsed = _call_while_busy(target, timed=True, held=(0.05, 0.13))
    assert reply.response == "Answer: q"
    assert 0.1 <= reply.first_token_time < 0.15
    assert 0.25 <= reply.duration < 0.3
    # the loop held from 0.15 to 0.55 s: the rest (0.25 s) waits in the kernel; the
    # duration is its arrival
    reply, elapsed = _call_while_busy(target, timed=True, held=(0.15, 0.4))
    assert elapsed >= 0.54
    assert 0.1 <= reply.first_token_time < 0.15
    assert 0.25 <= reply.duration < 0.3


def test_the_run_records_the_network_duration_of_each_call(server: TargetServer) -> None:
    server.script = [("hang", 0.1)]
    target = parse_target(server.url + "/rag", response_path="answer || 'none'")
    [done] = call_target([Sample(query="q")], target, TargetSettings(retries=0))
    assert done.target_call.status == "ok"
    assert 0.1 <= done.duration < 0.2


def test_a_kept_alive_connection_times_each_request_from_its_own_write(
    server: TargetServer,
) -> None:
    async def run() -> list[tuple[int, int]]:
        transport = linear_transport(LIMITS, timed=True)
        times = []
        async with httpx.AsyncClient(transport=transport) as client:
            for delay in (0.05, 0.15):
                server.script = [("hang", delay)]
                response = await client.post(server.url + "/rag", json={"question": "q"})
                assert isinstance(response.extensions["network_stream"], TimedStream)
                times.append(call_times(response))
        return times

    first, second = asyncio.run(run())
    assert 0.05 <= (first[1] - first[0]) / 1e9 < 0.1
    assert second[0] > first[1]  # the second request began after the first reply
    assert 0.15 <= (second[1] - second[0]) / 1e9 < 0.2


def test_connection_faults_are_httpxs_own_errors(server: TargetServer) -> None:
    async def run() -> None:
        transport = httpx.AsyncHTTPTransport()
        transport._pool._network_backend = ReceiveTimestampBackend()
        async with httpx.AsyncClient(transport=transport) as client:
            with pytest.raises(httpx.ConnectError):
                await client.get("http://127.0.0.1:1/")  # nothing listens on port 1
            server.script = [("hang", 1.0)]
            with pytest.raises(httpx.ReadTimeout):
                await client.post(server.url + "/rag", json={}, timeout=0.2)

    asyncio.run(run())


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key."""
    return self_signed(tmp_path_factory.mktemp("tls"))


class _SlowHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        return

    def do_GET(self) -> None:
        time.sleep(0.1)
        body = (
            b"x" * 40_000
        )  # three TLS records: within the socket buffers, so it arrives while the loop is held
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_https_through_the_timed_stream(tls_files: tuple[Path, Path]) -> None:
    cert, key = tls_files
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(cert, key)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _SlowHandler)
    httpd.daemon_threads = True
    httpd.socket = server_context.wrap_socket(httpd.socket, server_side=True)
    threading.Thread(
        target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    ).start()
    url = f"https://127.0.0.1:{httpd.server_address[1]}/"

    async def get(trusted: bool) -> tuple[httpx.Response, float]:
        context = ssl.create_default_context(cafile=str(cert) if trusted else None)
        transport = httpx.AsyncHTTPTransport(verify=context)
        transport._pool._network_backend = ReceiveTimestampBackend()
        async with httpx.AsyncClient(transport=transport) as client:
            blocker = asyncio.create_task(_busy_loop(0.02, 0.4))
            response = await client.get(url)
            await blocker
            return response, call_times(response)

    try:
        response, (sent, received) = asyncio.run(get(trusted=True))
        assert response.content == b"x" * 40_000
        stream = response.extensions["network_stream"]
        assert isinstance(stream, TimedTLSStream)
        assert stream.get_extra_info("ssl_object").version().startswith("TLS")
        assert 0.1 <= (received - sent) / 1e9 < 0.3
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            asyncio.run(get(trusted=False))
    finally:
        httpd.shutdown()
        httpd.server_close()


def _tls_server(
    tls_files: tuple[Path, Path], reply: bytes, close_notify: bool
) -> tuple[socket.socket, int]:
    """A TLS server on 127.0.0.1 that reads one request and answers ``reply``, then
    closes the connection (with or without ``close_notify``); its listener and port."""
    cert, key = tls_files
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    listener = socket.create_server(("127.0.0.1", 0))

    def answer(conn: socket.socket) -> None:
        with conn:
            try:
                tls = context.wrap_socket(conn, server_side=True)
                RequestReader(tls).next()
                tls.sendall(reply)
                if close_notify:
                    tls.unwrap()
                # else the socket closes with no TLS alert: the body ends at the TCP FIN
            except (OSError, ssl.SSLError):
                return

    accept_in_background(listener, answer)
    return listener, listener.getsockname()[1]


def test_a_body_ended_by_a_tls_close_without_close_notify_is_read_as_httpcore_reads_it(
    tls_files: tuple[Path, Path],
) -> None:
    """A reply without a length ends when the connection does; a server that closes it
    without ``close_notify`` (UNEXPECTED_EOF_WHILE_READING) still sent the whole body,
    as httpcore's own streams read it. A body shorter than its declared length stays
    httpx's error on both."""
    body = b"the whole body, " * 1000
    cases = {
        "no length": (b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + body, body),
        "short": (b"HTTP/1.1 200 OK\r\nContent-Length: 99999\r\n\r\n" + body, None),
    }

    async def get(url: str, timed: bool) -> bytes:
        context = ssl.create_default_context(cafile=str(tls_files[0]))
        transport = httpx.AsyncHTTPTransport(verify=context)
        if timed:
            transport._pool._network_backend = ReceiveTimestampBackend()
        async with httpx.AsyncClient(transport=transport) as client:
            response = await client.get(url)
            if timed:
                assert isinstance(response.extensions["network_stream"], TimedTLSStream)
            return response.content

    for name, (reply, expected) in cases.items():
        for close_notify in (False, True):
            listener, port = _tls_server(tls_files, reply, close_notify)
            url = f"https://127.0.0.1:{port}/"
            try:
                for timed in (False, True):  # httpcore's streams, then the timed ones
                    if expected is None:
                        with pytest.raises(
                            httpx.RemoteProtocolError,
                            match=r"without sending complete message body \(received 16000 bytes",
                        ):
                            asyncio.run(get(url, timed))
                    else:
                        assert asyncio.run(get(url, timed)) == expected, (name, timed)
            finally:
                listener.close()


def test_a_tls_requests_duration_starts_at_its_first_write_not_the_handshake(
    tls_files: tuple[Path, Path],
) -> None:
    """On TLS 1.3 the client's last handshake write (its Finished) comes before any
    request; a request written 0.5 s after the handshake, answered at once, is timed
    from its own write: under 0.1 s, not 0.5 s."""
    listener, port = _tls_server(
        tls_files, b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", close_notify=False
    )

    async def run() -> tuple[str, int, int]:
        context = ssl.create_default_context(cafile=str(tls_files[0]))
        raw = await ReceiveTimestampBackend().connect_tcp("127.0.0.1", port, timeout=5)
        tls = await raw.start_tls(context, server_hostname="127.0.0.1", timeout=5)
        await asyncio.sleep(0.5)
        await tls.write(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        read = b""
        while not read.endswith(b"hello"):
            read += await tls.read(65536, timeout=5)
        version = tls.get_extra_info("ssl_object").version()
        assert isinstance(tls, TimedTLSStream)
        await tls.aclose()
        return version, tls.sent_ns, tls.received_ns

    try:
        version, sent, received = asyncio.run(run())
    finally:
        listener.close()
    assert version == "TLSv1.3"
    assert 0 <= (received - sent) / 1e9 < 0.1
