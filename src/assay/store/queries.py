"""Dashboard aggregations of the chatbot hub, computed in SQL over the store.

- pass rate = passed / gated × 100, where gated = total - ungated: a sample no metric's
  threshold decided (status ``ungated``, shown as "no gate") neither passes nor fails
- average duration = AVG(duration) (seconds)
- timeout rate = COUNT(duration > 30 OR status = 'skipped') / total × 100
- metric averages = AVG(metric_value) per metric over non-null values (None is skipped,
  never counted as 0); ratio metrics are shown ×100, performance metrics keep their unit
- health = (pass_rate + reliability × 100) / 2 with reliability = mean of the available
  averages of output_stability, output_validity, schema_compliance; with none of them,
  health is the pass rate alone (``health_basis`` says which)
- safety (the hub's formula) and safety index: see `assay.evaluation.safety_scores` (None, with
  ``safety_problem`` saying why, when a stored average is off the 0..1 scale)
- trends = (current − previous) / previous × 100 for the last 24 h against the 24 h before
- history: hourly buckets of test results and of metric values
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Select, case, delete, func, or_, select
from sqlalchemy.exc import DataError
from sqlalchemy.orm import Session

from assay.core.stats import mean as finite_mean
from assay.core.stats import percentile
from assay.store.hourly import hour_bucket, live_points
from assay.store.models import (
    UNGATED,
    MetricSnapshot,
    QualityCheck,
    Run,
    RunMetricTotal,
    ScoringDetail,
    TestResult,
    ValidationDetail,
    utcnow,
)

__all__ = [
    "RELIABILITY_METRICS",
    "TIMEOUT_SECONDS",
    "display_value",
    "history",
    "metric_averages",
    "metric_meta",
    "run_detail",
    "runs",
    "sample_counts",
    "sample_detail",
    "sample_rows",
    "snapshot_run",
    "statistics",
]

TIMEOUT_SECONDS = 30.0
RELIABILITY_METRICS = ("output_stability", "output_validity", "schema_compliance")


def metric_meta(name: str) -> tuple[str, bool, str, str]:
    """(unit, higher_is_better, family, description) of a registered metric; a ratio of
    family "other" for a name no metric has (results stored by another version)."""
    from assay.metrics.registry import metric_class

    try:
        cls = metric_class(name)
    except KeyError:
        return "ratio", True, "other", ""
    return cls.unit, cls.higher_is_better, cls.family, cls.description()


def display_value(name: str, value: float | None) -> float | None:
    """The chatbot hub's mapping: ratio metrics 0..1 → 0..100 (2 decimals); units kept otherwise."""
    if value is None:
        return None
    unit = metric_meta(name)[0]
    if unit in {"ratio", "bool"}:
        return round(value * 100.0, 2)
    return round(value, 4)


def _window(
    stmt: Select[Any], column: Any, since: datetime | None, until: datetime | None
) -> Select[Any]:
    if since is not None:
        stmt = stmt.where(column >= since)
    if until is not None:
        stmt = stmt.where(column < until)
    return stmt


def _finite_means(
    session: Session, filters: Callable[[Select[Any]], Select[Any]]
) -> dict[str, tuple[float | None, int]]:
    """metric -> (mean, count) of the non-null values that ``filters`` selects.

    SQL's AVG sums first: near the float maximum (1.8e308) that sum overflows (SQLite
    returns inf, or NULL for inf + -inf; PostgreSQL raises). Such a mean is computed
    again as SUM(value / count), whose partial sums stay within the largest value; None
    only if even that is not a finite float (then `_average_entry` says so).
    """
    value = ScoringDetail.metric_value
    grouped = select(ScoringDetail.metric_name).group_by(ScoringDetail.metric_name)
    grouped = filters(grouped.having(func.count(value) > 0))
    stmt = grouped.add_columns(func.avg(value), func.count(value))
    if session.get_bind().dialect.name == "postgresql":
        try:
            with session.begin_nested():  # the failed statement is rolled back alone
                rows = session.execute(stmt).all()
        except DataError:  # a float8 sum overflowed
            rows = [
                (n, None, c) for n, c in session.execute(grouped.add_columns(func.count(value)))
            ]
    else:
        rows = session.execute(stmt).all()
    out: dict[str, tuple[float | None, int]] = {}
    for name, avg, count in rows:
        mean = math.nan if avg is None else float(avg)
        if not math.isfinite(mean):
            scaled = select(func.sum(value / float(count))).where(ScoringDetail.metric_name == name)
            again = session.scalar(filters(scaled))
            mean = math.nan if again is None else float(again)
        out[name] = (mean if math.isfinite(mean) else None, int(count))
    return out


