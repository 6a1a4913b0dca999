"""`read_samples`: a dataset file or URL of any supported format into samples, with the
problems of its malformed records."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assay.core.label_values import LabelScale
from assay.core.sample import Sample
from assay.inputs.formats import csv_records, json_records, jsonl_records, reader_suffix
from assay.inputs.locations import is_url, read_location
from assay.inputs.otlp import is_otlp, read_otlp
from assay.inputs.parquet import parquet_records
from assay.inputs.records import (
    InputError,
    InputErrors,
    LabelReading,
    depth_setting,
    in_file_order,
    iter_samples,
)

__all__ = ["SampleStream", "read_labelled_samples", "read_samples", "stream_samples"]


@dataclass
class SampleStream:
    """The samples of a dataset, read as they are asked for, and the errors of the invalid
    records met so far (in file order). ``lines``: the lines of a local JSONL file (an
    upper bound of its samples, for a progress bar), else None."""

    samples: Iterator[Sample]
    errors: list[InputError]
    lines: int | None = None


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
    stream = stream_samples(path, strict, max_json_depth=max_json_depth, input_format=input_format)
    samples = list(stream.samples)
    return samples, in_file_order(stream.errors)


def read_labelled_samples(
    source: str | Path,
    *,
    label_field: str | None = None,
    scale: LabelScale | None = None,
    **read_kwargs: Any,
) -> list[Sample]:
    """The samples of ``source`` as `read_samples` reads them, with their verdicts read
    as ``label_field`` and ``scale`` say (`assay.inputs.records.LabelReading`):
    ``label_field`` names the column holding each sample's one verdict (its value goes
    into ``Sample.label``, as the columns label, human_label, human_score and rating do);
    with ``scale`` (``--label-scale 1-5``) every verdict, those of a ``labels`` object
    too, is a rating on it, normalised to [0, 1] (`assay.core.labels.label_value`).

    Nothing is dropped silently: `InputErrors` lists every invalid record (a verdict that
    is not one names the file, line and column), and is raised too when ``label_field``
    gives no sample a verdict (a misspelt column). ``read_kwargs``: those of
    `read_samples` (``max_json_depth``, ``input_format``)."""
    reading = LabelReading(label_field, scale)
    stream = stream_samples(source, labels=reading, **read_kwargs)
    samples = list(stream.samples)
    if stream.errors:
        raise InputErrors(in_file_order(stream.errors))
    if label_field is not None and all(s.label is None for s in samples):
        raise InputErrors(
            [
                InputError(
                    str(source),
                    None,
                    label_field,
                    "no record has a verdict in this column (named by --label-field): "
                    "check its spelling",
                )
            ]
        )
    return samples


def stream_samples(
    path: str | Path,
    strict: bool = False,
    *,
    max_json_depth: int | None = None,
    input_format: str | None = None,
    count_lines: bool = False,
    labels: LabelReading | None = None,
) -> SampleStream:
    """`read_samples` as a stream: a local .jsonl, .csv, .json or .parquet file is read
    record by record as the samples are asked for (an OTLP export, whose traces are
    assembled from the whole file, and a URL are read first). The same samples and
    errors; a missing file or directory raises at once, a record that fails ``strict``
    or a file that cannot be read raises `InputErrors` when it is reached.
    ``count_lines``: count a JSONL file's lines first (``SampleStream.lines``).
    ``labels``: how the verdicts are read (`read_labelled_samples`).
    """
    if is_url(path):
        samples, errors = read_location(
            path,
            strict,
            max_json_depth=depth_setting(max_json_depth),
            input_format=input_format,
            labels=labels,
        )
        return SampleStream(iter(samples), errors)
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
    reader = reader_suffix(source, suffix, input_format)
    if reader == ".otlp" or (input_format is None and suffix in {".json", ".jsonl"}):
        try:
            if reader == ".otlp" or is_otlp(path):
                samples, errors = read_otlp(path, strict=strict)
                return SampleStream(iter(samples), in_file_order(errors))
        except OSError as exc:
            raise _unreadable(source, exc) from None
    errors: list[InputError] = []
    if reader == ".json":
        try:
            records, unit = json_records(path, errors, strict)
        except OSError as exc:
            raise _unreadable(source, exc) from None
    elif reader in {".csv", ".tsv"}:
        records, unit = csv_records(path, errors, strict), "line"
    elif reader == ".parquet":
        records, unit = parquet_records(path), "row"
    else:
        records, unit = jsonl_records(path, errors, strict), "line"
    samples = iter_samples(
        records,
        source,
        strict,
        unit,
        errors=errors,
        max_json_depth=depth_setting(max_json_depth),
        labels=labels,
    )
    lines = _count_lines(path) if count_lines and reader == ".jsonl" else None
    return SampleStream(_read_or_say(samples, source), errors, lines)


def _unreadable(source: str, exc: OSError) -> InputErrors:
    reason = exc.strerror or str(exc)
    return InputErrors([InputError(source, None, None, f"cannot read: {reason}")])


def _read_or_say(samples: Iterator[Sample], source: str) -> Iterator[Sample]:
    """The samples; a file that cannot be read raises `InputErrors` saying why."""
    try:
        yield from samples
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise _unreadable(source, exc) from None


def _count_lines(path: Path) -> int | None:
    """The number of lines of a file (read in 1 MiB blocks), None when it cannot be read."""
    lines = 0
    last = b"\n"
    try:
        with path.open("rb") as handle:
            while block := handle.read(1 << 20):
                lines += block.count(b"\n")
                last = block[-1:]
    except OSError:
        return None
    return lines + (last != b"\n")
