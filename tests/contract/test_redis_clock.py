"""The Redis store's one clock (I8, I10): a replica decides at its estimate of Redis TIME, and the
compare-and-set script takes a decision only while TIME lies in the decision's clock window (no
deadline passed between deciding and writing) and trails its `now` by at most BEHIND_LIMIT_US.
The estimate is never behind TIME, however late a busy event loop reads the replies it learns
TIME from, so a decision is never stamped before the request that asked for it.

Redis runs on this machine, so its TIME and the host's clock are one clock: a test compares the
two without tolerance.
"""

from __future__ import annotations

import asyncio
import random
import time
from importlib.resources import files

import pytest
from redis.asyncio import Redis

from tests.support.commands import KEY, SECOND, admit, open_call
from tests.support.waiting import eventually
from turngate.service.core import (
    Admit,
    Command,
    Directive,
    Heartbeat,
    HeartbeatReply,
    SessionKey,
    SettledBy,
    TurnOutcome,
    TurnSettled,
)
from turngate.service.store.redis import clock as redis_clock_module
from turngate.service.store.redis import store as redis_store_module
from turngate.service.store.redis.clock import BEHIND_LIMIT_US
from turngate.service.store.redis.keys import Keyspace
from turngate.service.store.redis.store import RedisStore

pytestmark = pytest.mark.redis

CAS = files("turngate.service.store.redis").joinpath("cas.lua").read_text()
# A reply read this late makes an estimate taken halfway through its round trip lag by half of it.
BUSY_S = 0.4
# Loop iterations a task takes to send a request on a connection it finds in the pool (redis-py
# yields once on its way to the socket).
_STEPS_TO_SEND = 2


def host_now() -> int:
    """The host's clock (µs), which is Redis TIME here."""
    return time.time_ns() // 1_000


async def pass_host_time(instant: int) -> None:
    """Waits until the host's clock has passed `instant` (µs), asking the store nothing."""
    await eventually(lambda: host_now() > instant)


def hold_the_event_loop(seconds: float) -> None:
    """Work that keeps the event loop from running anything else, as many callers at once do."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


async def read_a_reply_late(store: RedisStore) -> None:
    """The store learns Redis TIME from a reply its event loop reads BUSY_S late: the request goes
    out in the reading task's first steps (the pool holds a connected connection), then the loop
    is held while the reply waits."""
    await store.now()
    reading = asyncio.create_task(store.now())
    for _ in range(_STEPS_TO_SEND):
        await asyncio.sleep(0)
    hold_the_event_loop(BUSY_S)
    await reading


async def test_i10_a_decision_is_never_stamped_before_its_request_however_late_replies_are_read(
    redis_store: RedisStore,
) -> None:
    await read_a_reply_late(redis_store)

    sent = host_now()
    decision = await redis_store.apply(KEY, Admit("t1", "runner", 20 * SECOND))

    [admitted] = decision.events
    assert admitted.time >= sent


async def test_i8_a_heartbeat_after_expiry_is_abandoned_and_settles_lost_however_late_replies_are_read(
    redis_store: RedisStore,
) -> None:
    lease = await admit(redis_store, KEY, "t1", lease=SECOND)
    await read_a_reply_late(redis_store)
    await pass_host_time(lease.lease_expires_at)

    decision = await redis_store.apply(KEY, Heartbeat("t1", lease.generation))

    assert decision.reply == HeartbeatReply(Directive.ABANDON, settled_outcome=TurnOutcome.LOST)
    settled = decision.events[-1].body
    assert isinstance(settled, TurnSettled)
    assert (settled.turn.outcome, settled.turn.settled_by) == (TurnOutcome.LOST, SettledBy.WATCHDOG)


async def test_i8_a_heartbeat_decided_before_expiry_but_written_after_it_is_decided_again_and_abandoned(
    redis_store: RedisStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The clock window alone refuses it: the bound on trailing is out of the way."""
    monkeypatch.setattr(redis_store_module, "BEHIND_LIMIT_US", 60 * SECOND)
    lease = await admit(redis_store, KEY, "t1", lease=SECOND)
    attempts: list[Command] = []

    async def write_once_the_lease_expired(_key: SessionKey, command: Command) -> None:
        attempts.append(command)
        if len(attempts) == 1:
            await pass_host_time(lease.lease_expires_at)

    redis_store.before_write = write_once_the_lease_expired
    decision = await redis_store.apply(KEY, Heartbeat("t1", lease.generation))

    assert len(attempts) == 2, "extended the lease, refused by the script, decided again"
    assert decision.reply == HeartbeatReply(Directive.ABANDON, settled_outcome=TurnOutcome.LOST)
    state = await redis_store.load(KEY)
    assert state.active is None
    assert state.last_settled is not None
    assert state.last_settled.outcome is TurnOutcome.LOST


