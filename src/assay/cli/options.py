"""Command-line options that several commands share, declared once."""

from __future__ import annotations

import math
from typing import Annotated

import typer

__all__ = [
    "DeviceOption",
    "ExecutorOption",
    "JudgeBatchOption",
    "JudgeConcurrencyOption",
    "JudgeRateLimitOption",
    "OutFieldsOption",
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

#: ``--out-fields``: the fields of each ``--out`` row (`assay.cli.run_outputs.chosen_fields`)
OutFieldsOption = Annotated[
    str | None,
    typer.Option(
        "--out-fields",
        help="Keep only these fields in each --out row, comma separated, in this order, e.g. "
        "id,response,faithfulness: id, query, response, expected, contexts, turns, trace, "
        "expected_tool_calls, duration, first_token_time, target.status, a metric, "
        "METRIC.COMPONENT, tag.KEY, evidence (.jsonl). Default: every field.",
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


def _positive_rate(value: float | None) -> float | None:
    """``--judge-rate-limit``: a finite number above 0 (requests a second), or absent."""
    if value is not None and not (math.isfinite(value) and value > 0):
        raise typer.BadParameter(
            f"must be a positive number of requests a second (e.g. 10 or 0.5), got {value:g}"
        )
    return value


#: ``--judge-concurrency``: judge requests in flight at once (the whole cluster on Ray)
JudgeConcurrencyOption = Annotated[
    int | None,
    typer.Option(
        "--judge-concurrency",
        min=1,
        help="Judge requests in flight at once, at least 1 (on Ray: across the cluster); "
        "overrides judge_concurrency / ASSAY_JUDGE_CONCURRENCY (default 64).",
    ),
]

#: ``--judge-rate-limit``: judge requests a second (the whole cluster on Ray)
JudgeRateLimitOption = Annotated[
    float | None,
    typer.Option(
        "--judge-rate-limit",
        callback=_positive_rate,
        help="Judge requests per second, retries included, a positive number (on Ray: "
        "across the cluster); overrides judge_rate_limit / ASSAY_JUDGE_RATE_LIMIT "
        "(default: no limit).",
    ),
]

#: ``--judge-batch``: the judge's requests through the OpenAI Batch API
JudgeBatchOption = Annotated[
    bool,
    typer.Option(
        "--judge-batch",
        help="Send the judge's requests through the OpenAI Batch API: half the price, "
        "replies within 24 h; a stopped run's batches are collected by the next "
        "(judge_batch / ASSAY_JUDGE_BATCH; docs/batch.md).",
    ),
]
