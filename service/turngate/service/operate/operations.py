"""The operator commands, on the SDK (`turngate.client`): each reads or stops through one `Client`
and prints what it got (`render`), or, with `--json`, protobuf's JSON mapping of the contract's
message the SDK's value was built from."""

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
from pathlib import Path
from typing import TypeVar, assert_never

from pydantic import Field, SecretStr, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from turngate.client import (
    Cancelled,
    Client,
    ClientOptions,
    Idle,
    InvalidRequest,
    Mismatch,
    NotAuthenticated,
    NotFound,
    PermissionDenied,
    ProjectSummary,
    QueueAction,
    QueueVersionMismatch,
    ServiceUnavailable,
    SessionSnapshot,
    SessionSummary,
    Steered,
    SteerFallback,
    SteerMismatch,
    SteerQueued,
    SteerResult,
    StopResult,
    TurngateError,
    TurnNotQueued,
    TurnRecord,
    WriteOutcomeUnknown,
    tls_credentials,
)
from turngate.client.auth import check_token
from turngate.client.defaults import DEFAULT_PROJECT, DEFAULT_TARGET
from turngate.service.config import HostPort, Seconds, local_target
from turngate.service.config_help import describe
from turngate.service.operate import probe, render
from turngate.service.operate.exits import ExitCode

Operation = Callable[[Client, argparse.Namespace], Awaitable[ExitCode]]
T = TypeVar("T")
R = TypeVar("R", TurnRecord, SessionSnapshot, SessionSummary, ProjectSummary)
# The largest page the service returns.
MAX_PAGE = 500


class Target(BaseSettings):
    """Where the commands call, and as whom: flags override `TURNGATE_*` variables, which
    override these. The client certificate's variables are TURNGATE_CLIENT_CERT and
    TURNGATE_CLIENT_KEY (flags --tls-cert, --tls-key): TURNGATE_TLS_CERT and TURNGATE_TLS_KEY
    are the server's own, for `serve`."""

    model_config = SettingsConfigDict(env_prefix="TURNGATE_", extra="forbid", frozen=True)

    # The SDK's defaults, which the examples share (TURNGATE_TARGET, TURNGATE_PROJECT).
    target: str = Field(DEFAULT_TARGET, min_length=1)
    # The server's own listen address (`serve`): `health` probes it when no target is given.
    listen: HostPort | None = None
    project: str = DEFAULT_PROJECT
    # Each call's deadline, retries of network blips included.
    timeout: Seconds = Field(5.0, gt=0.0, le=3600.0)
    # The bearer token, or the file holding it (which keeps it out of the process list).
    token: SecretStr | None = None
    token_file: Path | None = None
    # TLS: the CA that signed the service's certificate; a client certificate for mutual TLS.
    tls_ca: Path | None = None
    client_cert: Path | None = None
    client_key: Path | None = None

    def health_target(self) -> str:
        """Where `health` calls: the target if one was given (flag or TURNGATE_TARGET), else the
        server's own listen address (TURNGATE_LISTEN) reached from this host, else the default."""
        if "target" in self.model_fields_set or self.listen is None:
            return self.target
        return local_target(self.listen)

    def client_options(self) -> ClientOptions:
        """The SDK client's options: deadlines, the token (read from its file) and TLS (its files
        read). ValueError or OSError saying what is wrong, never showing the token."""
        if self.token is not None and self.token_file is not None:
            raise ValueError("give --token or --token-file (TURNGATE_TOKEN or TURNGATE_TOKEN_FILE), not both")
        if (self.client_cert is None) != (self.client_key is None):
            raise ValueError("a client certificate needs both --tls-cert and --tls-key")
        token = self.token.get_secret_value() if self.token is not None else None
        if self.token_file is not None:
            token = self.token_file.read_bytes().decode(errors="replace").strip()
        if token is not None:
            try:
                check_token(token)
            except ValueError as error:
                where = f" in {self.token_file}" if self.token_file is not None else ""
                raise ValueError(f"the token{where} is not usable: {error}") from None
        tls = self.tls_ca is not None or self.client_cert is not None
        return ClientOptions(
            token=token,
            credentials=tls_credentials(self.tls_ca, cert=self.client_cert, key=self.client_key)
            if tls
            else None,
            call_timeout=self.timeout,
            retry_for=self.timeout,
        )


# Target's settings given by flag, and the flag (the rest only by their variable).
FLAGS = {
    "target": "--target",
    "project": "--project",
    "timeout": "--timeout",
    "token": "--token",
    "token_file": "--token-file",
    "tls_ca": "--tls-ca",
    "client_cert": "--tls-cert",
    "client_key": "--tls-key",
}


def _target(args: argparse.Namespace) -> Target:
    given = {name: value for name in Target.model_fields if (value := getattr(args, name, None)) is not None}
    if "token" in given or "token_file" in given:  # a flag overrides either variable
        given = {"token": None, "token_file": None, **given}
    return Target(**given)


