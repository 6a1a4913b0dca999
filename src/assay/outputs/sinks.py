"""Result sinks: JSONL written sample by sample, CSV and Parquet written from rows.

The row of a sample (`output_row`; docs/input.md, "Output files"), key by key:

- ``id``: the sample's id (one given without an id has its position: ``line-3``);
- what the sample held and the target said, where the sample has it (`SAMPLE_FIELDS`):
  ``query``, ``response``, ``expected``, ``contexts`` (a list of texts), ``turns`` (the
  conversation, a replayed one with the target's replies), ``trace`` (the tool calls,
  left out where they are those of ``turns``) and ``expected_tool_calls``;
- ``tag.KEY`` for each tag; ``target.status``, ``target.http_status``, ``target.reason``,
  ``duration`` and ``first_token_time`` for a sample ``assay run`` sent to its target;
- each metric's value under its name and its components as ``METRIC.COMPONENT``;
- in JSONL only, ``evidence``: each metric's method, reason, error, details, signature.

A .csv cell holds a list or an object as JSON text; a .parquet file holds ``contexts``
as a list of strings and ``turns``, ``trace`` and ``expected_tool_calls`` as JSON text
(their objects' keys and types vary from row to row). ``fields`` (``--out-fields``)
keeps only the keys named, in that order, absent ones as null.
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from assay.core.jsonout import line_bytes, to_jsonable
from assay.core.redaction import known_secrets, redact
from assay.core.result import MetricResult
from assay.core.sample import Sample
from assay.core.steps import trace_from_turns
from assay.evaluation.runner import flat_row

__all__ = [
    "EVIDENCE",
    "ITEM_FIELDS",
    "SAMPLE_FIELDS",
    "JsonlSink",
    "evidence_of",
    "output_row",
    "trimmed",
    "write_table",
]

#: the sample's fields a row carries, in this order, where the sample has them
SAMPLE_FIELDS = (
    "query",
    "response",
    "expected",
    "contexts",
    "turns",
    "trace",
    "expected_tool_calls",
)
#: the fields holding objects (turns, steps, calls): JSON text in a table, redacted as
#: evidence is
ITEM_FIELDS = ("turns", "trace", "expected_tool_calls")
_TEXT_FIELDS = tuple(name for name in SAMPLE_FIELDS if name not in ITEM_FIELDS)
#: the key of a JSONL line's per-metric evidence
EVIDENCE = "evidence"


def output_row(sample: Sample, results: dict[str, MetricResult]) -> dict[str, Any]:
    """The row of one scored sample in an ``--out`` file (module docstring)."""
    fields = sample.__dict__
    row: dict[str, Any] = {"id": sample.id}
    for name in _TEXT_FIELDS:
        value = fields[name]
        if value is not None:
            row[name] = value
    for name in ITEM_FIELDS:
        items = fields[name]
        if items is None:
            continue
        if name == "trace" and sample.turns and items == trace_from_turns(sample.turns):
            continue  # the conversation's own tool calls: ``turns`` holds them
        row[name] = [item.model_dump(mode="json", exclude_none=True) for item in items]
    return flat_row(sample, results, row)


def trimmed(row: dict[str, Any], fields: Sequence[str] | None) -> dict[str, Any]:
    """``row`` with only ``fields``, in their order (None for one it lacks); all of it
    when ``fields`` is None."""
    if fields is None:
        return row
    return {name: row.get(name) for name in fields if name != EVIDENCE}


def _evidence(result: MetricResult) -> dict[str, Any]:
    """A result's method, reason, error, details and signature, as they are."""
    return {
        "method": result.method,
        "reason": result.reason,
        "error": result.error,
        "details": result.details,
        "signature": result.signature,
    }


def evidence_of(
    results: dict[str, MetricResult], secrets: list[str] | None = None
) -> dict[str, Any]:
    """Per-metric method, reason, error and details, for JSON outputs, redacted of
    ``secrets`` (default: `known_secrets()`)."""
    secrets = known_secrets() if secrets is None else secrets
    return {
        name: redact(to_jsonable(_evidence(r)), secrets, by_name=False)
        for name, r in results.items()
    }


#: text that a redaction rule could act on: a bearer or basic credential, a URL (its
#: password), a query parameter (a credential-named one); the JSON text of a line is
#: searched, and a line without any is written without walking its evidence
_MAYBE_CREDENTIAL = re.compile(r"bearer|basic|://|[?&][A-Za-z0-9_.\-]{1,60}=", re.I)
_QUERY_PARAMETER = re.compile(rb"[?&][A-Za-z0-9_.\-]{1,60}=")
#: characters JSON escapes: a secret holding one is not found verbatim in JSON text
_ESCAPED = re.compile(r'["\\\x00-\x1f]')


@functools.lru_cache(maxsize=8)
def _verbatim_in_json(secrets: tuple[str, ...]) -> tuple[bytes, ...] | None:
    """The secrets as UTF-8, when every one appears in JSON text as it is (holds nothing
    JSON escapes); else None."""
    if any(_ESCAPED.search(secret) for secret in secrets):
        return None
    return tuple(secret.encode("utf-8", "surrogatepass") for secret in secrets)


