"""The SQL schema: the store's session rows and the ledger's history, in one MetaData.

A blank database gets these tables by `create_all` and is stamped at the newest revision; the
Alembic migrations (sql/migrations) bring an older one to the same schema, as a test checks
(sql/migrate.py).
Times are store-clock µs since the epoch; enums are stored as their contract numbers. Every
primary key starts with `project_id` (I11).
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Index,
    MetaData,
    PrimaryKeyConstraint,
    SmallInteger,
    String,
    Table,
    Text,
    text,
)
from sqlalchemy.dialects import postgresql, sqlite

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "pk": "pk_%(table_name)s",
    }
)

_ID = String(128)


def _key() -> tuple[Column[str], Column[str]]:
    return Column("project_id", _ID, primary_key=True), Column("session_id", _ID, primary_key=True)


sessions = Table(
    "sessions",
    metadata,
    *_key(),
    Column("version", BigInteger, nullable=False),
    Column("doc", Text, nullable=False),
    # The document's next deadline: its active turn's or a queued turn's (NULL: none).
    Column("deadline_at", BigInteger, nullable=True),
    Column("updated_at", BigInteger, nullable=False),
    # Whether a turn holds the session (Session.turn_active): what the active counts count.
    Column("turn_active", Boolean, nullable=False),
    # Since when nothing in the session has been live (NULL: something is): R1 retires by it.
    Column("idle_since", BigInteger, nullable=True),
    Index(None, "deadline_at"),
    Index(None, "idle_since"),
    Index(None, "project_id", "deadline_at", "session_id"),
    Index(None, "turn_active", "project_id"),
)

# An event is named by its session, the epoch of the log it was written to and its seq: a Redis
# store that lost a session starts its log again at seq 1 in a new epoch (redis mode keeps both).
session_events = Table(
    "session_events",
    metadata,
    Column("project_id", _ID, nullable=False),
    Column("session_id", _ID, nullable=False),
    Column("seq", BigInteger, nullable=False, autoincrement=False),
    Column("time", BigInteger, nullable=False),
    Column("kind", String(32), nullable=False),
    Column("turn_id", _ID, nullable=False),
    Column("body", Text, nullable=False),
    Column("epoch", BigInteger, nullable=False, autoincrement=False),
    PrimaryKeyConstraint("project_id", "session_id", "epoch", "seq"),
    # History retention finds the oldest events by it (ledger/prune.py).
    Index(None, "time"),
)

turns = Table(
    "turns",
    metadata,
    *_key(),
    Column("generation", BigInteger, primary_key=True, autoincrement=False),
    Column("turn_id", _ID, nullable=False),
    Column("runner_id", _ID, nullable=False),
    Column("phase", SmallInteger, nullable=False),
    Column("outcome", SmallInteger, nullable=True),
    Column("settled_by", SmallInteger, nullable=True),
    Column("stop_requested", Boolean, nullable=False),
    Column("stop_reason", Text, nullable=False),
    Column("stop_requested_at", BigInteger, nullable=True),
    Column("stop_deadline", BigInteger, nullable=True),
    Column("admitted_at", BigInteger, nullable=False),
    Column("settled_at", BigInteger, nullable=True),
    Column("lease_expires_at", BigInteger, nullable=False),
    Column("error", Text, nullable=False),
    Column("traceparent", Text, nullable=False),
    # When the turn joined the queue (NULL: it never waited); one that never ran has admitted_at 0.
    Column("queued_at", BigInteger, nullable=True),
    Index(None, "project_id", "session_id", "turn_id"),
    # History retention finds the turns settled longest ago by it (NULL while a turn is unsettled),
    # and the few turns not settled, whose events it keeps, by the second (partial: small).
    Index(None, "settled_at"),
    Index(
        "ix_turns_unsettled",
        "project_id",
        "session_id",
        "turn_id",
        postgresql_where=text("phase <> 3"),
        sqlite_where=text("phase <> 3"),
    ),
)

tool_calls = Table(
    "tool_calls",
    metadata,
    *_key(),
    Column("generation", BigInteger, primary_key=True, autoincrement=False),
    Column("call_id", _ID, primary_key=True),
    Column("turn_id", _ID, nullable=False),
    Column("name", Text, nullable=False),
    Column("status", SmallInteger, nullable=False),
    Column("error", Text, nullable=False),
    Column("opened_at", BigInteger, nullable=False),
    Column("closed_at", BigInteger, nullable=True),
    Column("opened_seq", BigInteger, nullable=False),
)

interactions = Table(
    "interactions",
    metadata,
    *_key(),
    Column("generation", BigInteger, primary_key=True, autoincrement=False),
    Column("interaction_id", _ID, primary_key=True),
    Column("turn_id", _ID, nullable=False),
    Column("kind", Text, nullable=False),
    Column("status", SmallInteger, nullable=False),
    Column("resolution", Text, nullable=False),
    Column("opened_at", BigInteger, nullable=False),
    Column("closed_at", BigInteger, nullable=True),
    Column("opened_seq", BigInteger, nullable=False),
)


# A turn's steers (docs/design.md §9), content kept: history is where a steer's content stays once
# it ended. GetTurn reads a turn's steers by the primary key's prefix (project, session, generation).
steers = Table(
    "steers",
    metadata,
    *_key(),
    Column("generation", BigInteger, primary_key=True, autoincrement=False),
    Column("steer_id", _ID, primary_key=True),
    Column("turn_id", _ID, nullable=False),
    Column("status", SmallInteger, nullable=False),
    Column("sent_at", BigInteger, nullable=False),
    Column("ended_at", BigInteger, nullable=True),
    Column("content", Text, nullable=False),
    Column("content_type", Text, nullable=False),
    Column("requeued", Boolean, nullable=False),
    # The turn_steered event's seq: steers read in the order they came, as tool calls by theirs.
    Column("opened_seq", BigInteger, nullable=False),
)


# Each session history holds events of: when its newest one was written, and the generation of its
# last turn that ran and settled (0: none). `record()` keeps it with every write; ListSessions pages a
# project's sessions by the first index, newest first; history retention finds the oldest by the
# second (docs/decisions.md, "Finding sessions").
session_activity = Table(
    "session_activity",
    metadata,
    *_key(),
    Column("last_activity_at", BigInteger, nullable=False),
    Column("settled_generation", BigInteger, nullable=False),
    Index(None, "project_id", "last_activity_at", "session_id"),
    Index(None, "last_activity_at"),
)


# Redis mode: how far the projector has recorded each session's events (up to `seq` of the log of
# `epoch`). Projecting locks the row, so replicas that deliver the same outbox entries record each
# event once, in seq order.
ledger_cursors = Table(
    "ledger_cursors",
    metadata,
    *_key(),
    Column("seq", BigInteger, nullable=False),
    Column("epoch", BigInteger, nullable=False),
)


def dialect_insert(dialect: str, table: Table) -> postgresql.Insert | sqlite.Insert:
    """An INSERT into `table` that knows ON CONFLICT (PostgreSQL and SQLite spell it alike)."""
    return postgresql.insert(table) if dialect == "postgresql" else sqlite.insert(table)
