"""Real Redis topologies of a test's own: a Redis Cluster (3 masters, each with a replica) and a
primary with a replica watched by 3 sentinels, on free ports, every process in a directory of its
own under the root given (its config, its log and, for a cluster node, its nodes.conf).

`async with RedisCluster.started(root) as cluster:` (or `RedisSentinel.started`) returns once the
topology is settled, and stops every process when the block ends, also when it raises: SIGTERM,
then SIGKILL after STOP_TIMEOUT_S. In between, a test fails processes (`freeze`, `kill`), brings
them back (`thaw`, `restart`) and waits for the topology to follow (`wait_for_failover`,
`wait_for_rejoin`). Nothing is persisted unless a test passes settings that ask for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from redis.asyncio import Redis
from redis.asyncio.cluster import ClusterNode
from redis.asyncio.cluster import RedisCluster as ClusterClient
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from tests.support.processes import PROCESS_TIMEOUT_S, free_port, is_free, stopped
from tests.support.waiting import eventually

HOST = "127.0.0.1"
# How long a process may take to exit on SIGTERM before it is killed.
STOP_TIMEOUT_S = 5.0
# How long a topology may take to settle, fail over or take a node back: reached only when a test fails.
SETTLE_TIMEOUT_S = 60.0
# The harness's own queries: a process silent this long is failing, not slow.
QUERY_TIMEOUT_S = 1.0
# The clients handed to tests: a call to a frozen node fails after this, not redis-py's default 5 s.
CLIENT_TIMEOUT_S = 1.0
CLUSTER_SLOTS = 16_384
CLUSTER_NODES = 6
# A cluster node also listens on its port + this (the cluster bus), and ports end at 65535.
BUS_PORT_OFFSET = 10_000
DATA_NODE_SETTINGS = (
    'save ""',
    "appendonly no",
    # A replica's full sync starts at once, not after the default 5 s of waiting for more replicas.
    "repl-diskless-sync-delay 0",
    # A master exits on SIGTERM at once instead of waiting for lagging (say, frozen) replicas.
    "shutdown-timeout 0",
)
# Sentinels' internal periods (SENTINEL DEBUG, Redis 7+): INFO every 1 s instead of 10 s and hellos
# every 0.5 s instead of 2 s, so they see replicas and each other, and turn an old primary back
# into a replica (4 hello periods after it reported itself primary), in seconds, not tens of them;
# and a sentinel that was frozen or starved of CPU (TILT mode) acts again after 2 s, not 30.
SENTINEL_PERIODS = (
    *("SENTINEL", "DEBUG"),
    *("info-period", "1000", "publish-period", "500", "tilt-period", "2000"),
)
# What a sentinel logs when it finds a primary down, and when it replaces one.
FAILOVER_MARKS = ("+sdown master", "+odown master", "+switch-master")
Role = Literal["master", "replica"]
T = TypeVar("T")


# --- one process ---------------------------------------------------------------------------


@dataclass(eq=False)
class RedisProcess:
    """One `redis-server` of a topology, a data node or (`mode` --sentinel) a sentinel: its port,
    its directory and config file, and the process while it runs."""

    port: int
    root: Path
    mode: tuple[str, ...] = ()
    setup: tuple[tuple[str, ...], ...] = ()  # commands sent at every start, once it answers
    frozen: bool = field(default=False, init=False)
    _process: asyncio.subprocess.Process | None = field(default=None, init=False, repr=False)
    # The harness's own connection: never retried, so a failing process fails a query fast.
    _admin: Redis | None = field(default=None, init=False, repr=False)

    @classmethod
    def configured(
        cls,
        parent: Path,
        name: str,
        port: int,
        settings: Sequence[str],
        mode: tuple[str, ...] = (),
        setup: tuple[tuple[str, ...], ...] = (),
    ) -> RedisProcess:
        """A process (not started) whose config holds `settings`, in a new directory `parent/name-port`."""
        root = parent / f"{name}-{port}"
        root.mkdir()
        process = cls(port, root, mode, setup)
        process.config.write_text("\n".join((f"port {port}", f"bind {HOST}", f"dir {root}", *settings, "")))
        return process

    @property
    def config(self) -> Path:
        return self.root / "redis.conf"

    @property
    def log(self) -> Path:
        return self.root / "redis.log"

    @property
    def address(self) -> tuple[str, int]:
        return HOST, self.port

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.returncode is None

    @property
    def reachable(self) -> bool:
        return self.running and not self.frozen

    def client(self, **options: Any) -> Redis:
        """A client of this process alone (no cluster redirects, no sentinel), for `async with`."""
        timeouts = {"socket_timeout": CLIENT_TIMEOUT_S, "socket_connect_timeout": CLIENT_TIMEOUT_S}
        return Redis(host=HOST, port=self.port, **{**timeouts, **options})

    async def query(self, *command: str) -> Any:
        """Its reply to `command` (parsed as redis-py parses it), over the harness's connection."""
        assert self._admin is not None, f"redis-server {self.port} is not running"
        return await self._admin.execute_command(*command)  # type: ignore[no-untyped-call]

    async def start(self) -> None:
        """Starts it with its config and returns once it answers PING and has taken its setup."""
        assert not self.running, f"redis-server {self.port} is running"
        with self.log.open("ab") as output:
            self._process = await asyncio.create_subprocess_exec(
                "redis-server", str(self.config), *self.mode, stdout=output, stderr=asyncio.subprocess.STDOUT
            )
        self._admin = Redis(
            host=HOST,
            port=self.port,
            socket_timeout=QUERY_TIMEOUT_S,
            socket_connect_timeout=QUERY_TIMEOUT_S,
            retry=Retry(NoBackoff(), 0),
        )
        process = self._process

        async def answers() -> None:
            assert process.returncode is None, f"redis-server {self.port} exited:\n{self.log.read_text()}"
            await self.query("PING")

        await _wait_for(f"redis-server {self.port} to answer", answers)
        for command in self.setup:
            await self.query(*command)

    def freeze(self) -> None:
        """SIGSTOP: it keeps its sockets open and answers nothing, as a hung machine."""
        self._running().send_signal(signal.SIGSTOP)
        self.frozen = True

    def thaw(self) -> None:
        assert self.frozen, f"redis-server {self.port} is not frozen"
        self._running().send_signal(signal.SIGCONT)
        self.frozen = False

    async def kill(self) -> None:
        """SIGKILL, as when its machine dies: no shutdown code runs."""
        process = self._running()
        await self._close_admin()
        process.kill()
        await process.wait()
        self.frozen = False

    async def stop(self) -> None:
        """SIGTERM, then SIGKILL if it has not exited within STOP_TIMEOUT_S; nothing if not running."""
        await self._close_admin()
        if self._process is None or not self.running:
            return
        process = self._process
        # A frozen process handles SIGTERM only once continued; one that just exited has no pid.
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGCONT)
        await stopped(process, STOP_TIMEOUT_S)
        self.frozen = False

    def _running(self) -> asyncio.subprocess.Process:
        assert self._process is not None, f"redis-server {self.port} was never started"
        assert self._process.returncode is None, f"redis-server {self.port} is not running"
        return self._process

    async def _close_admin(self) -> None:
        if self._admin is not None:
            await self._admin.aclose()
            self._admin = None


