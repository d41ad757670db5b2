"""The turn queue (issue 13) across replicas on one Redis and one PostgreSQL: runners on different
replicas wait in one session's queue and are admitted in its order, each learning its promotion
on its own replica; a promotion outlives the replica that wrote it; and the turns that waited
read the same before and after the ledger records them.
"""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from tests.support.calls import (
    admissions,
    complete,
    enqueue,
    events_after,
    get_turn,
    heartbeat,
    picked_up,
    snapshot,
    stop,
    with_queue,
)
from tests.support.logs import ledger_logs, wait_for_ledger
from tests.support.postgres import postgres_url
from tests.support.replicas import (
    Deployment,
    acting_through,
    assert_no_tracebacks,
    key_of,
    new_session,
    replicas,
)
from tests.support.servers import Client
from tests.support.shared_redis import delete_prefix, unique_prefix
from tests.support.watching import (
    Watch,
    admits,
    collect,
    collect_until,
    ended,
    settles,
    watch,
    watch_from_start,
)
from turngate.service.sql.migrate import migrate
from turngate.service.store.redis.connection import Client as RedisClient
from turngate.v1 import turngate_pb2 as pb

pytestmark = [pytest.mark.redis, pytest.mark.postgres]


def admitted(events: list[pb.SessionEvent]) -> list[tuple[str, bool]]:
    """Each turn_admitted: its turn, and whether it came from the queue."""
    return [(a.turn.turn_id, a.from_queue) for a in admissions(events)]


async def test_q1_q2_runners_on_three_replicas_wait_in_one_queue_and_are_admitted_in_its_order(
    clients: list[Client], session: pb.SessionRef
) -> None:
    a, b, c = clients
    watcher = await watch_from_start(c, session)
    # Each runner on a replica of its own; t2 and t4 learn their promotion from a watch there, t3
    # by sending its AdmitTurn again.
    runners = {"t2": b, "t3": c, "t4": a}
    own_watches: dict[str, Watch] = {
        turn_id: watch(runners[turn_id], session, turn_id=turn_id) for turn_id in ("t2", "t4")
    }
    try:
        lease = (await enqueue(a, session, "t1")).lease
        for position, (turn_id, replica) in enumerate(runners.items(), start=1):
            assert (await enqueue(replica, session, turn_id)).queued.position == position
        for replica in clients:
            assert [q.turn_id for q in (await snapshot(replica, session)).queue] == list(runners)

        previous, settling_through = lease, a
        for turn_id, replica in runners.items():
            await complete(settling_through, previous)  # admits the head in the same write
            if turn_id in own_watches:
                learned = await collect_until(own_watches[turn_id], admits(turn_id))
                assert learned[-1].turn_admitted.from_queue
            # Acknowledged on one replica, the promotion shows on every replica at once.
            picked = await picked_up(replica, session, turn_id)
            assert (await heartbeat(replica, picked.lease)).directive == pb.DIRECTIVE_CONTINUE
            previous, settling_through = picked.lease, replica
        await complete(settling_through, previous)

        seen = await collect_until(watcher, settles("t4"))
    finally:
        watcher.cancel()
        for stream in own_watches.values():
            stream.cancel()

    assert admitted(seen) == [("t1", False), ("t2", True), ("t3", True), ("t4", True)]
    assert [e.seq for e in seen] == list(range(1, len(seen) + 1))


async def test_q2_a_promotion_outlives_the_replica_that_wrote_it_and_its_runner_picks_it_up_on_another(
    deployment: Deployment,
    clients: list[Client],
    ledger: AsyncEngine,
    redis: RedisClient,
    session: pb.SessionRef,
    tmp_path: Path,
) -> None:
    a, b, _ = clients
    async with deployment.replica(tmp_path) as doomed:
        lease = (await enqueue(doomed.client, session, "t1")).lease
        runner_watch = watch(doomed.client, session, turn_id="t2")
        await collect(runner_watch, 1)  # its snapshot: the runner watches on the doomed replica
        assert (await enqueue(doomed.client, session, "t2")).queued.position == 1
        await complete(doomed.client, lease)  # settles t1 and admits t2, in one write

        await doomed.kill()  # before t2's runner has picked up its lease
        _, error = await ended(runner_watch)
        assert error.code() == grpc.StatusCode.UNAVAILABLE

    picked = await picked_up(a, session, "t2")  # the runner reconnects elsewhere, with the same AdmitTurn

    assert (await heartbeat(a, picked.lease)).directive == pb.DIRECTIVE_CONTINUE
    log = await events_after(b, session, 1)
    [promotion] = admissions(log)  # admitted once
    assert (promotion.turn.turn_id, promotion.from_queue) == ("t2", True)
    assert promotion.turn.generation == picked.lease.generation
    current = await snapshot(b, session)
    assert (current.active.turn_id, current.active.generation, list(current.queue)) == (
        "t2",
        picked.lease.generation,
        [],
    )
    # And the ledger records each event once, the killed replica's share included.
    await wait_for_ledger(ledger, redis, deployment.keys, [key_of(session)])


async def read_back(client: Client, session: pb.SessionRef, turn_ids: list[str]) -> list[pb.TurnRecord]:
    """Every named turn as GetTurn shows it, then the session's turns as ListTurns lists them."""
    turns = [await get_turn(client, session, turn_id) for turn_id in turn_ids]
    listed = await client.sessions.ListTurns(pb.ListTurnsRequest(session=session))
    return [*turns, *listed.turns]


async def test_turns_that_waited_read_the_same_before_and_after_the_ledger_records_them(
    tmp_path: Path, ledger_database: str, redis_url: str, redis: RedisClient
) -> None:
    deployment = Deployment(redis_url, unique_prefix(), postgres_url(ledger_database), replicas_project=False)
    session = new_session()
    turn_ids = ["t1", "t2", "t3"]
    await migrate(deployment.ledger_url)  # as `turngate migrate` does before replicas that do not project
    engine = create_async_engine(postgres_url(ledger_database))
    try:
        async with replicas(deployment, tmp_path, 2) as (a, b):
            runner = acting_through(a.client, b.client)
            # t1 runs; t2 waits and is stopped while it waits; t3 waits, is promoted and completes.
            lease = await with_queue(runner, session, "t2", "t3")
            await stop(runner, session, "t2")
            await complete(runner, lease)
            await complete(runner, (await picked_up(runner, session, "t3")).lease)
            before = [await read_back(replica.client, session, turn_ids) for replica in (a, b)]
            assert key_of(session) not in await ledger_logs(engine), "nothing projected yet"

            async with deployment.projector(tmp_path):
                await wait_for_ledger(engine, redis, deployment.keys, [key_of(session)])
                after = [await read_back(replica.client, session, turn_ids) for replica in (a, b)]

        assert [(t.turn_id, t.outcome) for t in before[0][:3]] == [
            ("t1", pb.TURN_OUTCOME_COMPLETED),
            ("t2", pb.TURN_OUTCOME_CANCELLED),
            ("t3", pb.TURN_OUTCOME_COMPLETED),
        ]
        assert before == after == [before[0], before[0]]
        assert_no_tracebacks(tmp_path)
    finally:
        await engine.dispose()
        await delete_prefix(redis, deployment.prefix)
