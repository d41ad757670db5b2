"""The `turngate` command: the service (`serve`, `migrate`, `project`, `prune`) and the operator
commands (`operate`). Exit codes (`operate.ExitCode`): 0 ok, 1 runtime failure, 2 usage or invalid settings;
3 to 7 and 130 for operator commands."""

from __future__ import annotations

import argparse
import asyncio
import errno
import logging
import os
import re
import socket
import sys
import textwrap
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import TYPE_CHECKING, Any

import argcomplete
from pydantic import ValidationError

# Before grpc loads: its C core would print its own lines (e.g. a failed TLS handshake) to stderr,
# where the command promises one line per error.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

from turngate.client import __version__
from turngate.service import operate
from turngate.service.config import Settings, host_and_port
from turngate.service.config_help import describe, reference, shown_default, unknown_variables, variable
from turngate.service.core import limits
from turngate.service.operate.operations import Target

if TYPE_CHECKING:
    from turngate.service.ledger.prune import Pruned

EXIT_FAILURE = 1
EXIT_USAGE = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="turngate",
        description="Single-turn admission for agent sessions.",
        epilog=operate.EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"turngate {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    serve_cmd = commands.add_parser(
        "serve",
        help="run the service (embedded SQLite store by default)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    serve_cmd.add_argument("--listen", metavar="HOST:PORT", help="where to listen")
    serve_cmd.add_argument(
        "--workers",
        metavar="N|auto",
        help="processes serving --listen together, each a full replica (redis mode); "
        "auto: one per usable core, or 1 on a SQL store",
    )
    _store_flags(serve_cmd)
    serve_cmd.add_argument(
        "--lease-ttl",
        type=float,
        metavar="SECONDS",
        help="a turn's lease without a heartbeat, unless its AdmitTurn names one",
    )
    serve_cmd.add_argument(
        "--stop-grace",
        type=float,
        metavar="SECONDS",
        help="how long a stopping turn has to settle before it is settled CANCELLED",
    )
    serve_cmd.add_argument(
        "--tombstone-ttl",
        type=float,
        metavar="SECONDS",
        help="how long a Stop of a turn not started yet, and a request_id's answer, are remembered",
    )
    _migrate_flag(serve_cmd)
    serve_cmd.add_argument(
        "--no-projector",
        dest="projector",
        action="store_false",
        default=None,
        help="redis mode: leave the ledger projection to `turngate project`",
    )
    _metrics_flag(serve_cmd)
    serve_cmd.add_argument(
        "--http-listen",
        metavar="HOST:PORT",
        help="where to serve browsers (Connect, gRPC-Web) and the operator console; unset: off",
    )
    _http_flags(serve_cmd)
    _security_flags(serve_cmd)
    _environment_only(serve_cmd)
    migrate_cmd = commands.add_parser("migrate", help="create or upgrade the store's schema, then exit")
    _store_flags(migrate_cmd)
    project_cmd = commands.add_parser(
        "project", help="redis mode: only project the outboxes into the ledger (with `serve --no-projector`)"
    )
    _store_flags(project_cmd)
    _migrate_flag(project_cmd)
    _metrics_flag(project_cmd)
    prune_cmd = commands.add_parser(
        "prune",
        help="delete the history settled or written before WHEN (turns, their tool calls and "
        "interactions, session events), then exit; never a turn not settled (docs/deploying.md, "
        "History retention)",
    )
    prune_cmd.add_argument(
        "--before",
        required=True,
        type=_cutoff,
        metavar="WHEN",
        help="an ISO-8601 time, UTC unless it names its offset (2025-01-31T00:00:00Z), or a "
        "duration ago by this host's clock (30d, 12h, 90m); at least a day ago",
    )
    prune_cmd.add_argument(
        "--dry-run", action="store_true", help="count what would be deleted; delete nothing"
    )
    _store_flags(prune_cmd)
    for service_cmd in (serve_cmd, migrate_cmd, project_cmd, prune_cmd):
        _name_settings(service_cmd)
    token_commands = commands.add_parser(
        "token",
        help="tokens: a principal's (entry; `turngate token NAME …` for short), a session's, or a "
        "session token signing key",
    ).add_subparsers(dest="token_command", metavar="COMMAND", required=True)
    entry_cmd = token_commands.add_parser(
        "entry",
        help="make a new token: its tokens-file entry goes to stdout, the token itself to stderr",
    )
    entry_cmd.add_argument("name", help="the principal's name")
    entry_cmd.add_argument(
        "--role", action="append", required=True, choices=["runner", "gateway", "watcher", "admin"]
    )
    entry_cmd.add_argument("--project", action="append", required=True, help="a project id, or '*' for all")
    key_cmd = token_commands.add_parser(
        "key",
        help="make a new session token signing key: its keys-file entry goes to stdout "
        "(docs/security.md, Session tokens)",
    )
    key_cmd.add_argument(
        "id", nargs="?", help="the key's id (default: k-YYYYMMDD-HHMMSS, now in UTC)", metavar="ID"
    )
    operate.add_session_token(token_commands)
    operate.add_commands(commands)
    return parser


