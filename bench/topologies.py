"""The Redis the run's servers use: the machine's one server (standalone), or a topology the run
starts for itself on free ports: a Redis Cluster (3 masters, each with a replica) or a primary
with a replica watched by 3 sentinels. Each of its processes has a directory of its own (config,
log, nodes.conf) under the run's log folder; nothing is persisted, and the exit stack stops them
(sentinels first), so the run's keys go with them.

The same approach as the tests' tests/support/topologies.py, cut down to starting and stopping:
the bench neither fails nodes nor waits for failovers, and keeps its processes as the bench's
other servers are kept (environment.ServerProcess, on the run's exit stack).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from redis.asyncio import Redis
from redis.exceptions import RedisError

from environment import READY_TIMEOUT_S, ServerProcess, cpu_seconds, free_port, is_free, wait_until

Kind = Literal["standalone", "cluster", "sentinel"]
T = TypeVar("T")
KINDS: tuple[Kind, ...] = ("standalone", "cluster", "sentinel")
HOST = "127.0.0.1"
SERVICE_NAME = "turngate"
CLUSTER_NODES = 6
CLUSTER_SLOTS = 16_384
SENTINELS = 3
# A cluster node also listens on its port + this (the cluster bus), and ports end at 65535.
BUS_PORT_OFFSET = 10_000
# The harness's own queries: a node silent this long is not ready yet.
QUERY_TIMEOUT_S = 1.0
DATA_NODE_SETTINGS = (
    'save ""',
    "appendonly no",
    # A replica's full sync starts at once, not after the default 5 s of waiting for more replicas.
    "repl-diskless-sync-delay 0",
    # A master exits on SIGTERM at once instead of waiting for its replicas to catch up.
    "shutdown-timeout 0",
)


class _NotYet(Exception):
    """What a wait saw instead of the state it waits for."""


@dataclass(frozen=True, slots=True)
class RedisNode:
    """One redis-server (a data node or a sentinel) the run started."""

    process: ServerProcess
    port: int

    @property
    def pid(self) -> int:
        return self.process.process.pid

    def client(self) -> Redis:
        """A client of this process alone (no cluster redirects, no sentinel)."""
        return Redis(
            host=HOST, port=self.port, socket_timeout=QUERY_TIMEOUT_S, socket_connect_timeout=QUERY_TIMEOUT_S
        )

    async def query(self, *command: str) -> Any:
        """Its raw reply to `command` (a multi-word command as separate words: redis-py then
        leaves the reply unparsed)."""
        async with self.client() as client:
            return await client.execute_command(*command)  # type: ignore[no-untyped-call]


@dataclass(frozen=True, slots=True)
class Topology:
    """Where the run's Redis is: the store URL turngate and the floor get, and, for a topology the
    run started, its serving nodes (masters, or the primary) and their replicas."""

    kind: Kind
    url: str
    description: str
    primaries: tuple[RedisNode, ...] = ()
    replicas: tuple[RedisNode, ...] = ()

    @property
    def own(self) -> bool:
        """Started by this run (and thrown away with its keys at the end)."""
        return bool(self.primaries)

    async def check_roles(self) -> None:
        """Raises if a serving node is no longer a master or a replica lost its link (a failover
        during the run: the CPU columns then count the wrong nodes, and calls may have failed)."""
        for node in self.primaries:
            role = await node.query("ROLE")
            if role[0] != b"master":
                raise RuntimeError(f"redis-server {node.port} was a master, now ROLE {role}")
        for node in self.replicas:
            role = await node.query("ROLE")
            if role[0] != b"slave" or role[3] != b"connected":
                raise RuntimeError(f"redis-server {node.port} was a linked replica, now ROLE {role}")

    def facts_node(self) -> RedisNode | None:
        """A data node to ask for the server's version (None: ask the standalone URL's server)."""
        return self.primaries[0] if self.primaries else None


def cpu_of(nodes: Sequence[RedisNode]) -> float:
    """CPU seconds so far of the run's own `nodes`, read from /proc (this run's work alone)."""
    return sum(cpu_seconds(node.pid) for node in nodes)


def standalone(url: str) -> Topology:
    return Topology("standalone", url, f"standalone, the machine's server ({url})")


async def start(stack: AsyncExitStack, kind: Kind, root: Path, standalone_url: str) -> Topology:
    """The topology of `kind`; one the run starts is stopped by `stack`."""
    if kind == "cluster":
        return await start_cluster(stack, root)
    if kind == "sentinel":
        return await start_sentinel(stack, root)
    return standalone(standalone_url)


async def _start_node(
    stack: AsyncExitStack,
    root: Path,
    name: str,
    port: int,
    settings: Sequence[str],
    *,
    sentinel: bool = False,
) -> RedisNode:
    """A redis-server with `settings` in a directory `root/name-port` of its own, once it answers
    PING; the stack stops it."""
    folder = root / f"{name}-{port}"
    folder.mkdir(parents=True)
    config = folder / "redis.conf"  # a sentinel rewrites its config: it must be a file of its own
    config.write_text("\n".join((f"port {port}", f"bind {HOST}", f"dir {folder}", *settings, "")))
    argv = ["redis-server", str(config), *(["--sentinel"] if sentinel else [])]
    process = await ServerProcess.start(f"{name}-{port}", argv, os.environ, folder / "redis.log")
    stack.push_async_callback(process.stop)
    node = RedisNode(process, port)

    async def answers() -> bool:
        process.check_alive()
        try:
            await node.query("PING")
        except (RedisError, OSError):
            return False
        return True

    await wait_until(answers, f"redis-server {port}")
    return node


async def _settled(what: str, check: Callable[[], Awaitable[T]]) -> T:
    """What `check()` returns once it stops raising _NotYet or failing to reach a node; fails after
    READY_TIMEOUT_S with what it saw last."""
    seen: list[BaseException] = []
    results: list[T] = []

    async def passes() -> bool:
        try:
            results.append(await check())
        except (_NotYet, RedisError, OSError) as error:
            seen[:] = [error]
            return False
        return True

    try:
        await wait_until(passes, what)
    except TimeoutError as error:
        raise TimeoutError(f"waited {READY_TIMEOUT_S:.0f} s for {what}; last seen: {seen}") from error
    return results[-1]


async def _linked_replica(replica: RedisNode) -> int:
    """The port of the master `replica` replicates, once the link is up (ROLE)."""
    role = await replica.query("ROLE")
    if role[0] != b"slave" or role[3] != b"connected":
        raise _NotYet(f"redis-server {replica.port} is not a linked replica: ROLE {role}")
    return int(role[2])


# --- Redis Cluster -------------------------------------------------------------------------


def _cluster_ports(count: int, within: range | None) -> list[int]:
    """`count` free ports (of `within`, if given) whose cluster bus ports (port + 10000) are free too."""
    ports: list[int] = []
    while len(ports) < count:
        port = free_port(within)
        bus = port + BUS_PORT_OFFSET
        taken = {*ports, *(p + BUS_PORT_OFFSET for p in ports)}
        if bus <= 65_535 and not {port, bus} & taken and is_free(bus):
            ports.append(port)
    return ports


async def start_private(stack: AsyncExitStack, root: Path, within: range | None = None) -> Topology:
    """A standalone redis-server of the run's own (on a port of `within`, if given): its INFO and
    its memory are this run's alone, unlike the machine's shared server."""
    node = await _start_node(stack, root, "standalone", free_port(within), DATA_NODE_SETTINGS)
    description = f"standalone redis-server started by the run (port {node.port})"
    return Topology("standalone", f"redis://{HOST}:{node.port}/0", description, (node,))


async def start_cluster(stack: AsyncExitStack, root: Path, within: range | None = None) -> Topology:
    """6 nodes (on ports of `within`, if given) made a cluster by `redis-cli --cluster create` (one
    replica per master), once every node says the cluster is ok, every node sees the same slot map,
    and every replica is linked."""
    # The default cluster-node-timeout (15 s): a node starved of CPU for a while on a busy machine is
    # not failed over during the run.
    settings = [*DATA_NODE_SETTINGS, "cluster-enabled yes", "cluster-config-file nodes.conf"]
    node_ports = _cluster_ports(CLUSTER_NODES, within)
    nodes = await asyncio.gather(
        *(_start_node(stack, root, "cluster", port, settings) for port in node_ports)
    )
    argv = ["redis-cli", "--cluster", "create", *(f"{HOST}:{node.port}" for node in nodes)]
    argv += ["--cluster-replicas", "1", "--cluster-yes"]
    cli = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    try:
        async with asyncio.timeout(READY_TIMEOUT_S):
            output, _ = await cli.communicate()
    finally:
        if cli.returncode is None:
            cli.kill()
            await cli.wait()
    if cli.returncode != 0:
        raise RuntimeError(f"redis-cli --cluster create failed:\n{output.decode(errors='replace')}")

    async def settled() -> tuple[list[RedisNode], list[RedisNode]]:
        slot_maps = set()
        for node in nodes:
            info = (await node.query("CLUSTER", "INFO")).decode()
            fields = dict(line.split(":", 1) for line in info.split() if ":" in line)
            if fields.get("cluster_state") != "ok" or fields.get("cluster_slots_ok") != str(CLUSTER_SLOTS):
                raise _NotYet(f"redis-server {node.port}: {fields}")
            if fields.get("cluster_known_nodes") != str(CLUSTER_NODES):
                raise _NotYet(f"redis-server {node.port} knows {fields.get('cluster_known_nodes')} nodes")
            # Masters only: CLUSTER SLOTS leaves a replica out until its replication offset moves
            # (the master's first replication PING, up to 10 s later), which WAIT does not need.
            ranges = await node.query("CLUSTER", "SLOTS")
            slot_maps.add(tuple(sorted((int(r[0]), int(r[1]), int(r[2][1])) for r in ranges)))
        if len(slot_maps) != 1:
            raise _NotYet(f"the nodes see different slot maps: {slot_maps}")
        [slot_map] = slot_maps
        master_ports = {port for _, _, port in slot_map}
        masters = [node for node in nodes if node.port in master_ports]
        replicas = [node for node in nodes if node not in masters]
        if len(masters) != CLUSTER_NODES // 2:
            raise _NotYet(f"{len(masters)} masters serve slots, not {CLUSTER_NODES // 2}")
        replicated = sorted([await _linked_replica(replica) for replica in replicas])
        if replicated != sorted(master_ports):
            raise _NotYet(f"the replicas replicate {replicated}, not each of the masters {master_ports}")
        return masters, replicas

    masters, replicas = await _settled("the new cluster to settle", settled)
    url = "redis+cluster://" + ",".join(f"{HOST}:{node.port}" for node in masters)
    ports = ", ".join(str(node.port) for node in masters)
    description = f"Redis Cluster started by the run: 3 masters ({ports}), each with a replica"
    return Topology("cluster", url, description, tuple(masters), tuple(replicas))


# --- Sentinel ------------------------------------------------------------------------------


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _pairs(reply: Any) -> dict[str, str]:
    """A SENTINEL MASTER reply as a dict of text: redis-py hands it over as a dict, or as the flat
    [name, value, …] list the server sends, depending on its version."""
    if isinstance(reply, dict):
        return {_text(name): _text(value) for name, value in reply.items()}
    words = [_text(item) for item in reply]
    return dict(zip(words[::2], words[1::2], strict=True))


async def start_sentinel(stack: AsyncExitStack, root: Path) -> Topology:
    """A primary and its replica, then 3 sentinels (quorum 2) monitoring SERVICE_NAME, once every
    sentinel sees the primary up, its linked replica and the other sentinels. A primary is called
    down only after the default 30 s of silence: nothing fails over during a run."""
    primary_port, replica_port = free_port(), free_port()
    while replica_port == primary_port:
        replica_port = free_port()
    primary = await _start_node(stack, root, "primary", primary_port, DATA_NODE_SETTINGS)
    replica_settings = [*DATA_NODE_SETTINGS, f"replicaof {HOST} {primary_port}"]
    replica = await _start_node(stack, root, "replica", replica_port, replica_settings)
    # Linked before the sentinels first ask the primary (INFO) for its replicas, so they see it.
    await _settled("the replica to sync", lambda: _linked_replica(replica))
    monitor = [f"sentinel monitor {SERVICE_NAME} {HOST} {primary_port} 2"]
    sentinel_ports: list[int] = []
    while len(sentinel_ports) < SENTINELS:
        if (port := free_port()) not in {primary_port, replica_port, *sentinel_ports}:
            sentinel_ports.append(port)
    sentinels = await asyncio.gather(
        *(_start_node(stack, root, "sentinel", port, monitor, sentinel=True) for port in sentinel_ports)
    )

    async def watched() -> None:
        for sentinel in sentinels:
            state = _pairs(await sentinel.query("SENTINEL", "MASTER", SERVICE_NAME))
            if (
                state["flags"] != "master"
                or int(state["port"]) != primary_port
                or state["num-slaves"] != "1"
                or state["num-other-sentinels"] != str(SENTINELS - 1)
            ):
                raise _NotYet(f"sentinel {sentinel.port} sees {state}")

    await _settled("the sentinels to know the primary, its replica and each other", watched)
    addresses = ",".join(f"{HOST}:{sentinel.port}" for sentinel in sentinels)
    url = f"redis+sentinel://{addresses}/{SERVICE_NAME}"
    description = (
        f"Sentinel, started by the run: primary {primary_port}, replica {replica_port}, "
        f"3 sentinels ({', '.join(map(str, sentinel_ports))})"
    )
    return Topology("sentinel", url, description, (primary,), (replica,))
