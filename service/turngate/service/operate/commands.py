"""The operator commands, on the SDK (`turngate.client`): each reads or stops through one `Client`
and prints what it got (`render`), or protobuf JSON with `--json`."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import TypeVar

from google.protobuf.message import Message
from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from turngate.client import (
    Cancelled,
    Client,
    Idle,
    InvalidRequest,
    Mismatch,
    NotFound,
    ServiceUnavailable,
    StopResult,
    TurngateError,
)
from turngate.service.config import Seconds, describe
from turngate.service.operate import render
from turngate.service.operate.exits import ExitCode
from turngate.v1 import turngate_pb2 as pb

Operation = Callable[[Client, argparse.Namespace], Awaitable[ExitCode]]
T = TypeVar("T")
M = TypeVar("M", bound=Message)
# The largest page the service returns.
MAX_PAGE = 500


class Target(BaseSettings):
    """Where the commands call: flags override `TURNGATE_*` variables, which override these."""

    model_config = SettingsConfigDict(env_prefix="TURNGATE_", extra="forbid", frozen=True)

    target: str = Field("127.0.0.1:50051", min_length=1)
    project: str = "default"
    # Each call's deadline, retries of network blips included.
    timeout: Seconds = Field(5.0, gt=0.0, le=3600.0)


def run(args: argparse.Namespace) -> int:
    """Runs the command `args.operation` parsed; its exit code. Errors are one line on stderr."""
    try:
        given = {name: getattr(args, name) for name in Target.model_fields}
        target = Target(**{name: value for name, value in given.items() if value is not None})
    except ValidationError as error:
        return _fail(describe(error), ExitCode.USAGE)
    logging.basicConfig(level=logging.WARNING, format="turngate: %(message)s")
    try:
        return asyncio.run(_call(args.operation, args, target))
    except (KeyboardInterrupt, asyncio.CancelledError):  # Ctrl-C or SIGTERM (`watch` ends with 0)
        return ExitCode.INTERRUPTED
    except BrokenPipeError:  # `turngate watch --json | head`: the reader is gone
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return ExitCode.OK
    except ServiceUnavailable as error:
        return _fail(f"{target.target} unavailable ({error.code.name}): {error}", ExitCode.FAILURE)
    except InvalidRequest as error:
        return _fail(str(error), ExitCode.USAGE)
    except NotFound as error:
        return _fail(str(error), ExitCode.NOT_FOUND)
    except TurngateError as error:
        return _fail(f"{error.code.name}: {error}", ExitCode.FAILURE)
    except Exception as error:  # a bug: still one line, as promised
        return _fail(f"unexpected {type(error).__name__}: {error}", ExitCode.FAILURE)


def _fail(message: str, code: ExitCode) -> ExitCode:
    print(f"turngate: {message}", file=sys.stderr)
    return code


async def _call(operation: Operation, args: argparse.Namespace, target: Target) -> ExitCode:
    task = asyncio.current_task()
    assert task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    async with Client(
        target.target, target.project, call_timeout=target.timeout, retry_for=target.timeout
    ) as client:
        return await operation(client, args)


def _now() -> datetime:
    return datetime.now(UTC)


def _page(limit: int) -> int:
    return min(limit, MAX_PAGE)


async def _first(items: AsyncIterator[T], limit: int) -> list[T]:
    taken: list[T] = []
    async for item in items:
        taken.append(item)
        if len(taken) == limit:
            break
    return taken


def _print_list(
    args: argparse.Namespace, records: list[M], rows: Callable[[M], render.Fields], empty: str
) -> None:
    """One JSON object a line with --json, else a table (or `empty`)."""
    if args.json:
        for record in records:
            print(render.json_line(record))
    else:
        print("\n".join(render.table([rows(record) for record in records])) if records else empty)


async def status(client: Client, args: argparse.Namespace) -> ExitCode:
    snapshot = await client.get_session(args.session)
    print(render.json_line(snapshot) if args.json else "\n".join(render.status(snapshot, _now())))
    return ExitCode.OK


async def watch(client: Client, args: argparse.Namespace) -> ExitCode:
    # Fails fast when the service cannot be reached at first; then the watch rides out restarts.
    await client.get_session(args.session)
    with contextlib.suppress(asyncio.CancelledError):  # Ctrl-C or SIGTERM: how a watch ends
        async with client.watch(args.session, after_seq=args.after, turn_id=args.turn) as events:
            async for event in events:
                print(render.json_line(event) if args.json else render.event(event), flush=True)
    return ExitCode.OK


async def stop(client: Client, args: argparse.Namespace) -> ExitCode:
    gateway = client.gateway()
    settled: pb.TurnRecord | None = None
    if args.wait is None:
        result = await gateway.stop(
            args.session,
            expected_turn_id=args.expect,
            force=args.force,
            request_id=args.request_id,
            reason=args.reason,
        )
    else:
        request_id = args.request_id or uuid.uuid4().hex
        turn_id = args.expect or (await client.get_session(args.session)).active.turn_id
        if turn_id:
            settled = await gateway.stop_and_wait(
                args.session, turn_id, force_after=args.wait, reason=args.reason, request_id=request_id
            )
        # With the same request id this returns the first answer and changes nothing (when
        # nothing was active, it is the Stop itself).
        result = await gateway.stop(
            args.session, expected_turn_id=turn_id, request_id=request_id, reason=args.reason
        )
    if args.json:
        print(render.json_line(render.stop_message(result)))
        if settled is not None:
            print(render.json_line(settled))
    else:
        print(render.stop_result(result, _now()))
        if settled is not None:
            print(render.settlement(settled))
    return _stop_exit(result)


def _stop_exit(result: StopResult) -> ExitCode:
    match result:
        case Cancelled():
            return ExitCode.OK
        case Mismatch():
            return ExitCode.MISMATCH
        case Idle():
            return ExitCode.IDLE


async def turn_show(client: Client, args: argparse.Namespace) -> ExitCode:
    record = await client.get_turn(args.session, args.turn)
    print(render.json_line(record) if args.json else "\n".join(render.turn_detail(record, _now())))
    return ExitCode.OK


async def turn_list(client: Client, args: argparse.Namespace) -> ExitCode:
    records = await _first(client.list_turns(args.session, page_size=_page(args.limit)), args.limit)
    now = _now()
    _print_list(args, records, lambda record: render.turn(record, now), f"no turns in {args.session}")
    return ExitCode.OK


async def sessions_busy(client: Client, args: argparse.Namespace) -> ExitCode:
    sessions = await _first(client.active_sessions(page_size=_page(args.limit)), args.limit)
    now = _now()
    _print_list(
        args,
        sessions,
        lambda snapshot: render.busy_session(snapshot, now),
        f"no session of project {client.project_id} has an active turn",
    )
    return ExitCode.OK