async def test_i10_a_decision_trailing_redis_time_by_more_than_the_bound_is_decided_again(
    redis_store: RedisStore,
) -> None:
    lease = await admit(redis_store, KEY, "t1")
    attempts: list[Command] = []
    held_until = 0

    async def write_past_the_bound(_key: SessionKey, command: Command) -> None:
        nonlocal held_until
        attempts.append(command)
        if len(attempts) == 1:
            held_until = host_now() + 2 * BEHIND_LIMIT_US
            await pass_host_time(held_until)

    redis_store.before_write = write_past_the_bound
    decision = await redis_store.apply(KEY, open_call("t1", lease.generation, "c1"))

    # Decided, refused by the script as stale, decided again (more than once on a machine slower
    # than the bound).
    assert len(attempts) >= 2
    [opened] = decision.events
    assert opened.time > held_until, "stamped when it was written, not when first decided"


async def test_i10_a_decision_leaves_for_redis_before_the_event_loop_runs_anything_else(
    redis_store: RedisStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Callbacks already waiting when a decision is taken (in a burst, the other callers' replies
    and decisions) run after its script has left, so they cannot make it trail TIME: however long
    they hold the loop, it is taken at its first attempt. (redis-py's own send on Python 3.11 is a
    task of its own, which waited behind them: under a burst of 200 callers, two thirds of the
    decisions were refused, and one caller lost 32 times in a row.)"""
    bound_s = 0.5  # room for Redis to run the script while the loop is held, on a loaded machine
    monkeypatch.setattr(redis_store_module, "BEHIND_LIMIT_US", int(bound_s * SECOND))
    lease = await admit(redis_store, KEY, "t1")
    attempts: list[Command] = []

    async def others_waiting_to_run(_key: SessionKey, command: Command) -> None:
        attempts.append(command)
        if len(attempts) == 1:
            asyncio.get_running_loop().call_soon(hold_the_event_loop, 2 * bound_s)

    redis_store.before_write = others_waiting_to_run
    decision = await redis_store.apply(KEY, open_call("t1", lease.generation, "c1"))

    assert len(attempts) == 1, "the script left after the callbacks waiting, past the bound"
    assert len(decision.events) == 1


@pytest.mark.parametrize(
    ("start_s", "end_s", "taken"),
    [
        (None, None, True),
        (-60, 60, True),
        (None, 0, False),  # an instant the decision took to lie ahead has passed
        (60, None, False),  # an instant the decision took to have passed lies ahead
    ],
)
async def test_the_script_takes_a_decision_only_while_time_lies_in_its_clock_window(
    redis_client: Redis, redis_keyspace: Keyspace, start_s: int | None, end_s: int | None, taken: bool
) -> None:
    seconds, micros = await redis_client.time()
    now = seconds * SECOND + micros

    def instant(offset_s: int | None) -> int | str:
        return "" if offset_s is None else now + offset_s * SECOND

    keys = [
        redis_keyspace.doc(KEY),
        redis_keyspace.log(KEY),
        redis_keyspace.deadlines(0),
        redis_keyspace.outbox(0),
        redis_keyspace.active(0),
    ]
    # A decision that changed nothing on a session never written (version 0, epoch 0), with bounds
    # that accept its `now`.
    args = [0, 0, now, 60 * SECOND, 60 * SECOND, instant(start_s), instant(end_s), ""]
    reply = await redis_client.eval(CAS, len(keys), *keys, *args)

    assert reply[0] == int(taken)


def test_the_estimate_of_redis_time_is_never_behind_it_and_catches_up_with_a_step_forward(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Replies whose reads a busy loop delays (by up to 50 ms, at random) never put the estimate
    behind TIME, which it follows to within the slowest of the fastest trips out. When TIME steps
    forward, the first reply read sooner than the step brings the estimate up to it."""
    monotonic = 0
    monkeypatch.setattr(redis_clock_module, "monotonic_us", lambda: monotonic)
    clock = redis_clock_module.StoreClock()
    offset = 1_700_000_000 * SECOND  # Redis TIME = the monotonic clock + offset
    step, step_at = 50_000, 1_000
    caught_up = True
    rng = random.Random(11)
    for i in range(2_000):
        if i == step_at:
            offset += step  # Redis's clock is set forward
            caught_up = False
        sent = monotonic
        monotonic += rng.randint(50, 2_000)  # out to Redis
        store_now = monotonic + offset
        back = rng.randint(50, 2_000) + rng.choice((0, rng.randint(0, 50_000)))
        monotonic += back
        clock.observe(store_now, sent, monotonic)
        caught_up = caught_up or back < step
        monotonic += rng.randint(0, 1_000)
        estimate = clock.now()
        if caught_up:
            assert estimate >= monotonic + offset, f"behind TIME at reply {i}"
        if i > 10:
            assert estimate <= monotonic + offset + 2_000, f"too far ahead at reply {i}"
    assert caught_up
