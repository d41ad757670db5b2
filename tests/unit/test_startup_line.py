"""The start-up line names the store and, when it is apart, the ledger, each as an operator knows
it and never with a password."""

from __future__ import annotations

from pathlib import Path

import pytest

from turngate.service.config import Settings
from turngate.service.server import _stores


def settings(store: str, ledger: str | None = None) -> Settings:
    return Settings(store=store, ledger=ledger, insecure=True)


def test_the_embedded_store_is_its_sqlite_file_by_absolute_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert (
        _stores(settings("sqlite+aiosqlite:///./turngate.db"))
        == f"; store: SQLite file {tmp_path}/turngate.db"
    )


def test_redis_mode_names_the_store_and_the_ledger_apart() -> None:
    line = _stores(settings("redis://127.0.0.1:6379/0", "sqlite+aiosqlite:////var/lib/turngate/ledger.db"))
    assert line == "; store: Redis redis://127.0.0.1:6379/0; ledger: SQLite file /var/lib/turngate/ledger.db"


@pytest.mark.parametrize(
    ("store", "ledger", "shown"),
    [
        (
            "redis://default:s3cret@redis:6379/0",
            "postgresql+asyncpg://turngate:pg-s3cret@db/turngate",
            "; store: Redis redis://default:***@redis:6379/0; ledger: postgresql+asyncpg://turngate:***@db/turngate",
        ),
        (
            "redis+cluster://:s3cret@a:7000,b:7001",
            "postgresql+asyncpg://db/turngate",
            "; store: Redis redis+cluster://:***@a:7000,b:7001; ledger: postgresql+asyncpg://db/turngate",
        ),
    ],
)
def test_no_password_is_shown(store: str, ledger: str, shown: str) -> None:
    line = _stores(settings(store, ledger))
    assert line == shown
    assert "s3cret" not in line
