"""Many sessions fast: sessions made through the store (templates) written again under other
sessions' names by a script that makes the store's own writes (cas.lua's XADD of each event, its
HSET of the document; the projector's HSET of what it recorded), many sessions a round trip.

A copy is what the store would have written for a session with the same commands and ids of the
same length: the same document and log, grown event by event as the store grows them (a copy by
DUMP and RESTORE is not: RESTORE allocates a stream's nodes to size, a third smaller than the
store's, so it would understate what Redis holds). A capacity run checks it (MEMORY USAGE of a copy
against its template). Copies never touch the per-bucket keys: an idle session is in no deadline
set, and its outbox entries are gone once projected.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from turngate.service.core import SessionKey
from turngate.service.store.redis.connection import Client
from turngate.service.store.redis.keys import Keyspace, LogEntries

# KEYS: 1 doc hash, 2 log stream. ARGV: 1 version, 2 document, 3 seq recorded by the ledger ('' for
# none), 4 epoch, then a triple per event: seq, time, body. The same calls, in the same order, as
# cas.lua's commits and the projector's acknowledgement (outbox_ack.lua) make.
REPLAY = """
for i = 5, #ARGV, 3 do
  redis.call('XADD', KEYS[2], ARGV[i] .. '-0', 't', ARGV[i + 1], 'e', ARGV[i + 2], 'epoch', ARGV[4])
end
redis.call('HSET', KEYS[1], 'v', ARGV[1], 'doc', ARGV[2])
if ARGV[3] ~= '' then
  redis.call('HSET', KEYS[1], 'ledger', ARGV[3])
end
"""
# Sessions per pipeline.
BATCH = 500


@dataclass(frozen=True, slots=True)
class Template:
    """A session's document hash and log, as the arguments REPLAY takes."""

    args: tuple[bytes, ...]


async def read_template(client: Client, keys: Keyspace, key: SessionKey) -> Template:
    fields = cast(dict[bytes, bytes], await client.hgetall(keys.doc(key)))
    entries = cast(LogEntries, await client.xrange(keys.log(key)))
    if not fields or not entries:
        raise LookupError(f"{key} has no document or no log to copy")
    epoch = entries[0][1][b"epoch"]
    args = [fields[b"v"], fields[b"doc"], fields.get(b"ledger", b""), epoch]
    for entry_id, event in entries:
        args += [entry_id.split(b"-", 1)[0], event[b"t"], event[b"e"]]
    return Template(tuple(args))


async def write_copies(
    client: Client, keys: Keyspace, templates: Sequence[Template], names: Sequence[SessionKey]
) -> None:
    """Each of `names` becomes a copy of a template (round robin), BATCH sessions a round trip; on a
    cluster, each master is sent its own sessions (a cluster pipeline refuses scripts)."""
    pairs = list(zip(names, itertools.cycle(templates), strict=False))
    if not isinstance(client, RedisCluster):
        await _write(client, keys, pairs)
        return
    await client.initialize()
    by_master: defaultdict[tuple[str, int], list[tuple[SessionKey, Template]]] = defaultdict(list)
    for key, template in pairs:
        node = client.get_node_from_key(keys.doc(key))
        assert node is not None, f"no master serves {key}"
        by_master[node.host, int(node.port)].append((key, template))
    for (host, port), own in by_master.items():
        async with Redis(host=host, port=port) as master:
            await _write(master, keys, own)


async def _write(server: Redis, keys: Keyspace, pairs: Sequence[tuple[SessionKey, Template]]) -> None:
    """REPLAY on one server (or a Sentinel's primary) for each pair, BATCH a pipeline."""
    sha = await server.script_load(REPLAY)
    for start in range(0, len(pairs), BATCH):
        async with server.pipeline(transaction=False) as pipe:
            for key, template in pairs[start : start + BATCH]:
                pipe.evalsha(sha, 2, keys.doc(key), keys.log(key), *template.args)
            await pipe.execute()
