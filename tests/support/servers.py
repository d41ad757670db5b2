"""Servers and clients for the e2e tests: a real turngate on a real port, and stubs for it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

import grpc
import pytest

from turngate.service.config import Settings
from turngate.service.ledger import retention
from turngate.service.server import TurngateServer
from turngate.v1 import turngate_pb2_grpc as pb_grpc


@dataclass
class Client:
    """The three services over one channel, as runners, gateways and watchers use them."""

    channel: grpc.aio.Channel
    admission: pb_grpc.AdmissionServiceAsyncStub
    control: pb_grpc.ControlServiceAsyncStub
    sessions: pb_grpc.SessionServiceAsyncStub


def client_for(channel: grpc.aio.Channel) -> Client:
    return Client(
        channel,
        pb_grpc.AdmissionServiceStub(channel),
        pb_grpc.ControlServiceStub(channel),
        pb_grpc.SessionServiceStub(channel),
    )


def settings_for(tmp: str, **overrides: object) -> Settings:
    values: dict[str, object] = {"listen": "127.0.0.1:0", "store": f"sqlite+aiosqlite:///{tmp}/turngate.db"}
    values.update(overrides)
    return Settings(**values)  # type: ignore[arg-type]


def pruning_often(settings: Settings, retention_s: float, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """`settings` with a history retention of `retention_s`, pruned every 50 ms (until monkeypatch
    undoes it): far below the setting's floor (a day, which no test waits out), so set past its
    validation."""
    monkeypatch.setattr(retention, "INTERVAL_S", 0.05)
    monkeypatch.setattr(retention, "JITTER_S", 0.0)
    return settings.model_copy(update={"history_retention": retention_s})


async def running(settings: Settings) -> AsyncIterator[tuple[TurngateServer, Client]]:
    async with (
        TurngateServer(settings) as server,
        grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as ch,
    ):
        yield server, client_for(ch)


OwnServer = Callable[..., AbstractAsyncContextManager[tuple[TurngateServer, Client]]]
