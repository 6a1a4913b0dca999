"""A team's documents as chunks: files (.txt, .md, .html, .pdf) or a JSONL of ready chunks.

- **Finding files**: a folder (searched recursively for the suffixes of `READERS`), a glob
  (``docs/**/*.md``) or one file; several may be given.
- **Text**: ``.txt`` and ``.md`` as UTF-8 text; ``.html``/``.htm`` through
  beautifulsoup4 (the standard library's ``html.parser``; the head, scripts, styles,
  navigation, headers and footers dropped; ``h1``..``h6`` become Markdown headings, block elements
  paragraphs); ``.pdf`` through pypdf (each page's text, its lines joined, words hyphenated
  at a line end joined again). A JSONL of chunks has one object a line with ``text``
  (required) and optional ``id``, ``source`` and ``heading``.
- **Chunking** (`chunk_text`): semantic-text-splitter's ``MarkdownSplitter`` cuts at the
  highest structural level that fits — headings, then paragraphs, then sentences, then
  words — into chunks of at most ``max_tokens`` tokens of OpenAI's ``cl100k_base``
  encoding (the encoding Assay counts tokens with, `assay.text.tokens`). Each chunk keeps
  its heading path (``Install > Linux``), the headings above where it starts.
- **Failures**: a file that cannot be read (missing, not UTF-8, an encrypted or broken PDF,
  a JSONL line that is not an object with a text) is named with its reason in the
  returned problems, and the other files go on.

pypdf, beautifulsoup4 and semantic-text-splitter come with the ``generate`` extra.
"""

from __future__ import annotations

import glob
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from assay.core.extras import MissingExtra, installed

__all__ = [
    "READERS",
    "Chunk",
    "Unreadable",
    "chunk_record",
    "chunk_text",
    "find_documents",
    "html_text",
    "pdf_text",
    "read_chunks",
]


@dataclass(frozen=True)
class Chunk:
    """One piece of a document that questions are generated from.

    Attributes:
        id: ``<source>#<n>``, n counting the file's chunks from 1 (a JSONL chunk's own
            ``id`` when it has one).
        source: the file, relative to the folder it was found in (as given otherwise).
        heading: the heading path above the chunk (``Install > Linux``; "" for none).
        text: the chunk's text (Markdown for .md and .html files).
    """

    id: str
    source: str
    heading: str
    text: str


@dataclass(frozen=True)
class Unreadable:
    """A file (or a JSONL line: ``file:line``) that was left out, and why."""

    path: str
    reason: str


_EXTRA = "generate"
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$", re.M)
_DROPPED_TAGS = (
    "head",
    "script",
    "style",
    "noscript",
    "nav",
    "header",
    "footer",
    "template",
    "svg",
)
_BLOCK_TAGS = (
    "p", "div", "li", "ul", "ol", "tr", "table", "pre", "blockquote", "section", "article",
    "dd", "dt", "br", "main", "aside", "figure", "figcaption", "td", "th",
)  # fmt: skip


def _require(module: str, purpose: str) -> None:
    if not installed(module):
        raise MissingExtra(purpose, _EXTRA)


def html_text(markup: str) -> str:
    """The readable text of an HTML page as Markdown-like text: headings as ``#`` lines,
    block elements as paragraphs, inline elements joined into their sentence."""
    _require("bs4", "reading HTML documents")
    from bs4 import BeautifulSoup, NavigableString

    soup = BeautifulSoup(markup, "html.parser")
    for tag in soup.find_all(_DROPPED_TAGS):
        tag.decompose()
    for level in range(1, 7):
        for tag in soup.find_all(f"h{level}"):
            title = " ".join(tag.get_text(" ").split())
            tag.replace_with(NavigableString(f"\n\n{'#' * level} {title}\n\n"))
    for tag in soup.find_all(_BLOCK_TAGS):
        tag.insert_before(NavigableString("\n\n"))
        tag.insert_after(NavigableString("\n\n"))
    paragraphs = re.split(r"\n\s*\n", soup.get_text(""))
    return "\n\n".join(" ".join(p.split()) for p in paragraphs if p.strip())


def pdf_text(path: Path) -> str:
    """The text of a PDF's pages, one paragraph a page (lines joined; a word hyphenated
    across a line end joined again).

    Raises:
        ValueError: the PDF is encrypted, or no page has extractable text (a scan).
    """
    _require("pypdf", "reading PDF documents")
    from pypdf import PdfReader

    reader = PdfReader(path)
    if reader.is_encrypted:
        raise ValueError("the PDF is encrypted")
    pages = []
    for page in reader.pages:
        text = page.extract_text() or ""
        text = re.sub(r"(\w)-\n(\w)", r"\1\2", text)
        joined = " ".join(text.split())
        if joined:
            pages.append(joined)
    if not pages:
        raise ValueError("no page has extractable text (a scanned PDF needs OCR first)")
    return "\n\n".join(pages)


