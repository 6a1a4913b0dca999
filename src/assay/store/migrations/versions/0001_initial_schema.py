"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "field_strategy_configs",
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("strategies", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )
    op.create_table(
        "metrics_snapshots",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("timestamp", sa.DateTime(), nullable=False),
        sa.Column("metric_type", sa.String(length=32), nullable=False),
        sa.Column("metric_name", sa.String(length=128), nullable=False),
        sa.Column("metric_value", sa.Float(), nullable=False),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("metrics_snapshots", schema=None) as batch_op:
        batch_op.create_index("ix_snapshots_type_time", ["metric_type", "timestamp"], unique=False)

    op.create_table(
        "runs",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=256), nullable=True),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=False),
        sa.Column("finished_at", sa.DateTime(), nullable=True),
        sa.Column("dataset", sa.String(length=1024), nullable=True),
        sa.Column("metrics", sa.JSON(), nullable=False),
        sa.Column("tags", sa.JSON(), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("judge_usage", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_runs_started_at"), ["started_at"], unique=False)

    op.create_table(
        "test_results",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("sample_index", sa.Integer(), nullable=False),
        sa.Column("test_name", sa.String(length=512), nullable=False),
        sa.Column("sample_id", sa.String(length=256), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("duration", sa.Float(), nullable=True),
        sa.Column("timestamp", sa.DateTime(), nullable=False),
        sa.Column("query", sa.Text(), nullable=True),
        sa.Column("response", sa.Text(), nullable=True),
        sa.Column("expected", sa.Text(), nullable=True),
        sa.Column("tags", sa.JSON(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("run_id", "sample_index", name="uq_test_results_run_sample"),
    )
    with op.batch_alter_table("test_results", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_test_results_run_id"), ["run_id"], unique=False)
        batch_op.create_index(
            "ix_test_results_timestamp_status", ["timestamp", "status"], unique=False
        )

    op.create_table(
        "quality_checks",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("test_result_id", sa.Integer(), nullable=False),
        sa.Column("check_name", sa.String(length=64), nullable=False),
        sa.Column("passed", sa.Boolean(), nullable=False),
        sa.Column("timestamp", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["test_result_id"], ["test_results.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("quality_checks", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_quality_checks_test_result_id"), ["test_result_id"], unique=False
        )

    op.create_table(
        "scoring_details",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("test_result_id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("metric_name", sa.String(length=128), nullable=False),
        sa.Column("metric_value", sa.Float(), nullable=True),
        sa.Column("method", sa.String(length=32), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("details", sa.JSON(), nullable=False),
        sa.Column("timestamp", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["test_result_id"], ["test_results.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("scoring_details", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_scoring_details_test_result_id"), ["test_result_id"], unique=False
        )
        batch_op.create_index(
            "ix_scoring_metric_time", ["metric_name", "timestamp", "metric_value"], unique=False
        )
        batch_op.create_index(
            "ix_scoring_run_metric", ["run_id", "metric_name", "metric_value"], unique=False
        )
        batch_op.create_index("ix_scoring_time", ["timestamp"], unique=False)

    op.create_table(
        "validation_details",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("test_result_id", sa.Integer(), nullable=False),
        sa.Column("query", sa.Text(), nullable=True),
        sa.Column("response", sa.Text(), nullable=True),
        sa.Column("expected", sa.Text(), nullable=True),
        sa.Column("similarity_score", sa.Float(), nullable=True),
        sa.Column("threshold", sa.Float(), nullable=True),
        sa.Column("is_relevant", sa.Boolean(), nullable=True),
        sa.Column("timestamp", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["test_result_id"], ["test_results.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("validation_details", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_validation_details_test_result_id"), ["test_result_id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("validation_details", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_validation_details_test_result_id"))

    op.drop_table("validation_details")
    with op.batch_alter_table("scoring_details", schema=None) as batch_op:
        batch_op.drop_index("ix_scoring_time")
        batch_op.drop_index("ix_scoring_run_metric")
        batch_op.drop_index("ix_scoring_metric_time")
        batch_op.drop_index(batch_op.f("ix_scoring_details_test_result_id"))

    op.drop_table("scoring_details")
    with op.batch_alter_table("quality_checks", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_quality_checks_test_result_id"))

    op.drop_table("quality_checks")
    with op.batch_alter_table("test_results", schema=None) as batch_op:
        batch_op.drop_index("ix_test_results_timestamp_status")
        batch_op.drop_index(batch_op.f("ix_test_results_run_id"))

    op.drop_table("test_results")
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_runs_started_at"))

    op.drop_table("runs")
    with op.batch_alter_table("metrics_snapshots", schema=None) as batch_op:
        batch_op.drop_index("ix_snapshots_type_time")

    op.drop_table("metrics_snapshots")
    op.drop_table("field_strategy_configs")
