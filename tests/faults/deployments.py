"""The Redis deployments the fault tests fail, each behind one interface (`PrivateRedis`): a
standalone redis-server of the test's own (servers.py), or a Redis Cluster or a primary with a
replica behind Sentinel (tests/support/topologies.py) that the tests of a run, or of a module,
share.

Each fault means the same on every topology, applied to every data node or every master:
`kill` SIGKILLs every data node, `start` starts them all again on their directories (their AOF,
their nodes.conf) and returns once the deployment serves, `refuse_writes` makes every master
answer but refuse writes (`Refusal`), until `accept_writes`, and `demoted` turns the master of a
key replica for a block, as a failover does. Where a refusal has no meaning on a topology,
`REFUSING` and `REFUSING_WRITES` skip it and say why.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol

import pytest
from redis.asyncio import Redis
from redis.exceptions import RedisError

from tests.faults.servers import PrivateRedisServer
from tests.support.shared_redis import REDIS_TIMEOUT_S
from tests.support.topologies import RedisCluster, RedisProcess, RedisSentinel
from turngate.service.store.redis.connection import Client, connect

Topology = Literal["standalone", "cluster", "sentinel"]
TOPOLOGIES: tuple[Topology, ...] = ("standalone", "cluster", "sentinel")
# Config lines of the shared deployments' data nodes. Durable: every acknowledged write is in the
# AOF, fsynced, so a SIGKILLed node started again has it. Volatile: nothing on disk at all; a
# replica too loads a full sync in memory (by default it keeps it as dump.rdb, which a restart
# would load), so a node started again is empty, as a Redis without AOF or snapshots is.
DURABLE_SETTINGS = ("appendonly yes", "appendfsync always")
VOLATILE_SETTINGS = ("repl-diskless-load swapdb",)
# The shared deployments call a node failing only after this long, so neither a data node killed
# and started again (a fraction of a second) nor a primary made a replica for a test (a second or
# two) nor a process a busy machine stalls is failed over: the deployment stays as it was made.
FAILURE_TIMEOUT_MS = 10_000


class Refusal(enum.StrEnum):
    """How a Redis that answers (PING, reads) refuses every write, the store's scripts included."""

    # A primary turned replica, as the sentinels turn a deposed one: READONLY.
    READ_ONLY_REPLICA = "read-only-replica"
    # maxmemory reached, and nothing to evict (noeviction): OOM.
    OUT_OF_MEMORY = "out-of-memory"
    # Fewer good replicas than min-replicas-to-write asks for (the README asks for 1, so that a
    # primary that lost its replicas refuses writes): NOREPLICAS.
    NO_GOOD_REPLICAS = "no-good-replicas"
    # A primary turned replica of a primary that is down, told not to serve stale data: MASTERDOWN,
    # to reads as to writes.
    MASTER_DOWN = "master-down"


# The refusals of a node that still reads.
WRITE_REFUSALS = (Refusal.READ_ONLY_REPLICA, Refusal.OUT_OF_MEMORY, Refusal.NO_GOOD_REPLICAS)


# The refusals a topology cannot have, and why.
WITHOUT_MEANING: dict[tuple[Topology, Refusal], str] = {
    ("cluster", Refusal.READ_ONLY_REPLICA): (
        "a cluster never answers a write READONLY: REPLICAOF is refused in cluster mode, and a node "
        "that is no longer a master (a deposed one) redirects the write (MOVED) to the slot's master, "
        "which the client follows (tests/topologies/test_failover.py). A cluster master that may be "
        "deposed refuses writes as no-good-replicas does (NOREPLICAS), which runs on the cluster"
    ),
    ("cluster", Refusal.MASTER_DOWN): (
        "a cluster node is made replica by a failover, not by REPLICAOF, and a replica in a cluster "
        "redirects what it does not serve (MOVED) instead of answering MASTERDOWN"
    ),
}


def _refusals(refusals: tuple[Refusal, ...]) -> list[Any]:
    """The refusals on every topology, as (topology, refusal) with ids like `cluster-out-of-memory`;
    those without meaning on their topology skipped, saying why."""
    return [
        pytest.param(
            topology,
            refusal,
            id=f"{topology}-{refusal}",
            marks=[pytest.mark.skip(reason=why)] if (why := WITHOUT_MEANING.get((topology, refusal))) else [],
        )
        for topology in TOPOLOGIES
        for refusal in refusals
    ]


# Every refusal, and those of a node that still reads.
REFUSING = _refusals(tuple(Refusal))
REFUSING_WRITES = _refusals(WRITE_REFUSALS)


class Node(Protocol):
    """A data node, asked a command directly (no cluster redirect, no sentinel)."""

    async def query(self, *command: str) -> Any: ...


