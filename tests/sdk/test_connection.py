"""The SDK's channel connecting to a server that is slow to answer a connection."""

from __future__ import annotations

from tests.support.calls import snapshot
from tests.support.relay import TcpForwarder
from tests.support.servers import client_for
from turngate.client.connection import open_channel
from turngate.v1 import turngate_pb2 as pb

# Longer than the 100 ms the SDK once gave a connection attempt, far shorter than gRPC's 20 s.
ANSWER_DELAY_S = 0.3


async def test_a_server_slow_to_answer_a_connection_serves_the_first_call_on_the_sdks_channel(
    target: str, ref: pb.SessionRef
) -> None:
    """gRPC's core gives a connection attempt at least `grpc.min_reconnect_backoff_ms` (20 s by
    default): the SDK once set it to 100 ms to reconnect sooner, and a call made while connecting
    to a server slower than that failed UNAVAILABLE (docs/decisions.md, "Python SDK")."""
    host, _, port = target.rpartition(":")
    # Each connection reaches the server late, so its HTTP/2 SETTINGS come that late (a busy host).
    late = TcpForwarder((host, int(port)), delay=ANSWER_DELAY_S)
    await late.start()
    try:
        channel = open_channel(
            f"127.0.0.1:{late.port}",
            credentials=None,
            token=None,
            options=(),
            interceptors=(),
            tracer_provider=None,
        )
        async with channel:
            first = await snapshot(client_for(channel), ref, within_s=10)
    finally:
        await late.close()
    assert first.session == ref
