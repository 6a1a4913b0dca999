"""The CLI's consoles: results on stdout, progress and messages on stderr.

When stdout is not a terminal (a pipe, a CI log) rich would wrap tables at 80 columns;
results are printed 160 wide there instead. Messages never wrap mid-path.
"""

from __future__ import annotations

import sys

from rich.console import Console

__all__ = ["messages", "results"]


def results() -> Console:
    """Console for tables and summaries (stdout)."""
    return Console(width=None if sys.stdout.isatty() else 160)


def messages() -> Console:
    """Console for errors, warnings and progress (stderr)."""
    return Console(stderr=True, soft_wrap=True)
