"""Settings: flags override `TURNGATE_*` environment variables, which override the defaults.

The timing contract is validated here, so a bad value refuses to start with one clear line.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DAY = 24 * 3600.0
MIN_LEASE_TTL = 1.0
MAX_LEASE_TTL = DAY

Seconds = Annotated[float, Field(allow_inf_nan=False)]
_LISTEN = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+|\*):(\d{1,5})$")


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="TURNGATE_", extra="forbid", frozen=True)

    listen: str = "127.0.0.1:50051"
    store: str = "sqlite+aiosqlite:///./turngate.db"
    lease_ttl: Seconds = Field(20.0, ge=MIN_LEASE_TTL, le=MAX_LEASE_TTL)
    stop_grace: Seconds = Field(30.0, ge=1.0, le=DAY)
    tombstone_ttl: Seconds = Field(600.0, ge=1.0, le=7 * DAY)
    # How many of a session's latest events a watcher may resume from; older cursors resync.
    event_retention: int = Field(10_000, ge=100)
    # Events queued for one watcher before its stream ends and it must resume from its cursor.
    watch_buffer: int = Field(1024, ge=16, le=1_000_000)
    migrate: bool = True
    sqlite_synchronous: Literal["NORMAL", "FULL"] = "NORMAL"
    shutdown_grace: Seconds = Field(10.0, ge=0.0, le=3600.0)
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"

    @field_validator("listen")
    @classmethod
    def _host_port(cls, value: str) -> str:
        match = _LISTEN.match(value)
        if match is None or not 0 <= int(match.group(2)) <= 65535:
            raise ValueError("must be HOST:PORT, e.g. 127.0.0.1:50051 or [::1]:50051")
        return value

    @field_validator("store")
    @classmethod
    def _store_url(cls, value: str) -> str:
        if not value.startswith(("sqlite+aiosqlite://", "postgresql+asyncpg://")):
            raise ValueError("must start with sqlite+aiosqlite:// or postgresql+asyncpg://")
        return value


def describe(error: ValidationError) -> str:
    """One line naming every bad setting, for a refusal to start."""
    parts = []
    for item in error.errors():
        name = ".".join(str(p) for p in item["loc"]) or "settings"
        # A store URL may carry a password, and any input may be long: echo only short, safe values.
        shown = "" if name == "store" else repr(item.get("input"))
        parts.append(f"{name}{'=' + shown if shown and len(shown) <= 40 else ''}: {item['msg']}")
    return "invalid settings: " + "; ".join(parts)