_TOKEN_COMMANDS = frozenset({"entry", "key", "session", "-h", "--help"})


def _with_token_entry(argv: list[str]) -> list[str]:
    """`turngate token NAME …` (as before `token` had subcommands) is `turngate token entry NAME …`."""
    if len(argv) > 1 and argv[0] == "token" and argv[1] not in _TOKEN_COMMANDS:
        return ["token", "entry", *argv[1:]]
    return argv


def _migrate_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-migrate",
        dest="migrate",
        action="store_false",
        default=None,
        help="do not migrate the schema: wait, not ready, until another process has",
    )


def _flags(parser: argparse.ArgumentParser) -> dict[str, str]:
    """The settings `parser` takes by flag, and the flag."""
    return {
        action.dest: action.option_strings[-1]
        for action in parser._actions
        if action.dest in Settings.model_fields and action.option_strings
    }


def _name_settings(parser: argparse.ArgumentParser) -> None:
    """Ends each setting's flag help with its variable and default, both read from `Settings` so
    --help cannot drift from what the service does."""
    for action in parser._actions:
        if action.dest in Settings.model_fields and action.option_strings:
            action.help = f"{action.help} [{variable(action.dest)}, {shown_default(action.dest)}]"


def _environment_only(parser: argparse.ArgumentParser) -> None:
    """Lists, in --help, the settings that have no flag with their defaults and what each does
    (docs/deploying.md, Settings, has them all)."""
    flagged = _flags(parser)
    lines = []
    for name, field in Settings.model_fields.items():
        if name not in flagged:
            lines.append(f"  {variable(name)}={shown_default(name)}")
            about = " ".join((field.description or "").split())
            lines += textwrap.wrap(about, width=76, initial_indent="      ", subsequent_indent="      ")
    title = "settings with no flag (environment only, with defaults; docs/deploying.md, Settings)"
    parser.add_argument_group(title, "\n".join(lines))


def settings_reference() -> str:
    """Every setting, with `serve`'s flag and help where it has one: the table
    scripts/settings_reference.py keeps in docs/deploying.md."""
    serve = next(sub for sub in _subparsers(_parser()) if sub.prog.endswith(" serve"))
    helps = {action.dest: action.help or "" for action in serve._actions}
    suffix = "[{}, {}]"
    return reference(
        {
            name: (flag, helps[name].removesuffix(" " + suffix.format(variable(name), shown_default(name))))
            for name, flag in _flags(serve).items()
        }
    )


