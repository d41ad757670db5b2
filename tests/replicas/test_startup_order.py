"""Start-up order never matters: whichever process kind starts first on an empty PostgreSQL
ledger, and whichever follow, every process that may migrate the ledger does, a replica that may
not says NOT_SERVING naming the ledger it waits for until another has, a replica that says SERVING
answers GetTurn and ListTurns, and no replica ever answers them INTERNAL."""

from __future__ import annotations

from collections.abc import Awaitable
from contextlib import AsyncExitStack
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from redis.asyncio import Redis

from tests.support.calls import admit, get_turn
from tests.support.postgres import postgres_url
from tests.support.processes import (
    PROCESS_TIMEOUT_S,
    SERVING,
    Spawned,
    free_port,
    health_of,
    run_cli,
    serve_log,
    spawn_server,
)
from tests.support.replicas import Deployment, assert_no_tracebacks, new_session
from tests.support.servers import Client
from tests.support.shared_redis import REDIS_SERVER, delete_prefix, unique_prefix
from tests.support.waiting import eventually
from turngate.v1 import turngate_pb2 as pb

pytestmark = [pytest.mark.redis, pytest.mark.postgres]

NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
# Each process kind: the `turngate` command and its flags.
KINDS: dict[str, tuple[str, ...]] = {
    "serve": ("serve",),
    "serve --no-projector": ("serve", "--no-projector"),
    "serve --no-migrate": ("serve", "--no-migrate"),
    "project": ("project",),
}


def waiting_for(url: str) -> str:
    """What a process that may not migrate logs while it waits for the database at `url`."""
    return f"ledger not migrated yet: waiting for another process to migrate {url}"


async def code_of(call: Awaitable[object]) -> grpc.StatusCode:
    try:
        await call
    except grpc.aio.AioRpcError as error:
        return error.code()
    return grpc.StatusCode.OK


async def health(client: Client) -> int | None:
    return await health_of(health_pb2_grpc.HealthStub(client.channel))


async def reads(client: Client, session: pb.SessionRef) -> tuple[grpc.StatusCode, grpc.StatusCode]:
    """How GetTurn of the session's turn-1 and ListTurns of the session answer."""
    got = await code_of(get_turn(client, session, "turn-1"))
    listed = await code_of(client.sessions.ListTurns(pb.ListTurnsRequest(session=session)))
    return got, listed


async def assert_reads_answer(client: Client) -> None:
    """A turn admitted through `client`'s replica (coordination needs no ledger), then read back:
    GetTurn and ListTurns never answer INTERNAL, and both answer while the replica says SERVING
    (it said so before the reads, and a migrated ledger stays migrated)."""
    session = new_session()
    await admit(client, session, "turn-1")
    serving = await health(client) == SERVING
    answers = await reads(client, session)
    assert grpc.StatusCode.INTERNAL not in answers, answers
    if serving:
        assert answers == (grpc.StatusCode.OK, grpc.StatusCode.OK)


def holds(log: Path, text: str) -> bool:
    return log.exists() and text in log.read_text()


async def logged(log: Path, text: str) -> None:
    """Waits until `log` holds `text`."""

    async def written() -> bool:
        return holds(log, text)

    await eventually(written, timeout_s=PROCESS_TIMEOUT_S)


async def serving(client: Client) -> None:
    async def says_so() -> bool:
        return bool(await health(client) == SERVING)

    await eventually(says_so, timeout_s=PROCESS_TIMEOUT_S)


@pytest.mark.parametrize("first", KINDS)
async def test_whichever_process_kind_starts_first_serving_replicas_answer_reads_and_none_internal(
    first: str, tmp_path: Path, ledger_database: str
) -> None:
    deployment = Deployment(REDIS_SERVER, unique_prefix(), postgres_url(ledger_database))
    migrated = False
    replicas: list[Spawned] = []
    try:
        async with AsyncExitStack() as stack:
            # Each kind starts once the one before it is settled: serving, projecting, or (a
            # replica that may not migrate, before any other did) saying what it waits for.
            for kind in [first, *(kind for kind in KINDS if kind != first)]:
                command, *flags = KINDS[kind]
                if command == "project":
                    log = tmp_path / "project.log"
                    await stack.enter_async_context(deployment.projector(tmp_path, log))
                    await logged(log, "ledger schema is this release's")
                elif "--no-migrate" in flags and not migrated:
                    port = free_port()
                    replica = await stack.enter_async_context(
                        deployment.replica(tmp_path, *flags, port=port, serving=False)
                    )
                    await logged(serve_log(tmp_path, port), waiting_for(deployment.ledger_url))
                    assert await health(replica.client) == NOT_SERVING
                    replicas.append(replica)
                else:
                    replicas.append(await stack.enter_async_context(deployment.replica(tmp_path, *flags)))
                migrated = migrated or "--no-migrate" not in flags
                for replica in replicas:
                    await assert_reads_answer(replica.client)
            for replica in replicas:
                await serving(replica.client)
                await assert_reads_answer(replica.client)
        assert_no_tracebacks(tmp_path)
    finally:
        async with Redis.from_url(REDIS_SERVER) as redis:
            await delete_prefix(redis, deployment.prefix)


async def test_a_sql_replica_told_not_to_migrate_says_not_serving_naming_its_database_until_it_is_migrated(
    tmp_path: Path, ledger_database: str
) -> None:
    url = postgres_url(ledger_database)
    port = free_port()
    async with spawn_server(tmp_path, "--store", url, "--no-migrate", port=port, serving=False) as replica:
        await logged(serve_log(tmp_path, port), waiting_for(url))
        assert await health(replica.client) == NOT_SERVING
        answers = await reads(replica.client, new_session())
        assert answers == (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNAVAILABLE)

        migrating = run_cli(tmp_path, "migrate", "--store", url)
        assert migrating.returncode == 0, migrating.stderr
        await serving(replica.client)
        await assert_reads_answer(replica.client)
    assert_no_tracebacks(tmp_path)
