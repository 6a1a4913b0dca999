"""a sample's conversation turns, agent trace and reference tool calls

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-26

``test_results`` gains three nullable JSON columns: ``turns`` (the conversation, one
object per message: role, content, tool_calls, tool_call_id, name), ``trace`` (the agent
steps: kind, name, arguments, ok, error, latency, result) and ``expected_tool_calls``
(the reference calls). NULL for samples without them and for rows written before.
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

COLUMNS = ("turns", "trace", "expected_tool_calls")


def upgrade() -> None:
    with op.batch_alter_table("test_results", schema=None) as batch_op:
        for name in COLUMNS:
            batch_op.add_column(sa.Column(name, sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("test_results", schema=None) as batch_op:
        for name in reversed(COLUMNS):
            batch_op.drop_column(name)