class PrivateRedis(Protocol):
    """A Redis deployment a test may kill, start again and make refuse writes."""

    @property
    def topology(self) -> Topology: ...

    @property
    def url(self) -> str:
        """The store URL (`redis://`, `redis+cluster://` or `redis+sentinel://`)."""
        ...

    def client(self) -> Client:
        """A new client of the deployment (the service's, for the URL), to look at what it holds;
        the caller closes it (`async with`)."""
        ...

    async def kill(self) -> None:
        """SIGKILLs every data node, as when their machines die: no shutdown code runs."""
        ...

    async def start(self) -> None:
        """Starts every data node again on its directory; returns once the deployment serves."""
        ...

    async def refuse_writes(self, refusal: Refusal) -> None:
        """Makes every master answer, and read, but refuse writes as `refusal` says."""
        ...

    async def accept_writes(self) -> None:
        """Undoes `refuse_writes` (nothing if there is nothing to undo)."""
        ...

    async def master_of(self, key: str) -> Node:
        """The data node that serves `key` now."""
        ...

    def demoted(self, key: str) -> contextlib.AbstractAsyncContextManager[None]:
        """The master that holds `key` turned replica for the block, as a failover turns one
        (clients blocked on it, in WAIT, are told UNBLOCKED); master again after it."""
        ...

    def for_one_test(self) -> contextlib.AbstractAsyncContextManager[PrivateRedis]:
        """The deployment for one test: serving and taking writes at the start, and again after the
        block (a test that failed midway may have left it killed, or refusing writes)."""
        ...


class _Refuses(Protocol):
    async def refuse_writes(self, refusal: Refusal) -> None: ...

    async def accept_writes(self) -> None: ...


@asynccontextmanager
async def refusing_writes(redis: _Refuses, refusal: Refusal) -> AsyncIterator[None]:
    """`redis` refusing writes as `refusal` says for the block; taking them again after it, however
    it ends."""
    await redis.refuse_writes(refusal)
    try:
        yield
    finally:
        await redis.accept_writes()


class _Deployment(ABC):
    """What the three deployments share: the client, and refusing writes on every master."""

    topology: ClassVar[Topology]
    # How many replicas each master has: one more is more than it can have good.
    REPLICAS_PER_MASTER: ClassVar[int]

    def __init__(self) -> None:
        # The commands that undo the refusal in force, each with the node to send it to.
        self._undo: list[tuple[Node, tuple[str, ...]]] = []

    @property
    @abstractmethod
    def url(self) -> str: ...

    @abstractmethod
    async def _masters(self) -> Sequence[Node]:
        """The data nodes that take writes now."""

    def client(self) -> Client:
        return connect(self.url, REDIS_TIMEOUT_S)

    async def refuse_writes(self, refusal: Refusal) -> None:
        assert (self.topology, refusal) not in WITHOUT_MEANING, WITHOUT_MEANING[self.topology, refusal]
        assert not self._undo, "writes are refused already"
        refuse, accept = self._commands(refusal)
        for master in await self._masters():
            # Undone in the reverse order, after whatever of it was done.
            for command, undo in zip(refuse, accept, strict=True):
                self._undo.append((master, undo))
                await master.query(*command)

    async def accept_writes(self) -> None:
        while self._undo:
            master, accept = self._undo.pop()
            # A node killed and started since has its config file's settings again: nothing to undo.
            with contextlib.suppress(RedisError, AssertionError):
                await master.query(*accept)

    async def master_of(self, key: str) -> Node:
        """One server, or a Sentinel deployment's primary (a cluster's: the slot's master)."""
        [master] = await self._masters()
        return master

    def demoted(self, key: str) -> contextlib.AbstractAsyncContextManager[None]:
        """One server, or a Sentinel deployment's primary: a replica of a port nothing listens on
        (the sentinels call it failing only after FAILURE_TIMEOUT_MS, long after the block)."""
        return refusing_writes(self, Refusal.READ_ONLY_REPLICA)

    def _commands(self, refusal: Refusal) -> tuple[tuple[tuple[str, ...], ...], tuple[tuple[str, ...], ...]]:
        """The commands that make a master refuse writes as `refusal` says, and those that undo
        each (in the same order)."""
        # A replica of a port nothing listens on: it never syncs, and serves what it has.
        replica_of_nothing = ("REPLICAOF", "127.0.0.1", "1"), ("REPLICAOF", "NO", "ONE")
        match refusal:
            case Refusal.READ_ONLY_REPLICA:
                return (replica_of_nothing[0],), (replica_of_nothing[1],)
            case Refusal.OUT_OF_MEMORY:
                return (_config_set("maxmemory", 1),), (_config_set("maxmemory", 0),)
            case Refusal.NO_GOOD_REPLICAS:
                # Asking for one more replica than it has is the state of a master that lost one
                # (with min-replicas-to-write 1, as the README asks), reached and left at once.
                wanted = self.REPLICAS_PER_MASTER + 1
                return (_config_set("min-replicas-to-write", wanted),), (
                    _config_set("min-replicas-to-write", 0),
                )
            case Refusal.MASTER_DOWN:
                stale = ("CONFIG", "SET", "replica-serve-stale-data", "no")
                served = ("CONFIG", "SET", "replica-serve-stale-data", "yes")
                return (stale, replica_of_nothing[0]), (served, replica_of_nothing[1])


