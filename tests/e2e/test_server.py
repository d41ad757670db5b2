"""The server around the services: health follows the store, reflection serves the contract,
SIGTERM drains gracefully, and an internal error reaches the client as INTERNAL, never a traceback.
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from google.protobuf import descriptor_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from grpc_status import rpc_status
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from tests.support.calls import admit, complete, snapshot, stop
from tests.support.collector import Collector, collecting
from tests.support.processes import (
    SERVICES,
    SERVING,
    database,
    spawn_server,
    sqlite_file,
    wait_for_health,
    write_locked,
)
from tests.support.servers import Client, OwnServer
from tests.support.waiting import eventually
from tests.support.watching import collect, ended, watch
from turngate.service.core import SessionKey
from turngate.service.ports.store import StoreUnavailable
from turngate.service.server import TurngateServer
from turngate.service.store.redis.store import RedisStore
from turngate.v1 import turngate_pb2 as pb

NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
# A session document the service cannot read: a bug's worth of unexpected exception.
UNREADABLE_DOCUMENT = '{"next_seq": "not a number"}'


async def write_unreadable_document(server: TurngateServer, session: pb.SessionRef) -> None:
    """Overwrites `session`'s document in the server's store, behind the service's back."""
    store = server.store
    if isinstance(store, RedisStore):
        key = SessionKey(session.project_id, session.session_id)
        # At a new version, as any writer's: the store keeps the documents of versions it wrote.
        await store.client.hset(store.keys.doc(key), "doc", UNREADABLE_DOCUMENT)
        await store.client.hincrby(store.keys.doc(key), "v", 1)
        return
    with sqlite_file(Path(server.settings.store.removeprefix("sqlite+aiosqlite:///"))) as db:
        db.execute(
            "UPDATE sessions SET doc = ? WHERE project_id = ? AND session_id = ?",
            (UNREADABLE_DOCUMENT, session.project_id, session.session_id),
        )


async def test_health_is_serving_for_the_server_and_each_service_while_the_store_answers(
    client: Client,
) -> None:
    health = health_pb2_grpc.HealthStub(client.channel)
    for service in ("", *SERVICES):
        await wait_for_health(health, SERVING, service)


async def test_health_lists_the_server_each_service_and_liveness(client: Client) -> None:
    health = health_pb2_grpc.HealthStub(client.channel)
    await wait_for_health(health, SERVING)
    listed = await health.List(health_pb2.HealthListRequest())
    assert {name: reply.status for name, reply in listed.statuses.items()} == {
        name: SERVING for name in ("", *SERVICES, "liveness")
    }


async def test_health_is_not_serving_while_the_store_does_not_answer(
    own_server: OwnServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def down() -> None:
        raise StoreUnavailable("the test took the store away")

    async with own_server() as (server, client):
        health = health_pb2_grpc.HealthStub(client.channel)
        await wait_for_health(health, SERVING)
        monkeypatch.setattr(server.store, "ping", down)
        for service in ("", *SERVICES):
            await wait_for_health(health, NOT_SERVING, service)
        monkeypatch.undo()
        for service in ("", *SERVICES):
            await wait_for_health(health, SERVING, service)


async def test_reflection_lists_the_three_services_and_serves_their_contract(client: Client) -> None:
    reflect = reflection_pb2_grpc.ServerReflectionStub(client.channel)
    call = reflect.ServerReflectionInfo()
    await call.write(reflection_pb2.ServerReflectionRequest(list_services=""))
    await call.write(reflection_pb2.ServerReflectionRequest(file_containing_symbol=SERVICES[0]))
    await call.done_writing()
    listed, files = [response async for response in call]

    names = {s.name for s in listed.list_services_response.service}
    assert set(SERVICES) <= names
    contract = descriptor_pb2.FileDescriptorProto.FromString(
        files.file_descriptor_response.file_descriptor_proto[0]
    )
    assert contract.name == "turngate/v1/turngate.proto"
    assert {f"{contract.package}.{s.name}" for s in contract.service} == set(SERVICES)


def exported(collector: Collector, name: str) -> list[dict[str, object]]:
    """The attributes of each span called `name` the collector has received."""
    return [
        {a.key: _value(a.value) for a in span.attributes}
        for request in collector.traces
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
        if span.name == name
    ]


def _value(value: AnyValue) -> object:
    kind = value.WhichOneof("value")
    return None if kind is None else getattr(value, kind)


def decided_to_write(collector: Collector, command: str) -> bool:
    """Whether the server has exported the `turngate.decide` span of a `command` that changed
    something: that span ends between the store's read and its write (store/cas.py)."""
    return any(
        attributes.get("turngate.command") == command and attributes.get("turngate.changed") is True
        for attributes in exported(collector, "turngate.decide")
    )


# How long a probe of a draining server waits for its answer: it refuses a new call at once.
PROBE_S = 0.5


async def test_sigterm_finishes_the_call_in_flight_refuses_new_ones_ends_watches_and_exits_0(
    tmp_path: Path, session: pb.SessionRef
) -> None:
    # The server exports its spans (at once) so the test sees when the admission is in flight.
    async with collecting() as collector:
        env = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{collector.port}",
            "OTEL_BSP_SCHEDULE_DELAY": "10",
            "OTEL_METRICS_EXPORTER": "none",
        }
        async with spawn_server(tmp_path, env=env) as served:
            client = served.client
            stream = watch(client, session)
            await collect(stream, 1)
            with write_locked(database(tmp_path)):
                in_flight = asyncio.create_task(admit(client, session, "t1"))
                # It reached the server, which decided and now waits for the store's write lock.
                await eventually(lambda: decided_to_write(collector, "Admit"))
                assert not in_flight.done()
                served.terminate()

                async def refused() -> bool:
                    # A call that reaches the server as it stops accepting may never be started: it
                    # waits for the end of the grace, then ends CANCELLED (grpc issue 41785,
                    # docs/deploying.md). Each probe gives up in time for the next to be sent.
                    try:
                        await snapshot(client, session, within_s=PROBE_S)
                    except grpc.aio.AioRpcError as error:
                        return error.code() == grpc.StatusCode.UNAVAILABLE
                    return False

                await eventually(refused)
                delivered, error = await ended(stream)
                assert delivered == []
                assert error.code() == grpc.StatusCode.UNAVAILABLE
            admitted = await in_flight
            assert admitted.lease.turn_id == "t1"
            assert admitted.lease.generation > 0
            assert await served.exit_code() == 0


