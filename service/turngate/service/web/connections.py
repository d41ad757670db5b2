"""Caps on a process's HTTP connections, counted as each is accepted, before a byte of it is read:
in all, and per peer address. Beyond a cap a connection is refused at once (on plaintext with a
503 answer, over TLS by closing it) and refusals are logged once per interval with a count. The
total is kept within half of the process's file limit, so HTTP connections alone can never take
the descriptors that gRPC calls and the store need."""

from __future__ import annotations

import contextlib
import logging
import resource
import socket
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from turngate.service.telemetry.throttled import Throttled

log = logging.getLogger("turngate.http")

_BODY = b"too many connections to this server, or from your address; try again later\n"
# What a refused plaintext connection is told before it is closed (HTTP/1.1; an HTTP/2 client
# reads it as a broken preface, which ends it just as well).
REFUSAL = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"content-length: %d\r\nconnection: close\r\nretry-after: 1\r\n\r\n%s" % (len(_BODY), _BODY)
)
# Refused connections answered per accept() call; the rest wait for the loop's next turn.
_REFUSED_PER_CALL = 64


@dataclass(frozen=True)
class ConnectionLimits:
    total: int
    per_peer: int


class ConnectionGate:
    """The connections open now, in all and per address, against the limits (shared by the HTTP
    listeners of a process)."""

    def __init__(self, limits: ConnectionLimits) -> None:
        self.limits = _within_file_limit(limits)
        self._open: Counter[str] = Counter()
        self._total = 0
        self._refused = Throttled(log, logging.WARNING, "refused an HTTP connection from %s: %s")

    @property
    def open(self) -> int:
        return self._total

    def admit(self, peer: str) -> bool:
        if self._total >= self.limits.total:
            self._refused.note(
                peer, f"{self.limits.total} connections are open (TURNGATE_HTTP_MAX_CONNECTIONS)"
            )
            return False
        if self._open[peer] >= self.limits.per_peer:
            self._refused.note(
                peer, f"it has {self.limits.per_peer} open (TURNGATE_HTTP_MAX_CONNECTIONS_PER_PEER)"
            )
            return False
        self._open[peer] += 1
        self._total += 1
        return True

    def release(self, peer: str) -> None:
        self._total -= 1
        self._open[peer] -= 1
        if not self._open[peer]:
            del self._open[peer]


def _within_file_limit(limits: ConnectionLimits) -> ConnectionLimits:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    room = limits.total if soft == resource.RLIM_INFINITY else max(1, soft // 2)
    if limits.total <= room:
        return limits
    log.warning(
        "HTTP connections limited to %d, half the process's file limit (%d), not %d: "
        "raise the limit (ulimit -n) to allow more",
        room,
        soft,
        limits.total,
    )
    return ConnectionLimits(room, min(limits.per_peer, room))


class GatedSocket(socket.socket):
    """A listening socket whose accept() hands the event loop only connections within the gate's
    caps; the others are answered `refusal` (nothing over TLS) and closed on the spot."""

    def __init__(self, bound: socket.socket, gate: ConnectionGate, refusal: bytes) -> None:
        super().__init__(bound.family, bound.type, bound.proto, fileno=bound.detach())
        self._gate = gate
        self._refusal = refusal

    def accept(self) -> tuple[socket.socket, Any]:
        for _ in range(_REFUSED_PER_CALL):
            connection, address = super().accept()  # BlockingIOError once none is waiting
            peer = str(address[0])
            if self._gate.admit(peer):
                return _Counted(connection, partial(self._gate.release, peer)), address
            _refuse(connection, self._refusal)
        raise BlockingIOError  # the event loop calls again while connections wait


class _Counted(socket.socket):
    """An accepted connection that gives its place back when the event loop closes it."""

    def __init__(self, connection: socket.socket, release: Callable[[], None]) -> None:
        super().__init__(connection.family, connection.type, connection.proto, fileno=connection.detach())
        self._release: Callable[[], None] | None = release

    def close(self) -> None:
        release, self._release = self._release, None
        if release is not None:
            release()
        super().close()


def _refuse(connection: socket.socket, answer: bytes) -> None:
    with connection, contextlib.suppress(OSError):
        if answer:
            connection.setblocking(False)
            connection.send(answer)