def _config_set(name: str, value: int) -> tuple[str, ...]:
    return ("CONFIG", "SET", name, str(value))


@dataclass(frozen=True)
class _ServerNode:
    """The standalone server as a `Node`."""

    url: str

    async def query(self, *command: str) -> Any:
        async with Redis.from_url(self.url) as client:
            return await client.execute_command(*command)  # type: ignore[no-untyped-call]


class Standalone(_Deployment):
    """A redis-server of one test's own (servers.py): started for the test, SIGKILLed after it."""

    topology = "standalone"
    REPLICAS_PER_MASTER = 0

    def __init__(self, server: PrivateRedisServer) -> None:
        super().__init__()
        self.server = server

    @property
    def url(self) -> str:
        return self.server.url

    # Off the loop: both wait for the process, and calls in flight must not wait with them.
    async def kill(self) -> None:
        await asyncio.to_thread(self.server.kill)

    async def start(self) -> None:
        await asyncio.to_thread(self.server.start)

    async def _masters(self) -> Sequence[Node]:
        return [_ServerNode(self.url)]

    @asynccontextmanager
    async def for_one_test(self) -> AsyncIterator[PrivateRedis]:
        await self.start()
        try:
            yield self
        finally:
            await self.kill()


class _Shared(_Deployment):
    """A deployment the tests of a run or of a module share: each test keeps to a keyspace of its
    own, and after each the deployment is made to serve and take writes again if it does not."""

    def __init__(self, harness: RedisCluster | RedisSentinel, data_nodes: Sequence[RedisProcess]) -> None:
        super().__init__()
        self.harness = harness
        self.data_nodes = data_nodes

    @property
    def url(self) -> str:
        return self.harness.url

    async def kill(self) -> None:
        await asyncio.gather(*(self.harness.kill(node) for node in self.data_nodes if node.running))

    async def start(self) -> None:
        down = [node for node in self.data_nodes if not node.running]
        await asyncio.gather(*(self.harness.restart(node) for node in down))
        await self.harness.wait_until_settled()

    @asynccontextmanager
    async def for_one_test(self) -> AsyncIterator[PrivateRedis]:
        try:
            yield self
        finally:
            await self.accept_writes()
            await self.start()


class ClusterDeployment(_Shared):
    """A Redis Cluster of 3 masters, each with a replica."""

    topology = "cluster"
    REPLICAS_PER_MASTER = 1

    def __init__(self, cluster: RedisCluster) -> None:
        super().__init__(cluster, cluster.nodes)
        self.cluster = cluster

    async def _masters(self) -> Sequence[Node]:
        members = await self.cluster.members()
        return [member.node for member in members if member.role == "master" and member.slots]

    async def master_of(self, key: str) -> Node:
        return await self.cluster.master_of(key)

    @asynccontextmanager
    async def demoted(self, key: str) -> AsyncIterator[None]:
        """The master of `key`'s slot hands it to its replica (CLUSTER FAILOVER, which waits for
        the replica to catch up), and takes it back after the block."""
        master = await self.cluster.master_of(key)
        [replica] = [m.node for m in await self.cluster.members() if m.master is master]
        await self.cluster.hand_over(master, replica)
        try:
            yield
        finally:
            await self.cluster.hand_over(replica, master)
            await self.cluster.wait_until_settled()


class SentinelDeployment(_Shared):
    """A primary and its replica, watched by 3 sentinels."""

    topology = "sentinel"
    REPLICAS_PER_MASTER = 1

    def __init__(self, sentinel: RedisSentinel) -> None:
        super().__init__(sentinel, sentinel.data_nodes)
        self.sentinel = sentinel

    async def _masters(self) -> Sequence[Node]:
        # Made a replica, the primary is not failed over: the sentinels call it down only once it
        # has said so for FAILURE_TIMEOUT_MS (and two INFO periods), and a test gives it back first.
        return [await self.sentinel.primary()]
