"""Readers: JSONL, CSV, JSON array, Parquet and pandas DataFrame into `Sample` objects.

A malformed record never stops the others: each problem becomes an `InputError` naming
the file, the line (or item) and the field; ``strict=True`` raises the first instead.

What the readers accept, and what they reject (every rejection names file, line, field):

* UTF-8 with or without a byte-order mark, UTF-16 with a byte-order mark; LF or CRLF.
  Bytes that are not valid UTF-8 make *that* record an error, not the whole file.
* JSONL: one JSON object per line; blank lines are skipped; a line holding an array,
  number, string or null is an error. A ``.json`` file holds an array of objects (or
  ``{"samples": [...]}``); a ``.json`` file that is really JSONL is read as JSONL.
* A key given twice in one object with different values, or a field given under two of
  its names (``answer`` and ``response``) with different values, is an error: the
  reader never picks one silently. Equal duplicates are harmless.
* CSV (``,``, or ``;``/tab/``|`` when the header holds no comma) and TSV: list columns
  hold JSON (``["a", "b"]``) or one plain string (a list of one); quoted newlines are
  fine; missing cells are absent; more cells than header columns is an error.
* Parquet: one row per sample; list and struct columns arrive as lists and dicts, a null
  cell is absent (`assay.parquet_input`).
* A record with no known field (only unknown keys, or all empty) is an error: nothing in
  it could be scored, and it usually means misspelt column names.
* A field nesting objects/arrays deeper than ``max_json_depth`` (500 by default) is an
  error of its record; the other limits (``max_field_chars``, ``max_contexts``) are
  applied per metric when scoring (``docs/input.md``, "Limits").
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from pydantic import ValidationError

from assay.config import load_config, over_limit
from assay.sample import FIELD_ALIASES, Sample, _key_form, json_extent

__all__ = [
    "INPUT_FORMATS",
    "InputError",
    "InputErrors",
    "read_samples",
    "samples_from_dataframe",
    "samples_from_records",
]

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
_SELF_EXPLAINED = {"conflicting_fields", "milliseconds"}
# a lone surrogate: what undecodable bytes become under errors="surrogateescape"
_NOT_TEXT = re.compile("[\ud800-\udfff]")
_CSV_LIMIT_RAISED = False


@dataclass(frozen=True)
class InputError:
    """One unusable input record: where it is and what is wrong."""

    source: str
    line: int | None
    field: str | None
    message: str
    unit: str = "line"

    def __str__(self) -> str:
        where = self.source
        if self.line is not None:
            where += f" {self.unit} {self.line}"
        if self.field:
            where += f", field '{self.field}'"
        return f"{where}: {self.message}"


class InputErrors(ValueError):
    """Raised in strict mode, or when an input has no usable record at all."""

    def __init__(self, errors: list[InputError]) -> None:
        self.errors = errors
        shown = "\n".join(str(e) for e in errors[:20])
        more = f"\n... and {len(errors) - 20} more" if len(errors) > 20 else ""
        super().__init__(shown + more)


class _Object(dict):  # type: ignore[type-arg]
    """A parsed JSON object that remembers a key it saw twice with different values."""

    duplicate: str | None = None


def _object(pairs: list[tuple[str, Any]]) -> _Object:
    out = _Object()
    for key, value in pairs:
        if key in out and out[key] != value and out.duplicate is None:
            out.duplicate = key
        out[key] = value
    return out


def _loads(text: str) -> Any:
    return json.loads(text, object_pairs_hook=_object)


def _field_hint(field: str) -> str:
    for canonical, aliases in FIELD_ALIASES.items():
        if field in aliases:
            others = [a for a in aliases if a != field][:3]
            return f" (field {canonical!r}; also accepted as {', '.join(map(repr, others))})"
    return ""


def _shown(value: Any) -> str:
    text = "null" if value is None else repr(value)
    return f"{text[:60]}{'...' if len(text) > 60 else ''}"


def _validation_errors(
    exc: ValidationError, source: str, line: int | None, unit: str
) -> list[InputError]:
    errors = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or None
        field_name = loc.split(".")[0] if loc else None
        if err["type"] in _SELF_EXPLAINED:
            message = err["msg"]
            if err["type"] == "milliseconds":
                message += f" (got {_shown(err.get('input'))})"
            errors.append(InputError(source, line, loc, message, unit))
            continue
        got = err.get("input")
        got_text = "" if isinstance(got, dict) or loc is None else f" (got {_shown(got)})"
        hint = _field_hint(field_name) if field_name else ""
        errors.append(InputError(source, line, loc, f"{err['msg']}{got_text}{hint}", unit))
    return errors


def _first_problem(value: Any) -> tuple[str | None, str] | None:
    """(field path, message) of the first text that is not text or key given twice.
    Iterative (depth-first, in order): nesting costs no recursion."""
    stack: list[tuple[Any, str, Any]] = [(value, "", None)]
    while stack:
        item, where, key = stack.pop()
        if isinstance(key, str) and _NOT_TEXT.search(key):
            return where, "the key is not valid UTF-8 text; save the file as UTF-8"
        if isinstance(item, str):
            if _NOT_TEXT.search(item):
                return where or None, (
                    "is not valid UTF-8 text (an undecodable byte or a lone surrogate escape); "
                    "save the file as UTF-8"
                )
        elif isinstance(item, dict):
            duplicate = getattr(item, "duplicate", None)
            if duplicate is not None:
                at = f"{where}.{duplicate}" if where else duplicate
                return at, "appears twice in one object with different values: keep one"
            entries = [(v, f"{where}.{k}" if where else str(k), k) for k, v in item.items()]
            stack.extend(reversed(entries))
        elif isinstance(item, list):
            entries = [(v, f"{where}.{i}" if where else str(i), None) for i, v in enumerate(item)]
            stack.extend(reversed(entries))
    return None


def _too_deep(record: dict[str, Any], max_json_depth: int) -> tuple[str, str] | None:
    """(key, message) of the first field nesting deeper than ``max_json_depth``."""
    for key, value in record.items():
        if isinstance(value, dict | list):
            depth = json_extent(value)[1]
            if depth > max_json_depth:
                measured = f"nests {depth:,} levels deep"
                return str(key), over_limit(measured, max_json_depth, "max_json_depth")
    return None


def _has_content(sample: Sample) -> bool:
    return any(
        getattr(sample, name) is not None
        for name in Sample.model_fields
        if name not in {"id", "metadata", "tags"}
    )


def _to_sample(
    record: Any, source: str, line: int | None, unit: str, max_json_depth: int
) -> tuple[Sample | None, list[InputError]]:
    if not isinstance(record, dict):
        kind = "null" if record is None else type(record).__name__
        return None, [InputError(source, line, None, f"expected a JSON object, got {kind}", unit)]
    problem = _too_deep(record, max_json_depth) or _first_problem(record)
    if problem is not None:
        return None, [InputError(source, line, problem[0], problem[1], unit)]
    try:
        sample = Sample.model_validate(record)
    except ValidationError as exc:
        return None, _validation_errors(exc, source, line, unit)
    if not _has_content(sample):
        keys = [str(k) for k in record][:8]
        got = f"keys {', '.join(map(repr, keys))}" if keys else "no keys"
        return None, [
            InputError(
                source,
                line,
                None,
                f"nothing to score: no known field with a value (got {got}); a sample "
                "needs fields such as 'response' (or 'answer'), 'query' (or 'question'), "
                "'expected' (or 'ground_truth') or 'contexts'",
                unit,
            )
        ]
    return sample, []


def samples_from_records(
    records: Iterable[tuple[int | None, Any]],
    source: str = "<records>",
    strict: bool = False,
    unit: str = "line",
    *,
    max_json_depth: int | None = None,
) -> tuple[list[Sample], list[InputError]]:
    """Validate (position, record) pairs into samples, collecting errors.

    ``unit`` names the position in messages: line, item or row. A field nesting deeper
    than ``max_json_depth`` levels (default: the configured ``max_json_depth``) makes its
    record an error.
    """
    depth = _depth_setting(max_json_depth)
    samples: list[Sample] = []
    errors: list[InputError] = []
    for line, record in records:
        sample, problems = _to_sample(record, source, line, unit, depth)
        if problems:
            if strict:
                raise InputErrors(problems)
            errors.extend(problems)
        elif sample is not None:
            samples.append(sample)
    return samples, errors


def _encoding_of(head: bytes) -> str:
    """The text encoding a file's first bytes announce: UTF-16 by its byte-order mark,
    else UTF-8 (a UTF-8 byte-order mark dropped)."""
    if head.startswith((b"\xff\xfe", b"\xfe\xff")) and not head.startswith(b"\xff\xfe\x00\x00"):
        return "utf-16"
    return "utf-8-sig"


def _encoding(path: Path) -> str:
    with path.open("rb") as handle:
        return _encoding_of(handle.read(4))


def _open_text(path: Path, newline: str | None = None) -> IO[str]:
    return path.open(encoding=_encoding(path), errors="surrogateescape", newline=newline)


def _parse_error(raw: str, exc: json.JSONDecodeError | RecursionError) -> str:
    bad = _NOT_TEXT.search(raw)
    if bad is not None:
        byte = ord(bad.group()) - 0xDC00
        shown = f"byte 0x{byte:02x}" if 0x80 <= byte <= 0xFF else "a lone surrogate"
        return f"not valid UTF-8: {shown} at column {bad.start() + 1}; save the file as UTF-8"
    if isinstance(exc, RecursionError):
        return "not usable JSON: nested too deeply"
    return f"not valid JSON: {exc.msg} at column {exc.colno}"


def _json_lines(
    lines: Iterable[str], source: str, errors: list[InputError], strict: bool
) -> Iterator[tuple[int, Any]]:
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            record = _loads(raw)
        except (json.JSONDecodeError, RecursionError) as exc:
            problem = InputError(source, number, None, _parse_error(raw, exc))
            if strict:
                raise InputErrors([problem]) from None
            errors.append(problem)
            continue
        yield number, record


def _jsonl_records(path: Path, errors: list[InputError], strict: bool) -> Iterator[tuple[int, Any]]:
    with _open_text(path) as handle:
        yield from _json_lines(handle, str(path), errors, strict)


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
                return _loads(text)
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


def _csv_records(path: Path, errors: list[InputError], strict: bool) -> Iterator[tuple[int, Any]]:
    with _open_text(path, newline="") as handle:
        yield from _csv_rows(handle, str(path), path.suffix.lower(), errors, strict)


def _csv_rows(
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


def _json_records(
    path: Path, errors: list[InputError], strict: bool
) -> tuple[Iterable[tuple[int, Any]], str]:
    """The items of a JSON array and the unit that numbers them (``item``; ``line`` when
    the file turns out to be JSONL)."""
    with _open_text(path) as handle:
        return _json_items(handle.read(), str(path), errors, strict)


def _json_items(
    text: str, source: str, errors: list[InputError], strict: bool
) -> tuple[Iterable[tuple[int, Any]], str]:
    """`_json_records` of the text of a .json file named ``source``."""
    if not text.strip():
        raise InputErrors([InputError(source, None, None, "the file is empty")])
    try:
        data = _loads(text)
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data" and text.lstrip().startswith("{"):
            # one object per line under a .json name: read it as the JSONL it is
            return _json_lines(text.splitlines(), source, errors, strict), "line"
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


def _depth_setting(max_json_depth: int | None) -> int:
    return load_config().max_json_depth if max_json_depth is None else max_json_depth


#: what ``input_format`` may name, and the file suffixes each is taken from by default
INPUT_FORMATS = {
    "jsonl": (".jsonl", ".ndjson"),
    "csv": (".csv", ".tsv"),
    "json": (".json",),
    "parquet": (".parquet",),
    "otlp": (),
}


def read_samples(
    path: str | Path,
    strict: bool = False,
    *,
    max_json_depth: int | None = None,
    input_format: str | None = None,
) -> tuple[list[Sample], list[InputError]]:
    """Read samples from a .jsonl, .csv (.tsv), .json (array of objects) or .parquet file
    (one row each, read in record batches: `assay.parquet_input`), or from an
    OpenTelemetry trace export (OTLP JSON, one sample per trace: `assay.otlp`). ``path``
    may be a URL that pyarrow's file systems read (``file://``, ``s3://``, ``gs://``,
    ``hdfs://``; not for OTLP): `assay.sources.read_location` reads it, with the same
    messages, naming the URL.

    ``input_format`` (jsonl, csv, json, parquet or otlp) overrides what the suffix says; without
    it, a .json or .jsonl file that starts like an OTLP export is read as one. Returns the
    valid samples and the errors of the invalid records (a field nesting deeper than
    ``max_json_depth``, default the configured one, is one). Raises `FileNotFoundError`
    for a missing file and `InputErrors` in strict mode or when the file cannot be read
    at all (a directory, no permission, not a known format), and `MissingExtra` (naming
    the pip command) for a .parquet file without pyarrow installed.
    """
    from assay.sources import is_url, read_location

    if is_url(path):
        return read_location(
            path, strict, max_json_depth=_depth_setting(max_json_depth), input_format=input_format
        )
    path = Path(path)
    source = str(path)
    if path.is_dir():
        raise InputErrors(
            [
                InputError(
                    source,
                    None,
                    None,
                    "is a directory; give a .jsonl, .csv, .json or .parquet file",
                )
            ]
        )
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    suffix = path.suffix.lower()
    errors: list[InputError] = []
    reader = _reader_suffix(source, suffix, input_format)
    if reader == ".otlp" or (input_format is None and suffix in {".json", ".jsonl"}):
        from assay.otlp import is_otlp, read_otlp

        try:
            if reader == ".otlp" or is_otlp(path):
                return read_otlp(path, strict=strict)
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise InputErrors([InputError(source, None, None, f"cannot read: {reason}")]) from None
    suffix = reader
    try:
        if suffix == ".json":
            records, unit = _json_records(path, errors, strict)
        elif suffix in {".csv", ".tsv"}:
            records, unit = _csv_records(path, errors, strict), "line"
        elif suffix == ".parquet":
            from assay.parquet_input import parquet_records

            records, unit = parquet_records(path), "row"
        else:
            records, unit = _jsonl_records(path, errors, strict), "line"
        samples, more = samples_from_records(
            records, source, strict, unit, max_json_depth=_depth_setting(max_json_depth)
        )
    except FileNotFoundError:
        raise
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise InputErrors([InputError(source, None, None, f"cannot read: {reason}")]) from None
    return samples, _in_file_order(errors + more)


def _in_file_order(errors: list[InputError]) -> list[InputError]:
    """The errors by line (those of no line last), in their order within a line."""
    return sorted(errors, key=lambda e: (e.line is None, e.line or 0))


def _reader_suffix(source: str, suffix: str, input_format: str | None) -> str:
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


def samples_from_dataframe(
    df: Any, strict: bool = False, *, max_json_depth: int | None = None
) -> tuple[list[Sample], list[InputError]]:
    """Samples from a pandas DataFrame (one row each; NaN cells are treated as absent;
    ``max_json_depth`` as in `samples_from_records`)."""
    import math

    def clean(value: Any) -> Any:
        if isinstance(value, float) and math.isnan(value):
            return None
        if hasattr(value, "tolist"):
            return value.tolist()
        return value

    records = (
        (int(i) + 1 if isinstance(i, int) else None, {k: clean(v) for k, v in row.items()})
        for i, row in zip(range(len(df)), df.to_dict(orient="records"), strict=True)
    )
    return samples_from_records(
        records, "<DataFrame>", strict, unit="row", max_json_depth=max_json_depth
    )
