"""Parquet input: each row of a ``.parquet`` file is one sample record.

Columns are read in record batches (`pyarrow.parquet.ParquetFile.iter_batches`), so the
Arrow data of only one batch is in memory at a time; the records then go through the same
validation as JSONL and CSV records (`assay.inputs.records.samples_from_records`), which
collects the valid samples into a list, so the samples themselves are all held at once.

How Arrow values arrive: list columns as Python lists, struct columns as dicts, map columns
as dicts (a key given twice with different values is an error of its row, as in JSON). A
null cell is a missing field, and a null field of a struct is a missing key (a struct
column gives every row every field of its type, so absent and null cannot be told apart);
a null *inside* a list is kept, and is an error where the field needs text. Rows are
numbered from 1 in messages (``row 3``). pyarrow comes with the ``pandas`` extra.

``turns``, ``trace`` and ``expected_tool_calls`` (under any of their names) given as
text holding a JSON array are read as that array: how an Assay ``--out`` Parquet file
holds them (`assay.outputs.sinks`), so it reads back as input; text that is not a JSON
array is left as it is, for validation to reject.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from assay.core.extras import require
from assay.core.sample import Sample, key_lookup
from assay.inputs.records import InputError, InputErrors, JsonObject, json_object, loads_json

__all__ = ["parquet_records"]

#: rows per record batch: small enough that a batch of long contexts stays a few MB
BATCH_ROWS = 1024


def _python(value: Any) -> Any:
    """An Arrow value as the JSON-like shape the readers share: maps become dicts, null
    struct fields are dropped. Iterative, so deep nesting costs no recursion."""
    root: list[Any] = [value]
    stack: list[tuple[Any, Any, Any]] = [(root, 0, value)]
    while stack:
        parent, key, item = stack.pop()
        if (
            isinstance(item, list)
            and item
            and all(isinstance(entry, tuple) and len(entry) == 2 for entry in item)
        ):
            item = json_object(list(item))  # a map column: key/value pairs
        if isinstance(item, dict):
            kept = JsonObject((name, entry) for name, entry in item.items() if entry is not None)
            kept.duplicate = getattr(item, "duplicate", None)
            stack.extend((kept, name, entry) for name, entry in kept.items())
            item = kept
        elif isinstance(item, list):
            item = list(item)
            stack.extend((item, index, entry) for index, entry in enumerate(item))
        parent[key] = item
    return root[0]


#: the fields of objects an Assay --out Parquet file holds as JSON text
_ITEM_FIELDS = frozenset({"turns", "trace", "expected_tool_calls"})


def _items_from_text(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with its turns, trace and reference calls given as JSON array text
    parsed (module docstring)."""
    lookup = key_lookup(Sample)
    for key, value in record.items():
        if type(value) is not str or not value.lstrip().startswith("["):
            continue
        if lookup.get(key, lookup.get(key.lower())) in _ITEM_FIELDS:
            try:
                record[key] = loads_json(value)
            except (json.JSONDecodeError, RecursionError):
                continue  # left as text: validation says the field needs a list
    return record


def parquet_records(
    path: Path | str,
    *,
    source: str | None = None,
    filesystem: Any = None,
    row_groups: list[int] | None = None,
    first_row: int = 0,
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(row number, record) for each row of the Parquet file at ``path``, one record batch
    at a time. Raises `MissingExtra` (naming the pip command) when pyarrow is not
    installed, and `InputErrors` when the file is not a readable Parquet file; both before
    the first record, since the file is opened here, not when iteration starts.

    For a part of a file (`assay.inputs.locations`): ``filesystem`` a pyarrow file system holding
    ``path``, ``source`` the name messages use (default ``path``), ``row_groups`` the row
    groups to read (default all) and ``first_row`` the rows of the file before them."""
    parquet = require("pyarrow.parquet", "reading .parquet")
    import pyarrow

    source = source or str(path)
    try:
        handle = parquet.ParquetFile(str(path) if filesystem else path, filesystem=filesystem)
    except pyarrow.ArrowException as exc:
        raise InputErrors([InputError(source, None, None, f"not a Parquet file: {exc}")]) from None

    def rows() -> Iterator[tuple[int, dict[str, Any]]]:
        number = first_row
        with handle:
            try:
                for batch in handle.iter_batches(batch_size=BATCH_ROWS, row_groups=row_groups):
                    for record in batch.to_pylist():
                        number += 1
                        yield number, _items_from_text(_python(record))
            except pyarrow.ArrowException as exc:
                message = f"cannot read the rows after row {number}: {exc}"
                raise InputErrors([InputError(source, None, None, message)]) from None

    return rows()
