"""Proxy variables: the judge's and ``assay run``'s clients send a URL that
``HTTP_PROXY`` covers through that proxy (a real forward proxy on 127.0.0.1 that records
what it forwards) and a URL that ``NO_PROXY`` exempts directly, over Assay's own
transports (`assay.core.http.client_over`)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from assay.core.http_aiohttp import AiohttpTransport
from assay.core.sample import Sample
from assay.inputs.targets import TargetSettings, call_target, parse_target
from assay.judge.http import ChatCompletions
from judge_server import JudgeServer
from raw_http import RequestReader, accept_in_background
from target_server import TargetServer


@pytest.fixture
def proxy(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict]:
    """A forward HTTP proxy, set as ``HTTP_PROXY`` (``NO_PROXY`` unset): each request
    (absolute URL) is sent on to its server with ``Connection: close`` and the whole reply
    returned; ``seen`` keeps the request lines."""
    facts: dict = {"seen": []}
    listener = socket.create_server(("127.0.0.1", 0))
    facts["url"] = f"http://127.0.0.1:{listener.getsockname()[1]}"

    def forward(conn: socket.socket) -> None:
        with conn:
            request = RequestReader(conn).next()
            if request is None:
                return
            head, _, body = request.partition(b"\r\n\r\n")
            lines = head.split(b"\r\n")
            method, target, version = lines[0].split(b" ")
            facts["seen"].append(lines[0].decode())
            url = urlsplit(target.decode())
            headers = [h for h in lines[1:] if not h.lower().startswith((b"connection", b"proxy-"))]
            path = (url.path or "/") + (f"?{url.query}" if url.query else "")
            onward = b"\r\n".join(
                [method + b" " + path.encode() + b" " + version, *headers, b"Connection: close"]
            )
            with socket.create_connection((url.hostname, url.port)) as upstream:
                upstream.sendall(onward + b"\r\n\r\n" + body)
                while chunk := upstream.recv(65536):
                    conn.sendall(chunk)

    accept_in_background(listener, forward)
    monkeypatch.setenv("HTTP_PROXY", facts["url"])
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    try:
        yield facts
    finally:
        listener.close()


def ask_judge(url: str) -> tuple[dict, object]:
    api = ChatCompletions(url, "key", timeout=10.0)
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}

    async def run() -> dict:
        try:
            return await api.create(body)
        finally:
            await api.close()

    transport = api._client._transport_for_url(api._client.base_url)
    return asyncio.run(run()), transport


def test_the_judge_goes_through_the_proxy_unless_no_proxy_exempts_it(
    proxy: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    with JudgeServer() as server:
        reply, transport = ask_judge(server.url)
        assert reply["choices"][0]["message"]["content"]
        assert not isinstance(transport, AiohttpTransport)
        assert proxy["seen"] == [f"POST {server.url.rstrip('/')}/chat/completions HTTP/1.1"]
        assert server.calls == 1
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        reply, transport = ask_judge(server.url)
        assert reply["choices"][0]["message"]["content"]
        assert isinstance(transport, AiohttpTransport)
        assert len(proxy["seen"]) == 1 and server.calls == 2  # the second went direct


def test_assay_runs_targets_go_through_the_proxy(
    proxy: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = TargetSettings(timeout=5.0, retries=0)
    with TargetServer() as server:
        target = parse_target(f"{server.url}/rag", request='{"question": "{query}"}',
                              response_path="answer")  # fmt: skip
        [done] = call_target([Sample(query="Where is Lyon?")], target, settings)
        assert done.response == "Answer: Where is Lyon?"
        assert proxy["seen"] == [f"POST {server.url}/rag HTTP/1.1"]
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        [direct] = call_target([Sample(query="Paris?")], target, settings)
        assert direct.response == "Answer: Paris?" and len(proxy["seen"]) == 1
