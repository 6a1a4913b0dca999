"""run fingerprint

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-25

What a run was scored on (dataset hash, metrics, parameters, judge), so that
``assay evaluate --resume`` refuses to mix a different dataset or setting into it.
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("fingerprint", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_column("fingerprint")
