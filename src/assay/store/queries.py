"""Dashboard aggregations of seed 000, computed in SQL over the store.

- pass rate = passed / total × 100
- average duration = AVG(duration) (seconds)
- timeout rate = COUNT(duration > 30 OR status = 'skipped') / total × 100
- metric averages = AVG(metric_value) per metric over non-null values (None is skipped,
  never counted as 0); ratio metrics are shown ×100, performance metrics keep their unit
- health = (pass_rate + reliability × 100) / 2 with reliability = mean of the available
  averages of output_stability, output_validity, schema_compliance; with none of them,
  health is the pass rate alone (``health_basis`` says which)
- safety (seed) and safety index: see `assay.safety_scores` (None, with
  ``safety_problem`` saying why, when a stored average is off the 0..1 scale)
- trends = (current − previous) / previous × 100 for the last 24 h against the 24 h before
- history: hourly buckets of test results and of metric values
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Select, case, delete, func, or_, select
from sqlalchemy.orm import Session

from assay.store.models import (
    MetricSnapshot,
    Run,
    RunMetricTotal,
    ScoringDetail,
    TestResult,
    utcnow,
)

__all__ = [
    "RELIABILITY_METRICS",
    "TIMEOUT_SECONDS",
    "display_value",
    "history",
    "metric_averages",
    "run_detail",
    "runs",
    "snapshot_run",
    "statistics",
]

TIMEOUT_SECONDS = 30.0
RELIABILITY_METRICS = ("output_stability", "output_validity", "schema_compliance")


def _metric_meta(name: str) -> tuple[str, bool, str]:
    """(unit, higher_is_better, family) of a registered metric; ratio for unknown names."""
    from assay.registry import metric_class

    try:
        cls = metric_class(name)
    except KeyError:
        return "ratio", True, "other"
    return cls.unit, cls.higher_is_better, cls.family


def display_value(name: str, value: float | None) -> float | None:
    """Seed 000's mapping: ratio metrics 0..1 → 0..100 (2 decimals); units kept otherwise."""
    if value is None:
        return None
    unit = _metric_meta(name)[0]
    if unit in {"ratio", "bool"}:
        return round(value * 100.0, 2)
    return round(value, 4)


def _bucket(column: Any, dialect: str) -> Any:
    if dialect == "sqlite":
        return func.strftime("%Y-%m-%d %H:00:00", column)
    return func.to_char(func.date_trunc("hour", column), "YYYY-MM-DD HH24:00:00")


def _window(
    stmt: Select[Any], column: Any, since: datetime | None, until: datetime | None
) -> Select[Any]:
    if since is not None:
        stmt = stmt.where(column >= since)
    if until is not None:
        stmt = stmt.where(column < until)
    return stmt


def metric_averages(
    session: Session,
    *,
    run_id: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    names: Sequence[str] | None = None,
) -> dict[str, dict[str, Any]]:
    """AVG(metric_value), COUNT per metric (non-null values only), with display values.

    Over all time (no run, no window) the finished runs are read from their stored totals
    and only the runs still running from the scoring rows.
    """
    if run_id is None and since is None and until is None:
        return _all_time_averages(session, names)
    stmt = select(
        ScoringDetail.metric_name,
        func.avg(ScoringDetail.metric_value),
        func.count(ScoringDetail.metric_value),
    ).group_by(ScoringDetail.metric_name)
    if run_id is not None:
        stmt = stmt.where(ScoringDetail.run_id == run_id)
    if names:
        stmt = stmt.where(ScoringDetail.metric_name.in_(list(names)))
    stmt = _window(stmt, ScoringDetail.timestamp, since, until)
    stmt = stmt.having(func.count(ScoringDetail.metric_value) > 0)
    return {
        name: _average_entry(name, float(avg), int(count))
        for name, avg, count in session.execute(stmt)
    }


def _average_entry(name: str, avg: float, count: int) -> dict[str, Any]:
    unit, higher, family = _metric_meta(name)
    return {
        "avg": avg,
        "count": count,
        "display": display_value(name, avg),
        "unit": unit,
        "higher_is_better": higher,
        "family": family,
    }


def _all_time_averages(session: Session, names: Sequence[str] | None) -> dict[str, dict[str, Any]]:
    sums: dict[str, list[float]] = {}
    totals = select(
        RunMetricTotal.metric_name, func.sum(RunMetricTotal.total), func.sum(RunMetricTotal.n)
    ).group_by(RunMetricTotal.metric_name)
    live_runs = [r for (r,) in session.execute(select(Run.id).where(Run.status == "running"))]
    live = (
        select(
            ScoringDetail.metric_name,
            func.sum(ScoringDetail.metric_value),
            func.count(ScoringDetail.metric_value),
        )
        .where(ScoringDetail.run_id.in_(live_runs))
        .group_by(ScoringDetail.metric_name)
    )
    if names:
        totals = totals.where(RunMetricTotal.metric_name.in_(list(names)))
        live = live.where(ScoringDetail.metric_name.in_(list(names)))
    for stmt in (totals, live) if live_runs else (totals,):
        for name, total, n in session.execute(stmt):
            if n:
                entry = sums.setdefault(name, [0.0, 0])
                entry[0] += float(total)
                entry[1] += int(n)
    return {name: _average_entry(name, t / n, int(n)) for name, (t, n) in sums.items()}


