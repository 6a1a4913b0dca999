"""spans received live and the traces they make

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-27

``live_spans`` keeps every span ``POST /v1/traces`` acknowledged (the OTLP JSON span and
its resource's attributes; one row per trace and span id), written before the answer is
sent. ``live_traces`` follows each trace: its service, whether its root came, when its
last new span came, and which version of it was scored into which run and sample.
``live_monitor_states`` keeps each monitor rule's state on each live run.
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "live_spans",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("trace_id", sa.String(64), nullable=False),
        sa.Column("span_id", sa.String(64), nullable=False),
        sa.Column("received_at", sa.DateTime(), nullable=False),
        sa.Column("body", sa.JSON(), nullable=False),
        sa.UniqueConstraint("trace_id", "span_id", name="uq_live_spans_trace_span"),
    )
    op.create_table(
        "live_traces",
        sa.Column("trace_id", sa.String(64), primary_key=True),
        sa.Column("service", sa.String(256), nullable=False),
        sa.Column("root_seen", sa.Boolean(), nullable=False),
        sa.Column("first_span_at", sa.DateTime(), nullable=False),
        sa.Column("last_span_at", sa.DateTime(), nullable=False),
        sa.Column("spans", sa.Integer(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("scored_version", sa.Integer(), nullable=False),
        sa.Column("pending", sa.Boolean(), nullable=False),
        sa.Column("run_id", sa.String(64), nullable=True),
        sa.Column("sample_index", sa.Integer(), nullable=True),
    )
    op.create_index("ix_live_traces_due", "live_traces", ["pending", "last_span_at"])
    op.create_table(
        "live_monitor_states",
        sa.Column("monitor", sa.String(256), primary_key=True),
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("value", sa.Float(), nullable=True),
        sa.Column("hour", sa.DateTime(), nullable=False),
        sa.Column("changed_at", sa.DateTime(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("live_monitor_states")
    op.drop_index("ix_live_traces_due", table_name="live_traces")
    op.drop_table("live_traces")
    op.drop_table("live_spans")
