"""Monitors of live runs: rules read as each hour closes.

A rule is ``STATISTIC OP NUMBER``, e.g. ``mean(faithfulness) < 0.7`` or
``timeout_rate > 5%``, where STATISTIC is one of

- ``mean(METRIC)``, ``p50(METRIC)``, ``p95(METRIC)``: of the metric's values stored in
  the hour (missing values skipped);
- ``pass_rate``: passed / (samples a threshold decided);
- ``error_rate``: samples with a metric error / samples;
- ``timeout_rate``: samples over 30 s or skipped / samples;
- ``traces``: samples stored in the hour;

OP is ``<``, ``<=``, ``>`` or ``>=`` and NUMBER may end in ``%`` (``5%`` is 0.05). A rule
**fires** when its statistic meets the condition. Each rule is read on each live run
(``live/<service.name>``) for the hour that just closed: ``firing``, ``ok``, or ``no_data``
when the hour holds nothing to compute it from. A run has no state for an hour that ended
before its first trace was stored (``traces < 1`` does not fire for the hours before a
service existed). `LiveMonitors.evaluate` stores the
states (one row per rule and run) and returns the ones that changed.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from assay.core.stats import mean, percentile
from assay.store.db import Store
from assay.store.models import LiveMonitorState, Run, ScoringDetail, TestResult, utcnow
from assay.store.queries import sample_counts

__all__ = [
    "LiveMonitors",
    "Monitor",
    "StateChange",
    "closed_hour",
    "monitor_states",
    "parse_monitors",
]

_OPERATORS: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
_RATES = ("pass_rate", "error_rate", "timeout_rate", "traces")
_RULE = re.compile(
    r"^\s*(?:(?P<stat>mean|p50|p95)\(\s*(?P<metric>[A-Za-z0-9_]+)\s*\)|(?P<rate>[a-z_]+))"
    r"\s*(?P<op><=|>=|<|>)\s*(?P<number>[0-9]+(?:\.[0-9]+)?)\s*(?P<percent>%?)\s*$"
)


@dataclass(frozen=True)
class Monitor:
    """One rule: its text, statistic (``mean``, ``p50``, ``p95`` of ``metric``, or a
    rate), operator and threshold."""

    text: str
    statistic: str
    metric: str | None
    op: str
    threshold: float

    def fires(self, value: float) -> bool:
        return _OPERATORS[self.op](value, self.threshold)


def parse_monitors(text: str | None, known_metrics: Callable[[str], bool]) -> list[Monitor]:
    """The rules of ``text`` (separated by ``;``). Raises ValueError naming a rule that
    does not read, or a metric ``known_metrics`` does not know."""
    monitors = []
    for part in (text or "").split(";"):
        rule = part.strip()
        if not rule:
            continue
        found = _RULE.match(rule)
        if found is None or (found["rate"] is not None and found["rate"] not in _RATES):
            raise ValueError(
                f"monitor {rule!r} does not read: write STATISTIC OP NUMBER, e.g. "
                "'mean(faithfulness) < 0.7' or 'timeout_rate > 5%'; STATISTIC is "
                "mean(METRIC), p50(METRIC), p95(METRIC), " + ", ".join(_RATES)
            )
        metric = found["metric"]
        if metric is not None and not known_metrics(metric):
            raise ValueError(f"monitor {rule!r}: no metric named {metric!r}")
        number = float(found["number"]) / (100 if found["percent"] else 1)
        statistic = found["stat"] or found["rate"]
        monitors.append(Monitor(" ".join(rule.split()), statistic, metric, found["op"], number))
    return monitors


@dataclass(frozen=True)
class StateChange:
    """A rule whose state on a live run changed when an hour closed."""

    monitor: str
    run_id: str
    service: str
    state: str
    previous: str | None
    value: float | None
    hour: datetime

    def to_dict(self) -> dict[str, Any]:
        return {
            "monitor": self.monitor,
            "service": self.service,
            "run_id": self.run_id,
            "state": self.state,
            "previous": self.previous,
            "value": self.value,
            "hour": self.hour.isoformat(),
        }


def closed_hour(now: datetime) -> datetime:
    """The start of the last whole hour before ``now``."""
    return now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)


class LiveMonitors:
    """The rules, read on the live runs of one store."""

    def __init__(self, store: Store, monitors: list[Monitor]) -> None:
        self.store = store
        self.monitors = monitors

    def evaluate(self, hour: datetime) -> list[StateChange]:
        """Read every rule on every live run for ``[hour, hour + 1 h)``, store the
        states and return the changes (a rule already read for this hour is skipped)."""
        if not self.monitors:
            return []
        end = hour + timedelta(hours=1)

        def action(session: Session) -> list[StateChange]:
            runs = session.execute(select(Run.id, Run.name).where(Run.source == "live")).all()
            states = {(s.monitor, s.run_id): s for s in session.scalars(select(LiveMonitorState))}
            first = _first_data(session, [run_id for run_id, _ in runs])
            changes = []
            for run_id, name in runs:
                if run_id not in first or first[run_id] >= end:
                    continue  # no state for an hour before the run's first trace
                service = (name or "").removeprefix("live/")
                for monitor in self.monitors:
                    known = states.get((monitor.text, run_id))
                    if known is not None and known.hour >= hour:
                        continue
                    value = _statistic(session, monitor, run_id, hour, end)
                    if value is None:
                        state = "no_data"
                    else:
                        state = "firing" if monitor.fires(value) else "ok"
                    previous = known.state if known is not None else None
                    if known is None:
                        known = LiveMonitorState(monitor=monitor.text, run_id=run_id)
                        session.add(known)
                    if state != previous:
                        known.changed_at = utcnow()
                        changes.append(
                            StateChange(monitor.text, run_id, service, state, previous, value, hour)
                        )
                    known.state, known.value, known.hour = state, value, hour
            return changes

        return self.store._write(action)


def _first_data(session: Session, run_ids: list[str]) -> dict[str, datetime]:
    """When each run's first sample was stored (runs with none are left out)."""
    if not run_ids:
        return {}
    rows = session.execute(
        select(TestResult.run_id, func.min(TestResult.timestamp))
        .where(TestResult.run_id.in_(run_ids))
        .group_by(TestResult.run_id)
    ).all()
    return {run_id: at for run_id, at in rows if at is not None}


