"""The CLI's consoles: results on stdout, progress and messages on stderr.

When stdout is not a terminal (a pipe, a CI log) rich would wrap tables at 80 columns;
results are printed 160 wide there instead. Messages never wrap mid-path. Both consoles
cut known secrets (API keys, URL passwords) out of every string they print: a message
that quotes a server's reply or a URL never shows a credential.
"""

from __future__ import annotations

import sys
from typing import Any

from rich.console import Console

from assay.redaction import known_secrets, redact_text

__all__ = ["RedactingConsole", "messages", "results"]


class RedactingConsole(Console):
    """A rich Console whose ``print`` redacts secrets from string arguments."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        secrets = known_secrets()
        super().print(
            *(redact_text(o, secrets) if isinstance(o, str) else o for o in objects), **kwargs
        )


def results() -> Console:
    """Console for tables and summaries (stdout)."""
    return RedactingConsole(width=None if sys.stdout.isatty() else 160)


def messages() -> Console:
    """Console for errors, warnings and progress (stderr)."""
    return RedactingConsole(stderr=True, soft_wrap=True)