# --- what both topologies share ------------------------------------------------------------


class _NotYet(AssertionError):
    """What a wait saw instead of the state it waits for (an assertion when nothing waits)."""


async def _wait_for(what: str, check: Callable[[], Awaitable[T]]) -> T:
    """What `check` returns once it passes (neither raises _NotYet nor fails to reach a process);
    fails after SETTLE_TIMEOUT_S, saying what it saw last."""
    results: list[T] = []
    last_seen: list[Exception] = []

    async def passes() -> bool:
        try:
            results.append(await check())
        except (_NotYet, RedisError) as seen:
            last_seen[:] = [seen]
            return False
        return True

    try:
        await eventually(passes, timeout_s=SETTLE_TIMEOUT_S)
    except TimeoutError:
        raise AssertionError(f"waited {SETTLE_TIMEOUT_S} s for {what}; last seen: {last_seen}") from None
    return results[-1]


async def _start_all(processes: Sequence[RedisProcess]) -> None:
    async with asyncio.TaskGroup() as group:
        for process in processes:
            group.create_task(process.start())


class _Topology(ABC):
    """Failing a topology's processes, bringing them back, and stopping them all."""

    @property
    @abstractmethod
    def processes(self) -> list[RedisProcess]: ...

    def reachable(self) -> list[RedisProcess]:
        """Its processes that run and are not frozen."""
        return [process for process in self.processes if process.reachable]

    def freeze(self, process: RedisProcess) -> None:
        """SIGSTOP `process`: it keeps its connections and answers nothing, as a hung machine."""
        self._own(process).freeze()

    def thaw(self, process: RedisProcess) -> None:
        """SIGCONT a frozen `process`: it goes on from where it stopped."""
        self._own(process).thaw()

    async def kill(self, process: RedisProcess) -> None:
        """SIGKILL `process`, as when its machine dies (without persistence, its data goes too)."""
        await self._own(process).kill()

    async def restart(self, process: RedisProcess) -> None:
        """Starts a killed `process` again with its config; returns once it answers PING (it has yet
        to rejoin: see `wait_for_rejoin`)."""
        await self._own(process).start()

    @abstractmethod
    async def detect_failures_within(self, timeout_ms: int) -> None:
        """From now on, a master silent for `timeout_ms` is failed over (set on every reachable
        process that judges it; one that is frozen or down keeps what it had)."""

    def _own(self, process: RedisProcess) -> RedisProcess:
        assert process in self.processes, f"redis-server {process.port} is not of this topology"
        return process

    @asynccontextmanager
    async def _stopped_at_exit(self) -> AsyncIterator[None]:
        """Stops every process at the end of the block, however it ends."""
        try:
            yield
        finally:
            stopped = await asyncio.gather(*(p.stop() for p in self.processes), return_exceptions=True)
            for failure in stopped:
                if isinstance(failure, BaseException):
                    raise failure