def run(args: argparse.Namespace) -> int:
    """Runs the command `args.operation` parsed; its exit code. Errors are one line on stderr."""
    try:
        target = _target(args)
        options = target.client_options()
    except ValidationError as error:
        return _fail(describe(error, flags=FLAGS), ExitCode.USAGE)
    except OSError as error:
        return _fail(f"cannot read {error.filename}: {error.strerror}", ExitCode.USAGE)
    except ValueError as error:
        return _fail(str(error), ExitCode.USAGE)
    logging.basicConfig(level=logging.WARNING, format="turngate: %(message)s")
    if args.command == "health":
        return asyncio.run(probe.check(target.health_target(), options, args.service))
    if args.command == "watch":  # its first read fails at once when the service is down (see `watch`)
        options["retry_for"] = 0.0
    try:
        return asyncio.run(_call(args.operation, args, target, options))
    except (KeyboardInterrupt, asyncio.CancelledError):  # Ctrl-C or SIGTERM (`watch` ends with 0)
        return ExitCode.INTERRUPTED
    except BrokenPipeError:  # `turngate watch --json | head`: the reader is gone
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return ExitCode.OK
    except WriteOutcomeUnknown as error:
        again = f" with --request-id {error.request_id}" if error.request_id else ""
        return _fail(
            f"{target.target} could not confirm it ({error.code.name}): it may have taken effect; "
            f"run the same command again{again} to learn what it did",
            ExitCode.OUTCOME_UNKNOWN,
        )
    except ServiceUnavailable as error:
        return _fail(f"{target.target} unavailable ({error.code.name}): {error}", ExitCode.FAILURE)
    except InvalidRequest as error:
        return _fail(str(error), ExitCode.USAGE)
    except NotFound as error:
        return _fail(str(error), ExitCode.NOT_FOUND)
    except NotAuthenticated as error:
        hint = "the token given was not accepted" if options.get("token") else "give --token-file or --token"
        return _fail(f"not authenticated: {error}; {hint}", ExitCode.UNAUTHENTICATED)
    except PermissionDenied as error:
        return _fail(f"permission denied: {error}", ExitCode.PERMISSION_DENIED)
    except TurngateError as error:
        return _fail(f"{error.code.name}: {error}", ExitCode.FAILURE)
    except Exception as error:  # a bug: still one line, as promised
        return _fail(f"unexpected {type(error).__name__}: {error}", ExitCode.FAILURE)


def _fail(message: str, code: ExitCode) -> ExitCode:
    print(f"turngate: {message}", file=sys.stderr)
    return code


async def _call(
    operation: Operation, args: argparse.Namespace, target: Target, options: ClientOptions
) -> ExitCode:
    task = asyncio.current_task()
    assert task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    async with Client(target.target, target.project, **options) as client:
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
    args: argparse.Namespace, records: list[R], rows: Callable[[R], render.Fields], empty: str
) -> None:
    """One JSON object a line with --json, else a table (or `empty`)."""
    if args.json:
        for record in records:
            print(render.json_of(record))
    else:
        print("\n".join(render.table([rows(record) for record in records])) if records else empty)


async def status(client: Client, args: argparse.Namespace) -> ExitCode:
    snapshot = await client.get_session(args.session)
    print(render.json_of(snapshot) if args.json else "\n".join(render.status(snapshot, _now())))
    return ExitCode.OK


async def watch(client: Client, args: argparse.Namespace) -> ExitCode:
    # Tried once (`run` gives watch no retries), so a service that cannot be reached fails it at
    # once; once watching, the watch itself reconnects, riding out restarts.
    await client.get_session(args.session)
    with contextlib.suppress(asyncio.CancelledError):  # Ctrl-C or SIGTERM: how a watch ends
        async with client.watch(args.session, after_seq=args.after, turn_id=args.turn) as events:
            async for event in events:
                print(render.json_of(event) if args.json else render.event(event), flush=True)
    return ExitCode.OK


async def stop(client: Client, args: argparse.Namespace) -> ExitCode:
    gateway = client.gateway()
    settled: TurnRecord | None = None
    queue = QueueAction[args.queue.upper()]
    if args.wait is None:
        result = await gateway.stop(
            args.session,
            expected_turn_id=args.expect,
            force=args.force,
            request_id=args.request_id,
            reason=args.reason,
            queue=queue,
        )
    else:
        request_id = args.request_id or uuid.uuid4().hex
        active = (await client.get_session(args.session)).active if not args.expect else None
        turn_id = args.expect or (active.turn_id if active is not None else "")
        if turn_id:
            settled = await gateway.stop_and_wait(
                args.session,
                turn_id,
                force_after=args.wait,
                reason=args.reason,
                request_id=request_id,
                queue=queue,
            )
        # With the same request id this returns the first answer and changes nothing (when
        # nothing was active, it is the Stop itself).
        result = await gateway.stop(
            args.session, expected_turn_id=turn_id, request_id=request_id, reason=args.reason, queue=queue
        )
    if args.json:
        print(render.json_line(render.stop_message(result)))
        if settled is not None:
            print(render.json_of(settled))
    elif isinstance(result, Cancelled) and not result.stopped_running_turn:
        print(render.nothing_running_stopped(result))
    else:
        print(render.stop_result(result, _now()))
        if settled is not None:
            print(render.settlement(settled))
        if (unknown := await _never_seen(client, args.session, result)) is not None:
            print(unknown)
    return _stop_exit(result)


