"""The judge's transport (`assay.core.http_aiohttp.AiohttpTransport`: aiohttp's C parser)
held differentially against h11, httpx's own HTTP/1.1 parser, on random and hostile reply
bytes: a raw server on 127.0.0.1 sends the bytes and closes the connection. Well-formed
replies are read exactly as h11 reads them (status, headers, body). Hostile ones (bad
chunk sizes and lengths, folded or malformed headers, odd status lines, stray line ends,
deleted spans, random bytes) are read alike or refused by both, except where the reply
shows one of the differences listed in `documented_difference`, and where both read a
reply they agree on its status and body. The transport raises nothing but httpx's
transport errors, and never waits for its timeout."""

from __future__ import annotations

import asyncio
import re
import socket
import threading
from collections.abc import Iterator
from typing import Any

import h11
import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assay.core.http_aiohttp import AiohttpTransport
from raw_http import RequestReader, accept_in_background

Outcome = tuple[str, Any, Any, Any]
REFUSED: Outcome = ("refused", None, None, None)


@pytest.fixture(scope="module")
def server() -> Iterator[dict[str, Any]]:
    """One listener; each connection gets ``facts["reply"]`` (as set when it arrives) for
    its first request, then is closed."""
    facts: dict[str, Any] = {"reply": b""}
    listener = socket.create_server(("127.0.0.1", 0))
    facts["url"] = f"http://127.0.0.1:{listener.getsockname()[1]}/v1/chat/completions"
    lock = threading.Lock()
    facts["lock"] = lock

    def serve(conn: socket.socket) -> None:
        with conn:
            if RequestReader(conn).next() is None:
                return
            try:
                conn.sendall(facts["reply"])
                conn.shutdown(socket.SHUT_WR)
                while conn.recv(65536):  # until the client closes: no RST over unread bytes
                    pass
            except OSError:
                return

    accept_in_background(listener, serve)
    yield facts
    listener.close()


def through_transport(url: str) -> Outcome:
    """What the judge's transport makes of the server's reply to one POST."""

    async def run() -> Outcome:
        async with httpx.AsyncClient(transport=AiohttpTransport(), timeout=5.0) as client:
            try:
                response = await client.post(url, content=b"{}")
            except httpx.TimeoutException as exc:
                raise AssertionError(f"the transport waited for its timeout: {exc!r}") from exc
            except httpx.TransportError:
                return REFUSED
            headers = [(k.lower(), v) for k, v in response.headers.raw]
            return ("ok", response.status_code, headers, response.content)

    return asyncio.run(run())


def through_h11(reply: bytes) -> Outcome:
    """What h11 makes of the same bytes, followed by the connection's end."""
    return h11_reading(reply)[0]


def h11_reading(reply: bytes) -> tuple[Outcome, bytes]:
    """h11's outcome, and the bytes that came after the reply it read."""
    conn = h11.Connection(h11.CLIENT)
    conn.send(
        h11.Request(method="POST", target="/", headers=[("Host", "x"), ("Content-Length", "2")])
    )
    conn.send(h11.Data(data=b"{}"))
    conn.send(h11.EndOfMessage())
    conn.receive_data(reply)
    conn.receive_data(b"")
    status, headers, body = None, None, b""
    try:
        while True:
            event = conn.next_event()
            if isinstance(event, h11.Response):
                status = event.status_code
                headers = [(k.lower(), v) for k, v in event.headers.raw_items()]
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                return ("ok", status, headers, body), conn.trailing_data[0]
            elif event is h11.NEED_DATA or isinstance(event, h11.ConnectionClosed):
                return REFUSED, b""  # the connection ended before the whole reply
    except h11.RemoteProtocolError:
        return REFUSED, b""


TOKEN = st.text("abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=12).filter(
    lambda name: (
        name.strip("-")
        and name not in ("content-length", "transfer-encoding", "connection", "content-encoding")
    )
)
VALUE = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=0, max_size=20).map(
    str.encode
)


