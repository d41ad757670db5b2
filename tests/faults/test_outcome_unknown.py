"""Writes whose reply is lost for real, on every store that has a reply to lose (docs/design.md
§3.2, "Unavailable: not applied, or outcome unknown"): a WAIT that cannot be met, a master demoted
under a blocked WAIT (UNBLOCKED), a Redis connection and a PostgreSQL connection cut after the
script or the COMMIT reached the server. Each fails the apply WriteOutcomeUnknown, never "not
applied"; the write is there; and the same command sent again answers what the first did. A Redis
frozen with the script in its socket is of unknown outcome too, and never applies the decision late
(its clock window has passed). A PostgreSQL connection cut before its COMMIT is "not applied" and
changes nothing. The watchdog, which writes too, logs such a failure as one warning and goes on.
(Refusals, which never ran the script, are in test_redis_faults.py.)"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from tests.faults.deployments import Node, PrivateRedis, Topology
from tests.faults.proxy import CuttingProxy
from tests.faults.servers import DurableRedis
from tests.support.commands import KEY, LEASE, SECOND, admit
from tests.support.stores import REDIS_RETENTION, open_sql_store
from tests.support.waiting import eventually
from turngate.service.codec import load_session
from turngate.service.core import (
    Admit,
    Admitted,
    Complete,
    CompleteReply,
    ResumeQueue,
    SessionKey,
    SettledBy,
    TurnOutcome,
)
from turngate.service.ledger.projector import LedgerProjector
from turngate.service.ledger.reads import Ledger
from turngate.service.ports.store import StoreUnavailable, WriteOutcomeUnknown
from turngate.service.sql.engine import make_engine
from turngate.service.sql.migrate import migrate
from turngate.service.store.redis import store as redis_store
from turngate.service.store.redis.connection import connect
from turngate.service.store.redis.keys import Keyspace
from turngate.service.store.redis.outbox import RedisOutbox
from turngate.service.store.redis.replication import Replication
from turngate.service.store.redis.script import CAS
from turngate.service.store.redis.store import RedisStore
from turngate.service.store.sql import SqlStore
from turngate.service.watchdog import Watchdog

# Each topology's replicas per master: WAIT for one more is never met.
REPLICAS: dict[Topology, int] = {"standalone": 0, "cluster": 1, "sentinel": 1}
ADMIT = Admit("t1", "runner", LEASE)


def waiting_for(redis: PrivateRedis, keys: Keyspace, replicas: int, wait_ms: int) -> RedisStore:
    """A store that acknowledges a write once `replicas` confirm it within `wait_ms` (its every
    call bounded so that a WAIT ends first)."""
    client = connect(redis.url, wait_ms / 1000 + 5)
    return RedisStore(client, keys, retention=REDIS_RETENTION, replication=Replication(replicas, wait_ms))


def widen_the_clock_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """The script must run, not refuse a decision a loaded machine made more than the clock window
    before it: a lost reply cannot tell a refusal from a write, and the retry would admit anew."""
    monkeypatch.setattr(redis_store, "BEHIND_LIMIT_US", 60 * SECOND)
    monkeypatch.setattr(redis_store, "AHEAD_LIMIT_US", 60 * SECOND)


async def admissions(store: RedisStore, key: SessionKey) -> int:
    """How many times `key`'s log says a turn was admitted."""
    return sum(event.body.kind == "turn_admitted" for event in await store.events_after(key, 0, 100))


def assert_admitted_again(reply: object, first: Admitted | None = None) -> Admitted:
    assert isinstance(reply, Admitted), reply
    assert reply.replayed, "an earlier call admitted it"
    assert first is None or reply.generation == first.generation
    return reply


@pytest.mark.redis
async def test_a_write_no_replica_confirms_in_time_is_outcome_unknown_and_a_retry_answers_what_it_did(
    redis_server: PrivateRedis, keys: Keyspace, store: RedisStore
) -> None:
    """TURNGATE_REDIS_WAIT_REPLICAS more than there are: the primary applies, WAIT confirms too few."""
    waiting = waiting_for(redis_server, keys, REPLICAS[redis_server.topology] + 1, 100)
    try:
        with pytest.raises(WriteOutcomeUnknown):
            await waiting.apply(KEY, ADMIT)
        with pytest.raises(StoreUnavailable) as unconfirmed:
            await waiting.apply(KEY, ADMIT)
    finally:
        await waiting.close()

    assert not isinstance(unconfirmed.value, WriteOutcomeUnknown), (
        "a retry that changes nothing, whose answer replicas do not confirm, changed nothing"
    )
    active = (await store.load(KEY)).active
    assert active is not None
    assert active.turn_id == "t1", "the primary applied the first call"
    retry = assert_admitted_again((await store.apply(KEY, ADMIT)).reply)
    assert retry.generation == active.generation


