"""The ``assay`` command line: a thin layer over the library's public functions.

Each command lives in its own module of this package and registers itself on ``app``
(`assay.cli.application`); importing this package imports them all.
"""

from __future__ import annotations

from assay.cli import compare_cmd, evaluate, json_eval, metrics_cmd, run, serve
from assay.cli.application import app

__all__ = ["app", "compare_cmd", "evaluate", "json_eval", "metrics_cmd", "run", "serve"]
