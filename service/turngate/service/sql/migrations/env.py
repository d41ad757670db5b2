"""Alembic's entry point: runs the migrations on the connection `migrate()` hands over."""

from alembic import context

from turngate.service.sql.tables import metadata

context.configure(connection=context.config.attributes["connection"], target_metadata=metadata)
with context.begin_transaction():
    context.run_migrations()
