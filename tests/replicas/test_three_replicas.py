"""Three `turngate serve` replicas on one Redis and one PostgreSQL behave as one service.

Callers spread over the replicas the way a load balancer would: a runner on one, a gateway on
another, a watcher on a third.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Literal

import grpc
import pytest
from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.support.calls import (
    admit,
    assert_reason,
    complete,
    events_after,
    get_turn,
    heartbeat,
    record_call,
    refusal_of,
    snapshot,
    stop,
    wait_for_phase,
)
from tests.support.logs import gapless, logged, serialized, wait_for_ledger
from tests.support.replicas import BUCKETS, PROJECT, Deployment, acting_through, key_of, new_session, through
from tests.support.servers import Client
from tests.support.shared_redis import REDIS_SERVER, REDIS_TIMEOUT_S, delete_prefix, unique_prefix
from tests.support.waiting import WAIT_TIMEOUT_S, cancelled
from tests.support.watching import (
    Watch,
    act_out_turn,
    admits,
    collect_until,
    seqs,
    settles,
    watch,
    watch_from_start,
)
from turngate.client.tasks import cancel_all
from turngate.service.core import Admit, Event, Expire, SessionKey, TurnOutcome, TurnSettled
from turngate.service.core import SettledBy as CoreSettledBy
from turngate.service.redis_url import RedisUrl
from turngate.service.store.redis.connection import Client as RedisClient
from turngate.service.store.redis.connection import connect
from turngate.service.store.redis.feed import RedisLogFeed, fixed_endpoints
from turngate.service.store.redis.keys import Keyspace
from turngate.service.store.redis.store import RedisStore
from turngate.service.watchdog import Watchdog
from turngate.v1 import turngate_pb2 as pb

pytestmark = [pytest.mark.redis, pytest.mark.postgres]

STORM_SESSIONS = 20
STORM_CONTENDERS = 30
EXPIRING_SESSIONS = 12
# A lease the watchdog lets expire (the shortest the contract allows).
SHORT_LEASE_S = 1.0
# Leases of turns admitted straight through a RedisStore (µs): one that expires at once, one that
# outlives the test.
EXPIRING_LEASE_US = 100_000
LASTING_LEASE_US = 60_000_000


# --- I1 across replicas --------------------------------------------------------------------


async def test_admission_storm_across_replicas_admits_exactly_one_per_session(clients: list[Client]) -> None:
    sessions = [new_session() for _ in range(STORM_SESSIONS)]

    async def contend(s: int, c: int) -> pb.AdmitTurnResponse | BaseException:
        try:
            return await admit(through(clients, s + c), sessions[s], f"turn-{c}", f"runner-{c}")
        except grpc.aio.AioRpcError as error:
            return error

    results = await asyncio.gather(
        *(contend(s, c) for s in range(STORM_SESSIONS) for c in range(STORM_CONTENDERS))
    )
    for s, session in enumerate(sessions):
        outcomes = results[s * STORM_CONTENDERS : (s + 1) * STORM_CONTENDERS]
        admitted = [o for o in outcomes if isinstance(o, pb.AdmitTurnResponse)]
        assert len(admitted) == 1, f"{session.session_id}: {len(admitted)} turns admitted"
        [winner] = admitted
        for outcome in outcomes:
            if isinstance(outcome, grpc.aio.AioRpcError):
                refusal = refusal_of(outcome)
                assert_reason(refusal, "SESSION_TURN_IN_USE", admission=True)
                assert refusal.admission is not None
                assert refusal.admission.active_turn_id == winner.lease.turn_id
            else:
                assert isinstance(outcome, pb.AdmitTurnResponse), outcome
        for client in clients:
            seen = await snapshot(client, session)
            assert (seen.seq, seen.active.turn_id) == (1, winner.lease.turn_id), "one turn_admitted only"
    await asyncio.gather(
        *(
            complete(through(clients, s), r.lease)
            for s, r in enumerate(results)
            if isinstance(r, pb.AdmitTurnResponse)
        )
    )


# --- I5 across replicas --------------------------------------------------------------------


async def test_stop_through_b_reaches_the_runner_heartbeat_on_a_and_a_watcher_on_c(
    clients: list[Client], session: pb.SessionRef
) -> None:
    a, b, c = clients
    watcher = await watch_from_start(c, session)
    runner_watch = watch(a, session, turn_id="turn-1")
    try:
        lease = (await admit(a, session, "turn-1")).lease
        await record_call(a, lease, "c1")

        answer = await stop(b, session, "turn-1", reason="stop from B")
        assert answer.WhichOneof("outcome") == "cancelled", answer
        assert answer.cancelled.stopping_turn_id == "turn-1"

        beat = await heartbeat(a, lease)
        assert beat.directive == pb.DIRECTIVE_STOP
        assert beat.stop_reason == "stop from B"

        seen = await collect_until(watcher, lambda e: e.HasField("stop_requested"))
        assert seqs(seen) == [1, 2, 3]
        assert [e.WhichOneof("kind") for e in seen] == ["turn_admitted", "tool_call", "stop_requested"]
        assert (seen[2].stop_requested.turn_id, seen[2].stop_requested.reason) == ("turn-1", "stop from B")
        pushed = await collect_until(runner_watch, lambda e: e.HasField("stop_requested"))
        assert pushed[-1].SerializeToString() == seen[2].SerializeToString(), "the runner's push on A"

        await complete(a, lease, pb.TURN_OUTCOME_CANCELLED)
        interrupted, settled = await collect_until(watcher, settles("turn-1"))
        assert seqs([interrupted, settled]) == [4, 5], "the settlement follows the stop, with no gap"
        assert (interrupted.tool_call.tool_call.call_id, interrupted.tool_call.tool_call.status) == (
            "c1",
            pb.TOOL_CALL_STATUS_INTERRUPTED,
        )
        turn = settled.turn_settled.turn
        assert (turn.outcome, turn.settled_by, turn.stop_requested) == (
            pb.TURN_OUTCOME_CANCELLED,
            pb.SETTLED_BY_RUNNER,
            True,
        )
        assert list(settled.turn_settled.interrupted_tool_call_ids) == ["c1"]
    finally:
        watcher.cancel()
        runner_watch.cancel()


# --- I9 across replicas --------------------------------------------------------------------


async def test_watcher_moving_from_a_to_b_with_its_cursor_misses_nothing_and_sees_nothing_twice(
    clients: list[Client], session: pb.SessionRef
) -> None:
    """The watcher hops A → B → C → A… each time a turn is admitted, while the runner (on B) and
    the gateway (on C) go on with that turn; the next turn starts once the watcher has hopped."""
    a, b, c = clients
    turn_ids = [f"turn-{i}" for i in range(6)]
    actor = acting_through(runner=b, gateway=c)
    reference = await watch_from_start(c, session)
    hopping = await watch_from_start(a, session)
    hopped = asyncio.Semaphore(1)

    async def act() -> None:
        for turn_id in turn_ids:
            await hopped.acquire()
            await act_out_turn(actor, session, turn_id)

    async def hop_while_watching(stream: Watch) -> list[pb.SessionEvent]:
        received: list[pb.SessionEvent] = []
        try:
            for i, turn_id in enumerate(turn_ids):
                received += await collect_until(stream, admits(turn_id))
                stream.cancel()
                stream = watch(through(clients, i + 1), session, after_seq=received[-1].seq)
                hopped.release()
            received += await collect_until(stream, settles(turn_ids[-1]))
        finally:
            stream.cancel()
        return received

    try:
        async with asyncio.TaskGroup() as group:
            group.create_task(act())
            hopper = group.create_task(hop_while_watching(hopping))
        everything = await collect_until(reference, settles(turn_ids[-1]))
    finally:
        reference.cancel()
    received = hopper.result()
    assert not any(e.HasField("snapshot") for e in received), "a cursor in the log resumes without a snapshot"
    assert seqs(received) == list(range(1, len(received) + 1)), "missed or repeated events"
    assert serialized(received) == serialized(everything), "hopping saw other events than staying"
    assert seqs(everything) == list(range(1, (await snapshot(a, session)).seq + 1))


class WatchedSetFlag(asyncio.Event):
    """The feed's "the watched sessions changed" flag (`RedisLogFeed._changed`), recording what
    the feed does with it: each clear with whether it was set, each wait; `waiting` is set once
    the feed blocks in a wait (the flag clear)."""

    def __init__(self) -> None:
        super().__init__()
        self.uses: list[tuple[str, bool]] = []
        self.waiting = asyncio.Event()

    def clear(self) -> None:
        self.uses.append(("clear", self.is_set()))
        super().clear()

    async def wait(self) -> Literal[True]:
        self.uses.append(("wait", self.is_set()))
        if not self.is_set():
            self.waiting.set()
        return await super().wait()


async def test_a_replica_feed_whose_watched_sessions_came_and_went_follows_the_next_one() -> None:
    """A replica's feed (one reader for all its watchers) that was told to follow a session and
    then to forget it before it read anything still follows the next session it is given."""
    keys = Keyspace(prefix=unique_prefix(), buckets=BUCKETS)
    feed = RedisLogFeed(keys, fixed_endpoints(RedisUrl.parse(REDIS_SERVER), REDIS_TIMEOUT_S))
    # The one place the feed shows that it waits for sessions to follow: its private flag.
    assert type(feed._changed) is asyncio.Event, "RedisLogFeed no longer waits on _changed: update this test"
    feed._changed = flag = WatchedSetFlag()
    delivered: asyncio.Queue[tuple[SessionKey, Sequence[Event]]] = asyncio.Queue()
    feed.deliver_to(lambda key, events: delivered.put_nowait((key, events)))
    gone, watched = SessionKey(PROJECT, "s-gone"), SessionKey(PROJECT, "s-watched")
    feed.track(gone, 0)
    feed.untrack(gone)
    following = asyncio.create_task(feed.run())
    store = RedisStore(connect(REDIS_SERVER, REDIS_TIMEOUT_S), keys, retention=1_000)
    try:
        try:
            async with asyncio.timeout(WAIT_TIMEOUT_S):
                await flag.waiting.wait()
        except TimeoutError:
            raise AssertionError(f"the feed never waited for sessions; it ended with {following!r}") from None
        # The path under test ran: with no session to follow, the feed cleared the flag the
        # session that came and went had left set, then blocked on it.
        assert flag.uses == [("clear", True), ("wait", False)]
        assert not following.done()
        feed.track(watched, 0)
        await store.apply(watched, Admit("turn-1", "runner-1", lease_ttl=LASTING_LEASE_US))
        try:
            async with asyncio.timeout(WAIT_TIMEOUT_S):
                key, events = await delivered.get()
        except TimeoutError:
            raise AssertionError(f"the feed delivered nothing; it ended with {following!r}") from None
        assert (key, [e.seq for e in events]) == (watched, [1])
    finally:
        await cancelled(following)
        await feed.close()
        await store.close()
        async with Redis.from_url(REDIS_SERVER) as client:
            await delete_prefix(client, keys.prefix)


class HangingControl:
    """Stands in for a feed's control connection whose CLIENT UNBLOCK is still under way (being
    connected, or retried) when the replica stops; records what happens to it, in order."""

    def __init__(self) -> None:
        self.unblocking = asyncio.Event()
        self.seen: list[str] = []

    async def client_unblock(self, _client_id: int) -> bool:
        self.unblocking.set()
        try:
            await asyncio.Event().wait()
        finally:
            self.seen.append("unblock ended")
        return True

    async def aclose(self) -> None:
        self.seen.append("closed")


async def test_a_replica_feed_closed_while_interrupting_its_read_ends_the_interruption_first() -> None:
    """A replica that stops just after a watcher came, its feed still interrupting the read in
    flight to follow the new session, ends that interruption before it closes the connection the
    interruption uses (it went on into the closing client and logged a traceback)."""
    keys = Keyspace(prefix=unique_prefix(), buckets=BUCKETS)
    feed = RedisLogFeed(keys, fixed_endpoints(RedisUrl.parse(REDIS_SERVER), REDIS_TIMEOUT_S))
    delivered: asyncio.Queue[SessionKey] = asyncio.Queue()
    feed.deliver_to(lambda key, _events: delivered.put_nowait(key))
    first, second = SessionKey(PROJECT, "s-first"), SessionKey(PROJECT, "s-second")
    following = asyncio.create_task(feed.run())
    store = RedisStore(connect(REDIS_SERVER, REDIS_TIMEOUT_S), keys, retention=1_000)
    real_control: Redis | None = None
    try:
        feed.track(first, 0)
        await store.apply(first, Admit("turn-1", "runner-1", lease_ttl=LASTING_LEASE_US))
        async with asyncio.timeout(WAIT_TIMEOUT_S):
            assert await delivered.get() == first  # the reader follows `first`, blocked in XREAD
        # The one place the feed shows how it interrupts its reader: its private control client.
        real_control = feed._control
        assert isinstance(real_control, Redis), "RedisLogFeed no longer has _control: update this test"
        feed._control = control = HangingControl()  # type: ignore[assignment]
        feed.track(second, 0)  # which interrupts that XREAD
        async with asyncio.timeout(WAIT_TIMEOUT_S):
            await control.unblocking.wait()

        # As a replica stops: its loops first, then what they used.
        assert await cancel_all([following]) == []
        await feed.close()

        assert control.seen == ["unblock ended", "closed"]
    finally:
        await cancelled(following)
        if real_control is not None:
            await real_control.aclose()
        await store.close()
        async with Redis.from_url(REDIS_SERVER) as client:
            await delete_prefix(client, keys.prefix)


# --- the watchdog on many replicas (I6) -----------------------------------------------------


async def test_three_replicas_sweeping_settle_each_expired_lease_exactly_once(clients: list[Client]) -> None:
    sessions = [new_session() for _ in range(EXPIRING_SESSIONS)]
    await asyncio.gather(
        *(
            admit(through(clients, i), session, "turn-1", lease_ttl=SHORT_LEASE_S)
            for i, session in enumerate(sessions)
        )
    )
    for i, session in enumerate(sessions):
        await wait_for_phase(through(clients, i), session, pb.SESSION_PHASE_IDLE)
    for i, session in enumerate(sessions):
        for client in clients:
            assert (await snapshot(client, session)).seq == 2, "admitted, then settled once"
        [settled] = await events_after(through(clients, i + 1), session, 1)
        turn = settled.turn_settled.turn
        assert (turn.turn_id, turn.outcome, turn.settled_by) == (
            "turn-1",
            pb.TURN_OUTCOME_LOST,
            pb.SETTLED_BY_WATCHDOG,
        )


async def test_three_watchdogs_deciding_the_same_expiries_on_one_redis_settle_each_once() -> None:
    """Three in-process watchdogs, each on its own RedisStore, all decide to settle every due turn
    before any of them writes (a barrier per session); the compare-and-set lets one write."""
    keys = Keyspace(prefix=unique_prefix(), buckets=BUCKETS)
    stores = [RedisStore(connect(REDIS_SERVER, REDIS_TIMEOUT_S), keys, retention=1_000) for _ in range(3)]
    sessions = [SessionKey("p-sweep", f"s-{i}") for i in range(20)]
    try:
        admitted = [
            await stores[0].apply(key, Admit("turn-1", "runner-1", lease_ttl=EXPIRING_LEASE_US))
            for key in sessions
        ]
        last_expiry = max(d.state.active.lease_expires_at for d in admitted if d.state.active is not None)
        await asyncio.sleep((last_expiry - await stores[0].now()) / 1e6 + 0.01)
        assert await stores[0].now() > last_expiry, "every lease is due on the store clock"
        all_decided = {key: asyncio.Barrier(len(stores)) for key in sessions}

        def waiting_for_the_others() -> Callable[[SessionKey, object], Awaitable[None]]:
            """A store's hook: its first decision on each session waits for the other stores' first.
            A decision taken again (the script refused the first: the version moved, or it waited
            at the barrier past the clock window) writes at once: the others are not deciding again."""
            waited: set[SessionKey] = set()

            async def wait(key: SessionKey, command: object) -> None:
                assert isinstance(command, Expire)
                if key in waited:
                    return
                waited.add(key)
                async with asyncio.timeout(WAIT_TIMEOUT_S):
                    await all_decided[key].wait()

            return wait

        for store in stores:
            store.before_write = waiting_for_the_others()
        settled = await asyncio.gather(*(Watchdog(store).sweep() for store in stores))
        assert sum(settled) == len(sessions), settled
        for key in sessions:
            events = await stores[1].events_after(key, 0, 100)
            assert [e.body.kind for e in events] == ["turn_admitted", "turn_settled"]
            body = events[1].body
            assert isinstance(body, TurnSettled)
            assert (body.turn.outcome, body.turn.settled_by) == (TurnOutcome.LOST, CoreSettledBy.WATCHDOG)
    finally:
        for store in stores:
            await store.close()
        async with Redis.from_url(REDIS_SERVER) as client:
            await delete_prefix(client, keys.prefix)


# --- the ledger on PostgreSQL ----------------------------------------------------------------


async def test_ledger_holds_every_event_once_in_order_as_redis_logged_it_and_watchers_saw_it(
    clients: list[Client], deployment: Deployment, ledger: AsyncEngine, redis: RedisClient
) -> None:
    """Runners, gateways and watchers on different replicas; then the ledger on PostgreSQL equals
    the Redis logs (of every session this module touched), equals what watchers saw, and GetTurn /
    ListTurns answer the same through every replica."""
    sessions = [new_session() for _ in range(6)]
    watchers = [await watch_from_start(through(clients, i + 2), s) for i, s in enumerate(sessions)]
    turn_ids = ["turn-1", "turn-2", "turn-3"]

    async def play(i: int, session: pb.SessionRef) -> None:
        actor = acting_through(runner=through(clients, i), gateway=through(clients, i + 1))
        await act_out_turn(actor, session, turn_ids[0])
        await act_out_turn(actor, session, turn_ids[1])
        # The last turn's runner goes silent: a watchdog settles it.
        await admit(actor, session, turn_ids[2], lease_ttl=SHORT_LEASE_S)

    await asyncio.gather(*(play(i, s) for i, s in enumerate(sessions)))
    try:
        seen = [await collect_until(w, settles(turn_ids[-1])) for w in watchers]
    finally:
        for w in watchers:
            w.cancel()

    everything = await wait_for_ledger(ledger, redis, deployment.keys)
    assert everything, "nothing was projected"
    for key, log in everything.items():
        assert gapless(log), f"{key}: {[s.logged.seq for s in log]}"
    for i, session in enumerate(sessions):
        log = everything[key_of(session)]
        assert [s.logged for s in log] == logged(seen[i]), "the ledger differs from what a watcher saw"
        assert serialized(seen[i][1:]) == serialized(await events_after(through(clients, i + 1), session, 1))
        await _same_turns_through_every_replica(clients, session, settled=seen[i], turn_ids=turn_ids)


async def _same_turns_through_every_replica(
    clients: list[Client], session: pb.SessionRef, *, settled: list[pb.SessionEvent], turn_ids: list[str]
) -> None:
    records = {
        e.turn_settled.turn.turn_id: e.turn_settled.turn for e in settled if e.HasField("turn_settled")
    }
    assert sorted(records) == turn_ids, "one settlement per turn"
    listings = [
        await client.sessions.ListTurns(pb.ListTurnsRequest(session=session, page_size=10))
        for client in clients
    ]
    assert all(listing == listings[0] for listing in listings)
    assert [t.turn_id for t in listings[0].turns] == turn_ids[::-1], "newest first, each once"
    for turn_id, record in records.items():
        turns = [await get_turn(client, session, turn_id) for client in clients]
        assert all(turn == turns[0] for turn in turns), f"{turn_id} differs between replicas"
        stored = turns[0]
        for field in (
            "turn_id",
            "generation",
            "outcome",
            "settled_by",
            "stop_requested",
            "admitted_at",
            "settled_at",
        ):
            assert getattr(stored, field) == getattr(record, field), field
    acted = await get_turn(clients[0], session, turn_ids[0])
    assert {(call.call_id, call.status) for call in acted.tool_calls} == {
        ("c1", pb.TOOL_CALL_STATUS_SUCCEEDED),
        ("c2", pb.TOOL_CALL_STATUS_INTERRUPTED),
    }
    # Resolutions live only in the ledger: this one was projected.
    assert {(i.interaction_id, i.status, i.resolution) for i in acted.interactions} == {
        ("i1", pb.INTERACTION_STATUS_RESOLVED, "approved"),
        ("i2", pb.INTERACTION_STATUS_CANCELLED, ""),
    }
    last = records[turn_ids[-1]]
    assert (last.outcome, last.settled_by) == (pb.TURN_OUTCOME_LOST, pb.SETTLED_BY_WATCHDOG)