def _weighted_mean(parts: Sequence[tuple[float, int]]) -> float:
    """The mean of several groups' means weighted by their counts, finite for finite
    means: each mean is divided by the largest magnitude (when that is past 1e300)
    before weighting, so no partial sum exceeds it."""
    top = max(abs(mean) for mean, _ in parts)
    scale = top if top > 1e300 else 1.0
    n = sum(count for _, count in parts)
    return math.fsum((mean / scale) * (count / n) for mean, count in parts) * scale


def metric_averages(
    session: Session,
    *,
    run_id: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    names: Sequence[str] | None = None,
) -> dict[str, dict[str, Any]]:
    """AVG(metric_value), COUNT per metric (non-null values only), with display values.

    Over all time (no run, no window) the finished runs are read from their stored means
    and only the runs still running from the scoring rows.
    """
    if run_id is None and since is None and until is None:
        return _all_time_averages(session, names)

    def filters(stmt: Select[Any]) -> Select[Any]:
        if run_id is not None:
            stmt = stmt.where(ScoringDetail.run_id == run_id)
        if names:
            stmt = stmt.where(ScoringDetail.metric_name.in_(list(names)))
        return _window(stmt, ScoringDetail.timestamp, since, until)

    return {
        name: _average_entry(name, mean, count)
        for name, (mean, count) in _finite_means(session, filters).items()
    }


def _average_entry(name: str, avg: float | None, count: int) -> dict[str, Any]:
    unit, higher, family, _ = metric_meta(name)
    entry = {
        "avg": avg,
        "count": count,
        "display": display_value(name, avg),
        "unit": unit,
        "higher_is_better": higher,
        "family": family,
    }
    if avg is None:
        entry["problem"] = "the mean of the stored values is not a finite float"
    return entry


def _all_time_averages(session: Session, names: Sequence[str] | None) -> dict[str, dict[str, Any]]:
    parts: dict[str, list[tuple[float, int]]] = {}
    totals = select(RunMetricTotal.metric_name, RunMetricTotal.mean, RunMetricTotal.n)
    if names:
        totals = totals.where(RunMetricTotal.metric_name.in_(list(names)))
    for name, mean, n in session.execute(totals):
        parts.setdefault(name, []).append((float(mean), int(n)))
    live_runs = [r for (r,) in session.execute(select(Run.id).where(Run.status == "running"))]
    if live_runs:

        def live(stmt: Select[Any]) -> Select[Any]:
            stmt = stmt.where(ScoringDetail.run_id.in_(live_runs))
            return stmt.where(ScoringDetail.metric_name.in_(list(names))) if names else stmt

        for name, (mean, n) in _finite_means(session, live).items():
            if mean is not None:
                parts.setdefault(name, []).append((mean, n))
    return {
        name: _average_entry(name, _weighted_mean(p), sum(n for _, n in p))
        for name, p in parts.items()
    }


def _with_status(status: str) -> Any:
    """SQL: how many test results have ``status``."""
    return func.sum(case((TestResult.status == status, 1), else_=0))


def pass_rate(passed: int | None, total: int | None, ungated: int | None) -> float | None:
    """Passed samples × 100 over the samples a threshold decided (``total - ungated``);
    None when none was decided."""
    gated = int(total or 0) - int(ungated or 0)
    return 100.0 * int(passed or 0) / gated if gated > 0 else None


def sample_counts(
    session: Session, run_id: str | None, since: datetime | None, until: datetime | None
) -> dict[str, Any]:
    """Samples of a run (or all) in ``[since, until)`` by status, their pass rate and
    timeout rate (percent: over 30 s or skipped) and average duration."""
    timeout = or_(TestResult.duration > TIMEOUT_SECONDS, TestResult.status == "skipped")
    stmt = select(
        func.count(),
        _with_status("passed"),
        _with_status("failed"),
        _with_status("skipped"),
        _with_status("error"),
        _with_status(UNGATED),
        func.avg(TestResult.duration),
        func.sum(case((timeout, 1), else_=0)),
    )
    if run_id is not None:
        stmt = stmt.where(TestResult.run_id == run_id)
    stmt = _window(stmt, TestResult.timestamp, since, until)
    total, passed, failed, skipped, errors, ungated, avg_duration, timeouts = session.execute(
        stmt
    ).one()
    total = int(total or 0)
    return {
        "total": total,
        "passed": int(passed or 0),
        "failed": int(failed or 0),
        "skipped": int(skipped or 0),
        "errors": int(errors or 0),
        "ungated": int(ungated or 0),
        "pass_rate": pass_rate(passed, total, ungated),
        "avg_duration": float(avg_duration) if avg_duration is not None else None,
        "timeout_rate": (100.0 * int(timeouts or 0) / total) if total else None,
    }


