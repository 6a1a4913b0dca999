"""Shared by the bad-input tests (test_robustness.py, test_robustness_cli.py): the CLI
``runner``, and ``_lines``, which writes rows (objects as JSON, strings as they are) as
the lines of a file."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

runner = CliRunner()


def _lines(path: Path, rows: list) -> Path:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path
