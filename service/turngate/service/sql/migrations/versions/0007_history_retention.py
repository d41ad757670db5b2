"""History retention: the turns settled longest ago and the oldest session events are found by an
index each, and the turns not settled (whose events are kept) by a partial one, so a prune costs
what it deletes, not the size of the tables. (3 is TurnPhase.SETTLED.)

On PostgreSQL, building them locks the two tables against writes for as long as it takes (a large
ledger can build them beforehand with CREATE INDEX CONCURRENTLY, under the same names).

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(op.f("ix_turns_settled_at"), "turns", ["settled_at"], if_not_exists=True)
    op.create_index(op.f("ix_session_events_time"), "session_events", ["time"], if_not_exists=True)
    unsettled = sa.text("phase <> 3")
    op.create_index(
        "ix_turns_unsettled",
        "turns",
        ["project_id", "session_id", "turn_id"],
        if_not_exists=True,
        postgresql_where=unsettled,
        sqlite_where=unsettled,
    )


def downgrade() -> None:
    op.drop_index("ix_turns_unsettled", table_name="turns")
    op.drop_index(op.f("ix_session_events_time"), table_name="session_events")
    op.drop_index(op.f("ix_turns_settled_at"), table_name="turns")
