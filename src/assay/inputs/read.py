"""`read_samples`: a dataset file or URL of any supported format into samples, with the
problems of its malformed records."""

from __future__ import annotations

from pathlib import Path

from assay.core.sample import Sample
from assay.inputs.formats import csv_records, json_records, jsonl_records, reader_suffix
from assay.inputs.locations import is_url, read_location
from assay.inputs.otlp import is_otlp, read_otlp
from assay.inputs.parquet import parquet_records
from assay.inputs.records import (
    InputError,
    InputErrors,
    depth_setting,
    in_file_order,
    samples_from_records,
)

__all__ = ["read_samples"]


def read_samples(
    path: str | Path,
    strict: bool = False,
    *,
    max_json_depth: int | None = None,
    input_format: str | None = None,
) -> tuple[list[Sample], list[InputError]]:
    """Read samples from a .jsonl, .csv (.tsv), .json (array of objects) or .parquet file
    (one row each, read in record batches: `assay.inputs.parquet`), or from an
    OpenTelemetry trace export (OTLP JSON, one sample per trace: `assay.inputs.otlp`). ``path``
    may be a URL that pyarrow's file systems read (``file://``, ``s3://``, ``gs://``,
    ``hdfs://``; not for OTLP): `assay.inputs.locations.read_location` reads it, with the same
    messages, naming the URL.

    ``input_format`` (jsonl, csv, json, parquet or otlp) overrides what the suffix says; without
    it, a .json or .jsonl file that starts like an OTLP export is read as one. Returns the
    valid samples and the errors of the invalid records (a field nesting deeper than
    ``max_json_depth``, default the configured one, is one). Raises `FileNotFoundError`
    for a missing file and `InputErrors` in strict mode or when the file cannot be read
    at all (a directory, no permission, not a known format), and `MissingExtra` (naming
    the pip command) for a .parquet file without pyarrow installed.
    """
    if is_url(path):
        return read_location(
            path, strict, max_json_depth=depth_setting(max_json_depth), input_format=input_format
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
    reader = reader_suffix(source, suffix, input_format)
    if reader == ".otlp" or (input_format is None and suffix in {".json", ".jsonl"}):
        try:
            if reader == ".otlp" or is_otlp(path):
                return read_otlp(path, strict=strict)
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise InputErrors([InputError(source, None, None, f"cannot read: {reason}")]) from None
    suffix = reader
    try:
        if suffix == ".json":
            records, unit = json_records(path, errors, strict)
        elif suffix in {".csv", ".tsv"}:
            records, unit = csv_records(path, errors, strict), "line"
        elif suffix == ".parquet":
            records, unit = parquet_records(path), "row"
        else:
            records, unit = jsonl_records(path, errors, strict), "line"
        samples, more = samples_from_records(
            records, source, strict, unit, max_json_depth=depth_setting(max_json_depth)
        )
    except FileNotFoundError:
        raise
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise InputErrors([InputError(source, None, None, f"cannot read: {reason}")]) from None
    return samples, in_file_order(errors + more)
