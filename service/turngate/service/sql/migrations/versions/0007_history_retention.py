"""History retention: the turns settled longest ago and the oldest session events are found by an
index each, so a prune costs what it deletes, not the size of the tables.

On PostgreSQL, building them locks the two tables against writes for as long as it takes (a large
ledger can build them beforehand with CREATE INDEX CONCURRENTLY, under the same names).

Revision ID: 0007
Revises: 0006
"""

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(op.f("ix_turns_settled_at"), "turns", ["settled_at"], if_not_exists=True)
    op.create_index(op.f("ix_session_events_time"), "session_events", ["time"], if_not_exists=True)


def downgrade() -> None:
    op.drop_index(op.f("ix_session_events_time"), table_name="session_events")
    op.drop_index(op.f("ix_turns_settled_at"), table_name="turns")
