"""`Client`: one channel to turngate for one project, and what runners, gateways and watchers
get from it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from types import TracebackType
from typing import Any, TypedDict

import grpc

from turngate.client import reads, telemetry
from turngate.client.connection import Connection, open_channel
from turngate.client.gateway import Gateway
from turngate.client.models import ProjectSummary, SessionSnapshot, SessionSummary, TurnRecord
from turngate.client.retry import DEFAULT_BACKOFF, Backoff
from turngate.client.runner import Runner
from turngate.client.telemetry import TracerProvider
from turngate.client.watch import Watch


class ClientOptions(TypedDict, total=False):
    """`Client`'s keyword options, for wrappers that pass them on (`turngate.client.sync`)."""

    token: str | None
    credentials: grpc.ChannelCredentials | None
    channel_options: Sequence[tuple[str, Any]]
    interceptors: Sequence[grpc.aio.ClientInterceptor]
    call_timeout: float
    retry_for: float
    backoff: Backoff
    tracer_provider: TracerProvider | None


class Client:
    """A connection to turngate at `target` (`host:port`) for the project `project_id`.

    Options: `token` (a bearer token sent on every call, watch streams included), `credentials`
    (TLS, e.g. `tls_credentials(ca=...)`; plaintext when None), `channel_options` (gRPC channel
    arguments), `interceptors` (extra grpc.aio client interceptors, run inside the OpenTelemetry
    client spans), `call_timeout` (seconds each attempt of a call may take), `retry_for` (seconds
    a gateway or read call keeps retrying network blips; a runner's writes retry while its lease
    lasts), `backoff` (delays between retries, `Backoff()` by default), `tracer_provider` (an
    OpenTelemetry TracerProvider, the global one when None; the SDK traces only where
    OpenTelemetry is installed: `pip install 'turngate-client[otel]'`).

    Use it as `async with Client(...) as client:`, or `await client.close()`. Create it inside
    the event loop that uses it.
    """

    def __init__(
        self,
        target: str,
        project_id: str,
        *,
        token: str | None = None,
        credentials: grpc.ChannelCredentials | None = None,
        channel_options: Sequence[tuple[str, Any]] = (),
        interceptors: Sequence[grpc.aio.ClientInterceptor] = (),
        call_timeout: float = 10.0,
        retry_for: float = 30.0,
        backoff: Backoff = DEFAULT_BACKOFF,
        tracer_provider: TracerProvider | None = None,
    ) -> None:
        channel = open_channel(
            target,
            credentials=credentials,
            token=token,
            options=channel_options,
            interceptors=interceptors,
            tracer_provider=tracer_provider,
        )
        self._connection = Connection(
            channel,
            project_id,
            backoff=backoff,
            call_timeout=call_timeout,
            retry_for=retry_for,
            tracer=telemetry.tracer(tracer_provider),
        )

    @property
    def project_id(self) -> str:
        return self._connection.project_id

    def runner(self, runner_id: str) -> Runner:
        return Runner(self._connection, runner_id)

    def gateway(self) -> Gateway:
        return Gateway(self._connection)

    def watch(self, session_id: str, *, after_seq: int = 0, turn_id: str = "", epoch: int = 0) -> Watch:
        """The session's events, reconnecting by itself: see `Watch`."""
        return Watch(self._connection, session_id, after_seq=after_seq, turn_id=turn_id, epoch=epoch)

    async def get_session(self, session_id: str) -> SessionSnapshot:
        """The session's current state (its `seq` is the head)."""
        return await reads.get_session(self._connection, session_id)

    async def get_turn(self, session_id: str, turn_id: str) -> TurnRecord:
        """One turn with its tool calls and interactions (`NotFound` if never admitted)."""
        return await reads.get_turn(self._connection, session_id, turn_id)

    def list_turns(self, session_id: str, *, page_size: int = 50) -> AsyncIterator[TurnRecord]:
        """The session's turns, newest first, fetched a page at a time (without their tool calls
        and interactions: `get_turn` has them)."""
        return reads.list_turns(self._connection, session_id, page_size)

    def active_sessions(self, *, page_size: int = 50) -> AsyncIterator[SessionSnapshot]:
        """The project's sessions with an active turn, earliest deadline first."""
        return reads.active_sessions(self._connection, page_size)

    def list_sessions(self, *, page_size: int = 50) -> AsyncIterator[SessionSummary]:
        """The project's sessions, busy or idle, the most recently active first, fetched a page at a
        time; each with its state as `get_session` shows it."""
        return reads.list_sessions(self._connection, page_size)

    def list_projects(self, *, page_size: int = 50) -> AsyncIterator[ProjectSummary]:
        """The projects this client's token may act on that have sessions, in id order (every
        project's `project_id` may be passed to a `Client` of its own)."""
        return reads.list_projects(self._connection, page_size)

    async def close(self) -> None:
        await self._connection.channel.close()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.close()
