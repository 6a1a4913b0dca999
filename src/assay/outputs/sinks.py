"""Result sinks: JSONL written sample by sample, CSV and Parquet written from rows."""

from __future__ import annotations

import contextlib
import functools
import re
from pathlib import Path
from typing import Any

from assay.core.jsonout import dumps, to_jsonable
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
#: characters JSON escapes: a secret holding one is not found verbatim in JSON text
_ESCAPED = re.compile(r'["\\\x00-\x1f]')


@functools.lru_cache(maxsize=8)
def _verbatim_in_json(secrets: tuple[str, ...]) -> bool:
    """Whether every secret appears in JSON text as it is (holds nothing JSON escapes)."""
    return not any(_ESCAPED.search(secret) for secret in secrets)


def _line(row: dict[str, Any], results: dict[str, MetricResult]) -> str:
    """One output line: the row and each metric's evidence, redacted (`evidence_of`).

    A line in whose JSON text no known secret and nothing a redaction rule acts on
    occurs is the same redacted or not, so it is written from the results as they are;
    any other line is built by `evidence_of`."""
    secrets = known_secrets()
    if _verbatim_in_json(tuple(secrets)):
        text = dumps({**row, "evidence": {name: _evidence(r) for name, r in results.items()}})
        if not _MAYBE_CREDENTIAL.search(text) and not any(s in text for s in secrets):
            return text
    return dumps({**row, "evidence": evidence_of(results, secrets)})


class JsonlSink:
    """Appends one JSON line per finished sample and flushes, so an interrupt loses nothing.

    ``append=True`` keeps the lines already in the file (a resumed run adds its samples).
    """

    def __init__(self, path: str | Path, append: bool = False) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if append and self.path.exists() and self.path.stat().st_size > 0:
            with self.path.open("rb+") as handle:  # end an interrupted last line
                handle.seek(-1, 2)
                if handle.read(1) != b"\n":
                    handle.write(b"\n")
        self._handle = self.path.open(
            "a" if append else "w", encoding="utf-8", errors="backslashreplace"
        )

    def write(self, row: dict[str, Any], sample: Sample, results: dict[str, MetricResult]) -> None:
        self._handle.write(_line(row, results) + "\n")
        self._handle.flush()

    def close(self) -> None:
        """Close the file. Every line was flushed when written, so only a line whose write
        already failed (and was reported) can be pending: it is not reported again."""
        with contextlib.suppress(OSError):
            self._handle.close()


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
