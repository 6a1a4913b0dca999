"""Alembic environment: runs on the connection `assay.store.db.migrate` hands over."""

from alembic import context

from assay.store.models import Base

connection = context.config.attributes.get("connection")
if connection is None:  # pragma: no cover - Assay always passes its connection
    raise RuntimeError("run migrations through assay.store.db.migrate()")

context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
