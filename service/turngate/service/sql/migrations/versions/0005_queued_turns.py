"""The turn queue: a turn that waited records when it was queued (NULL: it never waited). A turn
that left the queue without running has a row too, with admitted_at 0.

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("turns", sa.Column("queued_at", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("turns") as batch:
        batch.drop_column("queued_at")