async def test_internal_error_reaches_the_client_as_internal_without_a_traceback(
    server: TurngateServer, client: Client, session: pb.SessionRef, caplog: pytest.LogCaptureFixture
) -> None:
    await complete(client, (await admit(client, session, "t1")).lease)
    await write_unreadable_document(server, session)

    failures: list[grpc.aio.AioRpcError] = []
    with caplog.at_level(logging.ERROR, logger="turngate.api"):
        for call in (snapshot(client, session), admit(client, session, "t2"), stop(client, session)):
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await call
            failures.append(caught.value)
        failures.append((await ended(watch(client, session)))[1])

    for failure in failures:
        assert failure.code() == grpc.StatusCode.INTERNAL
        assert "nothing was changed" not in (failure.details() or ""), "it promises nothing it does not know"
        status = rpc_status.from_call(failure)
        assert status is not None
        assert list(status.details) == []
        shown = f"{failure.details()} {failure.trailing_metadata()} {failure.debug_error_string()}"
        for leak in ("Traceback", "File ", "not a number", "ValidationError", "next_seq"):
            assert leak not in shown
    assert len([r for r in caplog.records if r.exc_info]) == len(failures)


# What a process imports only for what it uses: Redis's client for a Redis store, the HTTP stack for
# an HTTP or metrics listener (docs/decisions.md, "The cost of a start").
FOR_REDIS_OR_HTTP = ("redis", "hypercorn", "connectrpc", "starlette")


@pytest.mark.parametrize(
    ("listeners", "imported"),
    [
        ({}, []),
        (
            {"http_listen": "127.0.0.1:0", "metrics_listen": "127.0.0.1:0"},
            ["connectrpc", "hypercorn", "starlette"],
        ),
    ],
    ids=["grpc-only", "with-http-and-metrics"],
)
def test_a_server_on_the_embedded_store_imports_redis_and_the_http_stack_only_for_what_it_serves(
    tmp_path: Path, listeners: dict[str, str], imported: list[str]
) -> None:
    store = f"sqlite+aiosqlite:///{tmp_path}/turngate.db"
    program = f"""
import asyncio, sys
from prometheus_client import CollectorRegistry
from turngate.service.config import Settings
from turngate.service.server import TurngateServer, metrics_served

async def main() -> None:
    settings = Settings(listen="127.0.0.1:0", store={store!r}, **{listeners!r})
    async with TurngateServer(settings), metrics_served(settings, CollectorRegistry()):
        pass

asyncio.run(main())
print(sorted({{name.partition(".")[0] for name in sys.modules}} & set({FOR_REDIS_OR_HTTP!r})))
"""
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(imported)