def _maybe_credential(line: bytes) -> bool:
    """`_MAYBE_CREDENTIAL` searched in a line's JSON text: by plain substring tests
    where the text is ASCII (the pattern's case folding then is ASCII's), by the
    pattern itself otherwise."""
    if not line.isascii():
        return _MAYBE_CREDENTIAL.search(line.decode("utf-8")) is not None
    if b"://" in line:
        return True
    lowered = line.lower()
    if b"bearer" in lowered or b"basic" in lowered:
        return True
    return (b"?" in line or b"&" in line) and _QUERY_PARAMETER.search(line) is not None


def _line(
    row: dict[str, Any],
    results: dict[str, MetricResult],
    secrets: list[str] | None = None,
    evidence: bool = True,
) -> bytes:
    """One output line (UTF-8 JSON, `line_bytes`): the row and, with ``evidence``, each
    metric's evidence; the evidence and the row's `ITEM_FIELDS` redacted of ``secrets``
    (default `known_secrets()`; `evidence_of`), as the store keeps them.

    A line in whose JSON text no known secret and nothing a redaction rule acts on
    occurs is the same redacted or not, so it is written from the results as they are;
    any other line is built by `evidence_of`."""
    secrets = known_secrets() if secrets is None else secrets
    verbatim = _verbatim_in_json(tuple(secrets))
    if verbatim is not None:
        found = {name: _evidence(r) for name, r in results.items()} if evidence else None
        line = line_bytes({**row, EVIDENCE: found} if evidence else row)
        if not _maybe_credential(line) and not any(s in line for s in verbatim):
            return line
    row = {
        key: redact(value, secrets, by_name=False) if key in ITEM_FIELDS else value
        for key, value in row.items()
    }
    return line_bytes({**row, EVIDENCE: evidence_of(results, secrets)} if evidence else row)


class JsonlSink:
    """Appends one JSON line per finished sample; `flush` (after each chunk) and `close`
    write them out, so an interrupt loses nothing that was scored.

    ``append=True`` keeps the lines already in the file (a resumed run adds its samples).
    ``fields``: the keys each line keeps (`trimmed`; ``evidence`` among them keeps the
    evidence), default all. The secrets redacted are read again at each flush.
    """

    def __init__(
        self, path: str | Path, append: bool = False, fields: Sequence[str] | None = None
    ) -> None:
        self.fields = list(fields) if fields is not None else None
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if append and self.path.exists() and self.path.stat().st_size > 0:
            with self.path.open("rb+") as handle:  # end an interrupted last line
                handle.seek(-1, 2)
                if handle.read(1) != b"\n":
                    handle.write(b"\n")
        self._handle = self.path.open("ab" if append else "wb")
        self._secrets: list[str] | None = None

    def write(self, row: dict[str, Any], sample: Sample, results: dict[str, MetricResult]) -> None:
        if self._secrets is None:
            self._secrets = known_secrets()
        evidence = self.fields is None or EVIDENCE in self.fields
        line = _line(trimmed(row, self.fields), results, self._secrets, evidence)
        self._handle.write(line + b"\n")

    def flush(self) -> None:
        """Write out the lines so far (raises OSError when the disk refuses them)."""
        self._secrets = None
        self._handle.flush()

    def close(self) -> None:
        """Write out what is pending and close the file. A write that fails here (a
        disk that filled since the last flush) raises OSError once; the file is closed
        either way."""
        try:
            self._handle.close()
        except OSError:
            with contextlib.suppress(OSError):
                self._handle.close()
            raise


def _cells(row: dict[str, Any], parquet: bool) -> dict[str, Any]:
    """A row's lists and objects as a table holds them (module docstring): JSON text,
    but for a Parquet file's ``contexts``, a list of strings."""
    out = to_jsonable(row)
    for key, value in out.items():
        if isinstance(value, list | dict) and not (parquet and key == "contexts"):
            out[key] = json.dumps(value, ensure_ascii=False)
    return out


def write_table(
    rows: list[dict[str, Any]], path: str | Path, fields: Sequence[str] | None = None
) -> None:
    """Write rows as CSV or Parquet, chosen by the file extension (the pandas extra),
    with only ``fields`` (`trimmed`) when given."""
    from assay.core.extras import require

    pd = require("pandas", f"writing {Path(path).suffix}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    parquet = path.suffix.lower() == ".parquet"
    frame = pd.DataFrame(
        [_cells(trimmed(r, fields), parquet) for r in rows],
        columns=[f for f in fields if f != EVIDENCE] if fields is not None else None,
    )
    if path.suffix.lower() == ".csv":
        frame.to_csv(path, index=False)
    elif path.suffix.lower() == ".parquet":
        frame.to_parquet(path, index=False)
    else:
        raise ValueError(f"{path}: output must end in .jsonl, .csv or .parquet")
