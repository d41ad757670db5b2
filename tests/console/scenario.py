"""Sessions the console's tests set up through the real contract: a turn that joins the queue with
no runner waiting for it, and a session with some history (turns that completed, were
interrupted by a Stop and failed, each with tool calls), a running turn with a call still open
and a question pending, and a queue."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass

import grpc

from tests.console.conftest import PROJECT, RUNNER, ConsoleServer
from tests.support.waiting import cancelled
from turngate.client import Turn
from turngate.v1 import turngate_pb2 as pb
from turngate.v1 import turngate_pb2_grpc as pb_grpc

# How long each scripted call takes: only so that the waterfalls have shapes to show.
STEP_S = 0.15


async def enqueue(server: ConsoleServer, session_id: str, turn_id: str, runner_id: str = "r2") -> None:
    """`turn_id` joins the session's queue: AdmitTurn ENQUEUE, with no runner waiting for it."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        answer = await pb_grpc.AdmissionServiceStub(channel).AdmitTurn(
            pb.AdmitTurnRequest(
                session=pb.SessionRef(project_id=PROJECT, session_id=session_id),
                turn_id=turn_id,
                runner_id=runner_id,
                mode=pb.ADMISSION_MODE_ENQUEUE,
            ),
            metadata=(("authorization", f"Bearer {RUNNER.token}"),),
        )
    assert answer.HasField("queued"), answer


async def call(turn: Turn, call_id: str, name: str, steps: int = 1) -> None:
    async with turn.tool_call(call_id, name):
        await asyncio.sleep(steps * STEP_S)


async def _held_open(turn: Turn, call_id: str, name: str, opened: asyncio.Event) -> None:
    """A tool call that stays open until its task is cancelled."""
    async with turn.tool_call(call_id, name):
        opened.set()
        await asyncio.Event().wait()


@asynccontextmanager
async def open_call(turn: Turn, call_id: str, name: str) -> AsyncIterator[None]:
    """`call_id` is OPEN inside the block; cancelled after it, the turn's settlement closes it
    INTERRUPTED."""
    opened = asyncio.Event()
    task = asyncio.create_task(_held_open(turn, call_id, name, opened))
    await opened.wait()
    try:
        yield
    finally:
        await cancelled(task)


@dataclass(frozen=True)
class BusySession:
    session_id: str
    running: Turn
    queued: tuple[str, ...]


async def _history(server: ConsoleServer, session_id: str) -> None:
    """turn-1 COMPLETED, turn-2 CANCELLED by a Stop with a call INTERRUPTED, turn-3 FAILED."""
    async with server.runner_client() as sdk, server.gateway_client() as gateway:
        runner = sdk.runner("agent-7")
        async with runner.turn(session_id, "turn-1") as turn:
            await call(turn, "c1", "read_file")
            await call(turn, "c2", "search_web", steps=3)
            await call(turn, "c3", "write_file")
        async with runner.turn(session_id, "turn-2") as turn:
            await call(turn, "c1", "read_file")
            async with open_call(turn, "c2", "run_tests"):
                await asyncio.sleep(2 * STEP_S)
                await gateway.gateway().stop(session_id, expected_turn_id="turn-2", reason="wrong branch")
                await turn.stop_requested.wait()
        with suppress(RuntimeError):
            async with runner.turn(session_id, "turn-3") as turn:
                await call(turn, "c1", "read_file")
                async with turn.tool_call("c2", "apply_patch"):
                    await asyncio.sleep(STEP_S)
                    raise RuntimeError("patch does not apply: src/app.py changed")


@asynccontextmanager
async def busy_session(server: ConsoleServer, session_id: str) -> AsyncIterator[BusySession]:
    """A session with its history, while turn-4 runs: two calls done, run_tests open, an
    approval pending; turn-5 and turn-6 wait in its queue."""
    await _history(server, session_id)
    async with server.runner_client() as sdk, sdk.runner("agent-7").turn(session_id, "turn-4") as turn:
        await call(turn, "c1", "read_file")
        await call(turn, "c2", "search_web", steps=2)
        asking = asyncio.create_task(turn.interaction("ask-1", "approval"))
        async with open_call(turn, "c3", "run_tests"):
            for turn_id in ("turn-5", "turn-6"):
                await enqueue(server, session_id, turn_id)
            try:
                yield BusySession(session_id, turn, ("turn-5", "turn-6"))
            finally:
                asking.cancel()
                with suppress(asyncio.CancelledError, Exception):
                    await asking


async def watched_events(server: ConsoleServer, busy: BusySession) -> None:
    """What a page watching the busy session sees arrive: a steer the running turn takes, and a
    call."""
    async with server.gateway_client() as gateway:
        steer = gateway.gateway().steer
        await steer(busy.session_id, "turn-4", "also update the changelog", steer_id="steer-1")
    await busy.running.acknowledge("steer-1")
    await call(busy.running, "c4", "edit_file")
