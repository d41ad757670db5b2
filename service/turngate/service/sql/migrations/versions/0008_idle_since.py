"""Sessions say since when nothing in them has been live (`Session.idle_since`), indexed: an idle
session leaves the store once that is `TURNGATE_IDLE_RETENTION` ago (docs/design.md §8, R1).
Rows written before are filled from their last write plus the longest a tombstone or a request's
answer may be remembered, so none is retired while it may still remember one (a session a turn
holds, or whose queue waits, is set right by its next write, which it will have).

Revision ID: 0008
Revises: 0007
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

# limits.MAX_TOMBSTONE_TTL, as it was when this migration was written (µs).
_LONGEST_MEMORY = 7 * 24 * 3600 * 1_000_000


def upgrade() -> None:
    op.add_column("sessions", sa.Column("idle_since", sa.BigInteger(), nullable=True))
    sessions = sa.table(
        "sessions", sa.column("idle_since"), sa.column("updated_at"), sa.column("deadline_at")
    )
    op.execute(
        sessions.update()
        .where(sessions.c.deadline_at.is_(None))
        .values(idle_since=sessions.c.updated_at + _LONGEST_MEMORY)
    )
    op.create_index(op.f("ix_sessions_idle_since"), "sessions", ["idle_since"])


def downgrade() -> None:
    op.drop_index(op.f("ix_sessions_idle_since"), table_name="sessions")
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("idle_since")
