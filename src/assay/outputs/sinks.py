"""Result sinks: JSONL written sample by sample, CSV and Parquet written from rows."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from assay.core.jsonout import dumps, to_jsonable
from assay.core.redaction import known_secrets, redact
from assay.core.result import MetricResult
from assay.core.sample import Sample

__all__ = ["JsonlSink", "evidence_of", "write_table"]


def evidence_of(results: dict[str, MetricResult]) -> dict[str, Any]:
    """Per-metric method, reason, error and details, for JSON outputs."""
    secrets = known_secrets()
    return {
        name: redact(
            to_jsonable(
                {
                    "method": r.method,
                    "reason": r.reason,
                    "error": r.error,
                    "details": r.details,
                    "signature": r.signature,
                }
            ),
            secrets,
            by_name=False,
        )
        for name, r in results.items()
    }


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
        record = dict(row)
        record["evidence"] = evidence_of(results)
        self._handle.write(dumps(record) + "\n")
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