def _http_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "HTTP listeners",
        "--http-listen and --metrics-listen: what a client may hold (docs/security.md, The HTTP edge)",
    )
    group.add_argument(
        "--http-request-timeout",
        type=float,
        metavar="SECONDS",
        help="a request's headers (from the connection's opening or last answer), then its body, must "
        "each arrive within this; an idle connection closes after it",
    )
    group.add_argument(
        "--http-max-connections", type=int, metavar="N", help="HTTP connections open at once, in all"
    )
    group.add_argument(
        "--http-max-connections-per-peer",
        type=int,
        metavar="N",
        help="HTTP connections open at once from one address (a proxy in front is one address)",
    )
    group.add_argument(
        "--http-access-log",
        action="store_true",
        default=None,
        help="log a line per HTTP request (logger turngate.http.access, INFO)",
    )


def _metrics_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--metrics-listen",
        metavar="HOST:PORT",
        help="where to serve Prometheus metrics at /metrics; unset: off",
    )


def _security_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("security", "docs/security.md; limits are set by TURNGATE_MAX_*")
    group.add_argument(
        "--auth-file",
        metavar="FILE",
        help="tokens file (TOML or JSON) naming principals; SIGHUP reloads it",
    )
    group.add_argument(
        "--session-token-keys",
        metavar="FILE",
        help="signing keys (TOML or JSON) of the session tokens gateways mint for web pages; unset: "
        "off; SIGHUP reloads it",
    )
    group.add_argument(
        "--insecure",
        action="store_true",
        default=None,
        help="allow listening beyond loopback with no --auth-file",
    )
    group.add_argument(
        "--tls-cert", metavar="FILE", help="PEM certificate chain: serve TLS; SIGHUP reloads the TLS files"
    )
    group.add_argument("--tls-key", metavar="FILE", help="PEM private key of --tls-cert")
    group.add_argument(
        "--tls-client-ca", metavar="FILE", help="PEM CA: require client certificates it signed (mutual TLS)"
    )


def _store_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store",
        metavar="URL",
        help="sqlite+aiosqlite:///FILE (a relative FILE is under the working directory), "
        "postgresql+asyncpg://…, redis://…, redis+cluster://host:port,…, redis+sentinel://host:port,…/service",
    )
    parser.add_argument("--ledger", metavar="URL", help="with a redis store: the SQL ledger's URL")


