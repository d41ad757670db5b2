"""The topology harness itself: a cluster and a Sentinel deployment settle, serve a client, fail
over when their master or primary fails, and take it back as a replica; however a block ends, no
process is left running. Run with -s to see how long the failovers took."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.support.topologies import CLUSTER_SLOTS, RedisCluster, RedisProcess, RedisSentinel

pytestmark = pytest.mark.redis  # redis-server: the topologies are started here


@pytest.fixture(scope="module")
async def cluster(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RedisCluster]:
    async with RedisCluster.started(tmp_path_factory.mktemp("cluster")) as cluster:
        yield cluster


@pytest.fixture(scope="module")
async def sentinel(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RedisSentinel]:
    async with RedisSentinel.started(tmp_path_factory.mktemp("sentinel")) as sentinel:
        yield sentinel


def report(what: str, since: float) -> None:
    print(f"\n{what}: {time.monotonic() - since:.2f} s")


# --- Redis Cluster -------------------------------------------------------------------------


async def test_the_cluster_is_ok_with_3_masters_and_3_replicas(cluster: RedisCluster) -> None:
    members = await cluster.members()
    masters = {member.node for member in members if member.role == "master"}
    replicas = [member for member in members if member.role == "replica"]
    assert len(masters) == 3
    assert len(replicas) == 3
    assert {replica.master for replica in replicas} == masters
    assert sum(member.slots for member in members) == CLUSTER_SLOTS
    for node in cluster.nodes:
        info = await node.query("CLUSTER INFO")
        assert info["cluster_state"] == "ok"
        assert int(info["cluster_slots_ok"]) == CLUSTER_SLOTS
        assert await node.query("CONFIG GET", "cluster-node-timeout") == {"cluster-node-timeout": "1000"}
    ports = [node.port for node in cluster.nodes[:3]]
    assert cluster.url == "redis+cluster://" + ",".join(f"127.0.0.1:{port}" for port in ports)


async def test_a_key_set_through_the_client_is_on_the_node_master_of_names(cluster: RedisCluster) -> None:
    async with cluster.client() as client:
        await client.set("harness:flushed", "gone")
        await cluster.flushall()
        assert await client.get("harness:flushed") is None
        await client.set("harness:key", "value")
    master = await cluster.master_of("harness:key")
    async with master.client() as direct:
        assert await direct.get("harness:key") == b"value"


async def test_a_frozen_master_is_replaced_by_its_replica_and_comes_back_as_a_replica(
    cluster: RedisCluster,
) -> None:
    async with cluster.client() as client:
        await client.set("harness:frozen", "before")
        old_master = await cluster.master_of("harness:frozen")
        async with old_master.client() as direct:
            assert await direct.wait(1, 5_000) == 1  # its replica has the key too

        frozen_at = time.monotonic()
        cluster.freeze(old_master)
        new_master = await cluster.wait_for_failover(old_master)
        report(f"cluster failover, a master frozen ({cluster.node_timeout_ms} ms node timeout)", frozen_at)
        assert await cluster.master_of("harness:frozen") is new_master
        assert await client.get("harness:frozen") == b"before"

        thawed_at = time.monotonic()
        cluster.thaw(old_master)
        assert await cluster.wait_for_rejoin(old_master) is new_master
        report("cluster rejoin of the thawed old master as a replica", thawed_at)


async def test_a_killed_master_is_replaced_and_restarts_as_a_replica(cluster: RedisCluster) -> None:
    old_master = await cluster.master_of("harness:killed")
    killed_at = time.monotonic()
    await cluster.kill(old_master)
    new_master = await cluster.wait_for_failover(old_master)
    report("cluster failover, a master killed", killed_at)

    restarted_at = time.monotonic()
    await cluster.restart(old_master)
    assert await cluster.wait_for_rejoin(old_master) is new_master
    report("cluster rejoin of the restarted old master as a replica", restarted_at)
    assert len([member for member in await cluster.members() if member.role == "master"]) == 3


# --- Sentinel ------------------------------------------------------------------------------


async def test_the_sentinels_name_the_primary_and_the_client_writes_to_it(sentinel: RedisSentinel) -> None:
    primary = await sentinel.primary()
    replica = await sentinel.replica()
    assert {primary, replica} == set(sentinel.data_nodes)
    async with sentinel.client() as client:
        await client.set("harness:flushed", "gone")
        await sentinel.flushall()
        assert await client.get("harness:flushed") is None
        await client.set("harness:key", "value")
    async with primary.client() as direct:
        assert await direct.get("harness:key") == b"value"
    sentinels = ",".join(f"127.0.0.1:{port}" for _, port in sentinel.sentinel_addresses)
    assert sentinel.url == f"redis+sentinel://{sentinels}/{sentinel.service_name}"


async def test_a_frozen_primary_is_replaced_by_the_replica_and_comes_back_as_a_replica(
    sentinel: RedisSentinel,
) -> None:
    old_primary = await sentinel.primary()
    old_replica = await sentinel.replica()
    async with sentinel.client() as client:
        frozen_at = time.monotonic()
        sentinel.freeze(old_primary)
        assert await sentinel.wait_for_failover(old_primary) is old_replica
        report("sentinel failover, the primary frozen", frozen_at)
        await client.set("harness:frozen", "after")
    async with old_replica.client() as direct:
        assert await direct.get("harness:frozen") == b"after"

    thawed_at = time.monotonic()
    sentinel.thaw(old_primary)
    assert await sentinel.wait_for_rejoin(old_primary) is old_replica
    report("sentinel rejoin of the thawed old primary as a replica", thawed_at)


async def test_a_killed_primary_is_replaced_by_the_replica_the_client_follows(
    sentinel: RedisSentinel,
) -> None:
    old_primary = await sentinel.primary()
    old_replica = await sentinel.replica()
    async with sentinel.client() as client:
        await client.set("harness:killed", "before")
        assert await client.wait(1, 5_000) == 1  # the replica has the key too

        killed_at = time.monotonic()
        await sentinel.kill(old_primary)
        assert await sentinel.wait_for_failover(old_primary) is old_replica
        report("sentinel failover, the primary killed", killed_at)
        assert await client.get("harness:killed") == b"before"
        await client.set("harness:killed", "after")
    async with old_replica.client() as direct:
        assert await direct.get("harness:killed") == b"after"

    restarted_at = time.monotonic()
    await sentinel.restart(old_primary)
    assert await sentinel.wait_for_rejoin(old_primary) is old_replica
    report("sentinel rejoin of the restarted old primary as a replica", restarted_at)
    assert await sentinel.replica() is old_primary


# --- settings and teardown -----------------------------------------------------------------


async def test_a_deployment_runs_with_the_settings_it_was_started_with(tmp_path: Path) -> None:
    started = RedisSentinel.started(
        tmp_path,
        service_name="other",
        down_after_ms=1_500,
        failover_timeout_ms=4_000,
        settings=["appendonly yes"],
    )
    async with started as topology:
        assert topology.url.endswith("/other")
        for node in topology.data_nodes:
            assert await node.query("CONFIG GET", "appendonly") == {"appendonly": "yes"}
        for watcher in topology.sentinels:
            state = await watcher.query("SENTINEL MASTER", "other")
            assert (state["down-after-milliseconds"], state["failover-timeout"]) == (1_500, 4_000)


class BlockFailed(Exception):
    """What a failing test raises inside a topology's block."""


async def test_a_failing_block_stops_every_process_a_frozen_one_too(tmp_path: Path) -> None:
    processes: list[RedisProcess] = []

    async def fail_with_the_primary_frozen() -> None:
        async with RedisSentinel.started(tmp_path) as topology:
            processes.extend(topology.processes)
            topology.freeze(topology.data_nodes[0])
            raise BlockFailed

    with pytest.raises(BlockFailed):
        await fail_with_the_primary_frozen()
    assert [process for process in processes if process.running] == []
