"""ListActiveSessions: a project's sessions with an active turn, by deadline, without a scan.

Revision ID: 0003
Revises: 0002
"""

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        op.f("ix_sessions_project_id_deadline_at_session_id"),
        "sessions",
        ["project_id", "deadline_at", "session_id"],
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_sessions_project_id_deadline_at_session_id"), table_name="sessions")
