"""WatchSession responses as the bytes sent: an event is converted and serialized once, however
many streams send it.

Every watcher of a session is handed the same events: the hub delivers one event object to all
of its streams, and a replay reads equal ones from the log. Converting an event to a
`SessionEvent` and serializing its `WatchSessionResponse` costs more than sending it, so the
first stream to send an event encodes it and every other stream sends those same bytes
(WatchSession is registered with a response serializer that passes bytes through:
`decoding.add_services`). A snapshot is each stream's own (its head, its time) and is encoded for
that stream alone.
"""

from __future__ import annotations

from turngate.service.api import convert
from turngate.service.core import Event, SessionKey
from turngate.service.watch import Snapshot
from turngate.v1 import turngate_pb2 as pb

# Events kept encoded, the latest first to go last. A stream that sends an event after that
# event left (it fell this far behind, across every session of the replica) encodes it again:
# the same bytes, at the cost of one more conversion.
CAPACITY = 4096


def snapshot_response(key: SessionKey, item: Snapshot) -> bytes:
    """A stream's first (or resync) response: its snapshot of the session's head."""
    event = convert.snapshot_event(key, item.state, item.time, item.resync)
    return pb.WatchSessionResponse(event=event).SerializeToString()


class EncodedEvents:
    """The latest events' responses, by session and position in its log (epoch and seq)."""

    def __init__(self, capacity: int = CAPACITY) -> None:
        self._capacity = capacity
        self._kept: dict[tuple[SessionKey, int, int], tuple[Event, bytes]] = {}

    def response(self, key: SessionKey, event: Event) -> bytes:
        """The serialized `WatchSessionResponse` of `event`, encoded if no stream has yet."""
        at = (key, event.epoch, event.seq)
        kept = self._kept.get(at)
        # A position of a log holds one event (I9): checked all the same (identity first, the
        # common case), so that another event there could never be sent as the kept one.
        if kept is not None and (kept[0] is event or kept[0] == event):
            return kept[1]
        encoded = pb.WatchSessionResponse(event=convert.event(key, event)).SerializeToString()
        self._kept[at] = (event, encoded)
        if len(self._kept) > self._capacity:
            del self._kept[next(iter(self._kept))]  # the oldest kept
        return encoded
