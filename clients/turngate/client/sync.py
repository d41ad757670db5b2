"""The SDK for code that is not async: the same surface, run on an event loop in a background
thread.

    from turngate.client.sync import Client

    with Client("127.0.0.1:50051", "my-project") as client:
        with client.runner("runner-1").turn("chat-42", "turn-7") as turn:
            with turn.tool_call("call-1", "search"):
                ...
            if turn.stop_requested.is_set():    # a threading.Event here
                return
        client.gateway().stop("chat-42", expected_turn_id="turn-7")
        for event in client.watch("chat-42"):
            ...

Every class, method and attribute of the async SDK is here with the same name, parameters and
types, made synchronous: coroutines are plain calls, async iterators iterators, async context
managers context managers, asyncio.Events threading.Events (a test holds the two to that).

A turn's context is entered and left by one task on the loop, so its span encloses everything
done through it (tool calls and interactions run in its trace context). An exception escaping a
`with` block is reported as on the async side (FAILED); KeyboardInterrupt and SystemExit are
reported as a cancellation (CANCELLED).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager, asynccontextmanager
from types import TracebackType
from typing import Any, Generic, TypeVar

import grpc

from turngate.client import client as aio
from turngate.client import turn as aio_turn
from turngate.client.admission import OnQueued
from turngate.client.enums import AdmissionMode, QueueAction, SteerFallback, TurnOutcome
from turngate.client.models import (
    Cancelled,
    Event,
    Interaction,
    MovedQueue,
    ProjectSummary,
    ResumedQueue,
    SessionSnapshot,
    SessionSummary,
    SessionToken,
    Steer,
    SteerAcknowledgement,
    SteerInput,
    SteerResult,
    StopResult,
    TurnLease,
    TurnRecord,
)
from turngate.client.retry import DEFAULT_BACKOFF, Backoff
from turngate.client.steers import Steers as AsyncSteers
from turngate.client.telemetry import TracerProvider
from turngate.client.watch import Watch as AsyncWatch

T = TypeVar("T")


class _Loop:
    """An event loop running in a daemon thread; `run` waits for a coroutine run on it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="turngate-client", daemon=True)
        self._thread.start()

    def submit(
        self, coroutine: Coroutine[Any, Any, T], context: contextvars.Context | None = None
    ) -> concurrent.futures.Future[T]:
        """Starts `coroutine` as a task on the loop, in a copy of `context` when given."""
        start = functools.partial(asyncio.run_coroutine_threadsafe, coroutine, self.loop)
        return context.copy().run(start) if context is not None else start()

    def run(self, coroutine: Coroutine[Any, Any, T], context: contextvars.Context | None = None) -> T:
        future = self.submit(coroutine, context)
        try:
            return future.result()
        except BaseException:
            future.cancel()  # e.g. KeyboardInterrupt while waiting: the task ends too
            raise

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


async def _next(items: AsyncIterator[T]) -> T:
    return await anext(items)


def _iterate(loop: _Loop, items: AsyncIterator[T]) -> Iterator[T]:
    while True:
        try:
            yield loop.run(_next(items))
        except StopAsyncIteration:
            return


class _Held(AbstractContextManager[T], Generic[T]):
    """An async context manager entered and left by one task on the loop, from a thread."""

    def __init__(
        self, loop: _Loop, manager: AbstractAsyncContextManager[T], context: contextvars.Context | None = None
    ) -> None:
        self._loop = loop
        self._manager = manager
        self._context = context
        self._entered: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._release: asyncio.Future[BaseException | None] | None = None
        self._held: concurrent.futures.Future[None] | None = None

    def __enter__(self) -> T:
        self._held = self._loop.submit(self._hold(), self._context)
        try:
            return self._entered.result()
        except BaseException:
            self._held.cancel()  # interrupted while entering: leave at once
            raise

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        assert self._held is not None
        assert self._release is not None
        self._loop.loop.call_soon_threadsafe(self._release.set_result, error)
        try:
            self._held.result()
        except BaseException:
            if error is None:
                raise  # leaving failed; otherwise `error` propagates from the with statement

    async def _hold(self) -> None:
        self._release = asyncio.get_running_loop().create_future()
        try:
            async with self._manager as value:
                self._entered.set_result(value)
                error = await self._release
                if isinstance(error, Exception):
                    raise error
                if error is not None:  # KeyboardInterrupt, SystemExit: not for the loop's thread
                    raise asyncio.CancelledError
        except BaseException as error:
            if not self._entered.done():
                self._entered.set_exception(error)
            raise


async def _mirror(source: asyncio.Event, target: threading.Event) -> None:
    await source.wait()
    target.set()


async def _received(steers: AsyncSteers) -> list[Steer]:
    return steers.received()  # on the loop that pushes them