_DURATION_AGO = re.compile(r"(\d+)([smhd])")
_UNIT = {"s": limits.SECOND, "m": 60 * limits.SECOND, "h": 3600 * limits.SECOND, "d": limits.DAY}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _cutoff(text: str) -> int:
    """An argparse type: `prune --before`'s WHEN as µs since the epoch, no later than history
    retention's floor allows (core/limits.py)."""
    now = time.time_ns() // 1000
    ago = _DURATION_AGO.fullmatch(text.strip())
    if ago is not None:
        before = now - int(ago.group(1)) * _UNIT[ago.group(2)]
    else:
        try:
            when = datetime.fromisoformat(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(
                "must be an ISO-8601 time (2025-01-31T00:00:00Z) or a duration ago (30d, 12h, 90m), "
                f"not {text!r}"
            ) from None
        aware = when if when.tzinfo is not None else when.replace(tzinfo=UTC)
        before = (aware - _EPOCH) // timedelta(microseconds=1)
    if before > now - limits.MIN_HISTORY_RETENTION:
        raise argparse.ArgumentTypeError(
            "must be at least a day ago: younger history is never pruned (a turn may wait a day in a queue)"
        )
    return before


def _iso(us: int) -> str:
    return (_EPOCH + timedelta(microseconds=us)).isoformat().replace("+00:00", "Z")


# The arguments of the service commands that are no setting.
_NOT_SETTINGS = frozenset({"command", "before", "dry_run"})


def _settings(args: argparse.Namespace) -> Settings:
    given: dict[str, Any] = {
        name: value for name, value in vars(args).items() if name not in _NOT_SETTINGS and value is not None
    }
    if args.command != "serve":
        # `migrate`, `project` and `prune` take no calls: an image's TURNGATE_LISTEN=0.0.0.0:… (or
        # TURNGATE_HTTP_LISTEN) must not make them ask for a tokens file, nor its TURNGATE_WORKERS
        # start workers.
        given["listen"] = "127.0.0.1:0"
        given["http_listen"] = None
        given["workers"] = 1
    return Settings(**given)


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    # Answers a shell's completion request (_ARGCOMPLETE set) and exits; otherwise does nothing.
    argcomplete.autocomplete(parser)
    args = parser.parse_args(_with_token_entry(list(sys.argv[1:] if argv is None else argv)))
    if args.command in operate.COMMANDS or getattr(args, "token_command", None) == "session":
        return operate.run(args)
    if args.command == "token":
        if args.token_command == "key":
            return _new_signing_key(args.id)
        return _issue_token(args.name, args.role, args.project)
    # A misspelt variable is most likely meant for the service; a warning, not a refusal, so a
    # deployment that carries a stale one keeps starting.
    known = [variable(name) for name in (*Settings.model_fields, *Target.model_fields)]
    for line in unknown_variables(os.environ, known):
        print(line, file=sys.stderr)
    try:
        settings = _settings(args)
    except ValidationError as error:
        service_cmd = next(p for p in _subparsers(parser) if p.prog.endswith(f" {args.command}"))
        print(f"turngate: {describe(error, flags=_flags(service_cmd))}", file=sys.stderr)
        return EXIT_USAGE
    if args.command == "prune":
        return _prune(settings, args.before, dry_run=args.dry_run)
    return _run_service(args.command, settings)


def _subparsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    return [
        sub
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
        for sub in action.choices.values()
    ]


def _issue_token(name: str, roles: list[str], projects: list[str]) -> int:
    from turngate.service.auth.issue import entry_for, new_token

    token = new_token()
    try:
        entry = entry_for(token, name, roles, projects)
    except ValidationError as error:
        print(f"turngate: {describe(error, 'token entry')}", file=sys.stderr)
        return EXIT_USAGE
    print(entry, end="")
    print(f"# the token of {name} (shown once; only its digest is kept): {token}", file=sys.stderr)
    return 0


def _new_signing_key(key_id: str | None) -> int:
    from datetime import UTC, datetime

    from turngate.service.auth.session_tokens import new_key_entry

    try:
        entry = new_key_entry(key_id or datetime.now(UTC).strftime("k-%Y%m%d-%H%M%S"))
    except ValidationError as error:
        print(f"turngate: {describe(error, 'signing key')}", file=sys.stderr)
        return EXIT_USAGE
    print(entry, end="")
    print(
        "# add it last to the signing keys file, reload every replica (SIGHUP), then move it first "
        "and reload again (docs/security.md, Session tokens)",
        file=sys.stderr,
    )
    return 0


def _run_service(command: str, settings: Settings) -> int:
    if command == "serve" and settings.worker_count != 1:
        from turngate.service.telemetry import logs
        from turngate.service.workers import run_workers

        logs.configure(settings.log_level, settings.log_format)
        return run_workers(settings, _run_worker)
    return _run_one(command, settings)


def _run_worker(settings: Settings, index: int, serving: Event) -> None:
    """One worker process of `serve --workers` (started by workers.py); sets `serving` once it serves."""
    from turngate.service.workers import worker_settings

    sys.exit(_run_one("serve", worker_settings(settings, index), worker=index, on_serving=serving.set))


def _run_one(
    command: str,
    settings: Settings,
    *,
    worker: int | None = None,
    on_serving: Callable[[], object] | None = None,
) -> int:
    # Imported here: the operator commands start faster without the server's stack.
    from turngate.service.auth.principals import TokensFileError
    from turngate.service.auth.session_tokens import KeysFileError
    from turngate.service.auth.tls import TlsError
    from turngate.service.ports.store import StoreUnavailable
    from turngate.service.server import ListenError, project, serve
    from turngate.service.sql.migrate import migrate
    from turngate.service.telemetry import logs, setup

    logs.configure(settings.log_level, settings.log_format, worker=worker)
    try:
        if worker is None:
            _check_can_start(command, settings)
        if command == "migrate":
            if settings.sqlite_file is not None:
                # `serve` names its SQLite file when it listens (server.serve).
                logging.getLogger("turngate.cli").info("migrating the SQLite file %s", settings.sqlite_file)
            asyncio.run(migrate(settings.ledger or settings.store))
        else:
            with setup.configured(settings) as prometheus:
                if command == "project":
                    asyncio.run(project(settings, prometheus))
                else:
                    asyncio.run(serve(settings, prometheus, on_serving=on_serving))
    except (
        ListenError,
        StoreUnavailable,
        TokensFileError,
        KeysFileError,
        TlsError,
        CannotStart,
    ) as error:
        print(f"turngate: {error}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        return 0
    return 0


def _prune(settings: Settings, before: int, *, dry_run: bool) -> int:
    """`turngate prune`: the history older than `before` deleted (or counted) in the database that
    holds it, as the history retention's loop deletes it; what it did printed in one line."""
    from turngate.service.ports.store import StoreUnavailable

    try:
        _check_can_start("prune", settings)
        if settings.sqlite_file is not None and not settings.sqlite_file.exists():
            raise CannotStart(f"no SQLite store at {settings.sqlite_file}")
        pruned = asyncio.run(_pruned(settings.ledger or settings.store, before, dry_run=dry_run))
    except (StoreUnavailable, CannotStart) as error:
        print(f"turngate: {error}", file=sys.stderr)
        return EXIT_FAILURE
    print(
        f"{'would prune' if dry_run else 'pruned'} {pruned.turns} turns, {pruned.tool_calls} tool calls, "
        f"{pruned.interactions} interactions, {pruned.steers} steers, "
        f"{pruned.session_events} session events and {pruned.session_activity} sessions "
        f"settled or written before {_iso(before)}"
    )
    return 0


async def _pruned(url: str, before: int, *, dry_run: bool) -> Pruned:
    from turngate.service.ledger.prune import prunable, prune
    from turngate.service.sql.engine import dispose, make_engine
    from turngate.service.sql.migrate import is_migrated

    if not await is_migrated(url):
        raise CannotStart("the database does not have this release's schema: run `turngate migrate` first")
    engine = make_engine(url)
    try:
        return await (prunable(engine, before) if dry_run else prune(engine, before))
    finally:
        await dispose(engine)


class CannotStart(Exception):
    """What stops the service from starting, found before it writes anything."""


def _check_can_start(command: str, settings: Settings) -> None:
    """Before the store is opened (which creates a SQLite file): the port is free and the SQLite
    file can be written, each reported in one line naming it."""
    if command == "serve":
        for address in settings.listens:
            _check_port_free(address)
    if settings.sqlite_file is not None:
        _check_writable(settings.sqlite_file)


def _check_port_free(listen: str) -> None:
    host, port = host_and_port(listen)
    if port == 0:
        return
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError:
        return  # the server's own bind reports it
    for family, kind, proto, _, address in addresses:
        with socket.socket(family, kind, proto) as probe:
            # As the server binds: a port whose last connections linger in TIME_WAIT is free.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(address)
            except OSError as error:
                # Only a port taken or forbidden: an address this host lacks (e.g. ::1 of a
                # `localhost` without IPv6) is left to the server, which binds what it can.
                if error.errno in (errno.EADDRINUSE, errno.EACCES):
                    raise CannotStart(f"cannot listen on {listen}: {error.strerror}") from None


def _check_writable(database: Path) -> None:
    # SQLite writes its journal next to the file: the directory must be writable too.
    folder = database.parent
    if not folder.is_dir():
        problem = "is not a directory" if folder.exists() else "does not exist"
        raise CannotStart(f"cannot open the SQLite store {database}: {folder} {problem}")
    for path in (folder, database):
        if path.exists() and not os.access(path, os.W_OK | (os.X_OK if path == folder else 0)):
            raise CannotStart(f"cannot open the SQLite store {database}: {path} is not writable")


if __name__ == "__main__":
    sys.exit(main())