def _health(
    pass_rate: float | None, averages: dict[str, dict[str, Any]]
) -> tuple[float | None, str]:
    reliability = [
        averages[m]["avg"]
        for m in RELIABILITY_METRICS
        if m in averages and averages[m]["avg"] is not None
    ]
    if pass_rate is None:
        return None, "no pass rate: no sample was gated by a threshold"
    if not reliability:
        return pass_rate, "pass rate only (no reliability metrics stored)"
    basis = "mean of the pass rate and reliability (output stability, validity, schema)"
    return (pass_rate + 100.0 * sum(reliability) / len(reliability)) / 2.0, basis


def _trend(current: float | None, previous: float | None) -> float | None:
    if current is None or previous is None or previous == 0:
        return None
    return (current - previous) / previous * 100.0


def _safety(plain: dict[str, float]) -> tuple[float | None, float | None, str | None]:
    """(hub safety score, safety index, problem) on the 0..1 scale. A stored average off that
    scale (a value written by hand or by an old version) makes both None with the problem
    stated, instead of failing the whole overview."""
    from assay.evaluation.safety_scores import hub_safety_score, safety_index

    try:
        return hub_safety_score(plain), safety_index(plain), None
    except ValueError as exc:
        return None, None, str(exc)


def _period(
    session: Session, run_id: str | None, since: datetime | None, until: datetime | None
) -> dict[str, Any]:
    counts = sample_counts(session, run_id, since, until)
    averages = metric_averages(session, run_id=run_id, since=since, until=until)
    plain = {name: a["avg"] for name, a in averages.items() if a["avg"] is not None}
    health, basis = _health(counts["pass_rate"], averages)
    hub_safety, index, problem = _safety(plain)
    out = {
        **counts,
        "health": health,
        "health_basis": basis,
        "safety": None if hub_safety is None else hub_safety * 100.0,
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
    as the chatbot hub's ``get_metrics_history``, the hourly average of ``metrics_snapshots``
    (one point per metric per finished run) and of each live run's hourly means
    (`assay.store.hourly.live_points`), optionally of one ``metric_type`` (family).
    """
    now = now or utcnow()
    since = now - timedelta(hours=hours)
    dialect = session.get_bind().dialect.name
    bucket = hour_bucket(TestResult.timestamp, dialect).label("bucket")
    tests = session.execute(
        select(
            bucket,
            func.count(),
            _with_status("passed"),
            _with_status(UNGATED),
            func.avg(TestResult.duration),
        )
        .where(TestResult.timestamp >= since)
        .group_by(bucket)
        .order_by(bucket)
    )
    metric_bucket = hour_bucket(MetricSnapshot.timestamp, dialect).label("bucket")
    stmt = (
        select(metric_bucket, MetricSnapshot.metric_name, MetricSnapshot.metric_value)
        .where(MetricSnapshot.timestamp >= since)
        .order_by(metric_bucket, MetricSnapshot.metric_name)
    )
    if metric_type is not None:
        stmt = stmt.where(MetricSnapshot.metric_type == metric_type)
    # (bucket, metric) -> run averages: a finished run's, each live run's of the hour
    points = live_points(session, since, lambda name: metric_meta(name)[2], metric_type)
    for b, name, value in session.execute(stmt):
        points.setdefault((b, name), []).append(value)
    series: dict[str, list[dict[str, Any]]] = {}
    for (b, name), values in sorted(points.items()):
        avg = finite_mean(values)  # finite for finite values, unlike SQL's AVG near 1.8e308
        series.setdefault(name, []).append(
            {"bucket": b, "avg": avg, "display": display_value(name, avg)}
        )
    return {
        "hours": hours,
        "tests": [
            {
                "bucket": b,
                "total": int(total),
                "passed": int(passed or 0),
                "pass_rate": pass_rate(passed, total, ungated),
                "avg_duration": float(avg) if avg is not None else None,
            }
            for b, total, passed, ungated, avg in tests
        ],
        "metrics": series,
    }


def snapshot_run(session: Session, run: Run) -> None:
    """Write the run's metric totals and one `MetricSnapshot` per metric average."""
    when = utcnow()
    session.execute(delete(RunMetricTotal).where(RunMetricTotal.run_id == run.id))
    averages = metric_averages(session, run_id=run.id)
    averages = {name: avg for name, avg in averages.items() if avg["avg"] is not None}
    for name, avg in averages.items():
        session.add(
            RunMetricTotal(run_id=run.id, metric_name=name, n=avg["count"], mean=avg["avg"])
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
            _with_status("passed").label("passed"),
            _with_status(UNGATED).label("ungated"),
            func.avg(TestResult.duration).label("avg_duration"),
        )
        .group_by(TestResult.run_id)
        .subquery()
    )
    stmt = (
        select(Run, counts.c.n, counts.c.passed, counts.c.ungated, counts.c.avg_duration)
        .outerjoin(counts, counts.c.run_id == Run.id)
        .order_by(Run.started_at.desc())
        .limit(limit)
        .offset(offset)
    )
    if run_ids is not None:
        stmt = stmt.where(Run.id.in_(list(run_ids)))
    rows = session.execute(stmt)
    out = []
    for run, n, passed, ungated, avg_duration in rows:
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
                "pass_rate": pass_rate(passed, n, ungated),
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
    """A run with its metric averages and per-sample results (paginated; a live run's
    newest traces first): see `sample_rows` for what each sample holds."""
    run = session.get(Run, run_id)
    if run is None:
        return None
    order = TestResult.sample_index.desc() if run.source == "live" else TestResult.sample_index
    results = session.scalars(
        select(TestResult)
        .where(TestResult.run_id == run_id)
        .order_by(order)
        .limit(limit)
        .offset(offset)
    ).all()
    summary = next(iter(runs(session, run_ids=[run_id])), None)
    return {
        "run": summary,
        "statistics": _period(session, run_id, None, None),
        "timings": run_timings(session, run_id),
        "samples": sample_rows(session, results),
    }


