"""SQLAlchemy models of the results store: runs plus the chatbot hub's five tables.

The chatbot hub stores ``test_results``, ``validation_details``, ``scoring_details``,
``quality_checks`` and ``metrics_snapshots``; Assay adds ``runs`` (every row belongs to a
run) and ``field_strategy_configs`` (JSON specification's configuration page). Metric values are
stored on the canonical scale (ratios 0..1, performance in its unit); the 0–100 view is
computed when read. Durations are seconds.

PostgreSQL text and JSON cannot hold the NUL character (``\x00``), which model output
occasionally contains: on PostgreSQL every text and JSON value (and every string compared
with one) has its NULs replaced by U+FFFD, so such a sample is stored instead of failing
its run. SQLite stores text verbatim.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship
from sqlalchemy.types import TypeDecorator

__all__ = [
    "NUL_REPLACEMENT",
    "UNGATED",
    "Base",
    "FieldStrategyConfig",
    "Label",
    "LiveMonitorState",
    "LiveSpan",
    "LiveTrace",
    "MetricSnapshot",
    "QualityCheck",
    "Run",
    "RunMetricTotal",
    "ScoringDetail",
    "TestResult",
    "ValidationDetail",
    "utcnow",
    "without_nul",
]


def utcnow() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


#: what a NUL character becomes on PostgreSQL (the Unicode replacement character)
NUL_REPLACEMENT = "\ufffd"


def without_nul(value: Any) -> Any:
    """``value`` with NUL characters replaced in every string, dict key and list item."""
    if isinstance(value, str):
        return value.replace("\x00", NUL_REPLACEMENT) if "\x00" in value else value
    if isinstance(value, dict):
        return {without_nul(k): without_nul(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [without_nul(v) for v in value]
    return value


class _NulSafe:
    """Bind processing shared by the text types: NULs replaced on PostgreSQL only."""

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        return without_nul(value) if dialect.name == "postgresql" else value


class SafeString(_NulSafe, TypeDecorator[str]):
    """VARCHAR that PostgreSQL accepts whatever the text."""

    impl = String
    cache_ok = True


class SafeText(_NulSafe, TypeDecorator[str]):
    """TEXT that PostgreSQL accepts whatever the text."""

    impl = Text
    cache_ok = True


class SafeJSON(_NulSafe, TypeDecorator[Any]):
    """JSON that PostgreSQL accepts whatever the strings inside."""

    impl = JSON
    cache_ok = True


class Base(DeclarativeBase):
    type_annotation_map: ClassVar[dict[Any, Any]] = {
        str: SafeString,
        dict[str, Any]: SafeJSON,
        list[Any]: SafeJSON,
    }


class Run(Base):
    """One evaluation run: a CLI invocation, a pytest session or an API call."""

    __tablename__ = "runs"

    id: Mapped[str] = mapped_column(SafeString(64), primary_key=True)
    name: Mapped[str | None] = mapped_column(SafeString(256))
    source: Mapped[str] = mapped_column(SafeString(16), default="cli")
    status: Mapped[str] = mapped_column(SafeString(16), default="running")
    started_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow, index=True)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime)
    dataset: Mapped[str | None] = mapped_column(SafeString(1024))
    metrics: Mapped[list[Any]] = mapped_column(default=list)
    tags: Mapped[dict[str, Any]] = mapped_column(default=dict)
    config: Mapped[dict[str, Any]] = mapped_column(default=dict)
    judge_usage: Mapped[dict[str, Any] | None] = mapped_column(SafeJSON)
    # what a CLI run was scored on (dataset hash, metrics, parameters, judge): --resume
    # refuses to continue it on anything else
    fingerprint: Mapped[dict[str, Any] | None] = mapped_column(SafeJSON)

    results: Mapped[list[TestResult]] = relationship(back_populates="run")


#: the status of a sample that no metric's threshold decided: it neither passed nor
#: failed, and pass rates leave it out (the dashboard shows "no gate")
UNGATED = "ungated"


class TestResult(Base):
    """One test (pytest) or one sample (CLI/API) with its outcome and duration (seconds):
    ``status`` is passed, failed, error, skipped (pytest) or `UNGATED`."""

    __tablename__ = "test_results"
    __table_args__ = (
        UniqueConstraint("run_id", "sample_index", name="uq_test_results_run_sample"),
        Index("ix_test_results_timestamp_status", "timestamp", "status"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    sample_index: Mapped[int] = mapped_column(Integer)
    #: the sample's id (or a name made from it): from the user's data, of any length
    #: (TEXT since revision 0011)
    test_name: Mapped[str] = mapped_column(SafeText)
    sample_id: Mapped[str | None] = mapped_column(SafeText)
    status: Mapped[str] = mapped_column(SafeString(16))
    duration: Mapped[float | None] = mapped_column(Float)
    #: seconds to a streamed reply's first token (assay run; revision 0007)
    first_token_time: Mapped[float | None] = mapped_column(Float)
    timestamp: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    query: Mapped[str | None] = mapped_column(SafeText)
    response: Mapped[str | None] = mapped_column(SafeText)
    expected: Mapped[str | None] = mapped_column(SafeText)
    #: the retrieved texts the sample held or its target returned, as
    #: `assay.store.transcript.stored_texts` writes them (revision 0009; NULL without)
    contexts: Mapped[list[Any] | None] = mapped_column(SafeJSON)
    tags: Mapped[dict[str, Any]] = mapped_column(default=dict)
    error: Mapped[str | None] = mapped_column(SafeText)
    # a conversation's turns, an agent's trace and its reference tool calls, as written by
    # `assay.store.transcript.stored_items` (revision 0006; NULL when the sample has none)
    turns: Mapped[list[Any] | None] = mapped_column(SafeJSON)
    trace: Mapped[list[Any] | None] = mapped_column(SafeJSON)
    expected_tool_calls: Mapped[list[Any] | None] = mapped_column(SafeJSON)
    #: `assay.core.labels.sample_key` of the sample: its labels' key (revision 0010; NULL
    #: on rows written before)
    sample_key: Mapped[str | None] = mapped_column(SafeString(64))

    __test__ = False  # not a pytest test class

    run: Mapped[Run] = relationship(back_populates="results")
    scores: Mapped[list[ScoringDetail]] = relationship(back_populates="test_result")


class Label(Base):
    """A person's verdict on a sample (revision 0010), kept apart from any run: the
    sample's `assay.core.labels.sample_key` finds it from every run of the same data.

    ``metric`` NULL is the sample's one verdict; ``value`` is in [0, 1] in the metric's
    direction; ``raw`` is what was given (a key pressed, a file's value) on ``scale``
    (``"1-5"``, NULL for a verdict already in [0, 1]); ``annotator`` is who gave it
    (``"file"`` when it came with the data); ``run_id`` the run it was given on (NULL:
    none). No foreign key: a label outlives the run it was given on."""

    __tablename__ = "labels"
    __table_args__ = (
        # a data file's verdict once per (sample, metric, value): `write_file_labels`
        Index(
            "uq_labels_file_verdict",
            "sample_key",
            text("coalesce(metric, '')"),
            "value",
            unique=True,
            sqlite_where=text("annotator = 'file'"),
            postgresql_where=text("annotator = 'file'"),
        ),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    sample_key: Mapped[str] = mapped_column(SafeString(64), index=True)
    sample_id: Mapped[str | None] = mapped_column(SafeText)
    run_id: Mapped[str | None] = mapped_column(SafeString(64))
    metric: Mapped[str | None] = mapped_column(SafeString(128))
    value: Mapped[float] = mapped_column(Float)
    raw: Mapped[str] = mapped_column(SafeText)
    scale: Mapped[str | None] = mapped_column(SafeString(32))
    annotator: Mapped[str] = mapped_column(SafeString(256))
    note: Mapped[str | None] = mapped_column(SafeText)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class ValidationDetail(Base):
    """A validated query/response pair with its similarity (chatbot hub test layer)."""

    __tablename__ = "validation_details"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    test_result_id: Mapped[int] = mapped_column(
        ForeignKey("test_results.id", ondelete="CASCADE"), index=True
    )
    query: Mapped[str | None] = mapped_column(SafeText)
    response: Mapped[str | None] = mapped_column(SafeText)
    expected: Mapped[str | None] = mapped_column(SafeText)
    similarity_score: Mapped[float | None] = mapped_column(Float)
    threshold: Mapped[float | None] = mapped_column(Float)
    is_relevant: Mapped[bool | None] = mapped_column(Boolean)
    timestamp: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class ScoringDetail(Base):
    """One metric value of one test/sample, with its method and evidence."""

    __tablename__ = "scoring_details"
    __table_args__ = (
        Index("ix_scoring_metric_time", "metric_name", "timestamp", "metric_value"),
        # test_result_id too: comparing runs reads a run's values from this index alone
        Index(
            "ix_scoring_run_metric_test", "run_id", "metric_name", "metric_value", "test_result_id"
        ),
        Index("ix_scoring_time", "timestamp"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    test_result_id: Mapped[int] = mapped_column(
        ForeignKey("test_results.id", ondelete="CASCADE"), index=True
    )
    run_id: Mapped[str] = mapped_column(SafeString(64))
    metric_name: Mapped[str] = mapped_column(SafeString(128))
    metric_value: Mapped[float | None] = mapped_column(Float)
    method: Mapped[str | None] = mapped_column(SafeString(32))
    reason: Mapped[str | None] = mapped_column(SafeText)
    error: Mapped[str | None] = mapped_column(SafeText)
    details: Mapped[dict[str, Any]] = mapped_column(default=dict)
    # the result's components (sub-scores) and signature (`assay.core.result`); NULL on rows
    # written before revision 0004
    components: Mapped[dict[str, Any] | None] = mapped_column(SafeJSON)
    signature: Mapped[str | None] = mapped_column(SafeText)
    timestamp: Mapped[datetime] = mapped_column(DateTime, default=utcnow)

    test_result: Mapped[TestResult] = relationship(back_populates="scores")


class QualityCheck(Base):
    """One boolean response-quality check of one test (chatbot hub test layer)."""

    __tablename__ = "quality_checks"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    test_result_id: Mapped[int] = mapped_column(
        ForeignKey("test_results.id", ondelete="CASCADE"), index=True
    )
    check_name: Mapped[str] = mapped_column(SafeString(64))
    passed: Mapped[bool] = mapped_column(Boolean)
    timestamp: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class MetricSnapshot(Base):
    """A time-series point: a metric's average over a run, written when a run finishes."""

    __tablename__ = "metrics_snapshots"
    __table_args__ = (Index("ix_snapshots_type_time", "metric_type", "timestamp"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    timestamp: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    metric_type: Mapped[str] = mapped_column(SafeString(32))
    metric_name: Mapped[str] = mapped_column(SafeString(128))
    metric_value: Mapped[float] = mapped_column(Float)
    labels: Mapped[dict[str, Any]] = mapped_column(default=dict)


class RunMetricTotal(Base):
    """Count and mean of one metric's non-null values in one finished run.

    Written when a run finishes, so all-time averages read a few rows per run instead of
    scanning every scoring row (the mean of the run means weighted by n). A mean, not a
    sum: the sum of values near the float maximum (1.8e308) overflows, their mean never.
    """

    __tablename__ = "run_metric_totals"

    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    metric_name: Mapped[str] = mapped_column(SafeString(128), primary_key=True)
    n: Mapped[int] = mapped_column(Integer)
    mean: Mapped[float] = mapped_column(Float)


class FieldStrategyConfig(Base):
    """A named JSON field-strategy configuration (JSON specification's configuration page)."""

    __tablename__ = "field_strategy_configs"

    name: Mapped[str] = mapped_column(SafeString(128), primary_key=True)
    strategies: Mapped[dict[str, Any]] = mapped_column(default=dict)
    updated_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow, onupdate=utcnow)


class LiveSpan(Base):
    """One span received by ``POST /v1/traces`` (revision 0008), kept as the OTLP JSON
    span (ids in hex) with its resource's attributes: ``body = {"span": ..., "resource":
    ...}``. A span sent twice (an exporter's retry) is stored once."""

    __tablename__ = "live_spans"
    __table_args__ = (UniqueConstraint("trace_id", "span_id", name="uq_live_spans_trace_span"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    trace_id: Mapped[str] = mapped_column(SafeString(64))
    span_id: Mapped[str] = mapped_column(SafeString(64))
    received_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    body: Mapped[dict[str, Any]] = mapped_column(default=dict)


class LiveTrace(Base):
    """A trace being received (revision 0008): its service, whether its root span came,
    when its last new span came, and which of its versions (one more with each request
    that brought new spans) was scored, into which run and sample index."""

    __tablename__ = "live_traces"
    __table_args__ = (Index("ix_live_traces_due", "pending", "last_span_at"),)

    trace_id: Mapped[str] = mapped_column(SafeString(64), primary_key=True)
    service: Mapped[str] = mapped_column(SafeString(256))
    root_seen: Mapped[bool] = mapped_column(Boolean, default=False)
    first_span_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    last_span_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    spans: Mapped[int] = mapped_column(Integer, default=0)
    version: Mapped[int] = mapped_column(Integer, default=1)
    #: the version last scored; -1 while it never was
    scored_version: Mapped[int] = mapped_column(Integer, default=-1)
    #: whether a version came that is not scored yet
    pending: Mapped[bool] = mapped_column(Boolean, default=True)
    run_id: Mapped[str | None] = mapped_column(SafeString(64))
    sample_index: Mapped[int | None] = mapped_column(Integer)


class LiveMonitorState(Base):
    """The state of one live monitor rule on one live run (revision 0008): ``ok``,
    ``firing`` or ``no_data``, the value it read for the last hour evaluated, and when
    the state last changed."""

    __tablename__ = "live_monitor_states"

    monitor: Mapped[str] = mapped_column(SafeString(256), primary_key=True)
    run_id: Mapped[str] = mapped_column(SafeString(64), primary_key=True)
    state: Mapped[str] = mapped_column(SafeString(16))
    value: Mapped[float | None] = mapped_column(Float)
    hour: Mapped[datetime] = mapped_column(DateTime)
    changed_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