async def _never_seen(client: Client, session_id: str, result: StopResult) -> str | None:
    """A Stop that found nothing, on a session where no turn ever ran: whether it was ever seen (a
    mistyped session or project reads exactly like an idle session)."""
    if not isinstance(result, Idle) or result.last_turn_id:
        return None
    return render.never_seen(await client.get_session(session_id))


def _stop_exit(result: StopResult) -> ExitCode:
    match result:
        case Cancelled(before_start=True) | Cancelled(queued=True):
            return ExitCode.NOT_STARTED
        case Cancelled():
            return ExitCode.OK
        case Mismatch():
            return ExitCode.MISMATCH
        case Idle():
            return ExitCode.IDLE
        case _:
            assert_never(result)


async def steer(client: Client, args: argparse.Namespace) -> ExitCode:
    result = await client.gateway().steer(
        args.session,
        args.expect,
        args.content,
        steer_id=args.steer_id,
        content_type=args.content_type,
        fallback=SteerFallback.ENQUEUE if args.enqueue else SteerFallback.REJECT,
        requeue_unconsumed=args.requeue,
        request_id=args.request_id,
    )
    print(render.json_line(render.steer_message(result)) if args.json else render.steer_result(result))
    return _steer_exit(result)


def _steer_exit(result: SteerResult) -> ExitCode:
    """As `stop`'s: 0 when the running turn got it; a turn of its own that will run is not that."""
    match result:
        case Steered():
            return ExitCode.OK
        case SteerMismatch(current_turn_id=current) if current:
            return ExitCode.MISMATCH
        case SteerMismatch():
            return ExitCode.IDLE
        case SteerQueued():
            return ExitCode.NOT_STARTED
        case _:
            assert_never(result)


async def turn_show(client: Client, args: argparse.Namespace) -> ExitCode:
    record = await client.get_turn(args.session, args.turn)
    print(render.json_of(record) if args.json else "\n".join(render.turn_detail(record, _now())))
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


async def sessions_list(client: Client, args: argparse.Namespace) -> ExitCode:
    sessions = await _first(client.list_sessions(page_size=_page(args.limit)), args.limit)
    empty = f"no session of project {client.project_id} was recorded"
    _print_list(args, sessions, render.listed_session, empty)
    return ExitCode.OK


async def sessions_projects(client: Client, args: argparse.Namespace) -> ExitCode:
    projects = await _first(client.list_projects(page_size=_page(args.limit)), args.limit)
    _print_list(args, projects, render.listed_project, "no project this token may see has sessions")
    return ExitCode.OK


async def queue_show(client: Client, args: argparse.Namespace) -> ExitCode:
    snapshot = await client.get_session(args.session)
    if args.json:  # one QueuedTurn a line, head first (the pause: `status --json`)
        for waiting in snapshot.queue:
            print(render.json_of(waiting))
    else:
        print("\n".join(render.queue(snapshot, _now())))
    return ExitCode.OK


async def queue_resume(client: Client, args: argparse.Namespace) -> ExitCode:
    resumed = await client.gateway().resume_queue(args.session, request_id=args.request_id)
    print(render.json_of(resumed) if args.json else render.resumed(resumed))
    return ExitCode.OK


async def queue_clear(client: Client, args: argparse.Namespace) -> ExitCode:
    cleared = await client.gateway().clear_queue(args.session, reason=args.reason)
    if cleared is not None:
        print(
            render.json_line(render.stop_message(cleared))
            if args.json
            else render.stop_result(cleared, _now())
        )
    elif not args.json:
        print(f"no turns wait in {args.session}")
    return ExitCode.OK


async def queue_move(client: Client, args: argparse.Namespace) -> ExitCode:
    try:
        moved = await client.gateway().move_queued_turn(
            args.session,
            args.turn,
            after=args.after,
            expected_queue_version=args.expect_version,
            request_id=args.request_id,
        )
    except QueueVersionMismatch as error:
        return _fail(f"{error}; nothing moved (queueVersion: `status --json`)", ExitCode.MISMATCH)
    except TurnNotQueued as error:
        return _fail(str(error), ExitCode.NOT_FOUND)
    print(render.json_of(moved) if args.json else render.moved(moved))
    return ExitCode.OK


async def token_session(client: Client, args: argparse.Namespace) -> ExitCode:
    # The token alone on stdout (`TOKEN=$(turngate token session s1)`); what it is, on stderr.
    minted = await client.gateway().mint_session_token(args.session, ttl=args.ttl, allow_stop=args.stop)
    if args.json:
        print(render.json_of(minted))
    else:
        print(minted.token)
        print(f"turngate: {render.session_token(minted, args.session, _now())}", file=sys.stderr)
    return ExitCode.OK