@st.composite
def well_formed(draw: st.DrawFn) -> bytes:
    """A reply h11 and RFC 9112 accept: a status, headers, a body of Content-Length,
    chunked (with extensions and trailers) or to the connection's end; CRLF or bare LF."""
    status = draw(st.sampled_from([200, 201, 202, 400, 404, 429, 500, 503]))
    headers = [(n.encode(), v) for n, v in draw(st.lists(st.tuples(TOKEN, VALUE), max_size=4))]
    body = draw(st.binary(max_size=300))
    framing = draw(st.sampled_from(["length", "chunked", "eof"]))
    eol = draw(st.sampled_from([b"\r\n", b"\n"]))
    head = [b"HTTP/1.1 %d Reason" % status] + [n + b": " + v for n, v in headers]
    if framing == "length":
        head.append(b"Content-Length: %d" % len(body))
        payload = body
    elif framing == "chunked":
        head.append(b"Transfer-Encoding: chunked")
        sizes = draw(st.lists(st.integers(1, 50), max_size=8))
        pieces, start = [], 0
        for size in [*sizes, len(body)]:
            part = body[start : start + size]
            if part:
                extension = draw(st.sampled_from([b"", b";a=1", b";name"]))
                pieces.append(b"%x%s\r\n%s\r\n" % (len(part), extension, part))
            start += len(part)
        trailer = draw(st.sampled_from([b"", b"X-Trailer: 1\r\n"]))
        payload = b"".join(pieces) + b"0\r\n" + trailer + b"\r\n"
    else:
        payload = body
    return eol.join(head) + eol + eol + payload


HOSTILE = [
    b"-1",
    b"+0",
    b"0x5",
    b" 5",
    b"5 ",
    b"ffffffffffffffffffff",
    b"1_0",
    b"",
    b"\x00",
    b"Content-Length: -1",
    b"Content-Length: 1, 2",
    b"Content-Length: +3",
    b"Transfer-Encoding: chunked, gzip",
    b"Transfer-Encoding: identity",
    b" folded",
    b"Bad Header: x",
    b"NoColon",
    b"HTTP/1.1 99 Low",
    b"HTTP/1.1 1000 High",
    b"HTTP/2 200 OK",
    b"\r\n",
    b"\n",
    b"\r",
]


@st.composite
def hostile(draw: st.DrawFn) -> bytes:
    """A well-formed reply with bytes changed: a hostile piece (bad chunk sizes, bad
    lengths, folded or malformed headers, odd status lines, stray line ends) put in, a
    span deleted, or random bytes; or only random bytes."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.binary(max_size=200))
    reply = draw(well_formed())
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(reply)))
        kind = draw(st.sampled_from(["piece", "delete", "random"]))
        if kind == "piece":
            reply = reply[:at] + draw(st.sampled_from(HOSTILE)) + reply[at:]
        elif kind == "delete":
            reply = reply[:at] + reply[at + draw(st.integers(1, 8)) :]
        else:
            reply = reply[:at] + draw(st.binary(min_size=1, max_size=6)) + reply[at:]
    return reply


def head_and_rest(reply: bytes) -> tuple[bytes, bytes]:
    """A reply's head (up to its first empty line, CRLF or LF) and the bytes after it."""
    ends = [(i, n) for i, n in ((reply.find(b"\r\n\r\n"), 4), (reply.find(b"\n\n"), 2)) if i >= 0]
    if not ends:
        return reply, b""
    end, width = min(ends)
    return reply[:end], reply[end + width :]


def header_values(head: bytes, name: bytes) -> list[bytes]:
    return [
        value.strip().lower()
        for key, colon, value in (line.rstrip(b"\r").partition(b":") for line in head.split(b"\n"))
        if colon and key.lower() == name
    ]


_TOKEN = rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
_EXTENSION = rb'[ \t]*%s(?:[ \t]*=[ \t]*(?:%s|"[^"\r\n]*"))?[ \t]*' % (_TOKEN, _TOKEN)
#: what follows a chunk size's first ``;``: extensions, each a token, perhaps ``=`` a
#: token or a quoted string (RFC 9112, 7.1.1)
_EXTENSIONS = re.compile(_EXTENSION + rb"(?:;" + _EXTENSION + rb")*")
#: bytes a head may not hold (RFC 9112 and 9110: controls but tab, and DEL), a bare CR
_CONTROL = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]|\r(?!\n)")


