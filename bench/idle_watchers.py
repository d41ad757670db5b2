"""Holds idle watch streams open for the memory phase of bench/fanout.py, in a process of its own.

Run: `python bench/idle_watchers.py ADDRESS METHOD STREAMS CHANNELS REQUEST_HEX...`: opens
`STREAMS` calls of the server-streaming `METHOD` (e.g. /turngate.v1.SessionService/WatchSession)
on `ADDRESS`, spread over `CHANNELS` connections of its own, the requests taken round-robin from
the hex-encoded `REQUEST_HEX` arguments (serialized request messages: one per session). Prints
`open N` once every stream has its first message, then holds them, reading nothing more, until
its stdin closes; exits 1 if a stream ended meanwhile. Replies stay raw bytes (never parsed), so
this process stays light.
"""

from __future__ import annotations

import asyncio
import itertools
import resource
import sys

import grpc

# Each channel its own TCP connection (gRPC would otherwise share one per target).
OWN_CONNECTION = [("grpc.use_local_subchannel_pool", 1)]
OPEN_TIMEOUT_S = 300.0
# Streams opened at a time: grpc-core cancels calls that wait for the application beyond
# `grpc.server.max_pending_requests` (1,000), so a burst of thousands would be partly refused.
BATCH = 200


def raise_fd_limit() -> None:
    """The soft limit on open files raised to the hard one."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


async def hold(address: str, method: str, streams: int, channels: int, requests: list[bytes]) -> int:
    opened = [grpc.aio.insecure_channel(address, options=OWN_CONNECTION) for _ in range(channels)]
    calls: list[grpc.aio.UnaryStreamCall[bytes, bytes]] = []
    targets = zip(range(streams), itertools.cycle(opened), itertools.cycle(requests))
    async with asyncio.timeout(OPEN_TIMEOUT_S):
        while batch := list(itertools.islice(targets, BATCH)):
            new = []
            for _, channel, request in batch:
                watch: grpc.aio.UnaryStreamMultiCallable[bytes, bytes] = channel.unary_stream(method)
                new.append(watch(request))
            firsts = await asyncio.gather(*(call.read() for call in new))
            if any(first is grpc.aio.EOF for first in firsts):
                print("a stream ended before its first message", file=sys.stderr)
                return 1
            calls += new
    print(f"open {len(calls)}", flush=True)
    await asyncio.to_thread(sys.stdin.buffer.read)  # until the bench closes our stdin
    ended = sum(call.done() for call in calls)
    for call in calls:
        call.cancel()
    for channel in opened:
        await channel.close()
    if ended:
        print(f"{ended} streams ended while held", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise_fd_limit()
    address, method, streams, channels, *hex_requests = sys.argv[1:]
    requests = [bytes.fromhex(h) for h in hex_requests]
    sys.exit(asyncio.run(hold(address, method, int(streams), int(channels), requests)))
