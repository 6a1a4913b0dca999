"""Generated replies (JSON of every type, server-sent event lines, line ends, codings,
gzip that inflates past the limits, wrong lengths, random cuts) served from 127.0.0.1 to
``assay run``'s targets: no exception escapes a call (each sample is answered or is its
own error with a reason), no call hangs (none times out: every reply ends), and nothing
read passes the limits, which are made small here so that the generated bodies cross
them. Well-formed streams are held to a reference: their text is the events' contents
joined, however the bytes are cut, coded or ended."""

from __future__ import annotations

import functools
import json
import tracemalloc
import zlib
from collections.abc import Iterator
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assay.core.sample import Sample
from assay.inputs import target_replies
from assay.inputs.targets import TargetSettings, call_target, parse_target
from target_server import TargetServer

#: the limits while fuzzing: small, so that generated bodies cross them
LIMITS = {"MAX_REPLY_BYTES": 4096, "MAX_STREAM_LINE_BYTES": 512, "MAX_STREAM_BYTES": 8192}
#: most calls an example makes (one run of calls: its set-up, about 0.1 s, is shared)
MAX_STEPS = 8
CALLS = TargetSettings(timeout=5.0, concurrency=1, retries=0)
FUZZ = settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

_KEYS = st.sampled_from(
    ["choices", "delta", "content", "message", "usage", "error", "answer", "sources", "0"]
)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(_KEYS | st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=12,
)
chat_chunks = st.one_of(
    json_values,
    st.builds(lambda c: {"choices": [{"delta": {"content": c}}]}, json_values | st.text()),
    st.builds(lambda c: {"choices": c}, json_values),
    st.builds(lambda c: {"choices": [{"message": {"content": c}}]}, json_values | st.text()),
    st.builds(lambda u: {"choices": [], "usage": u}, json_values),
    st.builds(lambda e: {"error": e}, json_values),
)
json_replies = st.one_of(
    json_values,
    st.builds(lambda a, s: {"answer": a, "sources": s}, json_values | st.text(), json_values),
)
line_ends = st.sampled_from([b"\n", b"\r\n", b"\r", b"\n\n", b"\r\n\r\n"])


def _json(value: Any, ascii_only: bool) -> bytes:
    return json.dumps(value, ensure_ascii=ascii_only).encode(errors="surrogatepass")


json_bodies = st.one_of(
    *[st.builds(_json, json_replies, st.booleans())] * 3, st.binary(max_size=40)
)


@st.composite
def sse_bodies(draw: st.DrawFn) -> bytes:
    """An event stream: data lines of generated JSON or garbage, comments, other fields,
    any line ends, maybe ``[DONE]``, maybe a line past the line limit."""
    lines = []
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["json", "json", "garbage", "bytes", "comment", "field"]))
        if kind == "json":
            data = _json(draw(chat_chunks), draw(st.booleans()))
            lines.append(draw(st.sampled_from([b"data: ", b"data:", b"data:  "])) + data)
        elif kind == "garbage":
            lines.append(b"data: " + draw(st.text(max_size=20)).encode(errors="surrogatepass"))
        elif kind == "bytes":
            lines.append(draw(st.binary(max_size=30)))
        elif kind == "comment":
            lines.append(b": " + b"x" * draw(st.sampled_from([0, 10, 600, 9000])))
        else:
            lines.append(b"event: message")
    if draw(st.booleans()):
        lines.append(b"data: [DONE]")
    return b"".join(line + draw(line_ends) for line in lines)


