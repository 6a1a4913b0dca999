"""Command-line options that several commands share, declared once."""

from __future__ import annotations

from typing import Annotated

import typer

__all__ = ["StoreUrlOption"]

#: ``--db``: where the results store is
StoreUrlOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        help="Results store URL or SQLite path (default: ASSAY_DATABASE_URL, else ./assay.db).",
    ),
]
