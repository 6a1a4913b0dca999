"""run metric totals

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "run_metric_totals",
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("metric_name", sa.String(length=128), nullable=False),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.Column("total", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("run_id", "metric_name"),
    )
    # backfill the runs that finished before this table existed
    op.execute(
        "INSERT INTO run_metric_totals (run_id, metric_name, n, total) "
        "SELECT s.run_id, s.metric_name, COUNT(s.metric_value), SUM(s.metric_value) "
        "FROM scoring_details s JOIN runs r ON r.id = s.run_id "
        "WHERE r.status <> 'running' "
        "GROUP BY s.run_id, s.metric_name HAVING COUNT(s.metric_value) > 0"
    )


def downgrade() -> None:
    op.drop_table("run_metric_totals")
