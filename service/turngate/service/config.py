"""Settings: flags override `TURNGATE_*` environment variables, which override the defaults.

The timing contract is validated here, so a bad value refuses to start with one clear line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, BeforeValidator, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from turngate.client.hosts import is_loopback
from turngate.service.core import limits
from turngate.service.cores import usable_cores
from turngate.service.store_kinds import KINDS, LEDGER_SCHEMES, StoreKind, kind_of


@dataclass(frozen=True)
class Values:
    """What a setting takes, in words, where a validator says it in code only: the settings
    reference (docs/deploying.md, Settings) shows it."""

    text: str


Seconds = Annotated[float, Field(allow_inf_nan=False)]
# A host name, an IPv4 address or a bracketed IPv6 one: in a listen address and in an origin.
_HOST = r"\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+"
_ORIGIN = re.compile(rf"^https?://({_HOST})(:\d{{1,5}})?$")
_LISTEN = re.compile(rf"^({_HOST}|\*):(\d{{1,5}})$")
# What every setting's environment variable starts with.
PREFIX = "TURNGATE_"


def _host_port(value: str) -> str:
    match = _LISTEN.match(value)
    if match is None or not 0 <= int(match.group(2)) <= 65535:
        raise ValueError("must be HOST:PORT, e.g. 127.0.0.1:50051 or [::1]:50051")
    return value


HostPort = Annotated[str, AfterValidator(_host_port), Values("`HOST:PORT`")]


MAX_WORKERS = 1024


def _workers(value: object) -> object:
    if value == "auto":
        return value
    try:
        count = int(str(value))
    except ValueError:
        count = 0
    if not 1 <= count <= MAX_WORKERS:
        raise ValueError(f"must be a number of processes from 1 to {MAX_WORKERS}, or auto")
    return count


Workers = Annotated[
    int | Literal["auto"],
    BeforeValidator(_workers),
    Values(f"1 to {MAX_WORKERS:,}, or `auto` (one per usable core in redis mode, 1 on a SQL store)"),
]


def _seconds(us: int) -> float:
    return us / limits.SECOND


def microseconds(seconds: float) -> int:
    """A setting's seconds as the core's µs."""
    return round(seconds * limits.SECOND)


DAY = _seconds(limits.DAY)


def sqlite_file_of(url: str) -> Path | None:
    """The absolute path of the SQLite file at a database `url` (None for another database, or one
    in memory): a relative path is the working directory's."""
    # Imported here: the operator commands, which read no store, start faster without it.
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if not parsed.drivername.startswith("sqlite") or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database).absolute()


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=PREFIX, extra="forbid", frozen=True, use_attribute_docstrings=True
    )

    listen: HostPort = "127.0.0.1:50051"
    # `serve`: processes serving `listen` together (SO_REUSEPORT), each a full replica; "auto" is
    # one per core this process may use in redis mode, and one on a SQL store (docs/decisions.md, Speed).
    workers: Workers = 1
    store: Annotated[str, Values(" · ".join(f"`{scheme}…`" for kind in KINDS for scheme in kind.schemes))] = (
        "sqlite+aiosqlite:///./turngate.db"
    )
    # With a Redis store: the SQL database that keeps the durable history (the ledger).
    ledger: Annotated[str | None, Values(" · ".join(f"`{scheme}…`" for scheme in LEDGER_SCHEMES))] = None
    lease_ttl: Seconds = Field(
        _seconds(limits.DEFAULT_LEASE_TTL),
        ge=_seconds(limits.MIN_LEASE_TTL),
        le=_seconds(limits.MAX_LEASE_TTL),
    )
    stop_grace: Seconds = Field(
        _seconds(limits.DEFAULT_STOP_GRACE),
        ge=_seconds(limits.MIN_STOP_GRACE),
        le=_seconds(limits.MAX_STOP_GRACE),
    )
    # How long a tombstone and a request_id's answer are remembered.
    tombstone_ttl: Seconds = Field(
        _seconds(limits.DEFAULT_TOMBSTONE_TTL),
        ge=_seconds(limits.MIN_TOMBSTONE_TTL),
        le=_seconds(limits.MAX_TOMBSTONE_TTL),
    )
    # The docstrings of the settings with no flag are `serve --help`'s text for them.
    queue_wait: Seconds = Field(
        _seconds(limits.DEFAULT_MAX_QUEUE_WAIT),
        ge=_seconds(limits.MIN_QUEUE_WAIT),
        le=_seconds(limits.MAX_QUEUE_WAIT),
    )
    """Seconds a queued turn waits when its AdmitTurn names no max_queue_wait."""
    max_queue_wait: Seconds = Field(
        _seconds(limits.DEFAULT_QUEUE_WAIT_CAP),
        ge=_seconds(limits.MIN_QUEUE_WAIT),
        le=_seconds(limits.MAX_QUEUE_WAIT),
    )
    """The most seconds an AdmitTurn may ask to wait in the queue."""
    max_queue_depth: int = Field(limits.DEFAULT_MAX_QUEUE_DEPTH, ge=1, le=limits.MAX_QUEUE_DEPTH)
    """Turns that may wait per session."""
    max_steer_bytes: int = Field(limits.DEFAULT_MAX_STEER_BYTES, ge=1, le=limits.MAX_STEER_BYTES)
    """Bytes of UTF-8 a SteerTurn's content may carry (it stays in the session while pending)."""
    max_steers_per_turn: int = Field(limits.DEFAULT_MAX_STEERS_PER_TURN, ge=1, le=limits.MAX_STEERS_PER_TURN)
    """Steers a turn may take; beyond, SteerTurn is refused LIMIT_EXCEEDED."""
    steer_wait: Seconds = Field(
        _seconds(limits.DEFAULT_STEER_WAIT),
        ge=_seconds(limits.MIN_STEER_WAIT),
        le=_seconds(limits.MAX_STEER_WAIT),
    )
    """Seconds a steer waits for its runner's AcknowledgeSteer before it ends EXPIRED."""
    event_retention: int = Field(1_000, ge=100, le=1_000_000)
    """How many of a session's latest events a watcher may resume from; older cursors resync."""
    event_max_age: Seconds | None = Field(None, ge=60.0, le=DAY * 365)
    """Redis store: seconds a session's events stay in its log (besides the last
    TURNGATE_EVENT_RETENTION; unset: no bound by age); older cursors resync."""
    idle_retention: Seconds = Field(
        _seconds(limits.DEFAULT_IDLE_RETENTION),
        ge=_seconds(limits.MIN_IDLE_RETENTION),
        le=_seconds(limits.MAX_IDLE_RETENTION),
    )
    """Seconds a session in which nothing is live stays in the store; then it leaves it (its
    history stays), and comes back as new when used again."""
    history_retention: Seconds | None = Field(
        None, ge=_seconds(limits.MIN_HISTORY_RETENTION), le=_seconds(limits.MAX_HISTORY_RETENTION)
    )
    """Seconds of history the SQL database keeps: settled turns (with their tool calls,
    interactions and steers) and session events older than this are pruned about every minute;
    unset: kept forever (docs/deploying.md, History retention)."""
    watch_buffer: int = Field(1024, ge=16, le=1_000_000)
    """Events queued for one watcher before its stream ends and it must resume from its cursor."""
    migrate: bool = True
    redis_buckets: int = Field(16, ge=1, le=16_384)
    """Redis store: sessions are spread over this many hash-tagged buckets (one slot each)."""
    redis_prefix: str = Field("tg", pattern=r"^[A-Za-z0-9_.-]{1,32}$")
    """Redis store: the prefix of every key."""
    redis_timeout: Seconds = Field(2.0, ge=0.05, le=60.0)
    """Redis store: seconds every read and connect to a node may take, so a frozen node fails
    calls fast (UNAVAILABLE) instead of holding them to their deadline."""
    redis_wait_replicas: int = Field(0, ge=0, le=16)
    """Redis store: a write is acknowledged only once this many replicas have it (WAIT), within
    TURNGATE_REDIS_WAIT_TIMEOUT; else the call is UNAVAILABLE."""
    redis_wait_timeout: Seconds = Field(0.5, gt=0.0, le=60.0)
    """Redis store: seconds a write waits for TURNGATE_REDIS_WAIT_REPLICAS."""
    # Redis store: whether `serve` also projects the outbox into the ledger (else `turngate project` does).
    projector: bool = True
    reclaim_idle: Seconds = Field(30.0, ge=1.0, le=DAY)
    """Ledger projector: an outbox entry pending this many seconds is taken over by another replica."""
    max_deliveries: int = Field(5, ge=1, le=1_000)
    """Ledger projector: an entry that failed this many deliveries while others commit goes to the
    dead letters."""
    sqlite_synchronous: Literal["NORMAL", "FULL"] = "NORMAL"
    """NORMAL: a killed process loses nothing committed; FULL: power loss neither."""
    drain_delay: Seconds = Field(2.0, ge=0.0, le=3600.0)
    """SIGTERM: seconds a replica goes on serving while its health says NOT_SERVING, so load
    balancers stop sending calls before it stops accepting them (SIGINT skips it)."""
    shutdown_grace: Seconds = Field(10.0, ge=0.0, le=3600.0)
    """... then seconds calls in flight may take to finish before they are cancelled."""
    max_connection_age: Seconds | None = Field(None, ge=1.0, le=DAY * 30)
    """A client connection is asked to move (GOAWAY) after about this many seconds, so long-lived
    clients spread over new replicas (unset: never)."""
    max_connection_age_grace: Seconds = Field(30.0, ge=0.0, le=DAY)
    """... then its calls get this many seconds to finish."""
    loop_failure_grace: Seconds = Field(30.0, ge=0.0, le=3600.0)
    """Readiness turns NOT_SERVING while a background loop has been failing (restarted again and
    again) for longer than this many seconds."""
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    """DEBUG, INFO, WARNING or ERROR, in any case."""
    log_format: Literal["text", "json"] = "text"
    """text: one human-readable line per record (state changes add logfmt fields); json: one object."""
    # Where to serve Prometheus text at /metrics (off by default; empty = off).
    metrics_listen: HostPort | None = None
    # Where to serve the contract over HTTP for browsers (Connect, gRPC-Web) and the operator
    # console (off by default; empty = off).
    http_listen: HostPort | None = None
    http_cors_origins: Annotated[
        tuple[str, ...], NoDecode, Values("`scheme://host[:port]`, comma-separated")
    ] = ()
    """HTTP listener: the origins (scheme://host[:port], comma-separated) whose pages may call it;
    none by default (same origin only), never *."""
    # HTTP listeners (--http-listen and --metrics-listen): what a stranger may hold open
    # (docs/security.md, The HTTP edge).
    http_request_timeout: Seconds = Field(10.0, ge=0.5, le=600.0)
    http_max_connections: int = Field(1024, ge=1, le=1_000_000)
    http_max_connections_per_peer: int = Field(128, ge=1, le=1_000_000)
    # One line per HTTP request (logger turngate.http.access, INFO).
    http_access_log: bool = False
    console_trace_url: Annotated[str | None, Values("an `http(s)://` address with `{trace_id}`")] = None
    """Operator console: a trace's address, {trace_id} standing for its id (e.g.
    http://jaeger:16686/trace/{trace_id}); unset: trace ids are shown unlinked."""

    # Security (docs/security.md, Securing turngate): bearer tokens, TLS, and the limits every caller meets.
    auth_file: Path | None = None
    # Keys signing and verifying session tokens (docs/security.md, Session tokens); unset: off.
    session_token_keys: Path | None = None
    # Listen beyond loopback with no auth file (anyone who can connect may run and stop turns).
    insecure: bool = False
    tls_cert: Path | None = None
    tls_key: Path | None = None
    # With TLS: only clients presenting a certificate signed by this CA may connect (mutual TLS).
    tls_client_ca: Path | None = None
    max_message_bytes: int = Field(64 * 1024, ge=16 * 1024, le=64 * 1024 * 1024)
    """The largest request, in bytes."""
    max_watches_per_principal: int = Field(10_000, ge=1, le=1_000_000)
    """Watch streams one principal may hold open."""
    max_watches_per_session: int = Field(1_000, ge=1, le=1_000_000)
    """Watch streams one session may have."""
    max_active_sessions_per_project: int = Field(0, ge=0, le=10_000_000)
    """Sessions of one project that may have an active turn at once; 0: no limit."""
    max_open_tool_calls: int = Field(limits.MAX_OPEN_TOOL_CALLS, ge=1, le=limits.MAX_TOOL_CALLS)
    """Tool calls one turn may have open at once."""
    max_pending_interactions: int = Field(limits.MAX_PENDING_INTERACTIONS, ge=1, le=limits.MAX_INTERACTIONS)
    """Interactions one turn may have pending at once."""
    rpc_timeout: Seconds = Field(30.0, gt=0.0, le=3600.0)
    """Deadline, in seconds, given to a unary call whose caller set none."""
    keepalive_time: Seconds = Field(30.0, ge=1.0, le=DAY)
    """Ping every connection this often (seconds)."""
    keepalive_timeout: Seconds = Field(10.0, ge=0.1, le=3600.0)
    """A connection that does not answer a ping within this many seconds is dropped."""

    @field_validator("log_level", mode="before")
    @classmethod
    def _any_case(cls, value: object) -> object:
        # TURNGATE_LOG_LEVEL=info is what people type.
        return value.upper() if isinstance(value, str) else value

    @field_validator("metrics_listen", "http_listen", "console_trace_url", mode="before")
    @classmethod
    def _empty_is_off(cls, value: object) -> object:
        # TURNGATE_METRICS_LISTEN= turns off what an image's environment turned on.
        return None if value == "" else value

    @field_validator("http_cors_origins", mode="before")
    @classmethod
    def _origins(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        origins = tuple(origin.strip() for origin in value.split(",") if origin.strip())
        for origin in origins:
            if not _ORIGIN.match(origin):
                raise ValueError(f"{origin!r} is not an origin: scheme://host[:port], no path, no wildcard")
        return origins

    @field_validator("console_trace_url")
    @classmethod
    def _trace_url(cls, value: str | None) -> str | None:
        if value is not None and (not value.startswith(("http://", "https://")) or "{trace_id}" not in value):
            raise ValueError("must be an http(s) address containing {trace_id}")
        return value

    @field_validator("store")
    @classmethod
    def _store_url(cls, value: str) -> str:
        kind_of(value)
        return value

    @field_validator("ledger")
    @classmethod
    def _ledger_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(LEDGER_SCHEMES):
            raise ValueError("must start with postgresql+asyncpg:// or sqlite+aiosqlite://")
        return value

    @property
    def sqlite_file(self) -> Path | None:
        """The absolute path of the SQLite file holding the store, or with a redis store the ledger
        (None for another database, or one in memory)."""
        return sqlite_file_of(self.ledger or self.store)

    @property
    def store_kind(self) -> StoreKind:
        return kind_of(self.store)

    @property
    def worker_count(self) -> int:
        """The processes `serve` runs: `auto` is one per core this process may use (its CPU limit
        in a container) with a store whose commits every process hears, and one otherwise."""
        if self.workers != "auto":
            return self.workers
        return usable_cores() if self.store_kind.shared_commits else 1

    @property
    def tls(self) -> bool:
        return self.tls_cert is not None

    @property
    def listens_beyond_loopback(self) -> bool:
        return any(not is_loopback(host_and_port(address)[0]) for address in self.listens)

    @property
    def listens(self) -> tuple[str, ...]:
        """The addresses where calls are taken: gRPC's, and the HTTP listener's if on."""
        return (self.listen,) if self.http_listen is None else (self.listen, self.http_listen)

    @model_validator(mode="after")
    def _ledger_where_kept_apart(self) -> Settings:
        kind = self.store_kind
        if kind.separate_ledger and self.ledger is None:
            raise ValueError(f"a {kind.name} store needs a ledger: --ledger postgresql+asyncpg://…")
        if not kind.separate_ledger and self.ledger is not None:
            raise ValueError(f"--ledger is for a redis store; a {kind.name} store keeps its own ledger")
        return self

    @model_validator(mode="after")
    def _queue_wait_within_cap(self) -> Settings:
        if self.queue_wait > self.max_queue_wait:
            raise ValueError(
                f"TURNGATE_QUEUE_WAIT ({self.queue_wait:g}s) must not exceed TURNGATE_MAX_QUEUE_WAIT "
                f"({self.max_queue_wait:g}s)"
            )
        return self

    @model_validator(mode="after")
    def _workers_where_commits_are_shared(self) -> Settings:
        if self.workers == 1 or (self.workers == "auto" and not self.store_kind.shared_commits):
            return self
        if not self.store_kind.shared_commits:
            raise ValueError(
                "--workers needs a redis store: a SQL store's watchers hear only their own process's "
                "writes, and SQLite has one writer; for more cores run redis mode "
                "(docs/deploying.md, Production mode)"
            )
        if host_and_port(self.listen)[1] == 0:
            raise ValueError("--workers needs a fixed --listen port: every worker listens on it")
        return self

    @model_validator(mode="after")
    def _secure_by_default(self) -> Settings:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("TLS needs both --tls-cert and --tls-key")
        if self.tls_client_ca is not None and self.tls_cert is None:
            raise ValueError("--tls-client-ca (mutual TLS) needs --tls-cert and --tls-key")
        if self.auth_file is None and self.listens_beyond_loopback and not self.insecure:
            addresses = " and ".join(self.listens)
            raise ValueError(
                f"listening on {addresses} without --auth-file would let anyone who can connect run "
                "and stop turns: give --auth-file (docs/security.md), listen on 127.0.0.1, "
                "or pass --insecure"
            )
        return self


def host_and_port(address: str) -> tuple[str, int]:
    """The host to bind and the port of a validated HOST:PORT (`*` is every IPv4 address)."""
    host, port = address.rsplit(":", 1)
    return ("0.0.0.0" if host == "*" else host.strip("[]")), int(port)


def local_target(listen: str) -> str:
    """The gRPC target through which a process on this host reaches a server listening on
    `listen`: a wildcard host (every address) is reached at loopback."""
    host, port = host_and_port(listen)
    if host == "0.0.0.0":
        return f"127.0.0.1:{port}"
    if host == "::":
        return f"[::1]:{port}"
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
