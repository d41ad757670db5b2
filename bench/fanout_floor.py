"""The fan-out floor: a bare grpc.aio server, run in its own process like turngate, that streams
the same pre-serialized bytes to every open stream.

`Watch` (server streaming) answers its request's bytes back at once (the bench sends a serialized
snapshot, so every stream starts as turngate's does), then sends every payload published from
then on. `Publish` (unary) hands its request's bytes to every open `Watch` stream and answers at
once; `Ready` answers at once (the bench's probe). No conversion, no serialization, no
interceptor, no store: what is left is grpc.aio sending one message to each stream. Requests and
replies are raw bytes, so no proto is needed.
Run: `python bench/fanout_floor.py PORT`; it exits on SIGTERM.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator

import grpc

from floor_server import serve_until_terminated

SERVICE = "bench.FanoutFloor"
WATCH = f"/{SERVICE}/Watch"
PUBLISH = f"/{SERVICE}/Publish"
READY = f"/{SERVICE}/Ready"


class Broadcast:
    """Payloads in the order published; each stream sends every one published after it opened."""

    def __init__(self) -> None:
        self._payloads: list[bytes] = []
        self._published = asyncio.Event()

    def publish(self, payload: bytes) -> None:
        self._payloads.append(payload)
        published, self._published = self._published, asyncio.Event()
        published.set()

    async def follow(self) -> AsyncIterator[bytes]:
        sent = len(self._payloads)
        while True:
            published = self._published
            while sent < len(self._payloads):
                yield self._payloads[sent]
                sent += 1
            await published.wait()


def _handler(broadcast: Broadcast) -> grpc.GenericRpcHandler:
    async def watch(first: bytes, _context: grpc.aio.ServicerContext[bytes, bytes]) -> AsyncIterator[bytes]:
        yield first
        async for payload in broadcast.follow():
            yield payload

    async def publish(payload: bytes, _context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        broadcast.publish(payload)
        return b""

    async def ready(_request: bytes, _context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        return b""

    methods: dict[str, grpc.RpcMethodHandler[bytes, bytes]] = {
        "Watch": grpc.unary_stream_rpc_method_handler(watch),
        "Publish": grpc.unary_unary_rpc_method_handler(publish),
        "Ready": grpc.unary_unary_rpc_method_handler(ready),
    }
    return grpc.method_handlers_generic_handler(SERVICE, methods)


async def serve(port: int) -> None:
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((_handler(Broadcast()),))
    await serve_until_terminated(server, port)


if __name__ == "__main__":
    asyncio.run(serve(int(sys.argv[1])))
