"""A reply body's content codings (``gzip``, ``deflate``) undone by bounded pieces, for
the readers that count a reply's decoded bytes as they are produced: `assay.core.http`'s
`read_bounded` (the judge, an embeddings endpoint) and `assay.inputs.target_replies`
(the targets of ``assay run``).

httpx's own decoders inflate each read whole: one 64 KiB read of gzipped zeros becomes
64 MiB before any count sees it. `decoded` never produces more than `PIECE_BYTES` at a
step, so a reader that stops at its limit has held at most the limit and one piece.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Mapping

__all__ = ["ACCEPTED_ENCODINGS", "PIECE_BYTES", "Inflater", "Undecodable", "decoded", "inflaters"]

#: most bytes one step of decompression produces: what is held past a limit at most
PIECE_BYTES = 2**16
#: the content codings a request accepts, the ones `decoded` undoes
ACCEPTED_ENCODINGS = "gzip, deflate"


class Undecodable(ValueError):
    """A body that its content coding cannot decode; the message names the coding."""


class Inflater:
    """One ``gzip`` or ``deflate`` coding undone by pieces of at most `PIECE_BYTES`
    (``deflate`` is zlib's format, or the raw one some servers send, as httpx reads it:
    its first two bytes tell which)."""

    def __init__(self, coding: str) -> None:
        self.coding = coding
        gzip = coding in ("gzip", "x-gzip")
        self._zlib = zlib.decompressobj(zlib.MAX_WBITS | 16 if gzip else zlib.MAX_WBITS)
        self._head: bytearray | None = None if gzip else bytearray()

    def feed(self, data: bytes) -> Iterator[bytes]:
        """What ``data`` decodes to, piece by piece: all of it (each ``decompress`` that
        fills less than a piece has used up its input and holds nothing back)."""
        try:
            while True:
                out = self._decompress(data)
                if out:
                    yield out
                data = self._zlib.unconsumed_tail
                if not data and len(out) < PIECE_BYTES:
                    return
        except zlib.error as exc:
            raise Undecodable(f"the reply's {self.coding} body cannot be decoded: {exc}") from None

    def _decompress(self, data: bytes) -> bytes:
        if self._head is not None:  # deflate, until its first two bytes tell which kind
            self._head += data
            if len(self._head) < 2:
                return b""
            data, self._head = bytes(self._head), None
            method, flags = data[0], data[1]
            if method & 0x0F != 8 or (method * 256 + flags) % 31:  # no zlib header: raw
                self._zlib = zlib.decompressobj(-zlib.MAX_WBITS)
        return self._zlib.decompress(data, PIECE_BYTES)


def inflaters(headers: Mapping[str, str]) -> list[Inflater]:
    """The codings a reply's ``Content-Encoding`` names, to undo last applied first; a
    coding not asked for is read as it is (as httpx does)."""
    codings = [c.strip().lower() for c in headers.get("content-encoding", "").split(",")]
    return [Inflater(c) for c in reversed(codings) if c in ("gzip", "x-gzip", "deflate")]


def decoded(data: bytes, undo: list[Inflater]) -> Iterator[bytes]:
    """What the raw bytes ``data`` decode to through ``undo`` (`inflaters`), in pieces of
    at most `PIECE_BYTES` (``data`` as it is when there is nothing to undo);
    `Undecodable` for a body its coding cannot decode."""
    if not undo:
        if data:
            yield data
        return
    first, rest = undo[0], undo[1:]
    for piece in first.feed(data):
        yield from decoded(piece, rest)