def _cluster_ports(count: int) -> list[int]:
    """`count` free ports whose cluster bus ports (port + 10000) are free too."""
    ports: list[int] = []
    while len(ports) < count:
        if is_free((port := free_port()) + BUS_PORT_OFFSET):
            ports.append(port)
    return ports


async def _replica_linked(replica: RedisProcess, master: RedisProcess) -> None:
    """Passes once `replica` says (ROLE) it replicates `master` over a live link."""
    role = await replica.query("ROLE")
    if role[0] != b"slave" or role[2] != master.port or role[3] != b"connected":
        raise _NotYet(f"redis-server {replica.port} is not linked to {master.port}: ROLE {role}")


# --- Redis Cluster -------------------------------------------------------------------------


@dataclass(frozen=True)
class ClusterMember:
    """A node as one node of the cluster sees it (CLUSTER NODES)."""

    node: RedisProcess
    role: Role
    master: RedisProcess | None  # whom a replica replicates
    slots: int  # how many slots it serves
    failing: bool  # flagged as failing, by this observer alone (fail?) or by the cluster (fail)


@dataclass(frozen=True)
class _NodeLine:
    """One line of CLUSTER NODES, or of a nodes.conf (the same form plus a `vars` line)."""

    node_id: str
    port: int
    flags: frozenset[str]
    master_id: str
    slot_ranges: tuple[str, ...]

    @property
    def slots(self) -> int:
        counted = 0
        for item in self.slot_ranges:
            if not item.startswith("["):  # "[slot->-node]": a slot on its way, still the source's
                first, _, last = item.partition("-")
                counted += int(last or first) - int(first) + 1
        return counted


def _parse_nodes(text: str) -> list[_NodeLine]:
    """The known nodes of a CLUSTER NODES listing or nodes.conf, leaving out the nodes still in
    handshake (they are listed twice, once under a made-up id), those of no known address, and the
    `vars` line of a file."""
    parsed = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 8 or {"handshake", "noaddr"} & set(fields[2].split(",")):
            continue
        node_id, address, flags, master_id = fields[:4]
        port = int(address.partition("@")[0].rpartition(":")[2])
        parsed.append(_NodeLine(node_id, port, frozenset(flags.split(",")), master_id, tuple(fields[8:])))
    return parsed


