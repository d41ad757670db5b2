"""Finding sessions (ListSessions, ListProjects): each session history holds events of, with when its
newest event was written and the generation of its last turn that ran and settled, indexed by
project and time. Filled from the history already recorded (its events, and its settled turns that
ran: phase 3 is TurnPhase.SETTLED, admitted_at 0 a turn that never left the queue), one pass over
the events at the upgrade; `record()` keeps it from then on.

Revision ID: 0010
Revises: 0009
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

_FILL = """
INSERT INTO session_activity (project_id, session_id, last_activity_at, settled_generation)
SELECT e.project_id, e.session_id, max(e.time),
       coalesce((SELECT max(t.generation) FROM turns t
                 WHERE t.project_id = e.project_id AND t.session_id = e.session_id
                   AND t.phase = 3 AND t.admitted_at <> 0), 0)
FROM session_events e
GROUP BY e.project_id, e.session_id
"""


def upgrade() -> None:
    op.create_table(
        "session_activity",
        sa.Column("project_id", sa.String(length=128), nullable=False),
        sa.Column("session_id", sa.String(length=128), nullable=False),
        sa.Column("last_activity_at", sa.BigInteger(), nullable=False),
        sa.Column("settled_generation", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("project_id", "session_id", name=op.f("pk_session_activity")),
    )
    op.create_index(
        op.f("ix_session_activity_project_id_last_activity_at_session_id"),
        "session_activity",
        ["project_id", "last_activity_at", "session_id"],
    )
    op.create_index(op.f("ix_session_activity_last_activity_at"), "session_activity", ["last_activity_at"])
    op.execute(sa.text(_FILL))


def downgrade() -> None:
    op.drop_table("session_activity")