def _test_counts(
    session: Session, run_id: str | None, since: datetime | None, until: datetime | None
) -> dict[str, Any]:
    timeout = or_(TestResult.duration > TIMEOUT_SECONDS, TestResult.status == "skipped")
    stmt = select(
        func.count(),
        func.sum(case((TestResult.status == "passed", 1), else_=0)),
        func.sum(case((TestResult.status == "failed", 1), else_=0)),
        func.sum(case((TestResult.status == "skipped", 1), else_=0)),
        func.sum(case((TestResult.status == "error", 1), else_=0)),
        func.avg(TestResult.duration),
        func.sum(case((timeout, 1), else_=0)),
    )
    if run_id is not None:
        stmt = stmt.where(TestResult.run_id == run_id)
    stmt = _window(stmt, TestResult.timestamp, since, until)
    total, passed, failed, skipped, errors, avg_duration, timeouts = session.execute(stmt).one()
    total = int(total or 0)
    return {
        "total": total,
        "passed": int(passed or 0),
        "failed": int(failed or 0),
        "skipped": int(skipped or 0),
        "errors": int(errors or 0),
        "pass_rate": (100.0 * int(passed or 0) / total) if total else None,
        "avg_duration": float(avg_duration) if avg_duration is not None else None,
        "timeout_rate": (100.0 * int(timeouts or 0) / total) if total else None,
    }


def _health(
    pass_rate: float | None, averages: dict[str, dict[str, Any]]
) -> tuple[float | None, str]:
    reliability = [averages[m]["avg"] for m in RELIABILITY_METRICS if m in averages]
    if pass_rate is None:
        return None, "no tests"
    if not reliability:
        return pass_rate, "pass_rate only (no reliability metrics stored)"
    return (pass_rate + 100.0 * sum(reliability) / len(reliability)) / 2.0, "seed 000 formula"


def _trend(current: float | None, previous: float | None) -> float | None:
    if current is None or previous is None or previous == 0:
        return None
    return (current - previous) / previous * 100.0


def _safety(plain: dict[str, float]) -> tuple[float | None, float | None, str | None]:
    """(seed safety, safety index, problem) on the 0..1 scale. A stored average off that
    scale (a value written by hand or by an old version) makes both None with the problem
    stated, instead of failing the whole overview."""
    from assay.safety_scores import safety_index, seed_safety_score

    try:
        return seed_safety_score(plain), safety_index(plain), None
    except ValueError as exc:
        return None, None, str(exc)


def _period(
    session: Session, run_id: str | None, since: datetime | None, until: datetime | None
) -> dict[str, Any]:
    counts = _test_counts(session, run_id, since, until)
    averages = metric_averages(session, run_id=run_id, since=since, until=until)
    plain = {name: a["avg"] for name, a in averages.items()}
    health, basis = _health(counts["pass_rate"], averages)
    seed_safety, index, problem = _safety(plain)
    out = {
        **counts,
        "health": health,
        "health_basis": basis,
        "safety": None if seed_safety is None else seed_safety * 100.0,
        "safety_index": None if index is None else index * 100.0,
        "metrics": averages,
    }
    if problem is not None:
        out["safety_problem"] = problem
    return out


