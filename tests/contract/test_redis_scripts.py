"""The Redis store's scripts on a node that lacks them, where redis-py's reload of a script went
elsewhere: on a Redis Cluster it loads a script where its map of the nodes says, which lags a
failover, so a master promoted meanwhile can lack the script still (a projector's acknowledgement
once failed NoScriptError so, in a failover test). Every script but the compare-and-set (which
loads it on its own connection) then runs by its text (store/redis/script.py, `evaluated`)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from redis import exceptions as redis_errors

from tests.support.commands import KEY, admit
from tests.support.shared_redis import REDIS_TIMEOUT_S
from tests.support.stores import open_redis_store
from tests.support.topologies import RedisCluster
from turngate.service.ports.outbox import Position
from turngate.service.store.redis.connection import connect
from turngate.service.store.redis.keys import Keyspace
from turngate.service.store.redis.outbox import RedisOutbox
from turngate.service.store.redis.script import UNRECORDED

pytestmark = pytest.mark.redis


async def test_a_script_the_serving_node_lacks_runs_by_its_text_when_reloading_it_goes_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with RedisCluster.started(tmp_path) as cluster:
        keys = Keyspace("noscript", 8)
        store = open_redis_store(cluster.url, keys)
        outbox_client = connect(cluster.url, REDIS_TIMEOUT_S)
        outbox = RedisOutbox(outbox_client, keys, consumer="projector")
        try:
            await admit(store, KEY, "t1")
            await outbox.create_groups()
            for node in cluster.processes:
                async with node.client() as node_client:
                    await node_client.script_flush()

            async def loaded_elsewhere(script: str | bytes) -> str:
                """The reload reaches nodes other than the one serving the key: none, here."""
                return hashlib.sha1(script.encode() if isinstance(script, str) else script).hexdigest()

            for client in (store.client, outbox_client):
                monkeypatch.setattr(client, "script_load", loaded_elsewhere)
            with pytest.raises(redis_errors.NoScriptError):
                await store.client.register_script(UNRECORDED)(keys=[keys.doc(KEY), keys.log(KEY)])

            assert [event.seq for event in (await store.unrecorded(KEY)).events] == [1]
            await store.ping()
            await outbox.acknowledge([], [(keys.bucket(KEY), b"0-1")])
            assert await outbox.dead_letter_events(KEY, Position(1, 1), "a test's letter", None)
        finally:
            await outbox.close()
            await store.close()
