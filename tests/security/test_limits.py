"""Every limit: going over it gives the documented status (RESOURCE_EXHAUSTED with ErrorInfo
`limit`, DEADLINE_EXCEEDED for the default deadline) and the service keeps serving others;
keepalive drops a peer that stopped answering."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path

import grpc
import pytest

from tests.security.freezer import Freezer
from tests.support.calls import admit, assert_reason, record_call, record_interaction, refused, stop
from tests.support.principals import ADMIN, GATEWAY_A, PROJECT_A, WATCHER_A, bearer, client_as, write_tokens
from tests.support.servers import Client, client_for, running, settings_for
from tests.support.waiting import eventually
from turngate.service.core import Command, Heartbeat, SessionKey
from turngate.service.server import TurngateServer
from turngate.v1 import turngate_pb2 as pb

LIMITS = {
    "max_watches_per_principal": 3,
    "max_watches_per_session": 2,
    "max_active_sessions_per_project": 2,
    "max_open_tool_calls": 2,
    "max_pending_interactions": 2,
    "rpc_timeout": 0.3,
}


@pytest.fixture(scope="module")
async def limited(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[TurngateServer, Client]]:
    tokens = tmp_path_factory.mktemp("limits-tokens") / "tokens.toml"
    settings = settings_for(str(tmp_path_factory.mktemp("limits")), auth_file=write_tokens(tokens), **LIMITS)
    async for pair in running(settings):
        yield pair


def fresh(project: str = PROJECT_A) -> pb.SessionRef:
    return pb.SessionRef(project_id=project, session_id=f"s-{uuid.uuid4().hex[:12]}")


async def opened(
    client: Client, session: pb.SessionRef
) -> grpc.aio.UnaryStreamCall[pb.WatchSessionRequest, pb.WatchSessionResponse]:
    """A watch whose snapshot arrived (so it holds its place)."""
    stream = client.sessions.WatchSession(pb.WatchSessionRequest(session=session))
    await stream.read()
    return stream


async def over_limit(
    stream: grpc.aio.UnaryStreamCall[pb.WatchSessionRequest, pb.WatchSessionResponse],
) -> str:
    refusal = await refused(stream.read())
    assert_reason(refusal, "LIMIT_EXCEEDED")
    assert refusal.info is not None
    return str(refusal.info.metadata["limit"])


async def test_limit_exceeded_max_message_bytes_and_the_server_keeps_serving(tmp_path: Path) -> None:
    async for server, client in running(settings_for(str(tmp_path))):
        session = fresh("p-big")
        huge = pb.ResolveInteractionRequest(session=session, interaction_id="i1", resolution="x" * 70_000)
        with pytest.raises(grpc.aio.AioRpcError) as over:
            await client.control.ResolveInteraction(huge)
        assert over.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert server.settings.max_message_bytes == 64 * 1024
        await admit(client, session)


async def test_limit_exceeded_watches_per_principal_other_principals_still_watch(
    limited: tuple[TurngateServer, Client],
) -> None:
    server, _ = limited
    async with (
        client_as(server.port, bearer(WATCHER_A)) as watcher,
        client_as(server.port, bearer(GATEWAY_A)) as other,
    ):
        held = [await opened(watcher, fresh()) for _ in range(3)]
        assert await over_limit(watcher.sessions.WatchSession(pb.WatchSessionRequest(session=fresh()))) == (
            "max_watches_per_principal"
        )
        other_stream = await opened(other, fresh())
        held[0].cancel()
        await eventually(lambda: server.hub.watchers < 4)
        held[0] = await opened(watcher, fresh())
        for stream in (*held, other_stream):
            stream.cancel()


async def test_limit_exceeded_watches_per_session_other_sessions_still_watched(
    limited: tuple[TurngateServer, Client],
) -> None:
    server, _ = limited
    session = fresh()
    async with (
        client_as(server.port, bearer(GATEWAY_A)) as one,
        client_as(server.port, bearer(WATCHER_A)) as two,
    ):
        held = [await opened(one, session), await opened(two, session)]
        assert await over_limit(one.sessions.WatchSession(pb.WatchSessionRequest(session=session))) == (
            "max_watches_per_session"
        )
        held.append(await opened(one, fresh()))
        for stream in held:
            stream.cancel()


async def test_limit_exceeded_active_sessions_per_project_yet_stop_is_never_refused(
    limited: tuple[TurngateServer, Client],
) -> None:
    server, _ = limited
    project = f"p-quota-{uuid.uuid4().hex[:6]}"
    async with client_as(server.port, bearer(ADMIN)) as admin:
        first, second, third = fresh(project), fresh(project), fresh(project)
        await admit(admin, first)
        await admit(admin, second)
        refusal = await refused(admit(admin, third))
        assert_reason(refusal, "LIMIT_EXCEEDED", admission=True)
        assert refusal.info is not None
        assert refusal.info.metadata["limit"] == "active_sessions_per_project"
        # The admission of a turn already running is not a new session: it is replayed.
        assert (await admit(admin, first)).replayed
        # Another project is not affected; Stop is never refused, and frees a place.
        await admit(admin, fresh(f"{project}-other"))
        reply = await stop(admin, first, "t1", force=True)
        assert reply.cancelled.settled
        await admit(admin, third)


async def test_limit_exceeded_open_tool_calls_and_pending_interactions_from_the_settings(
    limited: tuple[TurngateServer, Client],
) -> None:
    server, _ = limited
    async with client_as(server.port, bearer(ADMIN)) as admin:
        lease = (await admit(admin, fresh(f"p-{uuid.uuid4().hex[:6]}"))).lease
        for n in range(2):
            await record_call(admin, lease, f"c{n}")
            await record_interaction(admin, lease, f"i{n}")
        calls = await refused(record_call(admin, lease, "c-over"))
        interactions = await refused(record_interaction(admin, lease, "i-over"))
    for refusal, limit in ((calls, "open_tool_calls"), (interactions, "pending_interactions")):
        assert_reason(refusal, "LIMIT_EXCEEDED")
        assert refusal.info is not None
        assert refusal.info.metadata["limit"] == limit


async def test_a_call_without_a_deadline_gets_the_default_deadline_and_others_go_on(
    limited: tuple[TurngateServer, Client],
) -> None:
    server, _ = limited
    release = asyncio.Event()

    async def held(_key: SessionKey, command: Command) -> None:
        if isinstance(command, Heartbeat):
            await release.wait()

    async with client_as(server.port, bearer(ADMIN)) as admin:
        lease = (await admit(admin, fresh(f"p-{uuid.uuid4().hex[:6]}"))).lease
        server.store.before_write = held
        try:
            with pytest.raises(grpc.aio.AioRpcError) as late:
                await admin.admission.Heartbeat(pb.HeartbeatRequest(lease=lease))
            assert late.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED
            assert "no answer within 0.3s" in str(late.value.details())
            await admit(admin, fresh(f"p-{uuid.uuid4().hex[:6]}"))
        finally:
            release.set()
            server.store.before_write = None


def no_watchers(server: TurngateServer) -> bool:
    return server.hub.watchers == 0


async def test_keepalive_drops_a_peer_that_stopped_answering(tmp_path: Path) -> None:
    settings = settings_for(str(tmp_path), keepalive_time=1.0, keepalive_timeout=0.5)
    freezer = Freezer()
    async for server, _ in running(settings):
        async with (
            freezer.serving(server.port) as port,
            grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel,
        ):
            stream = await opened(client_for(channel), fresh("p-keepalive"))
            assert server.hub.watchers == 1
            freezer.freeze()
            await eventually(partial(no_watchers, server))
            stream.cancel()
