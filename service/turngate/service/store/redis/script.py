"""The Redis store's scripts, and the one way the compare-and-set script is run: on a connection
held for it, with the commands that confirm it in the same round trip, its failures classified by
whether the script had left (connection.failure); the other scripts run by `evaluated`."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from importlib.resources import files
from typing import Any

from redis import exceptions as redis_errors
from redis.commands.core import AsyncScript
from redis.typing import EncodableT, KeyT

from turngate.service.codec import dump_event_body, dump_session
from turngate.service.core import ClockWindow, Decision, SessionKey
from turngate.service.ports.store import StoreUnavailable
from turngate.service.store.redis.connection import unavailable_on_failure
from turngate.service.store.redis.keys import member
from turngate.service.store.redis.resp import Exchange, packed

CAS = files("turngate.service.store.redis").joinpath("cas.lua").read_text()
UNRECORDED = files("turngate.service.store.redis").joinpath("unrecorded.lua").read_text()
CAS_SHA = hashlib.sha1(CAS.encode()).hexdigest()


def window_args(window: ClockWindow) -> list[str | int]:
    """A clock window as the script takes it ("" for an open end)."""
    return ["" if window.start is None else window.start, "" if window.end is None else window.end]


def change_args(
    key: SessionKey, decision: Decision, *, retention: int, max_event_age: int | None
) -> list[str | int | bytes]:
    """cas.lua's arguments after the clock window: nothing to write, a removal, or the new
    document, its deadline, whether a turn holds it, since when it is idle, the events to retain
    and their age bound, and its events."""
    if not decision.changed:
        return [""]
    if decision.removed:
        return ["-", member(key)]
    deadline = decision.state.deadline()
    idle_since = decision.state.idle_since()
    args: list[str | int | bytes] = [
        dump_session(decision.state),
        member(key),
        "" if deadline is None else deadline,
        "1" if decision.state.turn_active else "",
        "" if idle_since is None else idle_since,
        retention,
        "" if max_event_age is None else max_event_age,
        len(decision.events),
    ]
    for event in decision.events:
        args += [event.seq, event.time, dump_event_body(event.body)]
    return args


def entry_fields(flat: list[bytes]) -> dict[bytes, bytes]:
    """A stream entry's fields as a script returns them (name, value, name, value…)."""
    return dict(zip(flat[::2], flat[1::2], strict=True))


async def run_cas(
    exchange: Exchange,
    keys: list[str],
    args: list[str | int | bytes],
    after: Sequence[tuple[str | int, ...]],
    *,
    writes: bool,
) -> list[Any]:
    """cas.lua's reply through `exchange`, then the replies of the commands `after` it (sent in the
    same round trip; a reply Redis failed is its exception), loading the script first if Redis lost
    it (a restart, a SCRIPT FLUSH). Once a script that `writes` is on its way, a failure may leave
    the write applied: its outcome is unknown (connection.failure)."""
    evalsha = ("EVALSHA", CAS_SHA, len(keys), *keys, *args)
    with unavailable_on_failure(sent=writes):
        for _ in range(2):
            replies = await exchange(packed([evalsha, *after]), 1 + len(after))
            if not isinstance(replies[0], redis_errors.NoScriptError):
                break
            (loaded,) = await exchange(packed([("SCRIPT", "LOAD", CAS)]), 1)
            if isinstance(loaded, Exception):
                raise loaded
        else:
            raise StoreUnavailable("the compare-and-set script could not be loaded")
        if isinstance(replies[0], Exception):
            raise replies[0]
        return replies


async def evaluated(script: AsyncScript, keys: Sequence[KeyT], args: Sequence[EncodableT] = ()) -> Any:
    """`script` run on the node that serves `keys`: by its SHA, else by its text. redis-py loads a
    script Redis lacks and tries once more, but on a Redis Cluster it loads it where its map of
    the nodes says, which lags a failover: a master promoted meanwhile can lack it still, and
    only the text is sure to run there (Redis then keeps it)."""
    try:
        return await script(keys=keys, args=args)
    except redis_errors.NoScriptError:
        return await script.registered_client.eval(script.script, len(keys), *keys, *args)  # type: ignore[arg-type]
