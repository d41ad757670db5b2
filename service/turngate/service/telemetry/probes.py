"""What the metrics listener's `/healthz` and `/readyz` ask (telemetry/listener.py), and the
`turngate.ready` gauge: the health of the server followed last. Apart from the listener, whose
HTTP stack a process imports only when it serves metrics."""

from __future__ import annotations

from collections.abc import Callable

Probe = Callable[[], bool]


class _Probes:
    """What `/healthz` and `/readyz` ask; the server that follows last wins."""

    live: Probe = staticmethod(lambda: True)
    ready: Probe = staticmethod(lambda: False)
    followed = False


_probes = _Probes()


def follow(*, live: Probe, ready: Probe) -> None:
    """From now on `/healthz` answers 200 when `live()` and `/readyz` when `ready()`, else 503."""
    _probes.live, _probes.ready, _probes.followed = live, ready, True


def forget() -> None:
    """Back to no server followed: `/readyz` answers 503."""
    _probes.live, _probes.ready, _probes.followed = _Probes.live, _Probes.ready, False


def readiness() -> bool | None:
    """Whether the server followed is ready; None if none is (the `turngate.ready` gauge)."""
    return _probes.ready() if _probes.followed else None


def is_live() -> bool:
    """`/healthz`: whether the server followed is live (True before any follows: the process serves)."""
    return _probes.live()


def is_ready() -> bool:
    """`/readyz`: whether the server followed is ready (False before any follows)."""
    return _probes.ready()