def statistics(
    session: Session,
    *,
    run_id: str | None = None,
    hours: float | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """The overview: counts, rates, health, safety, metric averages and 24 h trends."""
    now = now or utcnow()
    since = now - timedelta(hours=hours) if hours else None
    stats = _period(session, run_id, since, None)
    current = _period(session, run_id, now - timedelta(hours=24), None)
    previous = _period(session, run_id, now - timedelta(hours=48), now - timedelta(hours=24))
    stats["trends"] = {
        "health": _trend(current["health"], previous["health"]),
        "duration": _trend(current["avg_duration"], previous["avg_duration"]),
        "timeout_rate": _trend(current["timeout_rate"], previous["timeout_rate"]),
        "safety": _trend(current["safety"], previous["safety"]),
        "safety_index": _trend(current["safety_index"], previous["safety_index"]),
        "satisfaction": _trend(current["pass_rate"], previous["pass_rate"]),
    }
    return stats


def history(
    session: Session,
    *,
    hours: float = 24,
    metric_type: str | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Hourly buckets over the last ``hours``.

    Tests: total, passed, pass rate and average duration from ``test_results``. Metrics:
    as seed 000's ``get_metrics_history``, the hourly average of ``metrics_snapshots``
    (one point per metric per finished run), optionally of one ``metric_type`` (family).
    """
    now = now or utcnow()
    since = now - timedelta(hours=hours)
    dialect = session.get_bind().dialect.name
    bucket = _bucket(TestResult.timestamp, dialect).label("bucket")
    tests = session.execute(
        select(
            bucket,
            func.count(),
            func.sum(case((TestResult.status == "passed", 1), else_=0)),
            func.avg(TestResult.duration),
        )
        .where(TestResult.timestamp >= since)
        .group_by(bucket)
        .order_by(bucket)
    )
    metric_bucket = _bucket(MetricSnapshot.timestamp, dialect).label("bucket")
    stmt = (
        select(metric_bucket, MetricSnapshot.metric_name, func.avg(MetricSnapshot.metric_value))
        .where(MetricSnapshot.timestamp >= since)
        .group_by(metric_bucket, MetricSnapshot.metric_name)
        .order_by(metric_bucket)
    )
    if metric_type is not None:
        stmt = stmt.where(MetricSnapshot.metric_type == metric_type)
    metrics = session.execute(stmt)
    series: dict[str, list[dict[str, Any]]] = {}
    for b, name, avg in metrics:
        series.setdefault(name, []).append(
            {"bucket": b, "avg": float(avg), "display": display_value(name, float(avg))}
        )
    return {
        "hours": hours,
        "tests": [
            {
                "bucket": b,
                "total": int(total),
                "passed": int(passed or 0),
                "pass_rate": 100.0 * int(passed or 0) / int(total) if total else None,
                "avg_duration": float(avg) if avg is not None else None,
            }
            for b, total, passed, avg in tests
        ],
        "metrics": series,
    }


def snapshot_run(session: Session, run: Run) -> None:
    """Write the run's metric totals and one `MetricSnapshot` per metric average."""
    when = utcnow()
    session.execute(delete(RunMetricTotal).where(RunMetricTotal.run_id == run.id))
    averages = metric_averages(session, run_id=run.id)
    for name, avg in averages.items():
        session.add(
            RunMetricTotal(
                run_id=run.id, metric_name=name, n=avg["count"], total=avg["avg"] * avg["count"]
            )
        )
    for name, avg in averages.items():
        session.add(
            MetricSnapshot(
                timestamp=when,
                metric_type=avg["family"],
                metric_name=name,
                metric_value=avg["avg"],
                labels={"run_id": run.id, "source": run.source},
            )
        )


def runs(
    session: Session,
    *,
    limit: int = 100,
    offset: int = 0,
    run_ids: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """Newest runs first (or just ``run_ids``), with their sample counts and pass rates."""
    counts = (
        select(
            TestResult.run_id,
            func.count().label("n"),
            func.sum(case((TestResult.status == "passed", 1), else_=0)).label("passed"),
            func.avg(TestResult.duration).label("avg_duration"),
        )
        .group_by(TestResult.run_id)
        .subquery()
    )
    stmt = (
        select(Run, counts.c.n, counts.c.passed, counts.c.avg_duration)
        .outerjoin(counts, counts.c.run_id == Run.id)
        .order_by(Run.started_at.desc())
        .limit(limit)
        .offset(offset)
    )
    if run_ids is not None:
        stmt = stmt.where(Run.id.in_(list(run_ids)))
    rows = session.execute(stmt)
    out = []
    for run, n, passed, avg_duration in rows:
        n = int(n or 0)
        out.append(
            {
                "id": run.id,
                "name": run.name,
                "source": run.source,
                "status": run.status,
                "dataset": run.dataset,
                "started_at": run.started_at.isoformat(),
                "finished_at": run.finished_at.isoformat() if run.finished_at else None,
                "samples": n,
                "pass_rate": 100.0 * int(passed or 0) / n if n else None,
                "avg_duration": float(avg_duration) if avg_duration is not None else None,
                "metrics": list(run.metrics or []),
                "tags": run.tags or {},
                "judge_usage": run.judge_usage,
            }
        )
    return out


def run_detail(
    session: Session, run_id: str, *, limit: int = 200, offset: int = 0
) -> dict[str, Any] | None:
    """A run with its metric averages and per-sample results and evidence (paginated)."""
    run = session.get(Run, run_id)
    if run is None:
        return None
    results = session.scalars(
        select(TestResult)
        .where(TestResult.run_id == run_id)
        .order_by(TestResult.sample_index)
        .limit(limit)
        .offset(offset)
    ).all()
    ids = [r.id for r in results]
    scores: dict[int, list[ScoringDetail]] = {}
    if ids:
        for score in session.scalars(
            select(ScoringDetail).where(ScoringDetail.test_result_id.in_(ids))
        ):
            scores.setdefault(score.test_result_id, []).append(score)
    summary = next(iter(runs(session, run_ids=[run_id])), None)
    return {
        "run": summary,
        "statistics": _period(session, run_id, None, None),
        "samples": [
            {
                "index": r.sample_index,
                "id": r.sample_id,
                "test_name": r.test_name,
                "status": r.status,
                "duration": r.duration,
                "query": r.query,
                "response": r.response,
                "expected": r.expected,
                "tags": r.tags,
                "error": r.error,
                "scores": {
                    s.metric_name: {
                        "value": s.metric_value,
                        "display": display_value(s.metric_name, s.metric_value),
                        "method": s.method,
                        "reason": s.reason,
                        "error": s.error,
                        "details": s.details,
                    }
                    for s in scores.get(r.id, [])
                },
            }
            for r in results
        ],
    }
