"""a sample's time to the first token

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-27

``test_results`` gains ``first_token_time`` (seconds, nullable): what ``assay run``
measures for a streamed reply, shown on a run's page with the duration percentiles.
NULL for samples without it and for rows written before.
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("test_results", schema=None) as batch_op:
        batch_op.add_column(sa.Column("first_token_time", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("test_results", schema=None) as batch_op:
        batch_op.drop_column("first_token_time")
