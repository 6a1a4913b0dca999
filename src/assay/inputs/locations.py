"""Where a dataset is read from, and reading it in pieces that can be parsed apart.

A dataset is a local path or a URL that pyarrow's file systems read (``file://``,
``s3://``, ``gs://``, ``hdfs://`` ...: `pyarrow.fs.FileSystem.from_uri`; credentials come
from each machine's environment, as pyarrow reads them). `read_location` checks it first:
an unknown scheme, a store that cannot be reached, a missing file or a directory is one
error naming the location, raised before any record is parsed. It then cuts the file into
`Piece`s and parses each with `read_piece`, in this process or, given ``run``, elsewhere
(`assay.evaluation.scale.ray_executor.RayExecutor.read_samples` runs them as Ray tasks):

- JSONL: byte ranges of about ``piece_bytes``; a range owns the lines that start in it,
  so no line is cut. Each piece counts its lines, and the lines of the pieces before it
  are added to the line numbers of its errors. A UTF-16 file is one piece.
- Parquet: runs of row groups (about ``piece_bytes`` of data each), rows numbered from the
  file's first row.
- CSV (a quoted cell may hold a newline) and JSON arrays: one piece per file.

Each piece goes through the readers of `assay.inputs.formats` (`json_lines`, `csv_rows`,
`json_items`, `assay.inputs.parquet.parquet_records`) and `samples_from_records`, so the
samples, their order and every message (file, line or row, field) are those of
`read_samples` on the same file. A piece never raises for a record: ``strict`` raises the
first error in file order once every piece is back. OTLP trace exports are read from
local files only (`assay.inputs.otlp.read_otlp`).
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import IO, Any
from urllib.parse import unquote, urlsplit

from assay.core.extras import require
from assay.core.sample import Sample
from assay.inputs.formats import (
    INPUT_FORMATS,
    csv_rows,
    encoding_of,
    json_items,
    json_lines,
    reader_suffix,
)
from assay.inputs.otlp import read_otlp
from assay.inputs.otlp.reader import OTLP_HEAD_BYTES, starts_like_otlp
from assay.inputs.parquet import parquet_records
from assay.inputs.records import (
    InputError,
    InputErrors,
    LabelReading,
    depth_setting,
    in_file_order,
    position_id,
    samples_from_records,
)

__all__ = [
    "PIECE_BYTES",
    "Piece",
    "PieceResult",
    "is_local",
    "is_url",
    "local_path",
    "location_sha256",
    "read_location",
    "read_piece",
    "shown_location",
]

#: the largest piece: a piece's bytes are in one process's memory while it is parsed
PIECE_BYTES = 64 * 2**20
#: the smallest piece `read_location` cuts when it chooses the size
_MIN_PIECE_BYTES = 2**20
#: ``scheme://``: a location that is a URL, not a file path
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def is_url(location: str | Path) -> bool:
    """True for a URL (``file://``, ``s3://``, ...), False for a file path."""
    return isinstance(location, str) and _URL.match(location) is not None


def is_local(location: str | Path) -> bool:
    """True for a file path or a ``file://`` URL (a file of this machine)."""
    return not is_url(location) or str(location).lower().startswith("file:")


def local_path(location: str | Path) -> Path | None:
    """The file ``location`` names on this machine (a path, or a ``file://`` URL's path);
    None for another URL."""
    if not is_url(location):
        return Path(location)
    parts = urlsplit(str(location))
    return Path(unquote(parts.path)) if parts.scheme.lower() == "file" else None


def shown_location(location: str | Path) -> str:
    """The name messages give ``location``: a path as given, a URL without its user,
    password, query and fragment (where a credential can hide)."""
    if not is_url(location):
        return str(Path(location))
    parts = urlsplit(str(location))
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}{parts.path}"