def monitor_states(store: Store) -> list[dict[str, Any]]:
    """Every rule's state on every live run, for the dashboard and ``/api/live``."""
    with store.session() as session:
        rows = session.execute(
            select(LiveMonitorState, Run.name)
            .join(Run, Run.id == LiveMonitorState.run_id)
            .order_by(LiveMonitorState.monitor, Run.name)
        ).all()
    return [
        {
            "monitor": s.monitor,
            "service": (name or "").removeprefix("live/"),
            "run_id": s.run_id,
            "state": s.state,
            "value": s.value,
            "hour": s.hour.isoformat(),
            "changed_at": s.changed_at.isoformat(),
        }
        for s, name in rows
    ]


def _statistic(
    session: Session, monitor: Monitor, run_id: str, start: datetime, end: datetime
) -> float | None:
    """The rule's statistic over the run's samples stored in ``[start, end)``; the rates
    are the overview's (`assay.store.queries.sample_counts`), as fractions."""
    if monitor.metric is not None:
        values = session.scalars(
            select(ScoringDetail.metric_value).where(
                ScoringDetail.run_id == run_id,
                ScoringDetail.metric_name == monitor.metric,
                ScoringDetail.timestamp >= start,
                ScoringDetail.timestamp < end,
                ScoringDetail.metric_value.is_not(None),
            )
        ).all()
        if not values:
            return None
        if monitor.statistic == "mean":
            return mean(values)
        return percentile(values, 50 if monitor.statistic == "p50" else 95)
    counts = sample_counts(session, run_id, start, end)
    total = counts["total"]
    if monitor.statistic == "traces":
        return float(total)
    if monitor.statistic == "error_rate":
        return counts["errors"] / total if total else None
    percent = counts["timeout_rate" if monitor.statistic == "timeout_rate" else "pass_rate"]
    return None if percent is None else percent / 100
