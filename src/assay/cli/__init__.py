"""The ``assay`` command line: a thin layer over the library's public functions.

Each command lives in its own module of this package and registers itself on ``app``
(`assay.cli.application`); importing this package imports them all.
"""

from __future__ import annotations

from assay.cli import (
    agreement_cmd,
    calibrate_cmd,
    compare_cmd,
    evaluate,
    generate_cmd,
    json_eval,
    metrics_cmd,
    run,
    serve,
)
from assay.cli.application import app

__all__ = [
    "agreement_cmd",
    "app",
    "calibrate_cmd",
    "compare_cmd",
    "evaluate",
    "generate_cmd",
    "json_eval",
    "metrics_cmd",
    "run",
    "serve",
]
