"""Command-line options that several commands share, declared once."""

from __future__ import annotations

from typing import Annotated

import typer

__all__ = [
    "DeviceOption",
    "ExecutorOption",
    "RayAddressOption",
    "StoreUrlOption",
    "WorkersOption",
]

#: ``--db``: where the results store is
StoreUrlOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        help="Results store URL or SQLite path (default: ASSAY_DATABASE_URL, else ./assay.db).",
    ),
]

#: ``--executor``: where the samples are scored
ExecutorOption = Annotated[
    str,
    typer.Option(
        "--executor",
        help="local (this process) or ray (Ray actors: a local Ray instance, or the cluster "
        "at --ray-address; needs the ray extra).",
    ),
]

#: ``--ray-address``: the Ray cluster to join
RayAddressOption = Annotated[
    str | None,
    typer.Option(
        "--ray-address",
        help="With --executor ray: auto (the cluster this machine belongs to) or "
        "ray://HOST:PORT; default: start a local Ray instance for the run.",
    ),
]

#: ``--workers``: scoring actors
WorkersOption = Annotated[
    int | None,
    typer.Option(
        "--workers",
        min=1,
        help="With --executor ray: scoring workers (default: one per CPU of the cluster).",
    ),
]

#: ``--device``: where the torch models run
DeviceOption = Annotated[
    str | None,
    typer.Option(
        "--device",
        help="auto (a CUDA GPU when there is one), cpu or cuda: where BERTScore and "
        "sentence-transformers embedders run (else ASSAY_DEVICE; default auto).",
    ),
]