def documented_difference(reply: bytes) -> str | None:
    """Which documented difference between aiohttp's parser and h11's ``reply`` shows,
    if any. Each is harmless to the judge, which reads only the status and the JSON
    body, and for most RFC 9112 lets a recipient choose:

    - ``before``: empty lines before the status line (aiohttp skips them, h11 refuses);
    - ``control``: control characters or a bare CR in the head or the trailers (aiohttp
      reads past them, or takes a bare CR for a line end, h11 refuses; RFC 9112, 2.2,
      lets a recipient refuse a bare CR or read it as a space);
    - ``name``: a header name that is not a token (``Transfer-Encoding folded``): aiohttp
      keeps it as a header of that name, h11 refuses;
    - ``fold``: a header line folded onto the next (obs-fold): the two join it with a
      tab or a space (RFC 9112, 5.2: a space); the status and the body are the same;
    - ``coding``: a Transfer-Encoding other than ``chunked`` alone: aiohttp reads the
      body to the connection's end, as RFC 9112, 6.3, says for a reply whose final
      coding is not chunked; h11 refuses every coding but chunked;
    - ``extension``: a chunk extension that is not a token, perhaps ``=`` a token or a
      quoted string (``4;``, ``1;n\\x84``; RFC 9112, 7.1.1): one of the two refuses it;
    - ``chunk-lf``: a chunk's size line or data ended by a bare LF (aiohttp reads it,
      h11 refuses);
    - ``trailers``: trailer lines that are not header lines, or a connection that ends
      inside them: aiohttp returns the whole body, h11 refuses;
    - ``after``: bytes after the whole reply that are not a reply: aiohttp parses them at
      once and refuses the exchange; h11 returns the reply and would refuse the
      connection's next one.
    """
    head, rest = head_and_rest(reply)
    if reply[:1] in (b"\r", b"\n"):
        return "before"
    if _CONTROL.search(head):
        return "control"
    lines = head.split(b"\n")[1:]
    if any(line[:1] in (b" ", b"\t") for line in lines):
        return "fold"
    if any(not re.fullmatch(_TOKEN, line.partition(b":")[0]) for line in lines):
        return "name"
    codings = header_values(head, b"transfer-encoding")
    if codings and codings != [b"chunked"]:
        return "coding"
    found = chunked_difference(rest) if codings else None
    if found is None and h11_reading(reply)[1]:
        return "after"
    return found


def chunked_difference(body: bytes) -> str | None:
    """`documented_difference` of a chunked body, read as far as its chunks go."""
    at = 0
    while True:
        end = body.find(b"\n", at)
        if end < 0:
            return None
        if body[end - 1 : end] != b"\r":
            return "chunk-lf"
        size, semicolon, extensions = body[at : end - 1].partition(b";")
        if semicolon and not _EXTENSIONS.fullmatch(extensions):
            return "extension"
        try:
            length = int(size, 16)
        except ValueError:
            return None
        if length == 0:
            trailers = body[end + 1 :]
            if _CONTROL.search(trailers):
                return "control"
            lines = trailers.replace(b"\r\n", b"\n").split(b"\n")
            whole = trailers.endswith((b"\r\n\r\n", b"\n\n")) or trailers in (b"\r\n", b"\n")
            fields = [line for line in lines if line]
            if not whole or any(
                not re.fullmatch(_TOKEN, line.partition(b":")[0]) or b":" not in line
                for line in fields
            ):
                return "trailers"
            return None
        after = end + 1 + length
        if body[after : after + 2] == b"\r\n":
            at = after + 2
        elif body[after : after + 1] == b"\n":
            return "chunk-lf"
        else:
            return None


def outcome(server: dict[str, Any], reply: bytes) -> Outcome:
    """What the transport makes of ``reply`` from the server."""
    with server["lock"]:
        server["reply"] = reply
        return through_transport(server["url"])


def check(server: dict[str, Any], reply: bytes) -> None:
    """The transport and h11 agree on ``reply``, or differ where the reply shows a
    documented difference (`documented_difference`); where both read it, they agree
    on the status and the body."""
    ours, reference = outcome(server, reply), through_h11(reply)
    if ours == reference:
        return
    why = documented_difference(reply)
    assert why is not None, (reply, ours, reference)
    if ours[0] == "ok" and reference[0] == "ok":
        assert (why, ours[1], ours[3]) == ("fold", reference[1], reference[3])


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(reply=well_formed())
def test_well_formed_replies_are_read_as_h11_reads_them(
    server: dict[str, Any], reply: bytes
) -> None:
    check(server, reply)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(reply=hostile())
def test_hostile_replies_are_read_as_h11_reads_them_or_refused_by_both(
    server: dict[str, Any], reply: bytes
) -> None:
    check(server, reply)
