"""Result sinks: JSONL written sample by sample, CSV and Parquet written from rows."""

from __future__ import annotations

import contextlib
import functools
import re
from pathlib import Path
from typing import Any

from assay.core.jsonout import line_bytes, to_jsonable
from assay.core.redaction import known_secrets, redact
from assay.core.result import MetricResult
from assay.core.sample import Sample

__all__ = ["JsonlSink", "evidence_of", "write_table"]


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
    row: dict[str, Any], results: dict[str, MetricResult], secrets: list[str] | None = None
) -> bytes:
    """One output line (UTF-8 JSON, `line_bytes`): the row and each metric's evidence,
    redacted of ``secrets`` (default `known_secrets()`; `evidence_of`).

    A line in whose JSON text no known secret and nothing a redaction rule acts on
    occurs is the same redacted or not, so it is written from the results as they are;
    any other line is built by `evidence_of`."""
    secrets = known_secrets() if secrets is None else secrets
    verbatim = _verbatim_in_json(tuple(secrets))
    if verbatim is not None:
        line = line_bytes({**row, "evidence": {name: _evidence(r) for name, r in results.items()}})
        if not _maybe_credential(line) and not any(s in line for s in verbatim):
            return line
    return line_bytes({**row, "evidence": evidence_of(results, secrets)})


class JsonlSink:
    """Appends one JSON line per finished sample; `flush` (after each chunk) and `close`
    write them out, so an interrupt loses nothing that was scored.

    ``append=True`` keeps the lines already in the file (a resumed run adds its samples).
    The secrets redacted are read again at each flush.
    """

    def __init__(self, path: str | Path, append: bool = False) -> None:
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
        self._handle.write(_line(row, results, self._secrets) + b"\n")

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


def write_table(rows: list[dict[str, Any]], path: str | Path) -> None:
    """Write flat rows as CSV or Parquet, chosen by the file extension (the pandas extra)."""
    from assay.core.extras import require

    pd = require("pandas", f"writing {Path(path).suffix}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    frame = pd.DataFrame([to_jsonable(r) for r in rows])
    if path.suffix.lower() == ".csv":
        frame.to_csv(path, index=False)
    elif path.suffix.lower() == ".parquet":
        frame.to_parquet(path, index=False)
    else:
        raise ValueError(f"{path}: output must end in .jsonl, .csv or .parquet")
