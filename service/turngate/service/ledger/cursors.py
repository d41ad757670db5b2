"""How far the ledger has recorded each session's events (redis mode): one `ledger_cursors` row
per session, naming the epoch of the log it follows and the last seq recorded from it. Projecting
locks the rows first, so projectors that deliver the same outbox entries record each event once,
in seq order."""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import bindparam
from sqlalchemy.ext.asyncio import AsyncConnection

from turngate.service.core import SessionKey
from turngate.service.ports.outbox import Position
from turngate.service.sql.tables import dialect_insert, ledger_cursors


class Cursors:
    """The cursor rows, in one SQL dialect."""

    def __init__(self, dialect: str) -> None:
        # Locks sessions' cursor rows (made at seq 0 of the epoch given, the first time) and reads
        # them, in one statement.
        insert = dialect_insert(dialect, ledger_cursors)
        self._lock = insert.on_conflict_do_update(
            index_elements=list(ledger_cursors.primary_key), set_={"seq": ledger_cursors.c.seq}
        ).returning(
            ledger_cursors.c.project_id,
            ledger_cursors.c.session_id,
            ledger_cursors.c.epoch,
            ledger_cursors.c.seq,
        )
        self._forget = ledger_cursors.delete().where(
            ledger_cursors.c.project_id == bindparam("key_project_id"),
            ledger_cursors.c.session_id == bindparam("key_session_id"),
            ledger_cursors.c.epoch == bindparam("key_epoch"),
        )
        # The SET clause comes from the rows' other keys (`epoch`, `seq`).
        self._move = ledger_cursors.update().where(
            ledger_cursors.c.project_id == bindparam("key_project_id"),
            ledger_cursors.c.session_id == bindparam("key_session_id"),
        )

    async def lock(
        self, conn: AsyncConnection, epochs: Mapping[SessionKey, int]
    ) -> dict[SessionKey, Position]:
        """Locks the sessions' cursor rows, in key order (so projectors sharing sessions never
        deadlock), and reads them. A session seen for the first time starts at the epoch given."""
        rows = [
            {"project_id": key.project_id, "session_id": key.session_id, "epoch": epochs[key], "seq": 0}
            for key in sorted(epochs)
        ]
        locked = await conn.execute(self._lock, rows)
        return {SessionKey(row.project_id, row.session_id): Position(row.epoch, row.seq) for row in locked}

    async def move(self, conn: AsyncConnection, cursors: Mapping[SessionKey, Position]) -> None:
        rows = [
            {
                "key_project_id": key.project_id,
                "key_session_id": key.session_id,
                "epoch": cursor.epoch,
                "seq": cursor.seq,
            }
            for key, cursor in cursors.items()
        ]
        await conn.execute(self._move, rows)

    async def forget(self, conn: AsyncConnection, epochs: Mapping[SessionKey, int]) -> None:
        """Deletes the cursors of sessions that left the store (R1) while they follow the epoch
        given: the session's next log is then recorded as a new session's, from its start."""
        rows = [
            {"key_project_id": key.project_id, "key_session_id": key.session_id, "key_epoch": epoch}
            for key, epoch in sorted(epochs.items())
        ]
        await conn.execute(self._forget, rows)
