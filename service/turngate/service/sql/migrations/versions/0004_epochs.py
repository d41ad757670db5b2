"""Epochs: a session's events are keyed by the epoch of their log too, and the projector's cursor
says which epoch it has recorded up to its seq. What 0.1.0 wrote is of epoch 1 (the core's
LEGACY_EPOCH, as the codec reads 0.1.0's documents).

Downgrading fails once a session has events of two epochs (redis mode, after Redis lost it).

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_LEGACY_EPOCH = "1"


def upgrade() -> None:
    # Added with a default (which fills the rows there are), then the default dropped: every
    # writer names the epoch. On SQLite the batch rebuilds the table, keeping the rows.
    for table in ("session_events", "ledger_cursors"):
        op.add_column(
            table,
            sa.Column("epoch", sa.BigInteger(), nullable=False, server_default=_LEGACY_EPOCH),
        )
    with op.batch_alter_table("session_events") as batch:
        batch.alter_column("epoch", server_default=None)
        batch.drop_constraint("pk_session_events", type_="primary")
        batch.create_primary_key("pk_session_events", ["project_id", "session_id", "epoch", "seq"])
    with op.batch_alter_table("ledger_cursors") as batch:
        batch.alter_column("epoch", server_default=None)


def downgrade() -> None:
    with op.batch_alter_table("session_events") as batch:
        batch.drop_constraint("pk_session_events", type_="primary")
        batch.create_primary_key("pk_session_events", ["project_id", "session_id", "seq"])
        batch.drop_column("epoch")
    with op.batch_alter_table("ledger_cursors") as batch:
        batch.drop_column("epoch")
