"""Watching a session: a stream of its events that reconnects by itself and never loses or
repeats one."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator
from types import TracebackType

import grpc

from turngate.client import convert, errors
from turngate.client.connection import Connection
from turngate.client.models import Event
from turngate.v1 import turngate_pb2 as pb

log = logging.getLogger("turngate.client")
WATCH_BUFFER = "watch_buffer"


def _resumable(error: grpc.aio.AioRpcError) -> bool:
    """Worth reconnecting with the cursor: a blip, a restart or shutdown (UNAVAILABLE), or this
    watcher fell behind and was cut off (RESOURCE_EXHAUSTED, `limit = watch_buffer`). Being over
    the watch-stream limits (per principal, per session) is not: it is reported."""
    typed = errors.from_rpc(error)
    return isinstance(typed, errors.ServiceUnavailable) or (
        isinstance(typed, errors.LimitExceeded) and typed.limit == WATCH_BUFFER
    )


class Watch:
    """The events of one session, in `seq` order: `async for event in watch`.

    Yields `Event`s (`event.body` says what happened: match on it). A fresh watch
    (`after_seq=0`) starts with a snapshot event (a `SessionSnapshot` body; the event's seq is
    the head it reflects). An event of a kind this SDK does not know (from a newer service) is
    yielded with an `UnknownEvent` body. After a blip, a restart of the service or a cut-off for
    falling behind (not over the service's watch-stream limits: that is a `LimitExceeded`), it
    reconnects by itself with exponential backoff and jitter, resuming after `cursor` (the last
    seq yielded, with its epoch), so no event is lost or repeated. When the service cannot resume
    from the cursor (it is older than the retained events, or of a log the service's store lost
    and started again), the snapshot it sends instead is yielded with `resync = True`: events
    between the cursor and that snapshot are not replayed. `epoch` is the epoch of `after_seq`'s
    event (`Event.epoch`), when resuming from a cursor kept elsewhere. `turn_id` keeps only that
    turn's events (snapshots are always sent). Any other error ends the iteration with a
    `TurngateError`. Close it (`aclose()`, or `async with client.watch(...) as events:`) to end
    the stream; cancelling the task iterating it also does.
    """

    cursor: int
    """The seq of the last event yielded (a snapshot's seq is the head it reflects)."""

    def __init__(
        self,
        connection: Connection,
        session_id: str,
        *,
        after_seq: int = 0,
        turn_id: str = "",
        epoch: int = 0,
    ) -> None:
        self._connection = connection
        self._request = pb.WatchSessionRequest(
            session=connection.session(session_id), after_seq=after_seq, turn_id=turn_id
        )
        self.cursor = after_seq
        # The epoch of the log `cursor` is in (0: not known).
        self._epoch = epoch
        self._events = self._follow()

    def __aiter__(self) -> Watch:
        return self

    async def __anext__(self) -> Event:
        return await anext(self._events)

    async def aclose(self) -> None:
        await self._events.aclose()

    async def __aenter__(self) -> Watch:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.aclose()

    async def _follow(self) -> AsyncGenerator[Event, None]:
        backoff = self._connection.backoff
        delays = backoff.delays()
        while True:
            self._request.after_seq, self._request.epoch = self.cursor, self._epoch
            call = self._connection.sessions.WatchSession(self._request)
            try:
                async for response in call:
                    event = response.event
                    delays = backoff.delays()
                    if event.HasField("snapshot") or event.seq > self.cursor:
                        self.cursor, self._epoch = event.seq, event.epoch
                        yield convert.event(event)
                error = None
            except grpc.aio.AioRpcError as failed:
                if not _resumable(failed):
                    raise errors.from_rpc(failed) from failed
                error = failed
            finally:
                call.cancel()
            delay = next(delays)
            log.info(
                "watch of %s ended (%s); resuming after seq %d in %.2fs",
                self._request.session.session_id,
                error.code().name if error else "end of stream",
                self.cursor,
                delay,
            )
            await asyncio.sleep(delay)
