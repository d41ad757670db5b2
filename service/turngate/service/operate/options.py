"""The operator commands' arguments, added to the `turngate` command's parser."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from typing import TypeAlias, TypeVar

from turngate.client.defaults import DEFAULT_PROJECT, DEFAULT_TARGET, PROJECT_VARIABLE, TARGET_VARIABLE
from turngate.service.operate import operations
from turngate.service.operate.exits import EPILOG

COMMANDS = frozenset({"status", "watch", "stop", "steer", "queue", "turn", "sessions", "health"})
"""The `turngate` subcommands defined here (`run` them)."""

N = TypeVar("N", int, float)
Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def _positive(kind: Callable[[str], N]) -> Callable[[str], N]:
    """An argparse type: a number of `kind`, > 0."""

    def parse(text: str) -> N:
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or not value > 0:
            raise argparse.ArgumentTypeError(f"must be a number > 0, not {text!r}")
        return value

    return parse


def _common() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    group = common.add_argument_group("common options")
    group.add_argument(
        "--target", metavar="HOST:PORT", help=f"the service [{TARGET_VARIABLE}, {DEFAULT_TARGET}]"
    )
    group.add_argument("--project", metavar="ID", help=f"the project [{PROJECT_VARIABLE}, {DEFAULT_PROJECT}]")
    group.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help="each call's deadline, retries included [TURNGATE_TIMEOUT, 5]",
    )
    group.add_argument("--json", action="store_true", help="print protobuf JSON, one object a line")
    group.add_argument(
        "--token-file", metavar="FILE", help="a file holding the bearer token [TURNGATE_TOKEN_FILE]"
    )
    group.add_argument(
        "--token", help="the bearer token (shown in the process list: prefer --token-file) [TURNGATE_TOKEN]"
    )
    group.add_argument(
        "--tls-ca",
        metavar="FILE",
        help="TLS: the PEM CA that signed the service's certificate [TURNGATE_TLS_CA]",
    )
    group.add_argument(
        "--tls-cert",
        dest="client_cert",
        metavar="FILE",
        help="mutual TLS: the PEM client certificate chain [TURNGATE_CLIENT_CERT]",
    )
    group.add_argument(
        "--tls-key",
        dest="client_key",
        metavar="FILE",
        help="mutual TLS: its PEM private key [TURNGATE_CLIENT_KEY]",
    )
    return common


def _adder(
    common: argparse.ArgumentParser,
) -> Callable[[Subcommands, str, str, operations.Operation | None], argparse.ArgumentParser]:
    """Adds one operator command, with the common options, to a group of subcommands."""

    def add(
        parent: Subcommands, name: str, summary: str, operation: operations.Operation | None
    ) -> argparse.ArgumentParser:
        parser = parent.add_parser(
            name,
            help=summary,
            description=summary,
            parents=[common],
            epilog=EPILOG,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        parser.set_defaults(operation=operation)
        return parser

    return add


def add_session_token(token_commands: Subcommands) -> None:
    """Adds `session` (`turngate token session`, which mints through the service) to `token`'s
    subcommands."""
    session = _adder(_common())(
        token_commands,
        "session",
        "mint a short-lived token reaching only SESSION, to watch it (and with --stop, stop it), "
        "for a web page: the token goes to stdout, its expiry to stderr; needs a gateway token",
        operations.token_session,
    )
    session.add_argument("session", metavar="SESSION")
    session.add_argument("--stop", action="store_true", help="the token may also stop the session's turns")
    session.add_argument(
        "--ttl",
        type=lifetime,
        metavar="DURATION",
        help="how long it is valid: SECONDS, or with a unit (90s, 15m, 1h); default: the service's, 15m",
    )


_LIFETIME = re.compile(r"(\d+(?:\.\d+)?)([smh]?)")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600}


def lifetime(text: str) -> float:
    """An argparse type: seconds from `90`, `90s`, `15m` or `1h`."""
    match = _LIFETIME.fullmatch(text.strip())
    if match is None or float(match.group(1)) <= 0:
        raise argparse.ArgumentTypeError(f"must be a duration such as 90s, 15m or 1h, not {text!r}")
    return float(match.group(1)) * _UNIT_SECONDS[match.group(2)]


def add_commands(subcommands: Subcommands) -> None:
    """Adds `status`, `watch`, `stop`, `steer`, `queue show|resume|clear|move`, `turn show|list`,
    `sessions list|busy|projects` and `health` to `subcommands`."""
    add = _adder(_common())

    status = add(
        subcommands, "status", "a session's phase, active turn and last settled turn", operations.status
    )
    status.add_argument("session", metavar="SESSION")

    watch = add(
        subcommands,
        "watch",
        "a session's events as they happen, one a line, until interrupted (reconnects by itself)",
        operations.watch,
    )
    watch.add_argument("session", metavar="SESSION")
    watch.add_argument("--after", type=int, default=0, metavar="SEQ", help="resume after this event")
    watch.add_argument("--turn", default="", metavar="TURN", help="only this turn's events")

    stop = add(subcommands, "stop", "stop a session's turn; prints what the Stop did", operations.stop)
    stop.add_argument("session", metavar="SESSION")
    stop.add_argument(
        "--expect", default="", metavar="TURN", help="stop only this turn (a later one is left alone: exit 3)"
    )
    stop.add_argument("--reason", default="", metavar="TEXT", help="shown to the runner and watchers")
    stop.add_argument("--request-id", metavar="ID", help="idempotency key: a retry returns the first answer")
    stop.add_argument(
        "--queue",
        choices=["pause", "continue", "clear"],
        default="pause",
        help="what the session's queue does after the stopped turn: pause it (default), let it "
        "continue, or clear it now",
    )
    how = stop.add_mutually_exclusive_group()
    how.add_argument("--force", action="store_true", help="settle the turn CANCELLED now")
    how.add_argument(
        "--wait",
        type=_positive(float),
        metavar="SECONDS",
        help="wait for the turn to settle; force it after SECONDS",
    )

    steer = add(
        subcommands,
        "steer",
        "hand text to a session's running turn as input for its next step; prints what became of it",
        operations.steer,
    )
    steer.add_argument("session", metavar="SESSION")
    steer.add_argument(
        "--expect",
        required=True,
        metavar="TURN",
        help="the running turn to steer (any other, or none running: nothing changes, exit 3 or 4)",
    )
    steer.add_argument("content", metavar="TEXT", help="the input (UTF-8, 4 KiB by default)")
    steer.add_argument(
        "--steer-id", metavar="ID", help="names the steer (and the turn it becomes); made when not given"
    )
    steer.add_argument(
        "--content-type", default="text/plain", metavar="TYPE", help="what kind of text (default text/plain)"
    )
    steer.add_argument(
        "--enqueue",
        action="store_true",
        help="if TURN is not running, queue the text as a turn of its own for TURN's runner (exit 8)",
    )
    steer.add_argument(
        "--requeue",
        action="store_true",
        help="if TURN ends before its runner takes the text, queue it as a turn of its own",
    )
    steer.add_argument("--request-id", metavar="ID", help="idempotency key: a retry returns the first answer")

    queue = subcommands.add_parser("queue", help="a session's queue of waiting turns").add_subparsers(
        dest="queue_command", metavar="COMMAND", required=True
    )
    queue_show = add(
        queue,
        "show",
        "the turns waiting, head first, how long each has waited and when it expires, and whether "
        "the queue is paused",
        operations.queue_show,
    )
    queue_show.add_argument("session", metavar="SESSION")
    queue_resume = add(
        queue, "resume", "un-pause the queue: its head runs if no turn is active", operations.queue_resume
    )
    queue_resume.add_argument("session", metavar="SESSION")
    queue_resume.add_argument("--request-id", metavar="ID", help="idempotency key")
    queue_clear = add(
        queue,
        "clear",
        "cancel every turn waiting in the queue; the active turn runs on",
        operations.queue_clear,
    )
    queue_clear.add_argument("session", metavar="SESSION")
    queue_clear.add_argument("--reason", default="", metavar="TEXT", help="shown to watchers")
    queue_move = add(
        queue,
        "move",
        "move a waiting turn to the head of the queue, or right after another waiting turn",
        operations.queue_move,
    )
    queue_move.add_argument("session", metavar="SESSION")
    queue_move.add_argument("turn", metavar="TURN")
    queue_move.add_argument(
        "--after", metavar="TURN", help="right after this waiting turn (default: the head)"
    )
    queue_move.add_argument(
        "--expect-version",
        type=int,
        metavar="N",
        help="only if the queue is still at version N (queueVersion in `status --json`; "
        "printed by each move): a queue changed since is left alone",
    )
    queue_move.add_argument("--request-id", metavar="ID", help="idempotency key")

    turn = subcommands.add_parser("turn", help="one turn, or a session's turns").add_subparsers(
        dest="turn_command", metavar="COMMAND", required=True
    )
    show = add(turn, "show", "a turn with its tool calls and interactions", operations.turn_show)
    show.add_argument("turn", metavar="TURN")
    show.add_argument("--session", required=True, metavar="SESSION")
    listing = add(turn, "list", "a session's turns, newest first", operations.turn_list)
    listing.add_argument("session", metavar="SESSION")
    _limit(listing)

    health = add(
        subcommands,
        "health",
        "the service's gRPC health: prints it, exits 0 only on SERVING (a container's HEALTHCHECK); "
        "without --target or TURNGATE_TARGET, asks the server this host runs at TURNGATE_LISTEN",
        None,
    )
    health.add_argument(
        "--service",
        default="",
        metavar="NAME",
        help="'' (default: the whole server, ready for calls), 'liveness', or a turngate.v1 service",
    )

    sessions = subcommands.add_parser("sessions", help="the project's sessions").add_subparsers(
        dest="sessions_command", metavar="COMMAND", required=True
    )
    listing = add(
        sessions,
        "list",
        "the project's sessions, busy or idle, the most recently active first: each one's phase, "
        "active turn and last settled turn",
        operations.sessions_list,
    )
    _limit(listing)
    projects = add(
        sessions,
        "projects",
        "the projects the token may see that have sessions, in id order (--project is not used)",
        operations.sessions_projects,
    )
    _limit(projects)
    busy = add(
        sessions,
        "busy",
        "the project's sessions with an active turn or a waiting queue, earliest deadline first",
        operations.sessions_busy,
    )
    _limit(busy)


def _limit(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--limit", type=_positive(int), default=50, metavar="N", help="at most N (default 50)"
    )