class Steers(Iterator[Steer]):
    """`for steer in turn.steers:`; see `turngate.client.steers.Steers`."""

    def __init__(self, loop: _Loop, steers: AsyncSteers) -> None:
        self._loop = loop
        self._steers = steers

    def __iter__(self) -> Steers:
        return self

    def __next__(self) -> Steer:
        try:
            return self._loop.run(_next(self._steers))
        except StopAsyncIteration:
            raise StopIteration from None

    def received(self) -> list[Steer]:
        return self._loop.run(_received(self._steers))


class Turn:
    """`turngate.client.Turn` for threads: `stop_requested` and `abandoned` are threading.Events."""

    lease: TurnLease
    session_id: str
    turn_id: str
    generation: int
    runner_id: str
    replayed: bool
    waited: float | None
    heartbeat_interval: float
    stop_requested: threading.Event
    abandoned: threading.Event
    steers: Steers
    steer: SteerInput | None

    def __init__(self, loop: _Loop, turn: aio_turn.Turn, context: contextvars.Context) -> None:
        self._loop = loop
        self._turn = turn
        self._context = context
        self.stop_requested = threading.Event()
        self.abandoned = threading.Event()
        self.session_id = turn.session_id
        self.turn_id = turn.turn_id
        self.runner_id = turn.runner_id
        self.generation = turn.generation
        self.lease = turn.lease
        self.replayed = turn.replayed
        self.waited = turn.waited
        self.heartbeat_interval = turn.heartbeat_interval
        self.steers = Steers(loop, turn.steers)
        self.steer = turn.steer

    @property
    def stop_reason(self) -> str:
        return self._turn.stop_reason

    @property
    def outcome(self) -> TurnOutcome | None:
        return self._turn.outcome

    @property
    def settled(self) -> TurnRecord | None:
        return self._turn.settled

    def tool_call(self, call_id: str, name: str) -> AbstractContextManager[None]:
        return _Held(self._loop, self._turn.tool_call(call_id, name), self._context)

    def interaction(self, interaction_id: str, kind: str) -> str:
        return self._loop.run(self._turn.interaction(interaction_id, kind), self._context)

    def acknowledge(self, steer_id: str, *, consumed: bool = True) -> SteerAcknowledgement | None:
        return self._loop.run(self._turn.acknowledge(steer_id, consumed=consumed), self._context)


class Runner:
    runner_id: str

    def __init__(self, loop: _Loop, client: aio.Client, runner_id: str) -> None:
        self._loop = loop
        self._runner = client.runner(runner_id)
        self.runner_id = runner_id

    def turn(
        self,
        session_id: str,
        turn_id: str,
        *,
        lease_ttl: float | None = None,
        mode: AdmissionMode = AdmissionMode.REJECT,
        expected_active_turn_id: str = "",
        max_queue_wait: float | None = None,
        on_queued: OnQueued | None = None,
    ) -> AbstractContextManager[Turn]:
        """`with runner.turn(session_id, turn_id) as turn:`; see `turngate.client.Runner.turn`.
        `on_queued` is called on the SDK's event-loop thread."""
        entered = self._runner.turn(
            session_id,
            turn_id,
            lease_ttl=lease_ttl,
            mode=mode,
            expected_active_turn_id=expected_active_turn_id,
            max_queue_wait=max_queue_wait,
            on_queued=on_queued,
        )
        return _Held(self._loop, self._synced(entered))

    @asynccontextmanager
    async def _synced(self, manager: AbstractAsyncContextManager[aio_turn.Turn]) -> AsyncIterator[Turn]:
        async with manager as turn:
            synced = Turn(self._loop, turn, contextvars.copy_context())
            mirrors = [
                asyncio.create_task(_mirror(turn.stop_requested, synced.stop_requested)),
                asyncio.create_task(_mirror(turn.abandoned, synced.abandoned)),
            ]
            try:
                yield synced
            finally:
                for mirror in mirrors:
                    mirror.cancel()


