"""The first schema: sessions, their events and the ledger.

Revision ID: 0001
Revises: (none)
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "interactions",
        sa.Column("project_id", sa.String(length=128), nullable=False),
        sa.Column("session_id", sa.String(length=128), nullable=False),
        sa.Column("generation", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("interaction_id", sa.String(length=128), nullable=False),
        sa.Column("turn_id", sa.String(length=128), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("status", sa.SmallInteger(), nullable=False),
        sa.Column("resolution", sa.Text(), nullable=False),
        sa.Column("opened_at", sa.BigInteger(), nullable=False),
        sa.Column("closed_at", sa.BigInteger(), nullable=True),
        sa.Column("opened_seq", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint(
            "project_id", "session_id", "generation", "interaction_id", name=op.f("pk_interactions")
        ),
    )
    op.create_table(
        "session_events",
        sa.Column("project_id", sa.String(length=128), nullable=False),
        sa.Column("session_id", sa.String(length=128), nullable=False),
        sa.Column("seq", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("time", sa.BigInteger(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("turn_id", sa.String(length=128), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("project_id", "session_id", "seq", name=op.f("pk_session_events")),
    )
    op.create_table(
        "sessions",
        sa.Column("project_id", sa.String(length=128), nullable=False),
        sa.Column("session_id", sa.String(length=128), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("doc", sa.Text(), nullable=False),
        sa.Column("deadline_at", sa.BigInteger(), nullable=True),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("project_id", "session_id", name=op.f("pk_sessions")),
    )
    op.create_index(op.f("ix_sessions_deadline_at"), "sessions", ["deadline_at"], unique=False)
    op.create_table(
        "tool_calls",
        sa.Column("project_id", sa.String(length=128), nullable=False),
        sa.Column("session_id", sa.String(length=128), nullable=False),
        sa.Column("generation", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("call_id", sa.String(length=128), nullable=False),
        sa.Column("turn_id", sa.String(length=128), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("status", sa.SmallInteger(), nullable=False),
        sa.Column("error", sa.Text(), nullable=False),
        sa.Column("opened_at", sa.BigInteger(), nullable=False),
        sa.Column("closed_at", sa.BigInteger(), nullable=True),
        sa.Column("opened_seq", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint(
            "project_id", "session_id", "generation", "call_id", name=op.f("pk_tool_calls")
        ),
    )
    op.create_table(
        "turns",
        sa.Column("project_id", sa.String(length=128), nullable=False),
        sa.Column("session_id", sa.String(length=128), nullable=False),
        sa.Column("generation", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("turn_id", sa.String(length=128), nullable=False),
        sa.Column("runner_id", sa.String(length=128), nullable=False),
        sa.Column("phase", sa.SmallInteger(), nullable=False),
        sa.Column("outcome", sa.SmallInteger(), nullable=True),
        sa.Column("settled_by", sa.SmallInteger(), nullable=True),
        sa.Column("stop_requested", sa.Boolean(), nullable=False),
        sa.Column("stop_reason", sa.Text(), nullable=False),
        sa.Column("stop_requested_at", sa.BigInteger(), nullable=True),
        sa.Column("stop_deadline", sa.BigInteger(), nullable=True),
        sa.Column("admitted_at", sa.BigInteger(), nullable=False),
        sa.Column("settled_at", sa.BigInteger(), nullable=True),
        sa.Column("lease_expires_at", sa.BigInteger(), nullable=False),
        sa.Column("error", sa.Text(), nullable=False),
        sa.Column("traceparent", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("project_id", "session_id", "generation", name=op.f("pk_turns")),
    )
    op.create_index(
        op.f("ix_turns_project_id_session_id_turn_id"),
        "turns",
        ["project_id", "session_id", "turn_id"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_turns_project_id_session_id_turn_id"), table_name="turns")
    op.drop_table("turns")
    op.drop_table("tool_calls")
    op.drop_index(op.f("ix_sessions_deadline_at"), table_name="sessions")
    op.drop_table("sessions")
    op.drop_table("session_events")
    op.drop_table("interactions")
