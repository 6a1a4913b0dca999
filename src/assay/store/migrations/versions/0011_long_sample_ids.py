"""sample ids of any length: test_results.sample_id and test_name, labels.sample_id as TEXT

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-28

A sample's id comes from the user's data file, and nothing bounds it. PostgreSQL refused
an id over 256 characters (``value too long for type character varying(256)``), so the
run's results were not stored, while SQLite, which does not check a VARCHAR's length,
kept them. The three columns that hold a sample's id (its test name is the id or derived
from it) become TEXT: no index reads them, so nothing else changes. SQLite is left as it
is: it never checked the length, and rebuilding ``labels`` there (its only way to alter a
column) would drop the expression index ``uq_labels_file_verdict``.
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def _sqlite() -> bool:
    return op.get_bind().dialect.name == "sqlite"


def upgrade() -> None:
    if _sqlite():
        return
    with op.batch_alter_table("test_results", schema=None) as batch_op:
        batch_op.alter_column("test_name", type_=sa.Text(), existing_type=sa.String(512))
        batch_op.alter_column("sample_id", type_=sa.Text(), existing_type=sa.String(256))
    with op.batch_alter_table("labels", schema=None) as batch_op:
        batch_op.alter_column("sample_id", type_=sa.Text(), existing_type=sa.String(256))


def downgrade() -> None:
    if _sqlite():
        return
    # ids longer than the old sizes are cut to fit (PostgreSQL would refuse them)
    for table, column, size in (
        ("labels", "sample_id", 256),
        ("test_results", "sample_id", 256),
        ("test_results", "test_name", 512),
    ):
        op.execute(
            sa.text(
                f"UPDATE {table} SET {column} = substr({column}, 1, {size}) "
                f"WHERE length({column}) > {size}"
            )
        )
    with op.batch_alter_table("labels", schema=None) as batch_op:
        batch_op.alter_column("sample_id", type_=sa.String(256), existing_type=sa.Text())
    with op.batch_alter_table("test_results", schema=None) as batch_op:
        batch_op.alter_column("sample_id", type_=sa.String(256), existing_type=sa.Text())
        batch_op.alter_column("test_name", type_=sa.String(512), existing_type=sa.Text())
