"""Data as turngate 0.1.0 (the last release, before epochs) wrote it, for the tests that upgrade
it: a session's document without an `epoch`, its Redis log and outbox entries without one, and
its ledger rows in the schema of migration 0003."""

from __future__ import annotations

import json
from collections.abc import Sequence

from alembic import command
from redis.asyncio import Redis
from sqlalchemy import Connection, column, insert, table
from sqlalchemy.ext.asyncio import AsyncEngine

from turngate.service.codec import dump_event_body, dump_session
from turngate.service.core import (
    Admit,
    Admitted,
    Decision,
    Event,
    RecordToolCall,
    Session,
    SessionKey,
    ToolCallStatus,
    decide,
)
from turngate.service.sql.engine import make_engine
from turngate.service.sql.migrate import alembic_config
from turngate.service.sql.tables import sessions
from turngate.service.store.redis.keys import Keyspace, log_id, member

# The schema 0.1.0 shipped, and its tables that epochs changed.
RELEASED_SCHEMA = "0003"
RELEASED_EVENTS = table(
    "session_events", *map(column, ("project_id", "session_id", "seq", "time", "kind", "turn_id", "body"))
)
RELEASED_CURSORS = table("ledger_cursors", *map(column, ("project_id", "session_id", "seq")))
SECOND = 1_000_000
ADMITTED_AT = 1_764_000_000 * SECOND


def played() -> list[Decision]:
    """A session's first decisions: t1 admitted, then its tool call c1 opened (events 1 and 2)."""
    admitted = decide(Session(), Admit("t1", "runner", 20 * SECOND), ADMITTED_AT)
    assert isinstance(admitted.reply, Admitted)
    call = RecordToolCall("t1", admitted.reply.generation, "c1", "search", ToolCallStatus.OPEN)
    return [admitted, decide(admitted.state, call, ADMITTED_AT + SECOND)]


def released_document(state: Session) -> bytes:
    """The document as 0.1.0 serialized it: the same JSON, without `epoch`."""
    raw = json.loads(dump_session(state))
    del raw["epoch"]
    return json.dumps(raw).encode()


async def migrate_to(engine: AsyncEngine, revision: str) -> None:
    """Upgrades the database to `revision`, as an older release would have."""

    def upgrade(conn: Connection) -> None:
        config = alembic_config()
        config.attributes["connection"] = conn
        command.upgrade(config, revision)

    async with engine.begin() as conn:
        await conn.run_sync(upgrade)


async def migrate_url_to(url: str, revision: str) -> None:
    """`migrate_to` on the database at `url`."""
    engine = make_engine(url)
    try:
        await migrate_to(engine, revision)
    finally:
        await engine.dispose()


async def write_released_ledger(
    engine: AsyncEngine, key: SessionKey, events: Sequence[Event], *, cursor: int | None = None
) -> None:
    """The ledger's events of a session (schema 0003) and, in redis mode, its projector's cursor."""
    of_session = {"project_id": key.project_id, "session_id": key.session_id}
    async with engine.begin() as conn:
        for event in events:
            await conn.execute(
                insert(RELEASED_EVENTS).values(
                    **of_session,
                    seq=event.seq,
                    time=event.time,
                    kind=event.body.kind,
                    turn_id=event.turn_id,
                    body=dump_event_body(event.body).decode(),
                )
            )
        if cursor is not None:
            await conn.execute(insert(RELEASED_CURSORS).values(**of_session, seq=cursor))


async def write_released_sql_document(engine: AsyncEngine, key: SessionKey, state: Session) -> None:
    """The SQL store's row of a session, its document as 0.1.0 wrote it."""
    async with engine.begin() as conn:
        await conn.execute(
            insert(sessions).values(
                project_id=key.project_id,
                session_id=key.session_id,
                version=1,
                doc=released_document(state).decode(),
                deadline_at=state.deadline(),
                updated_at=ADMITTED_AT,
            )
        )


async def write_released_redis_session(
    client: Redis, keys: Keyspace, key: SessionKey, decisions: Sequence[Decision], *, projected: int
) -> None:
    """What 0.1.0's Redis store left of these decisions: the document (with the ledger's mark at
    `projected`), its log, and the outbox entries of the commits not projected yet."""
    state = decisions[-1].state
    await client.hset(
        keys.doc(key), mapping={"v": len(decisions), "doc": released_document(state), "ledger": projected}
    )
    for decision in decisions:
        for event in decision.events:
            await client.xadd(
                keys.log(key), {"t": event.time, "e": dump_event_body(event.body)}, id=log_id(event.seq)
            )
        last = decision.events[-1].seq
        if last > projected:
            await client.xadd(keys.outbox(keys.bucket(key)), {"k": member(key), "s": last})
