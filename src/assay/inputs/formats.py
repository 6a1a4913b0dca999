"""The file formats a dataset comes in, read into numbered records: JSONL, CSV (and TSV)
and JSON arrays; which reader a file's suffix or ``input_format`` chooses
(`INPUT_FORMATS`). The records become samples in `assay.inputs.records`; Parquet is
`assay.inputs.parquet`, OTLP `assay.inputs.otlp`.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from assay.core.sample import FIELD_ALIASES, Sample, _key_form
from assay.inputs.records import NOT_TEXT, InputError, InputErrors, loads_json

__all__ = ["INPUT_FORMATS", "csv_rows", "encoding_of", "json_items", "json_lines", "reader_suffix"]

_LIST_FIELDS = {
    name
    for name, field in Sample.model_fields.items()
    if "list" in str(field.annotation) or "dict" in str(field.annotation)
}
_JSON_FIELDS = {
    "expected_json",
    "output_json",
    "json_schema",
    "tags",
    "metadata",
    "trace",
    "expected_tool_calls",
}
# errors whose message already says what was given and which names are involved
_CSV_LIMIT_RAISED = False


#: what ``input_format`` may name, and the file suffixes each is taken from by default
INPUT_FORMATS = {
    "jsonl": (".jsonl", ".ndjson"),
    "csv": (".csv", ".tsv"),
    "json": (".json",),
    "parquet": (".parquet",),
    "otlp": (),
}


def encoding_of(head: bytes) -> str:
    """The text encoding a file's first bytes announce: UTF-16 by its byte-order mark,
    else UTF-8 (a UTF-8 byte-order mark dropped)."""
    if head.startswith((b"\xff\xfe", b"\xfe\xff")) and not head.startswith(b"\xff\xfe\x00\x00"):
        return "utf-16"
    return "utf-8-sig"


def _encoding(path: Path) -> str:
    with path.open("rb") as handle:
        return encoding_of(handle.read(4))


def _open_text(path: Path, newline: str | None = None) -> IO[str]:
    return path.open(encoding=_encoding(path), errors="surrogateescape", newline=newline)


def _parse_error(raw: str, exc: json.JSONDecodeError | RecursionError) -> str:
    bad = NOT_TEXT.search(raw)
    if bad is not None:
        byte = ord(bad.group()) - 0xDC00
        shown = f"byte 0x{byte:02x}" if 0x80 <= byte <= 0xFF else "a lone surrogate"
        return f"not valid UTF-8: {shown} at column {bad.start() + 1}; save the file as UTF-8"
    if isinstance(exc, RecursionError):
        return "not usable JSON: nested too deeply"
    return f"not valid JSON: {exc.msg} at column {exc.colno}"


def json_lines(
    lines: Iterable[str], source: str, errors: list[InputError], strict: bool
) -> Iterator[tuple[int, Any]]:
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            record = loads_json(raw)
        except (json.JSONDecodeError, RecursionError) as exc:
            problem = InputError(source, number, None, _parse_error(raw, exc))
            if strict:
                raise InputErrors([problem]) from None
            errors.append(problem)
            continue
        yield number, record


def jsonl_records(path: Path, errors: list[InputError], strict: bool) -> Iterator[tuple[int, Any]]:
    with _open_text(path) as handle:
        yield from json_lines(handle, str(path), errors, strict)


def _csv_cell(field: str, value: str) -> Any:
    if value == "":
        return None
    canonical = next(
        (c for c, a in FIELD_ALIASES.items() if field in a or _key_form(field) in a),
        _key_form(field),
    )
    if canonical in _LIST_FIELDS or canonical in _JSON_FIELDS:
        text = value.strip()
        if not text:
            return None
        if text[0] in "[{":
            try:
                return loads_json(text)
            except (json.JSONDecodeError, RecursionError) as exc:
                detail = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
                raise ValueError(f"column holds invalid JSON: {detail}") from exc
        if canonical in _LIST_FIELDS and canonical not in _JSON_FIELDS:
            return [text]
    return value


def _delimiter(header: str, suffix: str) -> str:
    if suffix == ".tsv":
        return "\t"
    if "," not in header:
        for candidate in (";", "\t", "|"):
            if candidate in header:
                return candidate
    return ","


def csv_records(path: Path, errors: list[InputError], strict: bool) -> Iterator[tuple[int, Any]]:
    with _open_text(path, newline="") as handle:
        yield from csv_rows(handle, str(path), path.suffix.lower(), errors, strict)


def csv_rows(
    handle: IO[str], source: str, suffix: str, errors: list[InputError], strict: bool
) -> Iterator[tuple[int, Any]]:
    """(line, record) for each row of CSV text (a seekable handle opened with
    ``newline=""``); ``suffix`` .tsv means tab-separated."""
    global _CSV_LIMIT_RAISED
    if not _CSV_LIMIT_RAISED:  # long contexts: the default 128 KiB per cell is too small
        csv.field_size_limit(max(csv.field_size_limit(), 2**31 - 1))
        _CSV_LIMIT_RAISED = True

    def problem(line: int, field: str | None, message: str) -> None:
        found = InputError(source, line, field, message)
        if strict:
            raise InputErrors([found])
        errors.append(found)

    first = handle.readline()
    handle.seek(0)
    reader = csv.reader(handle, delimiter=_delimiter(first, suffix), strict=True)
    header: list[str] | None = None
    while True:
        start = reader.line_num + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            problem(start, None, f"not valid CSV: {exc}")
            if reader.line_num < start:
                return
            continue
        if not row or (header is None and not any(c.strip() for c in row)):
            continue
        if header is None:
            header = [h.strip() for h in row]
            continue
        if len(row) > len(header):
            problem(
                start,
                None,
                f"more cells than header columns ({len(row)} cells, {len(header)} columns)",
            )
            continue
        record: dict[str, Any] = {}
        bad = False
        for key, value in zip(header, row, strict=False):
            try:
                cell = _csv_cell(key, value)
            except ValueError as exc:
                problem(start, key, str(exc))
                bad = True
                break
            if cell is not None and record.get(key) not in (None, cell):
                problem(
                    start,
                    key,
                    "the column appears twice in the header, with different values "
                    "in this row: keep one",
                )
                bad = True
                break
            if record.get(key) is None:
                record[key] = cell
        if not bad:
            yield start, record


def json_records(
    path: Path, errors: list[InputError], strict: bool
) -> tuple[Iterable[tuple[int, Any]], str]:
    """The items of a JSON array and the unit that numbers them (``item``; ``line`` when
    the file turns out to be JSONL)."""
    with _open_text(path) as handle:
        return json_items(handle.read(), str(path), errors, strict)


def json_items(
    text: str, source: str, errors: list[InputError], strict: bool
) -> tuple[Iterable[tuple[int, Any]], str]:
    """`json_records` of the text of a .json file named ``source``."""
    if not text.strip():
        raise InputErrors([InputError(source, None, None, "the file is empty")])
    try:
        data = loads_json(text)
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data" and text.lstrip().startswith("{"):
            # one object per line under a .json name: read it as the JSONL it is
            return json_lines(text.splitlines(), source, errors, strict), "line"
        lines = text.splitlines()
        raw = lines[exc.lineno - 1] if 0 < exc.lineno <= len(lines) else ""
        raise InputErrors([InputError(source, exc.lineno, None, _parse_error(raw, exc))]) from None
    except RecursionError as exc:
        raise InputErrors([InputError(source, None, None, _parse_error("", exc))]) from None
    if isinstance(data, dict) and isinstance(data.get("samples"), list):
        data = data["samples"]
    if not isinstance(data, list):
        kind = "an object" if isinstance(data, dict) else type(data).__name__
        raise InputErrors(
            [
                InputError(
                    source,
                    None,
                    None,
                    f'expected a JSON array of sample objects (or {{"samples": [...]}}), got '
                    f"{kind}; for one sample, wrap it in [ ]",
                )
            ]
        )
    return enumerate(data, start=1), "item"


def reader_suffix(source: str, suffix: str, input_format: str | None) -> str:
    """The suffix whose reader reads ``source`` (``.otlp`` for OTLP): ``input_format``'s
    first, else the file's own ``suffix``. Raises `InputErrors` for an unknown format."""
    if input_format is not None and input_format not in INPUT_FORMATS:
        known = ", ".join(INPUT_FORMATS)
        problem = f"unknown input format {input_format!r}: use {known}"
        raise InputErrors([InputError(source, None, None, problem)])
    if input_format is None:
        if suffix not in {s for suffixes in INPUT_FORMATS.values() for s in suffixes}:
            problem = "unknown format: use .jsonl, .csv, .json or .parquet"
            raise InputErrors([InputError(source, None, None, problem)])
        return suffix
    return INPUT_FORMATS[input_format][0] if input_format != "otlp" else ".otlp"
