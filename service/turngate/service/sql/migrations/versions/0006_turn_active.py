"""Sessions say whether a turn holds them: since the queue, a session may have a deadline (a
queued turn's expiry) with no active turn, and only those with one count among a project's
active sessions. Rows written before are filled from their deadline, which only an active turn
gave until 0005 (a session whose queue alone waits is set right by its next write).

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Added with a default (which fills the rows there are), then the default dropped: every
    # writer names it. On SQLite the batch rebuilds the table, keeping the rows.
    op.add_column(
        "sessions", sa.Column("turn_active", sa.Boolean(), nullable=False, server_default=sa.false())
    )
    sessions = sa.table("sessions", sa.column("deadline_at"), sa.column("turn_active"))
    op.execute(sessions.update().where(sessions.c.deadline_at.is_not(None)).values(turn_active=True))
    with op.batch_alter_table("sessions") as batch:
        batch.alter_column("turn_active", server_default=None)
    op.create_index(op.f("ix_sessions_turn_active_project_id"), "sessions", ["turn_active", "project_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_sessions_turn_active_project_id"), table_name="sessions")
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("turn_active")