def _filesystem(location: str) -> tuple[Any, str]:
    """(pyarrow file system, path in it) for a URL or a local path."""
    fs = require("pyarrow.fs", "reading a URL or with --executor ray")
    if is_url(location):
        return fs.FileSystem.from_uri(location)
    return fs.LocalFileSystem(), str(Path(location).absolute())


@dataclass(frozen=True)
class Piece:
    """One part of a dataset to parse on its own (see the module docstring).

    Attributes:
        location: the dataset (a URL, or an absolute path).
        source: its name in messages.
        reader: the reader's suffix: .jsonl, .csv, .json or .parquet.
        suffix: the file's own suffix (.tsv is tab-separated).
        start: JSONL: the first byte of the range.
        end: JSONL: the byte after it.
        row_groups: Parquet: the row groups (None: all).
        first_row: Parquet: the rows of the file before them.
        encoding: the text encoding of the piece's bytes.
        max_json_depth: the nesting limit of a field.
        labels: how its records' verdicts are read (None: the samples' own fields).
    """

    location: str
    source: str
    reader: str
    suffix: str
    start: int = 0
    end: int = 0
    row_groups: tuple[int, ...] | None = None
    first_row: int = 0
    encoding: str = "utf-8-sig"
    max_json_depth: int = 500
    labels: LabelReading | None = None


@dataclass
class PieceResult:
    """A parsed piece: its valid samples in file order, its records' errors (JSONL lines
    counted from the piece's first line), the lines it spans (JSONL), and ``fatal``: the
    errors that make the whole file unreadable (not Parquet, not a JSON array, a failed
    read), raised as `InputErrors` by `read_location`. ``positioned``: (index in
    ``samples``, line in the piece) of each sample whose id is its line (JSONL), which
    `read_location` renumbers from the file's first line."""

    samples: list[Sample]
    errors: list[InputError]
    lines: int = 0
    fatal: list[InputError] = field(default_factory=list)
    positioned: list[tuple[int, int]] = field(default_factory=list)


def _through_newline(handle: IO[bytes]) -> bytes:
    """The bytes from the handle's position through the next newline (or the end)."""
    out = bytearray()
    while block := handle.read(1 << 16):
        cut = block.find(b"\n")
        if cut >= 0:
            return bytes(out + block[: cut + 1])
        out += block
    return bytes(out)


def _line_range(handle: IO[bytes], start: int, end: int) -> bytes:
    """The bytes of the lines that start in [start, end): a line starts at byte 0 or after
    a newline; the last one runs on past ``end`` to its newline."""
    begin = 0
    if start > 0:
        handle.seek(start - 1)
        begin = start - 1 + len(_through_newline(handle))
    if begin >= end:
        return b""
    handle.seek(begin)
    data = handle.read(end - begin)
    if data and not data.endswith(b"\n"):
        data += _through_newline(handle)
    return data


def read_piece(piece: Piece) -> PieceResult:
    """Parse one piece with the readers of `assay.inputs.records` (never raises for a record)."""
    errors: list[InputError] = []
    lines = 0
    try:
        fs, path = _filesystem(piece.location)
        if piece.reader == ".parquet":
            groups = list(piece.row_groups) if piece.row_groups is not None else None
            records: Any = parquet_records(
                path,
                source=piece.source,
                filesystem=fs,
                row_groups=groups,
                first_row=piece.first_row,
            )
            samples, more = samples_from_records(
                records,
                piece.source,
                False,
                "row",
                max_json_depth=piece.max_json_depth,
                labels=piece.labels,
            )
            return PieceResult(samples, more)
        with fs.open_input_file(path) as raw:
            if piece.reader == ".jsonl":
                data = io.BytesIO(_line_range(raw, piece.start, piece.end))
                text = io.TextIOWrapper(data, piece.encoding, errors="surrogateescape")

                def counted() -> Iterator[str]:
                    nonlocal lines
                    for line in text:
                        lines += 1
                        yield line

                records, unit = json_lines(counted(), piece.source, errors, False), "line"
            elif piece.reader == ".csv":
                text = io.TextIOWrapper(raw, piece.encoding, errors="surrogateescape", newline="")
                records = csv_rows(text, piece.source, piece.suffix, errors, False)
                unit = "line"
            else:
                whole = io.TextIOWrapper(raw, piece.encoding, errors="surrogateescape").read()
                records, unit = json_items(whole, piece.source, errors, False)
            positioned: list[tuple[int, int]] = []
            samples, more = samples_from_records(
                records,
                piece.source,
                False,
                unit,
                max_json_depth=piece.max_json_depth,
                positioned=positioned,
                labels=piece.labels,
            )
    except InputErrors as exc:
        return PieceResult([], [], fatal=exc.errors)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        return PieceResult(
            [], [], fatal=[InputError(piece.source, None, None, f"cannot read: {reason}")]
        )
    return PieceResult(samples, errors + more, lines, positioned=positioned)


