"""The `turngate` command: the service (`serve`, `migrate`, `project`) and the operator commands
(`operate`). Exit codes (`operate.ExitCode`): 0 ok, 1 runtime failure, 2 usage or invalid settings;
3 to 7 and 130 for operator commands."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

# Before grpc loads: its C core would print its own lines (e.g. a failed TLS handshake) to stderr,
# where the command promises one line per error.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

from turngate.service import operate
from turngate.service.config import Settings, describe

EXIT_FAILURE = 1
EXIT_USAGE = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="turngate",
        description="Single-turn admission for agent sessions.",
        epilog=operate.EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    serve_cmd = commands.add_parser("serve", help="run the service (embedded SQLite store by default)")
    serve_cmd.add_argument("--listen", help="HOST:PORT to listen on [TURNGATE_LISTEN, 127.0.0.1:50051]")
    serve_cmd.add_argument(
        "--workers",
        help="processes serving --listen together, each a full replica; auto: one per core; "
        "redis mode only [TURNGATE_WORKERS, 1]",
    )
    _store_flags(serve_cmd)
    serve_cmd.add_argument("--lease-ttl", type=float, help="default lease, seconds [TURNGATE_LEASE_TTL, 20]")
    serve_cmd.add_argument("--stop-grace", type=float, help="stop grace, seconds [TURNGATE_STOP_GRACE, 30]")
    serve_cmd.add_argument(
        "--tombstone-ttl",
        type=float,
        help="how long a Stop before start is kept, seconds [TURNGATE_TOMBSTONE_TTL, 600]",
    )
    _migrate_flag(serve_cmd)
    serve_cmd.add_argument(
        "--no-projector",
        dest="projector",
        action="store_false",
        default=None,
        help="redis mode: leave the ledger projection to `turngate project` [TURNGATE_PROJECTOR]",
    )
    _metrics_flag(serve_cmd)
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
    token_cmd = commands.add_parser(
        "token",
        help="make a new token: its tokens-file entry goes to stdout, the token itself to stderr",
    )
    token_cmd.add_argument("name", help="the principal's name")
    token_cmd.add_argument(
        "--role", action="append", required=True, choices=["runner", "gateway", "watcher", "admin"]
    )
    token_cmd.add_argument("--project", action="append", required=True, help="a project id, or '*' for all")
    operate.add_commands(commands)
    return parser


def _migrate_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-migrate",
        dest="migrate",
        action="store_false",
        default=None,
        help="do not migrate the schema: wait, not ready, until another process has [TURNGATE_MIGRATE]",
    )


def _environment_only(parser: argparse.ArgumentParser) -> None:
    """Names, in --help, the settings that have no flag (README, Running it, says what each does)."""
    flagged = vars(parser.parse_args([]))
    names = [f"TURNGATE_{name.upper()}" for name in Settings.model_fields if name not in flagged]
    title = "settings with no flag (environment only; README, Running it)"
    parser.add_argument_group(title, ", ".join(names))


def _metrics_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--metrics-listen",
        help="HOST:PORT to serve Prometheus metrics at /metrics on [TURNGATE_METRICS_LISTEN, off]",
    )


def _security_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "security", "README, Securing turngate; limits are set by TURNGATE_MAX_* (docs/security.md)"
    )
    group.add_argument(
        "--auth-file",
        help="tokens file (TOML or JSON) naming principals; SIGHUP reloads it [TURNGATE_AUTH_FILE]",
    )
    group.add_argument(
        "--insecure",
        action="store_true",
        default=None,
        help="allow listening beyond loopback with no --auth-file [TURNGATE_INSECURE]",
    )
    group.add_argument(
        "--tls-cert",
        help="PEM certificate chain: serve TLS; SIGHUP reloads the TLS files [TURNGATE_TLS_CERT]",
    )
    group.add_argument("--tls-key", help="PEM private key of --tls-cert [TURNGATE_TLS_KEY]")
    group.add_argument(
        "--tls-client-ca",
        help="PEM CA: require client certificates it signed (mutual TLS) [TURNGATE_TLS_CLIENT_CA]",
    )


def _store_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store",
        help="store URL [TURNGATE_STORE, sqlite+aiosqlite:///./turngate.db; postgresql+asyncpg://…; "
        "redis://…, redis+cluster://host:port,…, redis+sentinel://host:port,…/service]",
    )
    parser.add_argument("--ledger", help="with a redis store: the SQL ledger's URL [TURNGATE_LEDGER]")


def _settings(args: argparse.Namespace) -> Settings:
    given: dict[str, Any] = {
        name: value for name, value in vars(args).items() if name != "command" and value is not None
    }
    if args.command != "serve":
        # `migrate` and `project` take no calls: an image's TURNGATE_LISTEN=0.0.0.0:… must not
        # make them ask for a tokens file, nor its TURNGATE_WORKERS start workers.
        given["listen"] = "127.0.0.1:0"
        given["workers"] = 1
    return Settings(**given)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command in operate.COMMANDS:
        return operate.run(args)
    if args.command == "token":
        return _issue_token(args.name, args.role, args.project)
    try:
        settings = _settings(args)
    except ValidationError as error:
        print(f"turngate: {describe(error)}", file=sys.stderr)
        return EXIT_USAGE
    return _run_service(args.command, settings)


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


def _run_service(command: str, settings: Settings) -> int:
    if command == "serve" and settings.workers != 1:
        from turngate.service.telemetry import logs
        from turngate.service.workers import run_workers

        logs.configure(settings.log_level, settings.log_format)
        return run_workers(settings, _run_worker)
    return _run_one(command, settings)


def _run_worker(settings: Settings, index: int) -> None:
    """One worker process of `serve --workers` (started by workers.py)."""
    from turngate.service.workers import worker_settings

    sys.exit(_run_one("serve", worker_settings(settings, index), worker=index))


def _run_one(command: str, settings: Settings, *, worker: int | None = None) -> int:
    # Imported here: the operator commands start faster without the server's stack.
    from turngate.service.auth.principals import TokensFileError
    from turngate.service.auth.tls import TlsError
    from turngate.service.ports.store import StoreUnavailable
    from turngate.service.server import ListenError, project, serve
    from turngate.service.sql.migrate import migrate
    from turngate.service.telemetry import logs, setup

    logs.configure(settings.log_level, settings.log_format, worker=worker)
    try:
        if command == "migrate":
            asyncio.run(migrate(settings.ledger or settings.store))
        else:
            with setup.configured(settings):
                asyncio.run(project(settings) if command == "project" else serve(settings))
    except (ListenError, StoreUnavailable, setup.TelemetryError, TokensFileError, TlsError) as error:
        print(f"turngate: {error}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
