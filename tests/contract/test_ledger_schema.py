"""The ledger's schema as every process kind sees it at start (schema.LedgerSchema): one that may
migrate migrates a blank ledger, not ready meanwhile; one told not to waits, not ready and naming
the database, until another process has migrated it; a ledger that does not answer is no reason
not to be ready."""

from __future__ import annotations

import asyncio

from tests.contract.released import migrate_url_to
from tests.support.waiting import cancelled, eventually
from turngate.service.schema import LedgerSchema
from turngate.service.sql.migrate import is_migrated, migrate

UNREACHABLE = "postgresql+asyncpg://postgres@127.0.0.1:1/turngate"
# Reached only when a test fails.
TIMEOUT_S = 10.0


async def test_a_process_that_may_migrate_migrates_a_blank_ledger_not_ready_until_done(
    blank_database_url: str,
) -> None:
    reported: list[str | None] = []
    schema = LedgerSchema(blank_database_url, migrate=True, report=reported.append)
    await asyncio.wait_for(schema.run(), TIMEOUT_S)

    assert reported == [f"ledger not migrated yet: migrating {blank_database_url}", None]
    assert schema.migrated.is_set()
    assert await is_migrated(blank_database_url)


async def test_a_process_told_not_to_migrate_waits_not_ready_naming_the_database_until_another_has(
    blank_database_url: str,
) -> None:
    await migrate_url_to(blank_database_url, "0001")  # an older release's schema is not this one's
    reported: list[str | None] = []
    schema = LedgerSchema(blank_database_url, migrate=False, report=reported.append)
    running = asyncio.create_task(schema.run())
    try:
        waiting = f"ledger not migrated yet: waiting for another process to migrate {blank_database_url}"
        await eventually(lambda: reported == [waiting])
        assert not schema.migrated.is_set()

        await migrate(blank_database_url)
        await asyncio.wait_for(running, TIMEOUT_S)
    finally:
        await cancelled(running)
    assert reported == [waiting, None]
    assert schema.migrated.is_set()


async def test_a_ledger_that_does_not_answer_is_no_reason_not_to_be_ready() -> None:
    reported: list[str | None] = []
    schema = LedgerSchema(UNREACHABLE, migrate=True, report=reported.append)
    running = asyncio.create_task(schema.run())
    try:
        await eventually(lambda: reported == [None])
        assert not schema.migrated.is_set()
    finally:
        await cancelled(running)
