"""Spans received live, in the results store, and the traces they make.

`LiveTraces.ingest` writes the spans of one export in one transaction (committed before
the receiver answers, so an acknowledged span survives a crash) and keeps, per trace,
whether its root came, when its last new span came and a version that grows with each
export that brought new spans. `LiveTraces.due` names the traces ready to score: root
seen and quiet for the grace period (or quiet for ``orphan_seconds`` without a root),
with a version not scored yet; `LiveTraces.marking` records the version scored, so a
span that arrives while a trace is scored makes it due again and is never dropped.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import and_, bindparam, func, insert, or_, select, update
from sqlalchemy.exc import IntegrityError

from assay.inputs.otlp.limits import MAX_SPANS_PER_TRACE
from assay.inputs.otlp.reader import MalformedSpan, Span, span_of
from assay.store.db import Store
from assay.store.models import LiveSpan, LiveTrace, TestResult, utcnow

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection
    from sqlalchemy.orm import Session

    from assay.inputs.otlp.request import ReceivedSpan

__all__ = ["QUARANTINED", "DueTrace", "Ingested", "LiveTraces", "live_run_id"]


def live_run_id(service: str) -> str:
    """The id of the run that holds the scored traces of ``service`` (its name is
    ``live/<service>``): the same on every restart."""
    return "live-" + hashlib.sha256(service.encode("utf-8")).hexdigest()[:16]


#: how the sample of a quarantined trace starts its error
QUARANTINED = "quarantined: "


def _backlog(connection: Connection) -> int:
    table = LiveTrace.__table__
    return connection.scalar(select(func.count()).where(table.c.pending.is_(True))) or 0


@dataclass(frozen=True)
class Ingested:
    """What one export's spans did: how many were stored, why each other one was
    rejected (the spans a stored trace had no room for), and the traces waiting to be
    scored once they were stored (counted in the same transaction)."""

    new: int
    rejected: list[str]
    backlog: int


@dataclass(frozen=True)
class DueTrace:
    """A trace to score: its id, service, the version read, its sample index in its run
    when an earlier version was scored, and how many spans it has."""

    trace_id: str
    service: str
    version: int
    sample_index: int | None
    spans: int


class LiveTraces:
    """The live spans and traces of one results store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def ingest(
        self,
        spans: list[ReceivedSpan],
        now: datetime | None = None,
        max_spans: int = MAX_SPANS_PER_TRACE,
    ) -> Ingested:
        """Store the spans not stored yet (a retried export's are skipped) and update
        their traces, in one transaction; a span that would take its trace over
        ``max_spans`` spans is rejected with the reason. Returns what was stored, what
        was rejected and the backlog counted in the same transaction."""
        if not spans:
            return Ingested(0, [], self.backlog())
        when = now or utcnow()

        span_table, trace_table = LiveSpan.__table__, LiveTrace.__table__
        # Core statements, one executemany a table: the ORM's unit of work cost most of
        # an export's time
        grow = (
            update(trace_table)
            .where(trace_table.c.trace_id == bindparam("b_trace"))
            .values(
                root_seen=or_(trace_table.c.root_seen, bindparam("b_root")),
                last_span_at=when,
                spans=trace_table.c.spans + bindparam("b_spans"),
                version=trace_table.c.version + 1,
                pending=True,
            )
        )

        def action(session: Session) -> Ingested:
            connection = session.connection()
            by_trace: dict[str, dict[str, ReceivedSpan]] = defaultdict(dict)
            for received in spans:
                by_trace[received.span.trace_id].setdefault(received.span.span_id, received)
            ids = list(by_trace)
            stored = set(
                connection.execute(
                    select(span_table.c.trace_id, span_table.c.span_id).where(
                        span_table.c.trace_id.in_(ids)
                    )
                ).all()
            )
            known = dict(
                connection.execute(
                    select(trace_table.c.trace_id, trace_table.c.spans).where(
                        trace_table.c.trace_id.in_(ids)
                    )
                ).all()
            )
            new, rejected = [], []
            for trace_id, group in by_trace.items():
                room = max_spans - known.get(trace_id, 0)
                for span_id, received in group.items():
                    if (trace_id, span_id) in stored:
                        continue
                    if room <= 0:
                        rejected.append(
                            f"span {span_id}: its trace {trace_id} has {max_spans} spans "
                            "stored, the limit of a trace"
                        )
                        continue
                    room -= 1
                    new.append(received)
            if not new:
                return Ingested(0, rejected, _backlog(connection))
            connection.execute(
                insert(span_table),
                [
                    {
                        "trace_id": r.span.trace_id,
                        "span_id": r.span.span_id,
                        "received_at": when,
                        "body": {"span": r.raw, "resource": r.resource},
                    }
                    for r in new
                ],
            )
            grouped: dict[str, list[ReceivedSpan]] = defaultdict(list)
            for received in new:
                grouped[received.span.trace_id].append(received)
            created, grown = [], []
            for trace_id, group in grouped.items():
                root = any(r.span.parent_id is None for r in group)
                if trace_id in known:
                    grown.append({"b_trace": trace_id, "b_root": root, "b_spans": len(group)})
                    continue
                created.append(
                    {
                        "trace_id": trace_id,
                        "service": group[0].service[:256],
                        "root_seen": root,
                        "first_span_at": when,
                        "last_span_at": when,
                        "spans": len(group),
                        "version": 1,
                        "scored_version": -1,
                        "pending": True,
                    }
                )
            if created:
                connection.execute(insert(trace_table), created)
            if grown:
                connection.execute(grow, grown)
            return Ingested(len(new), rejected, _backlog(connection))

        try:
            return self.store._write(action)
        except IntegrityError:  # another request created one of these traces meanwhile
            return self.store._write(action)

    def due(
        self,
        grace_seconds: float,
        orphan_seconds: float,
        limit: int,
        now: datetime | None = None,
    ) -> list[DueTrace]:
        """Traces to score, quietest first: a version not scored, and the root seen and
        no new span for ``grace_seconds``, or no root and none for ``orphan_seconds``."""
        when = now or utcnow()
        quiet = when - timedelta(seconds=grace_seconds)
        forsaken = when - timedelta(seconds=orphan_seconds)
        stmt = (
            select(
                LiveTrace.trace_id,
                LiveTrace.service,
                LiveTrace.version,
                LiveTrace.sample_index,
                LiveTrace.spans,
            )
            .where(
                LiveTrace.pending.is_(True),
                or_(
                    and_(LiveTrace.root_seen.is_(True), LiveTrace.last_span_at <= quiet),
                    LiveTrace.last_span_at <= forsaken,
                ),
            )
            .order_by(LiveTrace.last_span_at)
            .limit(limit)
        )
        with self.store.session() as session:
            return [DueTrace(*row) for row in session.execute(stmt)]

    def spans_of(self, trace_ids: list[str]) -> dict[str, list[Span]]:
        """The stored spans of each trace, as the file reader reads them (a span that no
        longer reads is left out; none is stored that did not)."""
        out: dict[str, list[Span]] = {t: [] for t in trace_ids}
        stmt = select(LiveSpan.trace_id, LiveSpan.body).where(LiveSpan.trace_id.in_(trace_ids))
        with self.store.session() as session:
            for trace_id, body in session.execute(stmt):
                span = span_of(body.get("span"), body.get("resource") or {})
                if not isinstance(span, MalformedSpan):
                    out[trace_id].append(span)
        return out

    def marking(self, marks: list[tuple[DueTrace, str, int]]) -> Callable[[Session], None]:
        """Record that each (trace, run id, sample index) had ``trace.version`` scored as
        that sample of that run, to run in the transaction that stores the samples; a
        trace stays due when a newer version came meanwhile."""
        return _recording(marks, scored_version=lambda version: version)

    def quarantining(self, marks: list[tuple[DueTrace, str, int]]) -> Callable[[Session], None]:
        """Record that each (trace, run id, sample index) had ``trace.version``
        quarantined: it failed to assemble or to score, its sample holds the reason, and it
        is not due again until a new span of it comes (``scored_version`` holds
        ``-(version + 1)``, below the -1 of a trace never scored)."""
        return _recording(marks, scored_version=lambda version: -1 - version)

    def quarantined(self, limit: int = 20) -> tuple[int, list[dict[str, Any]]]:
        """How many traces are quarantined (their last version failed to assemble or to
        score), and the ``limit`` latest: trace id, service, run, sample and reason."""
        trace, result = LiveTrace, TestResult
        held = trace.scored_version < -1
        with self.store.session() as session:
            count = session.scalar(select(func.count()).where(held)) or 0
            rows = session.execute(
                select(
                    trace.trace_id, trace.service, trace.run_id, trace.sample_index, result.error
                )
                .outerjoin(
                    result,
                    and_(result.run_id == trace.run_id, result.sample_index == trace.sample_index),
                )
                .where(held)
                .order_by(trace.last_span_at.desc())
                .limit(limit)
            ).all()
        return count, [
            {
                "trace_id": trace_id,
                "service": service,
                "run_id": run_id,
                "sample_index": index,
                "reason": (error or "").removeprefix(QUARANTINED),
            }
            for trace_id, service, run_id, index, error in rows
        ]

    def backlog(self) -> int:
        """Traces with a version not scored yet (complete or not; a quarantined trace is
        not waiting)."""
        with self.store.session() as session:
            return _backlog(session.connection())

    def next_sample_index(self, run_id: str) -> int:
        """One more than the largest sample index of ``run_id`` (0 for a new run)."""
        with self.store.session() as session:
            top = session.scalar(
                select(func.max(TestResult.sample_index)).where(TestResult.run_id == run_id)
            )
            taken = session.scalar(
                select(func.max(LiveTrace.sample_index)).where(LiveTrace.run_id == run_id)
            )
        return max(-1 if top is None else top, -1 if taken is None else taken) + 1

    def counts(self) -> dict[str, Any]:
        """Spans and traces stored, and traces waiting to be scored."""
        with self.store.session() as session:
            spans = session.scalar(select(func.count()).select_from(LiveSpan)) or 0
            traces = session.scalar(select(func.count()).select_from(LiveTrace)) or 0
        return {"spans": spans, "traces": traces, "pending": self.backlog()}


def _recording(
    marks: list[tuple[DueTrace, str, int]], scored_version: Callable[[int], int]
) -> Callable[[Session], None]:
    """The action that stores, for each (trace, run id, sample index), its run, its
    sample index and ``scored_version(trace.version)`` in one executemany; the trace
    stays pending when its version grew meanwhile."""
    table = LiveTrace.__table__
    statement = (
        update(table)
        .where(table.c.trace_id == bindparam("b_trace"))
        .values(
            scored_version=bindparam("b_scored"),
            pending=table.c.version != bindparam("b_version"),
            run_id=bindparam("b_run"),
            sample_index=bindparam("b_index"),
        )
    )
    params = [
        {
            "b_trace": t.trace_id,
            "b_version": t.version,
            "b_scored": scored_version(t.version),
            "b_run": run_id,
            "b_index": index,
        }
        for t, run_id, index in marks
    ]

    def action(session: Session) -> None:
        if params:  # one executemany, not an ORM statement a trace
            session.connection().execute(statement, params)

    return action