def _plain(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text (byte {exc.start}: {exc.reason})") from None


def _html(path: Path) -> str:
    return html_text(_plain(path))


#: file suffix -> the function that reads its text
READERS: dict[str, Callable[[Path], str]] = {
    ".txt": _plain,
    ".md": _plain,
    ".markdown": _plain,
    ".html": _html,
    ".htm": _html,
    ".pdf": pdf_text,
}


def find_documents(specs: str | Path | Sequence[str | Path]) -> list[tuple[Path, str]]:
    """The files named by ``specs`` (folders, globs, files) with the name each is known
    by (relative to its folder for a folder's files), in a stable order; a spec that
    matches nothing is an error naming it.

    Raises:
        FileNotFoundError: a spec that is no file, no folder and matches no file.
    """
    items = [specs] if isinstance(specs, str | Path) else list(specs)
    found: dict[Path, str] = {}
    for spec in items:
        path = Path(spec)
        if path.is_dir():
            for file in sorted(path.rglob("*")):
                if file.is_file() and file.suffix.lower() in READERS:
                    found.setdefault(file, file.relative_to(path).as_posix())
        elif path.is_file():
            found.setdefault(path, path.as_posix())
        else:
            matches = sorted(Path(m) for m in glob.glob(str(spec), recursive=True))
            files = [m for m in matches if m.is_file()]
            if not files:
                raise FileNotFoundError(f"{spec}: no such file, folder or matching glob")
            for file in files:
                found.setdefault(file, file.as_posix())
    return list(found.items())


def _heading_paths(text: str) -> list[tuple[int, str]]:
    """(offset, heading path) at each Markdown heading of ``text``."""
    stack: list[tuple[int, str]] = []
    out = []
    for match in _HEADING.finditer(text):
        level = len(match.group(1))
        stack = [(lv, title) for lv, title in stack if lv < level]
        stack.append((level, match.group(2).strip()))
        out.append((match.start(), " > ".join(title for _, title in stack)))
    return out


def chunk_text(text: str, max_tokens: int = 300) -> list[tuple[str, str]]:
    """``text`` cut into (heading path, chunk) pairs of at most ``max_tokens`` tokens
    (see the module doc); blank chunks are left out.

    Raises:
        MissingExtra: semantic-text-splitter is not installed (the generate extra).
        ValueError: ``max_tokens`` under 16.
    """
    if max_tokens < 16:
        raise ValueError(f"max_tokens must be at least 16 (got {max_tokens})")
    _require("semantic_text_splitter", "chunking documents")
    from semantic_text_splitter import MarkdownSplitter

    splitter = MarkdownSplitter.from_tiktoken_model("gpt-3.5-turbo", max_tokens)
    headings = _heading_paths(text)
    out = []
    for offset, piece in splitter.chunk_indices(text):
        if not piece.strip():
            continue
        # a chunk that opens with a heading belongs under it
        start = offset + len(piece) - len(piece.lstrip())
        path = ""
        for at, heading in headings:
            if at > start:
                break
            path = heading
        out.append((path, piece.strip()))
    return out


def _jsonl_chunks(path: Path, name: str, problems: list[Unreadable]) -> list[Chunk]:
    chunks = []
    with path.open("rb") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            where = f"{name}:{number}"
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                problems.append(Unreadable(where, f"not JSON ({exc})"))
                continue
            if not isinstance(record, dict):
                problems.append(Unreadable(where, "a chunk line must be a JSON object"))
                continue
            text = record.get("text")
            if not isinstance(text, str) or not text.strip():
                problems.append(Unreadable(where, "field 'text': a non-empty string is required"))
                continue
            bad = [k for k in ("id", "source", "heading") if not isinstance(record.get(k, ""), str)]
            if bad:
                problems.append(Unreadable(where, f"field {bad[0]!r}: must be a string"))
                continue
            chunks.append(
                Chunk(
                    id=record.get("id") or f"{name}#{number}",
                    source=record.get("source") or name,
                    heading=record.get("heading") or "",
                    text=text.strip(),
                )
            )
    return chunks


def read_chunks(
    specs: str | Path | Sequence[str | Path], max_tokens: int = 300
) -> tuple[list[Chunk], list[Unreadable]]:
    """The chunks of every document ``specs`` names (see the module doc), and the files
    that could not be read with their reasons.

    Raises:
        FileNotFoundError: a spec matches nothing (see `find_documents`).
        MissingExtra: a package of the generate extra is missing.
    """
    chunks: list[Chunk] = []
    problems: list[Unreadable] = []
    for path, name in find_documents(specs):
        suffix = path.suffix.lower()
        if suffix == ".jsonl":
            try:
                chunks += _jsonl_chunks(path, name, problems)
            except OSError as exc:
                problems.append(Unreadable(name, exc.strerror or str(exc)))
            continue
        reader = READERS.get(suffix)
        if reader is None:
            known = ", ".join([*READERS, ".jsonl"])
            problems.append(Unreadable(name, f"unsupported file type {suffix!r} (known: {known})"))
            continue
        try:
            text = reader(path)
        except MissingExtra:
            raise
        except OSError as exc:
            problems.append(Unreadable(name, exc.strerror or str(exc)))
            continue
        except ValueError as exc:  # not UTF-8, an encrypted or scanned PDF
            problems.append(Unreadable(name, str(exc)))
            continue
        except Exception as exc:  # a broken PDF or page: pypdf's own errors
            problems.append(Unreadable(name, f"{type(exc).__name__}: {exc}"))
            continue
        pieces = chunk_text(text, max_tokens)
        if not pieces:
            problems.append(Unreadable(name, "no text"))
        for n, (heading, piece) in enumerate(pieces, 1):
            chunks.append(Chunk(f"{name}#{n}", name, heading, piece))
    _unique_ids(chunks)
    return chunks, problems


def _unique_ids(chunks: Iterable[Chunk]) -> None:
    seen: set[str] = set()
    for chunk in chunks:
        if chunk.id in seen:
            raise ValueError(f"chunk id {chunk.id!r} occurs twice: ids must be unique")
        seen.add(chunk.id)


def chunk_record(chunk: Chunk) -> dict[str, Any]:
    """The JSONL form of a chunk (what `read_chunks` reads back)."""
    return {"id": chunk.id, "source": chunk.source, "heading": chunk.heading, "text": chunk.text}
