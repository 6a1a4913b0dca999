"""Readers: JSONL, CSV, JSON array and pandas DataFrame into `Sample` objects.

A malformed record never stops the others: each problem becomes an `InputError` naming
the file, the line (or item) and the field; ``strict=True`` raises the first instead.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from assay.sample import FIELD_ALIASES, Sample

__all__ = [
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
_JSON_FIELDS = {"expected_json", "output_json", "json_schema", "tags", "metadata", "trace"}


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


def _field_hint(field: str) -> str:
    for canonical, aliases in FIELD_ALIASES.items():
        if field in aliases:
            others = [a for a in aliases if a != field][:3]
            return f" (field {canonical!r}; also accepted as {', '.join(map(repr, others))})"
    return ""


def _validation_errors(
    exc: ValidationError, source: str, line: int | None, unit: str
) -> list[InputError]:
    errors = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or None
        got = err.get("input")
        got_text = ""
        if got is not None and not isinstance(got, dict):
            shown = repr(got)
            got_text = f" (got {shown[:60]}{'...' if len(shown) > 60 else ''})"
        field_name = loc.split(".")[0] if loc else None
        hint = _field_hint(field_name) if field_name else ""
        errors.append(InputError(source, line, loc, f"{err['msg']}{got_text}{hint}", unit))
    return errors


def _to_sample(
    record: Any, source: str, line: int | None, unit: str
) -> tuple[Sample | None, list[InputError]]:
    if not isinstance(record, dict):
        kind = type(record).__name__
        return None, [InputError(source, line, None, f"expected a JSON object, got {kind}", unit)]
    try:
        return Sample.model_validate(record), []
    except ValidationError as exc:
        return None, _validation_errors(exc, source, line, unit)


def samples_from_records(
    records: Iterable[tuple[int | None, Any]],
    source: str = "<records>",
    strict: bool = False,
    unit: str = "line",
) -> tuple[list[Sample], list[InputError]]:
    """Validate (position, record) pairs into samples, collecting errors.

    ``unit`` names the position in messages: line, item or row.
    """
    samples: list[Sample] = []
    errors: list[InputError] = []
    for line, record in records:
        sample, problems = _to_sample(record, source, line, unit)
        if problems:
            if strict:
                raise InputErrors(problems)
            errors.extend(problems)
        elif sample is not None:
            samples.append(sample)
    return samples, errors


def _jsonl_records(path: Path, errors: list[InputError], strict: bool) -> Iterator[tuple[int, Any]]:
    with path.open(encoding="utf-8-sig") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                yield number, json.loads(raw)
            except json.JSONDecodeError as exc:
                problem = InputError(
                    str(path), number, None, f"not valid JSON: {exc.msg} at column {exc.colno}"
                )
                if strict:
                    raise InputErrors([problem]) from exc
                errors.append(problem)


def _csv_cell(field: str, value: str, source: str, line: int) -> Any:
    if value == "":
        return None
    canonical = next((c for c, a in FIELD_ALIASES.items() if field in a), field)
    if canonical in _LIST_FIELDS or canonical in _JSON_FIELDS:
        text = value.strip()
        if text[:1] in "[{":
            try:
                return json.loads(text)
            except json.JSONDecodeError as exc:
                raise ValueError(f"column holds invalid JSON: {exc.msg}") from exc
        if canonical in _LIST_FIELDS and canonical not in _JSON_FIELDS:
            return [text]
    return value


def _csv_records(path: Path, errors: list[InputError], strict: bool) -> Iterator[tuple[int, Any]]:
    with path.open(encoding="utf-8-sig", newline="") as handle:
        reader = csv.DictReader(handle)
        if reader.fieldnames is None:
            return
        for row in reader:
            line = reader.line_num
            record: dict[str, Any] = {}
            bad = False
            for key, value in row.items():
                if key is None:
                    problem = InputError(str(path), line, None, "more cells than header columns")
                    if strict:
                        raise InputErrors([problem])
                    errors.append(problem)
                    bad = True
                    break
                try:
                    record[key] = _csv_cell(key, value or "", str(path), line)
                except ValueError as exc:
                    problem = InputError(str(path), line, key, str(exc))
                    if strict:
                        raise InputErrors([problem]) from exc
                    errors.append(problem)
                    bad = True
                    break
            if not bad:
                yield line, record


def read_samples(path: str | Path, strict: bool = False) -> tuple[list[Sample], list[InputError]]:
    """Read samples from a .jsonl, .csv or .json (array of objects) file.

    Returns the valid samples and the errors of the invalid records. Raises
    `FileNotFoundError` for a missing file and `InputErrors` in strict mode or when the
    file's format cannot be read at all.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    suffix = path.suffix.lower()
    errors: list[InputError] = []
    if suffix in {".jsonl", ".ndjson"}:
        samples, more = samples_from_records(
            _jsonl_records(path, errors, strict), str(path), strict
        )
    elif suffix == ".csv":
        samples, more = samples_from_records(_csv_records(path, errors, strict), str(path), strict)
    elif suffix == ".json":
        try:
            data = json.loads(path.read_text(encoding="utf-8-sig"))
        except json.JSONDecodeError as exc:
            raise InputErrors(
                [InputError(str(path), exc.lineno, None, f"not valid JSON: {exc.msg}")]
            ) from exc
        if isinstance(data, dict) and isinstance(data.get("samples"), list):
            data = data["samples"]
        if not isinstance(data, list):
            raise InputErrors(
                [InputError(str(path), None, None, "expected a JSON array of sample objects")]
            )
        samples, more = samples_from_records(
            ((i, rec) for i, rec in enumerate(data, start=1)), str(path), strict, unit="item"
        )
    else:
        raise InputErrors(
            [InputError(str(path), None, None, "unknown format: use .jsonl, .csv or .json")]
        )
    return samples, errors + more


def samples_from_dataframe(df: Any, strict: bool = False) -> tuple[list[Sample], list[InputError]]:
    """Samples from a pandas DataFrame (one row each; NaN cells are treated as absent)."""
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
    return samples_from_records(records, "<DataFrame>", strict, unit="row")
