"""Servers and clients for the e2e tests: a real turngate on a real port, and stubs for it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

import grpc

from turngate.service.config import Settings
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


async def running(settings: Settings) -> AsyncIterator[tuple[TurngateServer, Client]]:
    async with (
        TurngateServer(settings) as server,
        grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as ch,
    ):
        yield server, client_for(ch)


OwnServer = Callable[..., AbstractAsyncContextManager[tuple[TurngateServer, Client]]]
