"""the contexts a sample was scored with

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-28

``test_results`` gains ``contexts`` (JSON, nullable): the retrieved texts the sample held
or its target returned (``assay run --contexts-path``, a python: target's ``contexts``),
as `assay.store.transcript.stored_texts` writes them. NULL for samples without contexts
and for rows written before.
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("test_results", schema=None) as batch_op:
        batch_op.add_column(sa.Column("contexts", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("test_results", schema=None) as batch_op:
        batch_op.drop_column("contexts")
