"""OpenTelemetry traces (OTLP JSON) as Assay samples: one sample per trace.

``read_otlp("traces.json")`` streams the file (JSON lines or one document), groups the
spans into traces and maps each trace to a sample through the GenAI semantic conventions
and OpenInference attributes (`assay.inputs.otlp.traces` says which field comes from where).
Malformed spans are reported with their span id and skipped; the other traces are read.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from assay.core.sample import Sample
from assay.inputs.otlp.reader import MalformedSpan, is_otlp, iter_spans
from assay.inputs.otlp.traces import DEFAULT_WINDOW, assemble_traces, trace_record
from assay.inputs.records import InputError, InputErrors, samples_from_records

__all__ = ["DEFAULT_WINDOW", "is_otlp", "otlp_records", "read_otlp"]


def otlp_records(
    path: str | Path, errors: list[InputError], window: int = DEFAULT_WINDOW
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(trace number, sample record) for each trace of an OTLP JSON file, in the order the
    traces complete; problems are appended to ``errors`` as they are met."""
    source = str(path)
    number = 0
    for item in assemble_traces(iter_spans(path), window):
        if isinstance(item, MalformedSpan):
            field = f"span {item.span_id}" if item.span_id else None
            errors.append(InputError(source, item.line, field, item.message))
            continue
        number += 1
        try:
            record = trace_record(item)
        except ValueError as exc:  # a value over a limit: this trace's error, not the file's
            errors.append(InputError(source, None, f"trace {item[0].trace_id}", str(exc)))
            continue
        yield number, record


def read_otlp(
    path: str | Path, strict: bool = False, window: int = DEFAULT_WINDOW
) -> tuple[list[Sample], list[InputError]]:
    """Samples (one per trace) from an OTLP JSON trace export, and the problems met.

    ``strict=True`` raises `InputErrors` at the first malformed span or trace.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    errors: list[InputError] = []
    records = otlp_records(path, errors, window)
    samples, more = samples_from_records(
        _checked(records, errors, strict), str(path), strict, "trace"
    )
    return samples, errors + more


def _checked(
    records: Iterator[tuple[int, dict[str, Any]]], errors: list[InputError], strict: bool
) -> Iterator[tuple[int, dict[str, Any]]]:
    for item in records:
        if strict and errors:
            raise InputErrors(errors[:1])
        yield item
    if strict and errors:
        raise InputErrors(errors[:1])
