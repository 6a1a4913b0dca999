"""Dotted paths naming the fields of nested JSON.

A field is named by the keys from the document root joined with ``.``: ``address.city``;
elements of an array of objects by their 0-based index: ``items.0.sku``. A key that itself
contains ``.``, ``\\`` or ``*`` is written with a backslash escape (``"a.b"`` -> ``a\\.b``).
A path that is not an object (a scalar or an array of scalars at the root) is ``$``.

In a field-strategy config, a segment ``*`` matches any one key or index:
``items.*.description`` names the ``description`` of every element of ``items``; a ``*``
inside a segment matches within it (``code_*`` names ``code_0``, ``code_12``...).
"""

from __future__ import annotations

import re

__all__ = ["ROOT", "WILDCARD", "PathPattern", "escape_segment", "join", "parse_path"]

ROOT = "$"
WILDCARD = "*"
_SEGMENT_RE = r"(?:[^.\\]|\\.)+"


def escape_segment(key: str) -> str:
    """One key as a path segment (escapes ``\\``, ``.`` and ``*``)."""
    if "." not in key and "\\" not in key and "*" not in key:
        return key
    return key.replace("\\", "\\\\").replace(".", "\\.").replace("*", "\\*")


def join(parent: str, key: str | int) -> str:
    """The path of ``key`` under ``parent`` (``""`` is the root)."""
    segment = str(key) if isinstance(key, int) else escape_segment(key)
    return segment if not parent else f"{parent}.{segment}"


def parse_path(text: str) -> list[str]:
    """Segments of a path as written in a config (escapes kept). Raises ValueError when
    the path is empty or has an empty segment (``a..b``, ``.a``, ``a.``); a key of spaces
    is a key like any other (JSON allows it)."""
    if not isinstance(text, str) or not text:
        raise ValueError("a field path must be a non-empty string")
    parts: list[str] = []
    current: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text):
            current.append(text[i : i + 2])
            i += 2
            continue
        if char == ".":
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
        i += 1
    parts.append("".join(current))
    if any(p == "" for p in parts):
        raise ValueError(f"field path {text!r} has an empty segment")
    return parts


class PathPattern:
    """A config path, possibly with ``*`` wildcards, matched against field paths.

    A segment that is ``*`` matches any one key or index; a ``*`` inside a segment matches
    any run of characters within that segment (``code_*`` matches ``code_0``, not
    ``code_0.x``). ``\\*`` is a literal star.
    """

    __slots__ = ("_regex", "segments", "text", "wildcards")

    def __init__(self, text: str) -> None:
        self.segments = parse_path(text)
        self.text = ".".join(self.segments)
        pieces = []
        self.wildcards = 0
        for segment in self.segments:
            if segment == WILDCARD:
                pieces.append(_SEGMENT_RE)
                self.wildcards += 1
                continue
            parts, i = [], 0
            while i < len(segment):
                if segment[i] == "\\":
                    parts.append(re.escape(segment[i : i + 2]))
                    i += 2
                    continue
                if segment[i] == WILDCARD:
                    parts.append(r"(?:[^.\\]|\\.)*")
                    self.wildcards += 1
                else:
                    parts.append(re.escape(segment[i]))
                i += 1
            pieces.append("".join(parts))
        self._regex = re.compile(r"\.".join(pieces)) if self.wildcards else None

    def matches(self, path: str) -> bool:
        if self._regex is None:
            return path == self.text
        return self._regex.fullmatch(path) is not None

    def __repr__(self) -> str:
        return f"PathPattern({self.text!r})"