@functools.cache
def _gzip_of_zeros(mebibytes: int) -> bytes:
    """``mebibytes`` MiB of zeros (0: none, 9000: 9,000 bytes) in gzip: 64 MiB is 65 KB."""
    size = mebibytes * 2**20 if mebibytes in (0, 64) else mebibytes
    packer = zlib.compressobj(6, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    block = bytes(min(size, 2**20))
    packed = [packer.compress(block) for _ in range(size // max(len(block), 1))]
    return b"".join(packed) + packer.flush()


@st.composite
def served(draw: st.DrawFn, body: st.SearchStrategy[bytes], content_type: str) -> tuple:
    """A ``("reply", headers, chunks)`` step of the server's script: ``body`` coded as
    drawn (none, gzip, zlib or raw deflate, a coding that lies, or a gzip of zeros that
    inflates past the limits), with a right, wrong or no length, cut at random points."""
    raw = draw(body)
    coding = draw(
        st.sampled_from(["identity"] * 4 + ["gzip", "deflate", "raw", "lie", "bomb", "br"])
    )
    headers = {"content-type": draw(st.sampled_from([content_type] * 4 + ["text/plain", ""]))}
    if coding == "bomb":
        raw = draw(st.sampled_from([_gzip_of_zeros(0), _gzip_of_zeros(9000), _gzip_of_zeros(64)]))
        headers["content-encoding"] = "gzip"
    elif coding == "gzip":
        packer = zlib.compressobj(6, zlib.DEFLATED, zlib.MAX_WBITS | 16)
        raw = packer.compress(raw) + packer.flush()
        headers["content-encoding"] = "gzip"
    elif coding == "deflate":
        raw = zlib.compress(raw)
        headers["content-encoding"] = "deflate"
    elif coding == "raw":
        packer = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
        raw = packer.compress(raw) + packer.flush()
        headers["content-encoding"] = "deflate"
    elif coding in ("lie", "br"):
        headers["content-encoding"] = "gzip" if coding == "lie" else "br"
    length = draw(st.sampled_from(["none", "right", "short", "long"]))
    if length != "none":
        shift = {"right": 0, "short": -1, "long": 7}[length]
        headers["content-length"] = str(max(0, len(raw) + shift))
    cuts = sorted(draw(st.lists(st.integers(0, len(raw)), max_size=4)))
    chunks = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
    return ("reply", headers, [c for c in chunks if c])


@pytest.fixture(scope="module")
def server() -> Iterator[TargetServer]:
    with TargetServer() as srv:
        yield srv


def _check(done: Sample) -> None:
    """Each call ends answered or as its own error with a reason; none hangs; what is
    read stays within the limits."""
    call = done.target_call
    assert call is not None
    assert call.status in ("ok", "error"), call  # never a timeout: every reply ends
    if call.status == "ok":
        assert isinstance(done.response, str)
        assert len(done.response.encode(errors="surrogatepass")) <= LIMITS["MAX_REPLY_BYTES"]
    else:
        assert isinstance(call.reason, str) and call.reason.strip()
        assert done.response is None


def _answered(server: TargetServer, target: Any, steps: list[tuple]) -> list[Sample]:
    """One sample a step, called in order (one call at a time) under the small limits."""
    server.script = list(steps)
    samples = [Sample(id=str(i), query="q") for i in range(len(steps))]
    tracemalloc.start()
    try:
        with mock.patch.multiple(target_replies, **LIMITS):
            done = call_target(samples, target, CALLS)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # memory stays bounded: the replies, a 64 MiB gzip bomb among them, are read up to
    # the 4-8 KiB limits (a run of calls itself allocates about 1.5 MiB at its peak)
    assert peak < 8 * 2**20
    # a length shorter than the body leaves the connection open for the next call,
    # which then fails on it (the server closes after each reply): a step may go unused
    return done


@FUZZ
@given(steps=st.lists(served(sse_bodies(), "text/event-stream"), min_size=1, max_size=MAX_STEPS))
def test_an_openai_target_survives_any_streamed_reply(
    server: TargetServer, steps: list[tuple]
) -> None:
    target = parse_target(f"openai:{server.url}/v1", model="m")
    for done in _answered(server, target, steps):
        _check(done)


@FUZZ
@given(
    steps=st.lists(served(json_bodies, "application/json"), min_size=1, max_size=MAX_STEPS),
    paths=st.sampled_from(
        [
            ("answer", None),
            ("to_string(length(answer))", "sources"),
            ("answer || 'none'", "sort(sources)"),
            ("join(', ', sources)", "sources[*].text"),
        ]
    ),
)
def test_a_json_target_survives_any_reply(
    server: TargetServer, steps: list[tuple], paths: tuple[str, str | None]
) -> None:
    target = parse_target(f"{server.url}/rag", response_path=paths[0], contexts_path=paths[1])
    for done in _answered(server, target, steps):
        _check(done)
        if done.target_call.status == "ok" and paths[1] is not None:
            assert isinstance(done.contexts, list)
            assert all(isinstance(c, str) for c in done.contexts)


@st.composite
def well_formed_streams(draw: st.DrawFn) -> tuple[tuple, str]:
    """A well-formed stream of text deltas, its line ends, coding and cuts drawn (maybe
    ``[DONE]`` and an event after it, which does not count), and the text it holds."""
    texts = draw(st.lists(st.text(max_size=30), max_size=8))
    ascii_only = draw(st.booleans())
    ends = draw(st.lists(line_ends, min_size=1, max_size=3))
    events = [{"choices": [{"delta": {"content": t}}]} for t in texts]
    lines = [b"data: " + _json(e, ascii_only) for e in events]
    if draw(st.booleans()):
        lines += [b"data: [DONE]", b"data: " + _json(events[0] if events else {}, True)]
    body = b"".join(line + ends[i % len(ends)] for i, line in enumerate(lines))
    headers = {"content-type": "text/event-stream"}
    coding = draw(st.sampled_from([None, "gzip", "deflate", "raw deflate"]))
    if coding is not None:
        wbits = {"gzip": zlib.MAX_WBITS | 16, "deflate": zlib.MAX_WBITS}.get(coding)
        packer = zlib.compressobj(6, zlib.DEFLATED, wbits or -zlib.MAX_WBITS)
        body = packer.compress(body) + packer.flush()
        headers["content-encoding"] = coding.removeprefix("raw ")
    points = sorted(set(draw(st.lists(st.integers(0, len(body)), max_size=6))))
    chunks = [body[a:b] for a, b in zip([0, *points], [*points, len(body)], strict=True)]
    return ("reply", headers, [c for c in chunks if c]), "".join(texts)


@FUZZ
@given(streams=st.lists(well_formed_streams(), min_size=1, max_size=MAX_STEPS))
def test_a_well_formed_stream_reads_as_its_contents_joined(
    server: TargetServer, streams: list[tuple[tuple, str]]
) -> None:
    """The reference: the text of a well-formed stream is its contents joined, whatever
    its line ends, coding and cuts."""
    target = parse_target(f"openai:{server.url}/v1", model="m")
    server.script = [step for step, _ in streams]
    samples = [Sample(id=str(i), query="q") for i in range(len(streams))]
    done = call_target(samples, target, CALLS)
    assert [(d.target_call.status, d.response) for d in done] == [
        ("ok", text) for _, text in streams
    ]