def run_timings(session: Session, run_id: str) -> dict[str, Any]:
    """The p50 and p95 of the run's durations and times to first token (seconds, None
    without any; linear interpolation between order statistics) and its timeouts
    (duration over `TIMEOUT_SECONDS`, or skipped: the timeout rate's count)."""
    rows = session.execute(
        select(TestResult.duration, TestResult.first_token_time, TestResult.status).where(
            TestResult.run_id == run_id
        )
    ).all()
    durations = [d for d, _, _ in rows if d is not None]
    firsts = [f for _, f, _ in rows if f is not None]
    timeouts = sum(1 for d, _, s in rows if s == "skipped" or (d or 0.0) > TIMEOUT_SECONDS)
    return {
        "duration_p50": percentile(durations, 50) if durations else None,
        "duration_p95": percentile(durations, 95) if durations else None,
        "first_token_p50": percentile(firsts, 50) if firsts else None,
        "first_token_p95": percentile(firsts, 95) if firsts else None,
        "timeouts": timeouts,
    }


def sample_detail(session: Session, run_id: str, index: int) -> dict[str, Any] | None:
    """One stored sample of a run by its sample index (`sample_rows`), or None."""
    row = session.scalar(
        select(TestResult).where(TestResult.run_id == run_id, TestResult.sample_index == index)
    )
    return None if row is None else sample_rows(session, [row])[0]


def sample_rows(session: Session, results: Sequence[TestResult]) -> list[dict[str, Any]]:
    """The samples as the dashboard shows them: texts, tags, error, each score's value,
    evidence, components and signature, the quality checks and validation (written by the
    pytest plugin; empty / None otherwise), the ``contexts``, and the conversation
    ``turns``, agent ``trace`` and ``expected_tool_calls`` (None when not stored)."""
    ids = [r.id for r in results]
    scores: dict[int, list[ScoringDetail]] = {}
    checks: dict[int, dict[str, bool]] = {}
    validations: dict[int, dict[str, Any]] = {}
    if ids:
        for score in session.scalars(
            select(ScoringDetail).where(ScoringDetail.test_result_id.in_(ids))
        ):
            scores.setdefault(score.test_result_id, []).append(score)
        for check in session.scalars(
            select(QualityCheck)
            .where(QualityCheck.test_result_id.in_(ids))
            .order_by(QualityCheck.id)
        ):
            checks.setdefault(check.test_result_id, {})[check.check_name] = check.passed
        for v in session.scalars(
            select(ValidationDetail).where(ValidationDetail.test_result_id.in_(ids))
        ):
            validations[v.test_result_id] = {
                "similarity": v.similarity_score,
                "threshold": v.threshold,
                "relevant": v.is_relevant,
            }
    return [
        {
            "index": r.sample_index,
            "id": r.sample_id,
            "test_name": r.test_name,
            "status": r.status,
            "duration": r.duration,
            "query": r.query,
            "response": r.response,
            "expected": r.expected,
            "contexts": r.contexts,
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
                    "components": s.components,
                    "signature": s.signature,
                }
                for s in scores.get(r.id, [])
            },
            "quality_checks": checks.get(r.id, {}),
            "validation": validations.get(r.id),
            "turns": r.turns,
            "trace": r.trace,
            "expected_tool_calls": r.expected_tool_calls,
        }
        for r in results
    ]
