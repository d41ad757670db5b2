"""A PostgreSQL of the fault tests' own for the whole run, which a test may stop and start again;
every test works in a database of its own on it."""

from __future__ import annotations

import asyncio
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from tests.faults.servers import PrivatePostgres
from turngate.service.ledger import migrate


@pytest.fixture(scope="session")
def private_postgres() -> Iterator[PrivatePostgres]:
    # Not under pytest's tmp_path: its parents are private to the user running the tests, and the
    # server may run as another user.
    with tempfile.TemporaryDirectory(prefix="turngate-pg-") as root:
        postgres = PrivatePostgres(Path(root))
        postgres.start()
        yield postgres
        postgres.stop()


@pytest.fixture
def ledger_url(private_postgres: PrivatePostgres) -> str:
    """A migrated ledger database of this test's own on the private PostgreSQL."""
    name = f"ledger_{uuid.uuid4().hex[:12]}"

    async def create() -> None:
        engine = create_async_engine(private_postgres.url(), isolation_level="AUTOCOMMIT")
        try:
            async with engine.connect() as conn:
                await conn.execute(text(f'CREATE DATABASE "{name}"'))
        finally:
            await engine.dispose()
        await migrate(private_postgres.url(name))

    asyncio.run(create())
    return private_postgres.url(name)
