"""The SDK's channel connecting to a server that is slow to answer a connection."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from tests.support.calls import snapshot
from tests.support.servers import client_for
from turngate.client.connection import open_channel
from turngate.v1 import turngate_pb2 as pb

# Longer than the 100 ms the SDK once gave a connection attempt, far shorter than gRPC's 20 s.
ANSWER_DELAY_S = 0.3


@asynccontextmanager
async def answering_late(target: str, delay: float) -> AsyncIterator[str]:
    """A TCP relay to `target` that takes each connection at once but reaches the server only
    `delay` seconds later, so the server's HTTP/2 SETTINGS come that late (a busy host); its address."""
    host, _, port = target.rpartition(":")
    relays: set[asyncio.Task[None]] = set()

    async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        try:
            while chunk := await source.read(65_536):
                sink.write(chunk)
                await sink.drain()
        finally:
            sink.close()

    async def relay(client_in: asyncio.StreamReader, client_out: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        relays.add(task)
        await asyncio.sleep(delay)
        server_in, server_out = await asyncio.open_connection(host, int(port))
        await asyncio.gather(pipe(client_in, server_out), pipe(server_in, client_out), return_exceptions=True)

    server = await asyncio.start_server(relay, "127.0.0.1", 0)
    try:
        yield f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()
        for task in relays:
            task.cancel()
        await asyncio.gather(*relays, return_exceptions=True)


async def test_a_server_slow_to_answer_a_connection_serves_the_first_call_on_the_sdks_channel(
    target: str, ref: pb.SessionRef
) -> None:
    """gRPC's core gives a connection attempt at least `grpc.min_reconnect_backoff_ms` (20 s by
    default): the SDK once set it to 100 ms to reconnect sooner, and a call made while connecting
    to a server slower than that failed UNAVAILABLE (docs/decisions.md, "Python SDK")."""
    async with answering_late(target, ANSWER_DELAY_S) as late:
        channel = open_channel(
            late, credentials=None, token=None, options=(), interceptors=(), tracer_provider=None
        )
        async with channel:
            first = await snapshot(client_for(channel), ref, within_s=10)
    assert first.session == ref
