"""A turn's steers (docs/design.md §9): each steer a row, PENDING as it is sent, then its one end
(S2), its content kept. Read by GetTurn through the primary key.

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "steers",
        sa.Column("project_id", sa.String(length=128), nullable=False),
        sa.Column("session_id", sa.String(length=128), nullable=False),
        sa.Column("generation", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("steer_id", sa.String(length=128), nullable=False),
        sa.Column("turn_id", sa.String(length=128), nullable=False),
        sa.Column("status", sa.SmallInteger(), nullable=False),
        sa.Column("sent_at", sa.BigInteger(), nullable=False),
        sa.Column("ended_at", sa.BigInteger(), nullable=True),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("content_type", sa.Text(), nullable=False),
        sa.Column("requeued", sa.Boolean(), nullable=False),
        sa.Column("opened_seq", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("project_id", "session_id", "generation", "steer_id", name=op.f("pk_steers")),
    )


def downgrade() -> None:
    op.drop_table("steers")
