"""Hour buckets of the history, and the hourly points of live runs.

A finished run is one point per metric in the history (its snapshot, written when it
finishes); a live run (``live/<service.name>``, source ``live``) never finishes, so each
of its hours is a point of its own: the mean of the values its samples got in that hour.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from assay.store.models import Run, ScoringDetail

__all__ = ["hour_bucket", "live_points"]


def hour_bucket(column: Any, dialect: str) -> Any:
    """The hour of a timestamp column as text, ``YYYY-MM-DD HH:00:00``."""
    if dialect == "sqlite":
        return func.strftime("%Y-%m-%d %H:00:00", column)
    return func.to_char(func.date_trunc("hour", column), "YYYY-MM-DD HH24:00:00")


def live_points(
    session: Session, since: datetime, family_of: Callable[[str], str], family: str | None
) -> dict[tuple[str, str], list[float]]:
    """(hour, metric) -> the hourly mean of each live run's values since ``since``
    (metrics of ``family`` only, when given; a mean past the float range is left out)."""
    dialect = session.get_bind().dialect.name
    bucket = hour_bucket(ScoringDetail.timestamp, dialect).label("bucket")
    stmt = (
        select(bucket, ScoringDetail.metric_name, func.avg(ScoringDetail.metric_value))
        .where(
            ScoringDetail.timestamp >= since,
            ScoringDetail.metric_value.is_not(None),
            ScoringDetail.run_id.in_(select(Run.id).where(Run.source == "live")),
        )
        .group_by(bucket, ScoringDetail.metric_name, ScoringDetail.run_id)
    )
    points: dict[tuple[str, str], list[float]] = {}
    for hour, name, mean in session.execute(stmt):
        if mean is None or not math.isfinite(mean):
            continue
        if family is None or family_of(name) == family:
            points.setdefault((hour, name), []).append(float(mean))
    return points