class Gateway:
    def __init__(self, loop: _Loop, client: aio.Client) -> None:
        self._loop = loop
        self._gateway = client.gateway()

    def stop(
        self,
        session_id: str,
        *,
        expected_turn_id: str = "",
        force: bool = False,
        request_id: str | None = None,
        reason: str = "",
        queue: QueueAction = QueueAction.PAUSE,
    ) -> StopResult:
        return self._loop.run(
            self._gateway.stop(
                session_id,
                expected_turn_id=expected_turn_id,
                force=force,
                request_id=request_id,
                reason=reason,
                queue=queue,
            )
        )

    def resume_queue(self, session_id: str, *, request_id: str | None = None) -> ResumedQueue:
        return self._loop.run(self._gateway.resume_queue(session_id, request_id=request_id))

    def clear_queue(
        self, session_id: str, *, reason: str = "", request_id: str | None = None
    ) -> Cancelled | None:
        return self._loop.run(self._gateway.clear_queue(session_id, reason=reason, request_id=request_id))

    def steer(
        self,
        session_id: str,
        expected_turn_id: str,
        content: str,
        *,
        steer_id: str | None = None,
        content_type: str = "text/plain",
        fallback: SteerFallback = SteerFallback.REJECT,
        requeue_unconsumed: bool = False,
        request_id: str | None = None,
    ) -> SteerResult:
        return self._loop.run(
            self._gateway.steer(
                session_id,
                expected_turn_id,
                content,
                steer_id=steer_id,
                content_type=content_type,
                fallback=fallback,
                requeue_unconsumed=requeue_unconsumed,
                request_id=request_id,
            )
        )

    def move_queued_turn(
        self,
        session_id: str,
        turn_id: str,
        *,
        after: str | None = None,
        expected_queue_version: int | None = None,
        request_id: str | None = None,
    ) -> MovedQueue:
        return self._loop.run(
            self._gateway.move_queued_turn(
                session_id,
                turn_id,
                after=after,
                expected_queue_version=expected_queue_version,
                request_id=request_id,
            )
        )

    def resolve_interaction(
        self, session_id: str, interaction_id: str, resolution: str, *, request_id: str | None = None
    ) -> Interaction:
        return self._loop.run(
            self._gateway.resolve_interaction(session_id, interaction_id, resolution, request_id=request_id)
        )

    def mint_session_token(
        self, session_id: str, *, ttl: float | None = None, allow_stop: bool = False
    ) -> SessionToken:
        return self._loop.run(self._gateway.mint_session_token(session_id, ttl=ttl, allow_stop=allow_stop))

    def stop_and_wait(
        self,
        session_id: str,
        expected_turn_id: str,
        *,
        force_after: float,
        reason: str = "",
        request_id: str | None = None,
        queue: QueueAction = QueueAction.PAUSE,
    ) -> TurnRecord | None:
        return self._loop.run(
            self._gateway.stop_and_wait(
                session_id,
                expected_turn_id,
                force_after=force_after,
                reason=reason,
                request_id=request_id,
                queue=queue,
            )
        )


class Watch(Iterator[Event]):
    """`for event in client.watch(session_id):`; see `turngate.client.Watch`. `close()` it, or
    use it as a context manager, to end the stream."""

    def __init__(self, loop: _Loop, watch: AsyncWatch) -> None:
        self._loop = loop
        self._watch = watch

    @property
    def cursor(self) -> int:
        return self._watch.cursor

    def __iter__(self) -> Watch:
        return self

    def __next__(self) -> Event:
        try:
            return self._loop.run(_next(self._watch))
        except StopAsyncIteration:
            raise StopIteration from None

    def close(self) -> None:
        self._loop.run(self._watch.aclose())

    def __enter__(self) -> Watch:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()


class Client:
    """`turngate.client.Client` for threads; the same options. `with Client(...) as client:`."""

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
        self._loop = _Loop()
        options = aio.ClientOptions(
            token=token,
            credentials=credentials,
            channel_options=channel_options,
            interceptors=interceptors,
            call_timeout=call_timeout,
            retry_for=retry_for,
            backoff=backoff,
            tracer_provider=tracer_provider,
        )

        async def connect() -> aio.Client:
            return aio.Client(target, project_id, **options)

        self._client = self._loop.run(connect())

    @property
    def project_id(self) -> str:
        return self._client.project_id

    def runner(self, runner_id: str) -> Runner:
        return Runner(self._loop, self._client, runner_id)

    def gateway(self) -> Gateway:
        return Gateway(self._loop, self._client)

    def watch(self, session_id: str, *, after_seq: int = 0, turn_id: str = "", epoch: int = 0) -> Watch:
        return Watch(
            self._loop, self._client.watch(session_id, after_seq=after_seq, turn_id=turn_id, epoch=epoch)
        )

    def get_session(self, session_id: str) -> SessionSnapshot:
        return self._loop.run(self._client.get_session(session_id))

    def get_turn(self, session_id: str, turn_id: str) -> TurnRecord:
        return self._loop.run(self._client.get_turn(session_id, turn_id))

    def list_turns(self, session_id: str, *, page_size: int = 50) -> Iterator[TurnRecord]:
        return _iterate(self._loop, self._client.list_turns(session_id, page_size=page_size))

    def active_sessions(self, *, page_size: int = 50) -> Iterator[SessionSnapshot]:
        return _iterate(self._loop, self._client.active_sessions(page_size=page_size))

    def list_sessions(self, *, page_size: int = 50) -> Iterator[SessionSummary]:
        return _iterate(self._loop, self._client.list_sessions(page_size=page_size))

    def list_projects(self, *, page_size: int = 50) -> Iterator[ProjectSummary]:
        return _iterate(self._loop, self._client.list_projects(page_size=page_size))

    def close(self) -> None:
        self._loop.run(self._client.close())
        self._loop.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()