@pytest.mark.redis
async def test_a_master_demoted_under_a_blocked_wait_answers_unblocked_and_the_write_is_outcome_unknown(
    redis_server: PrivateRedis, keys: Keyspace, store: RedisStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failover while WAIT blocks: Redis unblocks the WAIT (UNBLOCKED) of a script it ran
    (a cluster node: CLUSTER FAILOVER on its replica; the others: REPLICAOF)."""
    widen_the_clock_window(monkeypatch)
    waiting = waiting_for(redis_server, keys, REPLICAS[redis_server.topology] + 1, 30_000)
    master = await redis_server.master_of(keys.doc(KEY))
    # The script loaded on the node whose WAIT the test watches: the WAIT is then the script's, not
    # one sent after a NOSCRIPT (which would leave nothing applied).
    await master.query("SCRIPT", "LOAD", CAS)
    await store.apply(KEY, ResumeQueue())
    # The deployment is shared: a client an earlier test closed while it waited may still be
    # blocked in WAIT (on a loaded machine), and would be taken for this test's.
    await eventually(lambda: nobody_in_wait(master))
    try:
        applying = asyncio.create_task(waiting.apply(KEY, ADMIT))
        await eventually(lambda: blocked_in_wait(master))
        assert await holds_turn(master, keys), "the script ran before its WAIT blocked"
        async with redis_server.demoted(keys.doc(KEY)):
            with pytest.raises(WriteOutcomeUnknown) as caught:
                await applying
    finally:
        await waiting.close()

    # Redis answers the WAIT UNBLOCKED; a cluster node handing its slots over closes the connection
    # instead. Either way the failure came after the script ran.
    if redis_server.topology != "cluster":
        assert "UNBLOCKED" in str(caught.value)
    active = (await store.load(KEY)).active
    assert active is not None
    assert active.turn_id == "t1"
    assert_admitted_again((await store.apply(KEY, ADMIT)).reply)


async def blocked_in_wait(master: Node) -> bool:
    """Whether a client of `master` is blocked in WAIT: not any blocked client (a server's watch
    feed blocks in XREAD on every master), which would let the failover come before the script."""
    listed = await master.query("CLIENT", "LIST")
    text = listed.decode() if isinstance(listed, bytes) else str(listed)
    clients = [
        dict(field.split("=", 1) for field in line.split() if "=" in field) for line in text.splitlines()
    ]
    return any(client.get("cmd") == "wait" and "b" in client.get("flags", "") for client in clients)


async def holds_turn(master: Node, keys: Keyspace) -> bool:
    """Whether `master` itself has a turn active in KEY's session."""
    document = await master.query("HGET", keys.doc(KEY), "doc")
    return document is not None and load_session(document).active is not None


async def nobody_in_wait(master: Node) -> bool:
    return not await blocked_in_wait(master)


@pytest.mark.redis
async def test_a_redis_frozen_with_the_script_in_its_socket_is_outcome_unknown_and_never_applies_it_late(
    tmp_path: Path, keys: Keyspace
) -> None:
    """SIGSTOP after the script left: the call times out, its outcome unknown. Thawed, Redis runs
    the script, which refuses the decision: TIME has moved past its clock window (cas.lua), so a
    decision is never applied late, and the retry admits the turn, once."""
    server = DurableRedis(tmp_path)
    server.start()
    store = RedisStore(connect(server.url, 0.5), keys, retention=REDIS_RETENTION)
    try:
        await store.ping()  # connected, calibrated and the script loaded before the freeze
        server.freeze()
        try:
            with pytest.raises(WriteOutcomeUnknown):
                await store.apply(KEY, ADMIT)
        finally:
            server.thaw()

        retry = (await store.apply(KEY, ADMIT)).reply
        assert isinstance(retry, Admitted)
        assert not retry.replayed, "the frozen call's decision was refused: this one admitted it"
        assert await admissions(store, KEY) == 1
    finally:
        await store.close()
        server.kill()


@pytest.mark.redis
async def test_a_redis_script_whose_reply_is_cut_off_is_outcome_unknown_and_a_retry_answers_what_it_did(
    tmp_path: Path, keys: Keyspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The connection lost with the reply: the script ran, and the retry finds its turn."""
    widen_the_clock_window(monkeypatch)
    server = DurableRedis(tmp_path)
    server.start()
    proxy = CuttingProxy(("127.0.0.1", server.port))
    try:
        async with proxy.running():
            store = RedisStore(
                connect(f"redis://127.0.0.1:{proxy.port}/0", 2.0), keys, retention=REDIS_RETENTION
            )
            try:
                await store.ping()  # the script loaded
                proxy.cut(at=b"EVALSHA")
                with pytest.raises(WriteOutcomeUnknown):
                    await store.apply(KEY, ADMIT)
                assert proxy.cuts == 1
                assert_admitted_again((await store.apply(KEY, ADMIT)).reply)
            finally:
                await store.close()
    finally:
        server.kill()


@pytest.mark.redis
async def test_a_pipe_cut_with_many_writes_waiting_leaves_each_unknown_and_each_retry_admits_its_turn_once(
    tmp_path: Path, keys: Keyspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Concurrent admissions share the node's pipe (store/redis/pipeline.py): the connection cut
    with their scripts on it fails every one written as of unknown outcome, never as refused (any
    not yet written as not applied); sent again, each admits its turn exactly once."""
    widen_the_clock_window(monkeypatch)
    server = DurableRedis(tmp_path)
    server.start()
    proxy = CuttingProxy(("127.0.0.1", server.port))
    sessions = [SessionKey(KEY.project_id, f"piped-{i}") for i in range(20)]
    try:
        async with proxy.running():
            store = RedisStore(
                connect(f"redis://127.0.0.1:{proxy.port}/0", 2.0), keys, retention=REDIS_RETENTION
            )
            try:
                await admit(store, KEY, "t0")  # the pipe open and the script loaded
                proxy.cut(at=b"EVALSHA")
                outcomes = await asyncio.gather(
                    *(store.apply(key, ADMIT) for key in sessions), return_exceptions=True
                )
                assert proxy.cuts == 1
                unknown = [o for o in outcomes if isinstance(o, WriteOutcomeUnknown)]
                unsent = [o for o in outcomes if type(o) is StoreUnavailable]
                assert len(unknown) + len(unsent) == len(sessions), outcomes
                assert unknown, "the scripts on the cut connection"
                assert all("before the command was sent" in str(o) for o in unsent), unsent
                for key in sessions:
                    assert isinstance((await store.apply(key, ADMIT)).reply, Admitted)
                    assert await admissions(store, key) == 1, key
            finally:
                await store.close()
    finally:
        server.kill()


@pytest.mark.redis
async def test_the_watchdog_logs_a_write_of_unknown_outcome_as_one_warning_and_goes_on(
    redis_server: PrivateRedis, keys: Keyspace, store: RedisStore, caplog: pytest.LogCaptureFixture
) -> None:
    """Each settlement it writes is of unknown outcome (WAIT is never met): one warning each, and
    it goes on to the next deadline."""
    waiting = waiting_for(redis_server, keys, REPLICAS[redis_server.topology] + 1, 50)
    watchdog = asyncio.create_task(Watchdog(waiting, max_sleep=0.05).run())
    sessions = [KEY, SessionKey(KEY.project_id, "another")]
    try:
        with caplog.at_level(logging.WARNING, logger="turngate.watchdog"):
            for key in sessions:
                logged = len(failures(caplog))
                await admit(store, key, "t1", lease=SECOND // 10)
                await eventually(lambda: len(failures(caplog)) > logged)  # noqa: B023  (awaited at once)
        assert not watchdog.done(), "it goes on"
    finally:
        watchdog.cancel()
        await asyncio.gather(watchdog, return_exceptions=True)
        await waiting.close()

    assert all(record.exc_info is None for record in caplog.records), "warnings, never a traceback"
    assert "replicas confirmed it" in failures(caplog)[0].getMessage()
    for key in sessions:
        settled = (await store.load(key)).settled("t1")
        assert settled is not None, "the primary applied the settlement"
        assert settled.outcome is TurnOutcome.LOST


def failures(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage().startswith("watchdog sweep failed, retrying")]


@asynccontextmanager
async def postgresql_through_a_proxy(url: str) -> AsyncIterator[tuple[SqlStore, SqlStore, CuttingProxy]]:
    """A store on the database at `url`, another reaching it through a CuttingProxy, and the proxy."""
    target = make_url(url)
    proxy = CuttingProxy((target.host or "127.0.0.1", target.port or 5432))
    direct = open_sql_store(url)
    try:
        async with proxy.running():
            through = open_sql_store(target.set(port=proxy.port).render_as_string(hide_password=False))
            try:
                yield direct, through, proxy
            finally:
                await through.close()
    finally:
        await direct.close()


@pytest.mark.postgres
async def test_a_postgresql_commit_whose_reply_is_lost_is_outcome_unknown_and_a_retry_answers_what_it_did(
    ledger_url: str,
) -> None:
    async with postgresql_through_a_proxy(ledger_url) as (direct, through, proxy):
        lease = await admit(direct, KEY, "t1")
        complete = Complete("t1", lease.generation, TurnOutcome.COMPLETED)
        proxy.cut(at=b"COMMIT", after=b"UPDATE")
        with pytest.raises(WriteOutcomeUnknown):
            await through.apply(KEY, complete)
        assert proxy.cuts == 1

        assert (await direct.load(KEY)).active is None, "PostgreSQL committed it"
        retry = (await through.apply(KEY, complete)).reply
    assert isinstance(retry, CompleteReply)
    assert (retry.recorded, retry.turn.outcome, retry.turn.settled_by) == (
        False,
        TurnOutcome.COMPLETED,
        SettledBy.RUNNER,
    )


@pytest.mark.postgres
async def test_a_postgresql_connection_cut_before_its_commit_is_not_applied_and_changes_nothing(
    ledger_url: str,
) -> None:
    async with postgresql_through_a_proxy(ledger_url) as (direct, through, proxy):
        lease = await admit(direct, KEY, "t1")
        before = await direct.load(KEY)
        proxy.cut(at=b"UPDATE", forward=False)
        with pytest.raises(StoreUnavailable) as failed:
            await through.apply(KEY, Complete("t1", lease.generation, TurnOutcome.COMPLETED))
        assert proxy.cuts == 1

        assert not isinstance(failed.value, WriteOutcomeUnknown), "its COMMIT never left"
        assert await direct.load(KEY) == before


@pytest.mark.redis
@pytest.mark.parametrize("topology", ["standalone", "sentinel"])
async def test_the_projector_logs_reads_no_replica_confirms_as_warnings_and_records_nothing_of_them(
    redis_server: PrivateRedis,
    keys: Keyspace,
    store: RedisStore,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Its reads of the logs are confirmed by WAIT (a deposed primary may hold what no replica
    has; on a cluster they are not): never met, or unblocked by a demotion, the projection
    pauses, warns and retries; nothing unconfirmed reaches the ledger."""
    await admit(store, KEY, "t1")
    ledger_url = f"sqlite+aiosqlite:///{tmp_path / 'ledger.db'}"
    await migrate(ledger_url)
    ledger = make_engine(ledger_url)
    outbox = RedisOutbox(
        connect(redis_server.url, 2.0),
        keys,
        consumer="p",
        replication=Replication(REPLICAS[redis_server.topology] + 1, 50),
    )
    projector = LedgerProjector(outbox, ledger, reclaim_idle=1.0, max_deliveries=3)
    running = asyncio.create_task(projector.run())
    try:
        with caplog.at_level(logging.WARNING, logger="turngate.projector"):
            await eventually(lambda: len(paused(caplog)) >= 2)
        assert not running.done(), "it goes on"
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
        await projector.close()
    try:
        assert all(record.exc_info is None for record in caplog.records), "warnings, never a traceback"
        assert "replicas confirmed it" in paused(caplog)[0].getMessage()
        assert await Ledger(ledger).list_turns(KEY, None, 10) == []
    finally:
        await ledger.dispose()


def paused(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage().startswith("ledger projection paused")]
