"""The CLI's consoles: results on stdout, progress and messages on stderr.

When stdout is not a terminal (a pipe, a CI log) rich would wrap tables at 80 columns;
results are printed 160 wide there instead. Messages never wrap mid-path. Both consoles
cut known secrets (API keys, URL passwords) out of every string they print: a message
that quotes a server's reply or a URL never shows a credential. A closed pipe raises
`BrokenPipeError` for the command to report (exit 2), see `silence_stdout`.
"""

from __future__ import annotations

import errno
import os
import re
import sys
from typing import Any

from rich.console import Console

from assay.core.redaction import REDACTED, known_secrets, redact_text

__all__ = ["RedactingConsole", "messages", "results", "silence_stdout"]

_BARE_MARKER = re.compile(r"(?<!\\)" + re.escape(REDACTED))


class RedactingConsole(Console):
    """A rich Console whose ``print`` redacts secrets from string arguments."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        secrets = known_secrets()
        markup = kwargs.get("markup", self._markup) is not False

        def clean(text: str) -> str:
            text = redact_text(text, secrets)
            # the marker must show as written, not be read as a markup tag and vanish
            return _BARE_MARKER.sub(rf"\\{REDACTED}", text) if markup else text

        super().print(*(clean(o) if isinstance(o, str) else o for o in objects), **kwargs)

    def on_broken_pipe(self) -> None:
        """A closed pipe is an output failure for the command to report (rich would exit 1
        silently, the code of a failed gate)."""
        raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))


def results() -> Console:
    """Console for tables and summaries (stdout)."""
    return RedactingConsole(width=None if sys.stdout.isatty() else 160)


def messages() -> Console:
    """Console for errors, warnings and progress (stderr)."""
    return RedactingConsole(stderr=True, soft_wrap=True)


def silence_stdout() -> None:
    """After a write to stdout failed (a closed pipe, a full disk), point the process's
    stdout at the null device: Python's flush at exit would otherwise fail again and print
    a traceback-like message. Nothing to do where stdout is no file (captured output)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)
