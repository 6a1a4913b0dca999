"""covering index for comparing runs

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-25

``ix_scoring_run_metric`` (run_id, metric_name, metric_value) gains ``test_result_id``:
comparing two runs reads each run's values and their samples' row ids from the index
alone instead of one table lookup per scoring row (half the query's time at 1M rows on
SQLite). Every query that used the old index uses its prefix of the new one.
"""

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_scoring_run_metric_test",
        "scoring_details",
        ["run_id", "metric_name", "metric_value", "test_result_id"],
    )
    op.drop_index("ix_scoring_run_metric", table_name="scoring_details")


def downgrade() -> None:
    op.create_index(
        "ix_scoring_run_metric", "scoring_details", ["run_id", "metric_name", "metric_value"]
    )
    op.drop_index("ix_scoring_run_metric_test", table_name="scoring_details")
