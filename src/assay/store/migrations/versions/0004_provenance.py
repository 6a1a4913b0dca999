"""score provenance and finite run means

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-25

``scoring_details`` keeps each result's ``components`` and ``signature`` (NULL for the
rows written before). ``run_metric_totals`` keeps each run's mean instead of its sum
(a sum of values near 1.8e308 overflows): ``mean = total / n`` for the stored rows.
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("scoring_details", schema=None) as batch_op:
        batch_op.add_column(sa.Column("components", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("signature", sa.Text(), nullable=True))
    with op.batch_alter_table("run_metric_totals", schema=None) as batch_op:
        batch_op.add_column(sa.Column("mean", sa.Float(), nullable=True))
    op.execute("UPDATE run_metric_totals SET mean = total / n")
    with op.batch_alter_table("run_metric_totals", schema=None) as batch_op:
        batch_op.alter_column("mean", existing_type=sa.Float(), nullable=False)
        batch_op.drop_column("total")


def downgrade() -> None:
    with op.batch_alter_table("run_metric_totals", schema=None) as batch_op:
        batch_op.add_column(sa.Column("total", sa.Float(), nullable=True))
    op.execute("UPDATE run_metric_totals SET total = mean * n")
    with op.batch_alter_table("run_metric_totals", schema=None) as batch_op:
        batch_op.alter_column("total", existing_type=sa.Float(), nullable=False)
        batch_op.drop_column("mean")
    with op.batch_alter_table("scoring_details", schema=None) as batch_op:
        batch_op.drop_column("signature")
        batch_op.drop_column("components")