def _unreachable(source: str, exc: BaseException) -> InputErrors:
    """One error naming the location, with the first line of pyarrow's reason."""
    reason = next((line for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
    return InputErrors([InputError(source, None, None, f"cannot be read: {reason[:300]}")])


def _pieces(
    location: str, input_format: str | None, depth: int, piece_bytes: int | None, workers: int
) -> list[Piece] | Path:
    """The pieces of the dataset, or the local path of an OTLP export (read as a whole).
    Raises `FileNotFoundError` or `InputErrors` naming the location."""
    source = shown_location(location)
    if not is_url(location):  # the tasks' working folder is not this process's
        location = str(Path(location).absolute())
    try:
        fs, path = _filesystem(location)
    except ValueError:  # pyarrow's message repeats the URL, credentials included
        scheme = urlsplit(location).scheme
        problem = (
            f"cannot be read: pyarrow has no file system for {scheme}:// URLs (it reads "
            "file://, s3://, gs://, abfs:// and hdfs://); copy the file to one of those"
        )
        raise InputErrors([InputError(source, None, None, problem)]) from None
    except OSError as exc:  # e.g. an S3 bucket's region could not be looked up
        raise _unreachable(source, exc) from None
    try:
        info = fs.get_file_info(path)
    except OSError as exc:  # the store cannot be reached, no permission
        raise _unreachable(source, exc) from None
    from pyarrow.fs import FileType

    if info.type == FileType.NotFound:
        raise FileNotFoundError(f"{source}: no such file")
    if info.type == FileType.Directory:
        problem = "is a directory; give a .jsonl, .csv, .json or .parquet file"
        raise InputErrors([InputError(source, None, None, problem)])
    suffix = PurePosixPath(path).suffix.lower()
    reader = reader_suffix(source, suffix, input_format)
    reader = next((s[0] for s in INPUT_FORMATS.values() if reader in s), reader)  # .ndjson
    size = int(info.size or 0)
    if piece_bytes is None:
        piece_bytes = max(_MIN_PIECE_BYTES, min(PIECE_BYTES, math.ceil(size / (2 * workers))))
    base = Piece(location, source, reader, suffix, max_json_depth=depth)
    if reader != ".parquet":
        try:
            with fs.open_input_stream(path) as handle:
                head = handle.read(OTLP_HEAD_BYTES)
        except OSError as exc:
            raise _unreachable(source, exc) from None
        sniffed = input_format is None and suffix in {".json", ".jsonl"}
        if reader == ".otlp" or (sniffed and starts_like_otlp(head)):
            if not is_local(location):
                problem = "an OTLP trace export is read from a local file only: copy it here"
                raise InputErrors([InputError(source, None, None, problem)])
            return Path(path) if is_url(location) else Path(location)
        base = replace(base, encoding=encoding_of(head[:4]))
    if reader == ".parquet":
        return _parquet_pieces(base, fs, path, piece_bytes)
    if reader != ".jsonl" or base.encoding == "utf-16" or size <= piece_bytes:
        return [replace(base, end=size)]
    starts = range(0, size, piece_bytes)
    return [
        replace(
            base, start=a, end=min(a + piece_bytes, size), encoding="utf-8" if a else base.encoding
        )
        for a in starts
    ]


def _parquet_pieces(base: Piece, fs: Any, path: str, piece_bytes: int) -> list[Piece]:
    """Runs of row groups of about ``piece_bytes`` (uncompressed) each; one piece for all
    when the footer cannot be read (its reader then says why)."""
    parquet = require("pyarrow.parquet", "reading .parquet")
    import pyarrow

    try:
        meta = parquet.ParquetFile(path, filesystem=fs).metadata
    except (pyarrow.ArrowException, OSError):
        return [base]
    pieces: list[Piece] = []
    group: list[int] = []
    first = rows = held = 0
    for index in range(meta.num_row_groups):
        info = meta.row_group(index)
        group.append(index)
        rows += info.num_rows
        held += info.total_byte_size
        if held >= piece_bytes or index == meta.num_row_groups - 1:
            pieces.append(replace(base, row_groups=tuple(group), first_row=first))
            group, first, held = [], rows, 0
    return pieces or [replace(base, row_groups=())]


def read_location(
    location: str | Path,
    strict: bool = False,
    *,
    max_json_depth: int | None = None,
    input_format: str | None = None,
    run: Callable[[Sequence[Piece]], list[PieceResult]] | None = None,
    piece_bytes: int | None = None,
    workers: int = 1,
    labels: LabelReading | None = None,
) -> tuple[list[Sample], list[InputError]]:
    """The samples and record errors of the dataset at ``location`` (a path or a URL), as
    `assay.inputs.read.read_samples` gives them for the same file.

    Args:
        location: a file path or a URL pyarrow's file systems read.
        strict: raise `InputErrors` for the first malformed record (in file order).
        max_json_depth: the nesting limit of a field (default: the configured one).
        input_format: jsonl, csv, json, parquet or otlp; default: from the suffix.
        run: parses the pieces and returns their results in order (default: one after
            another in this process; the Ray executor runs them as Ray tasks).
        piece_bytes: the size of a piece; None: the file over ``2 * workers`` pieces,
            each between 1 MiB and `PIECE_BYTES`.
        workers: the processes that parse pieces at once.
        labels: how the records' verdicts are read (`assay.inputs.records.LabelReading`).

    Raises `FileNotFoundError`, and `InputErrors` naming the location when it cannot be
    read at all (unknown scheme, store not reachable, not a known format).
    """
    depth = depth_setting(max_json_depth)
    planned = _pieces(str(location), input_format, depth, piece_bytes, max(1, workers))
    if isinstance(planned, Path):
        return read_otlp(planned, strict=strict)
    if labels is not None:
        planned = [replace(piece, labels=labels) for piece in planned]
    results = run(planned) if run is not None else [read_piece(p) for p in planned]
    samples: list[Sample] = []
    errors: list[InputError] = []
    lines = 0
    for result in results:
        if result.fatal:
            raise InputErrors(result.fatal)
        if lines:  # a JSONL piece after the first: its lines counted from the file's
            for index, line in result.positioned:
                result.samples[index].id = position_id("line", line + lines)
        samples += result.samples
        errors += [
            replace(e, line=e.line + lines) if e.line is not None and lines else e
            for e in result.errors
        ]
        lines += result.lines
    errors = in_file_order(errors)
    if strict and errors:
        raise InputErrors([e for e in errors if e.line == errors[0].line])
    return samples, errors


def location_sha256(location: str | Path) -> str:
    """The SHA-256 of the bytes of the dataset at ``location`` (a path or a URL)."""
    import hashlib

    def sha256_of(handle: Any) -> str:
        digest = hashlib.sha256()
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
        return digest.hexdigest()

    if not is_url(location):
        with Path(location).open("rb") as handle:
            return sha256_of(handle)
    fs, path = _filesystem(str(location))
    with fs.open_input_stream(path) as handle:
        return sha256_of(handle)