@dataclass(eq=False)
class RedisCluster(_Topology):
    """A Redis Cluster of 6 nodes, 3 masters each with a replica (`started` makes one)."""

    nodes: list[RedisProcess]
    node_timeout_ms: int

    @classmethod
    @asynccontextmanager
    async def started(
        cls, root: Path, *, node_timeout_ms: int = 1_000, settings: Sequence[str] = ()
    ) -> AsyncIterator[RedisCluster]:
        """6 nodes in `root` with `cluster-node-timeout node_timeout_ms` and `settings` (more config
        lines, e.g. "appendonly yes"), once the cluster is created and settled; all stopped at the
        end of the block."""
        cluster_settings = [
            *DATA_NODE_SETTINGS,
            "cluster-enabled yes",
            "cluster-config-file nodes.conf",
            f"cluster-node-timeout {node_timeout_ms}",
            *settings,
        ]
        nodes = [
            RedisProcess.configured(root, "node", port, cluster_settings)
            for port in _cluster_ports(CLUSTER_NODES)
        ]
        cluster = cls(nodes, node_timeout_ms)
        async with cluster._stopped_at_exit():
            await _start_all(nodes)
            await cluster._create()
            await _wait_for("the new cluster to settle", cluster._settled_as_created)
            yield cluster

    @property
    def processes(self) -> list[RedisProcess]:
        return self.nodes

    @property
    def startup_nodes(self) -> list[tuple[str, int]]:
        """Where a client starts from: 3 of the nodes, whatever their roles."""
        return [node.address for node in self.nodes[:3]]

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"{host}:{port}" for host, port in self.startup_nodes)

    @asynccontextmanager
    async def client(self, **options: Any) -> AsyncIterator[ClusterClient]:
        """A redis-py cluster client from the startup nodes (`options` go to it), closed at the end."""
        timeouts = {"socket_timeout": CLIENT_TIMEOUT_S, "socket_connect_timeout": CLIENT_TIMEOUT_S}
        startup_nodes = [ClusterNode(host, port) for host, port in self.startup_nodes]
        async with ClusterClient(startup_nodes=startup_nodes, **{**timeouts, **options}) as client:
            yield client

    async def detect_failures_within(self, timeout_ms: int) -> None:
        for node in self.reachable():
            await node.query("CONFIG", "SET", "cluster-node-timeout", str(timeout_ms))
        self.node_timeout_ms = timeout_ms

    async def members(self) -> list[ClusterMember]:
        """Every node, its role and master, as the first reachable node sees them."""
        return await self._seen_by(self.reachable()[0])

    async def master_of(self, key: str) -> RedisProcess:
        """The node serving `key`'s slot, as the first reachable node says (CLUSTER KEYSLOT, SHARDS)."""
        observer = self.reachable()[0]
        slot = int(await observer.query("CLUSTER KEYSLOT", key))
        for shard in await observer.query("CLUSTER SHARDS"):
            bounds = shard[b"slots"]
            if any(first <= slot <= last for first, last in zip(bounds[::2], bounds[1::2], strict=True)):
                [master] = [node for node in shard[b"nodes"] if node[b"role"] == b"master"]
                return self._node_on(int(master[b"port"]))
        raise AssertionError(f"no shard serves slot {slot} of {key!r}")

    async def hand_over(self, master: RedisProcess, replica: RedisProcess) -> None:
        """`replica` takes over the slots of `master`, its master, in a manual failover (CLUSTER
        FAILOVER, once every node agrees on the roles: the masters vote only for a replica they see
        as one); returns once `master` says (ROLE) it is its replica, linked."""
        await self.wait_until_settled()
        await _replica_linked(replica, master)
        await replica.query("CLUSTER", "FAILOVER")
        await _wait_for(
            f"{replica.port} to take over from {master.port}", lambda: _replica_linked(master, replica)
        )

    async def flushall(self) -> None:
        """Empties every reachable master (their replicas follow), for tests sharing one cluster."""
        for member in await self.members():
            if member.role == "master" and member.slots and member.node.reachable:
                await member.node.query("FLUSHALL")

    async def wait_for_failover(self, old_master: RedisProcess) -> RedisProcess:
        """Waits until a replica `old_master` had is a master serving slots, every reachable node
        agreeing, and the cluster is settled again (`cluster_state:ok` everywhere reachable);
        returns that new master."""
        # The old master's own nodes.conf names its replicas even once the others forgot the link.
        own_view = _parse_nodes((self._own(old_master).root / "nodes.conf").read_text())
        [myself] = [line for line in own_view if "myself" in line.flags]
        replica_ports = {line.port for line in own_view if line.master_id == myself.node_id}
        assert replica_ports, f"redis-server {old_master.port} had no replica"

        async def failed_over() -> RedisProcess:
            for member in await self._settled():
                if member.node.port in replica_ports and member.role == "master" and member.slots:
                    return member.node
            raise _NotYet(f"no replica of {old_master.port} is a master yet")

        return await _wait_for(f"a replica of {old_master.port} to take over", failed_over)

    async def wait_for_rejoin(self, node: RedisProcess) -> RedisProcess:
        """Waits until `node` (thawed or restarted) is a replica every reachable node agrees on,
        linked to its master, and the cluster is settled; returns its master."""
        assert self._own(node).reachable, f"redis-server {node.port} is not running, or frozen"

        async def rejoined() -> RedisProcess:
            [member] = [member for member in await self._settled() if member.node is node]
            if member.role != "replica" or member.master is None:
                raise _NotYet(f"redis-server {node.port} is not a replica yet: {member}")
            return member.master

        return await _wait_for(f"redis-server {node.port} to rejoin as a replica", rejoined)

    async def wait_until_settled(self) -> list[ClusterMember]:
        """Waits until the cluster is whole again (every node restarted, say): 3 masters serving
        every slot, 3 replicas linked to them, every reachable node agreeing and saying
        `cluster_state:ok`; returns the members."""
        return await _wait_for("the cluster to settle", self._settled_as_created)

    async def _create(self) -> None:
        """`redis-cli --cluster create` of every node, one replica per master."""
        addresses = [f"{HOST}:{node.port}" for node in self.nodes]
        cli = await asyncio.create_subprocess_exec(
            *("redis-cli", "--cluster", "create", *addresses, "--cluster-replicas", "1", "--cluster-yes"),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        try:
            async with asyncio.timeout(PROCESS_TIMEOUT_S):
                output, _ = await cli.communicate()
        finally:
            if cli.returncode is None:
                cli.kill()
                await cli.wait()
        assert cli.returncode == 0, f"redis-cli --cluster create failed:\n{output.decode()}"

    async def _settled_as_created(self) -> list[ClusterMember]:
        members = await self._settled()
        masters = [member for member in members if member.role == "master" and member.slots]
        if len(members) != CLUSTER_NODES or len(masters) != CLUSTER_NODES // 2:
            raise _NotYet(f"not 3 masters and 3 replicas yet: {members}")
        return members

    async def _settled(self) -> list[ClusterMember]:
        """The members (as the first reachable node sees them), once every reachable node says
        `cluster_state:ok` with every slot served, they agree on the reachable nodes' roles, none of
        which is failing, and every reachable replica is linked to its master."""
        views = []
        for observer in self.reachable():
            info = await observer.query("CLUSTER INFO")
            if info["cluster_state"] != "ok" or int(info["cluster_slots_ok"]) != CLUSTER_SLOTS:
                raise _NotYet(f"redis-server {observer.port}: {info}")
            view = await self._seen_by(observer)
            views.append((observer, view, {member for member in view if member.node.reachable}))
        _, members, agreed = views[0]
        for observer, _, seen in views:
            if seen != agreed:
                raise _NotYet(f"redis-server {observer.port} sees {seen}, not {agreed}")
        for member in agreed:
            if member.failing:
                raise _NotYet(f"redis-server {member.node.port} is flagged as failing")
            if member.role == "replica":
                if member.master is None:
                    raise _NotYet(f"redis-server {member.node.port} replicates a node not known yet")
                await _replica_linked(member.node, member.master)
        return members

    async def _seen_by(self, observer: RedisProcess) -> list[ClusterMember]:
        # Split in two words, so redis-py leaves the reply as the text a nodes.conf holds too.
        listing = _parse_nodes((await observer.query("CLUSTER", "NODES")).decode())
        ports = {line.node_id: line.port for line in listing}
        return [
            ClusterMember(
                node=self._node_on(line.port),
                role="master" if "master" in line.flags else "replica",
                master=self._node_on(ports[line.master_id]) if line.master_id in ports else None,
                slots=line.slots,
                failing=bool({"fail", "fail?"} & line.flags),
            )
            for line in listing
        ]

    def _node_on(self, port: int) -> RedisProcess:
        [node] = [node for node in self.nodes if node.port == port]
        return node


# --- Sentinel ------------------------------------------------------------------------------


@dataclass(eq=False)
class RedisSentinel(_Topology):
    """A primary and its replica, watched by 3 sentinels with a quorum of 2 (`started` makes one)."""

    service_name: str
    data_nodes: list[RedisProcess]  # the first primary, then its replica
    sentinels: list[RedisProcess]

    @classmethod
    @asynccontextmanager
    async def started(
        cls,
        root: Path,
        *,
        service_name: str = "turngate",
        # A busy machine can stall a process for a second: with 1 s, the sentinels once failed a
        # healthy primary over in CI.
        down_after_ms: int = 2_000,
        failover_timeout_ms: int = 3_000,
        settings: Sequence[str] = (),
    ) -> AsyncIterator[RedisSentinel]:
        """A primary, a replica and 3 sentinels in `root`; the sentinels call a primary silent for
        `down_after_ms` down, and give up a failover stuck for `failover_timeout_ms`; `settings` are
        more config lines for the data nodes. Returns once every sentinel knows the primary, the
        replica and the other sentinels; all stopped at the end of the block."""
        primary_port, replica_port, *sentinel_ports = (free_port() for _ in range(5))
        primary = RedisProcess.configured(root, "redis", primary_port, [*DATA_NODE_SETTINGS, *settings])
        replica_settings = [*DATA_NODE_SETTINGS, f"replicaof {HOST} {primary_port}", *settings]
        replica = RedisProcess.configured(root, "redis", replica_port, replica_settings)
        sentinel_settings = [
            f"sentinel monitor {service_name} {HOST} {primary_port} 2",
            f"sentinel down-after-milliseconds {service_name} {down_after_ms}",
            f"sentinel failover-timeout {service_name} {failover_timeout_ms}",
        ]
        sentinels = [
            RedisProcess.configured(
                root, "sentinel", port, sentinel_settings, mode=("--sentinel",), setup=(SENTINEL_PERIODS,)
            )
            for port in sentinel_ports
        ]
        topology = cls(service_name, [primary, replica], sentinels)
        async with topology._stopped_at_exit():
            await _start_all(topology.data_nodes)
            # Linked before the sentinels first ask the primary (INFO) for its replicas, so they see it.
            await _wait_for("the replica to sync", lambda: _replica_linked(replica, primary))
            await _start_all(sentinels)
            await _wait_for("the sentinels to know everyone", lambda: topology._watched(replica))
            yield topology

    @property
    def processes(self) -> list[RedisProcess]:
        return [*self.data_nodes, *self.sentinels]

    @property
    def sentinel_addresses(self) -> list[tuple[str, int]]:
        return [sentinel.address for sentinel in self.sentinels]

    @property
    def url(self) -> str:
        nodes = ",".join(f"{host}:{port}" for host, port in self.sentinel_addresses)
        return f"redis+sentinel://{nodes}/{self.service_name}"

    @asynccontextmanager
    async def client(self, **options: Any) -> AsyncIterator[Redis]:
        """A redis-py client of the primary the sentinels name, `Sentinel(...).master_for` (`options`
        go to it), which follows a failover; closed with its sentinel connections at the end."""
        timeouts = {"socket_timeout": CLIENT_TIMEOUT_S, "socket_connect_timeout": CLIENT_TIMEOUT_S}
        async with (
            Sentinel(self.sentinel_addresses, **timeouts) as sentinel,  # type: ignore[no-untyped-call]
            sentinel.master_for(self.service_name, **{**timeouts, **options}) as client,
        ):
            yield client

    async def primary(self) -> RedisProcess:
        """The data node the reachable sentinels name as the primary; they must agree (during a
        failover they may not: `wait_for_failover` first)."""
        named = {
            tuple(await sentinel.query("SENTINEL GET-MASTER-ADDR-BY-NAME", self.service_name))
            for sentinel in self._reachable_sentinels()
        }
        if len(named) != 1:
            raise _NotYet(f"the sentinels name different primaries: {named}")
        [(_, port)] = named
        return self._data_node_on(int(port))

    async def replica(self) -> RedisProcess:
        """The data node the reachable sentinels list as the primary's replica (after a failover,
        the old primary, even while it is down); they must agree."""
        listed = set()
        for sentinel in self._reachable_sentinels():
            replicas = await sentinel.query("SENTINEL SLAVES", self.service_name)
            listed.add(tuple(sorted(int(replica["port"]) for replica in replicas)))
        if len(listed) != 1:
            raise _NotYet(f"the sentinels list different replicas: {listed}")
        [ports] = listed
        assert len(ports) == 1, f"the sentinels list {len(ports)} replicas: {ports}"
        return self._data_node_on(ports[0])

    async def detect_failures_within(self, timeout_ms: int) -> None:
        for sentinel in self._reachable_sentinels():
            await sentinel.query(
                "SENTINEL", "SET", self.service_name, "down-after-milliseconds", str(timeout_ms)
            )

    async def flushall(self) -> None:
        """Empties the primary (the replica follows), for tests sharing one deployment."""
        await (await self.primary()).query("FLUSHALL")

    async def wait_for_failover(self, old_primary: RedisProcess) -> RedisProcess:
        """Waits until every reachable sentinel names another primary than `old_primary` and it says
        (ROLE) it is a master; returns it."""

        async def failed_over() -> RedisProcess:
            primary = await self.primary()
            if primary is old_primary:
                raise _NotYet(f"the sentinels still name {old_primary.port}")
            role = await primary.query("ROLE")
            if role[0] != b"master":
                raise _NotYet(f"redis-server {primary.port} is named primary but is not one yet: {role}")
            return primary

        return await _wait_for(f"the sentinels to replace {old_primary.port}", failed_over)

    async def wait_for_rejoin(self, node: RedisProcess) -> RedisProcess:
        """Waits until `node` (thawed or restarted) is linked as a replica to the primary, and every
        reachable sentinel sees it so; returns the primary. (The sentinels turn an old primary back
        into a replica only once it has reported itself primary for a while: see SENTINEL_PERIODS.)"""
        assert self._own(node).reachable, f"redis-server {node.port} is not running, or frozen"
        return await _wait_for(
            f"redis-server {node.port} to rejoin as a replica", lambda: self._watched(node)
        )

    async def wait_until_settled(self) -> RedisProcess:
        """Waits until the sentinels agree on a primary that says (ROLE) it is a master, the other
        data node is linked to it as its replica, and every reachable sentinel sees both so (every
        data node restarted, say); returns the primary."""

        async def settled() -> RedisProcess:
            primary = await self.primary()
            role = await primary.query("ROLE")
            if role[0] != b"master":
                raise _NotYet(f"redis-server {primary.port} is named primary but is not one: {role}")
            [replica] = [node for node in self.data_nodes if node is not primary]
            return await self._watched(replica)

        return await _wait_for("the sentinels' deployment to settle", settled)

    async def _watched(self, replica: RedisProcess) -> RedisProcess:
        """The primary, once `replica` replicates it and every reachable sentinel sees it up, sees
        `replica` as its linked replica, and knows every other sentinel."""
        primary = await self.primary()
        if primary is replica:
            raise _NotYet(
                f"the sentinels name {replica.port} the primary: they failed over again "
                f"({self._failover_events()})"
            )
        await _replica_linked(replica, primary)
        for sentinel in self._reachable_sentinels():
            state = await sentinel.query("SENTINEL MASTER", self.service_name)
            if state["flags"] != "master" or state["num-other-sentinels"] != len(self.sentinels) - 1:
                raise _NotYet(f"sentinel {sentinel.port} sees the primary as {state}")
            listed = await sentinel.query("SENTINEL SLAVES", self.service_name)
            if not any(
                int(seen["port"]) == replica.port
                and seen["flags"] == "slave"
                and seen["master-link-status"] == "ok"
                for seen in listed
            ):
                raise _NotYet(f"sentinel {sentinel.port} does not see {replica.port} linked: {listed}")
        return primary

    def _failover_events(self) -> str:
        """The last lines in which the sentinels logged a primary down or replaced."""
        events = [
            f"{sentinel.port}: {line.split(' # ', 1)[-1]}"
            for sentinel in self.sentinels
            for line in sentinel.log.read_text().splitlines()[-200:]
            if any(mark in line for mark in FAILOVER_MARKS)
        ]
        return "; ".join(events[-9:])

    def _reachable_sentinels(self) -> list[RedisProcess]:
        return [sentinel for sentinel in self.sentinels if sentinel.reachable]

    def _data_node_on(self, port: int) -> RedisProcess:
        [node] = [node for node in self.data_nodes if node.port == port]
        return node
