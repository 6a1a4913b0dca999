"""labels: people's verdicts on samples, and the key that joins them to results

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-28

``labels`` keeps each verdict a person (or a data file, annotator ``file``) gave a sample:
the sample's key (`assay.core.labels.sample_key`, indexed) and id, the run it was given
on (NULL: none), the metric (NULL: the sample's one verdict), the value in [0, 1], the
raw text as given and its scale, the annotator, an optional note and when (UTC).
``test_results`` gains ``sample_key`` (nullable: NULL on rows written before), so a
run's stored results find the labels given on any run of the same data.
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "labels",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("sample_key", sa.String(64), nullable=False),
        sa.Column("sample_id", sa.String(256), nullable=True),
        sa.Column("run_id", sa.String(64), nullable=True),
        sa.Column("metric", sa.String(128), nullable=True),
        sa.Column("value", sa.Float(), nullable=False),
        sa.Column("raw", sa.Text(), nullable=False),
        sa.Column("scale", sa.String(32), nullable=True),
        sa.Column("annotator", sa.String(256), nullable=False),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )
    op.create_index("ix_labels_sample_key", "labels", ["sample_key"])
    # a data file's verdict is kept once per (sample, metric, value), even when two runs
    # of the same file are stored at once
    file_only = sa.text("annotator = 'file'")
    op.create_index(
        "uq_labels_file_verdict",
        "labels",
        ["sample_key", sa.text("coalesce(metric, '')"), "value"],
        unique=True,
        sqlite_where=file_only,
        postgresql_where=file_only,
    )
    with op.batch_alter_table("test_results", schema=None) as batch_op:
        batch_op.add_column(sa.Column("sample_key", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("test_results", schema=None) as batch_op:
        batch_op.drop_column("sample_key")
    op.drop_index("uq_labels_file_verdict", table_name="labels")
    op.drop_index("ix_labels_sample_key", table_name="labels")
    op.drop_table("labels")
