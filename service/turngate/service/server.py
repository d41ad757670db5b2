"""The composition root: store, watch hub, watchdog and the gRPC server, started and stopped in order;
the background loops run under a supervisor."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
from collections.abc import AsyncIterator, Callable, Sized
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar
from urllib.parse import urlsplit

import grpc
from grpc_health.v1 import health, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from prometheus_client import CollectorRegistry
from sqlalchemy.engine import make_url

from turngate.service.api import decoding
from turngate.service.api.admission import AdmissionService
from turngate.service.api.control import ControlService
from turngate.service.api.edge import Edge
from turngate.service.api.policy import Policy
from turngate.service.api.quota import WatchQuota
from turngate.service.api.sessions import SessionService
from turngate.service.auth.files import SecretsFileError
from turngate.service.auth.gatekeeper import Gatekeeper
from turngate.service.auth.principals import load_tokens
from turngate.service.auth.session_tokens import load_keys
from turngate.service.auth.tls import ServerCertificates, TlsError
from turngate.service.backends import Backend, ledger_url, open_backend, when_migrated
from turngate.service.config import Settings, host_and_port, microseconds, sqlite_file_of
from turngate.service.health import LIVENESS, STORE, Health, follow_store
from turngate.service.redis_url import REDIS_SCHEMES
from turngate.service.retirement import Retirement
from turngate.service.schema import LEDGER, LedgerSchema
from turngate.service.sql.engine import dispose, make_engine
from turngate.service.store.cas import CompareAndSetStore
from turngate.service.supervise import Supervisor
from turngate.service.telemetry import instrument
from turngate.service.telemetry.metrics import Sources
from turngate.service.watch import WatchHub
from turngate.service.watchdog import Watchdog
from turngate.service.web.connections import ConnectionGate, ConnectionLimits
from turngate.service.web.private_socket import PrivateSocket
from turngate.v1 import turngate_pb2 as pb

if TYPE_CHECKING:
    from turngate.service.web.listener import HttpListener

log = logging.getLogger("turngate.server")
SERVICE_NAMES = tuple(service.full_name for service in pb.DESCRIPTOR.services_by_name.values())
_HEALTH_INTERVAL = 1.0
# gc.set_threshold for a serving process (see _tune_garbage_collector); Python's default is 700, 10, 10.
GC_THRESHOLD = (10_000, 10, 10)
# The metrics listener's connections: Prometheus and a few probes need a handful.
METRICS_LIMITS = ConnectionLimits(total=64, per_peer=16)


class ListenError(Exception):
    """The listen address could not be bound."""


class TurngateServer:
    """One replica. `start()` opens the backend, binds and starts background tasks."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.port = 0
        self._backend: Backend | None = None
        self._hub: WatchHub | None = None
        self._health = Health(
            SERVICE_NAMES,
            waiting_for={STORE: "store not probed yet", LEDGER: "ledger schema not looked at yet"},
        )
        # Its backoff may be changed before `start()` (tests restart loops at once).
        self.supervisor = Supervisor(grace=settings.loop_failure_grace, report=self._health.report)
        self._gatekeeper = Gatekeeper(None)
        self._certificates: ServerCertificates | None = None
        self._grpc: grpc.aio.Server | None = None
        self._http: HttpListener | None = None
        self._bridge: grpc.aio.Channel | None = None
        self._bridge_socket: PrivateSocket | None = None
        self.http_port = 0

    @property
    def backend(self) -> Backend:
        assert self._backend is not None, "server not started"
        return self._backend

    @property
    def store(self) -> CompareAndSetStore:
        return self.backend.store

    @property
    def hub(self) -> WatchHub:
        assert self._hub is not None, "server not started"
        return self._hub

    async def start(self) -> None:
        settings = self.settings
        self._gatekeeper.tokens = _optional(settings.auth_file, load_tokens)
        self._gatekeeper.session_keys = _optional(settings.session_token_keys, load_keys)
        self._certificates = ServerCertificates(settings) if settings.tls else None
        self._backend = backend = await open_backend(
            settings, lambda problem: self._health.report(LEDGER, problem)
        )
        store = backend.store
        self._hub = hub = WatchHub(
            store, buffer=settings.watch_buffer, retention=settings.event_retention, feed=backend.feed
        )
        watchdog = Watchdog(store)
        retirement = Retirement(store, idle_retention=microseconds(settings.idle_retention))
        policy = Policy.from_settings(settings)
        quota = WatchQuota(settings.max_watches_per_principal, settings.max_watches_per_session)
        projector, retention = backend.projector, backend.retention
        instrumented = instrument.server(
            store,
            Sources(
                active_turns=store.count_active,
                lag=projector.lag if projector else None,
                watchers=lambda: hub.watchers,
                dead_letters=(lambda: projector.dead_letters) if projector else None,
                lost_histories=(lambda: projector.lost_histories) if projector else None,
                loop_restarts=self.supervisor.restarts,
                pruned=(lambda: retention.pruned.by_table()) if retention else None,
            ),
            store_kind=settings.store.partition(":")[0],
            live=lambda: self._health.serving(LIVENESS),
            ready=lambda: self._health.serving(""),
        )
        server = grpc.aio.server(
            interceptors=[*instrumented.interceptors, Edge(self._gatekeeper, settings.rpc_timeout)],
            options=_grpc_options(settings),
        )
        decoding.add_services(
            server,
            {
                "AdmissionService": AdmissionService(store, policy),
                "ControlService": ControlService(store, policy, lambda: self._gatekeeper.session_keys),
                "SessionService": SessionService(store, backend.history, backend.directory, hub, quota),
            },
        )
        health_pb2_grpc.add_HealthServicer_to_server(self._health, server)
        reflection.enable_server_reflection(
            (*SERVICE_NAMES, health.SERVICE_NAME, reflection.SERVICE_NAME), server
        )
        try:
            if self._certificates is None:
                self.port = server.add_insecure_port(settings.listen)
            else:
                self.port = server.add_secure_port(settings.listen, self._certificates.credentials())
        except RuntimeError as error:
            await backend.close()
            raise ListenError(f"cannot listen on {settings.listen}: {error}") from error
        self._grpc = server
        bridge_target = self._bridge_port(server) if settings.http_listen else None
        await server.start()
        if bridge_target is not None:
            await self._start_http(bridge_target)
        loops = {
            "watchdog": watchdog.run,
            "retirement": retirement.run,
            # The store's ping looked up at each call, as a test may swap it.
            "health": lambda: follow_store(self._health, lambda: self.store.ping(), _HEALTH_INTERVAL),
            **backend.loops,
            **instrumented.loops,
        }
        for name, loop in loops.items():
            self.supervisor.start(name, loop)

    def _bridge_port(self, server: grpc.aio.Server) -> str:
        """The private gRPC port the HTTP listener forwards to: a Unix socket in a directory only
        this user may enter, so nothing else on the host reaches the server past its TLS."""
        self._bridge_socket = PrivateSocket()
        server.add_insecure_port(self._bridge_socket.target)
        return self._bridge_socket.target

    async def _start_http(self, bridge_target: str) -> None:
        # Imported only by a process that serves HTTP (docs/decisions.md, "The cost of a start").
        from turngate.service.web.app import application
        from turngate.service.web.listener import HttpListener

        settings = self.settings
        assert settings.http_listen is not None
        # Replies (a turn's history) may exceed the request limit; the gRPC server bounds requests.
        self._bridge = grpc.aio.insecure_channel(
            bridge_target, options=[("grpc.max_receive_message_length", -1)]
        )
        app = application(
            self._bridge,
            self._gatekeeper,
            max_message_bytes=settings.max_message_bytes,
            request_timeout=settings.http_request_timeout,
            cors_origins=settings.http_cors_origins,
            trace_url=settings.console_trace_url,
            host_names=None if settings.auth_file else _served_names(settings.http_listen),
        )
        limits = ConnectionLimits(settings.http_max_connections, settings.http_max_connections_per_peer)
        self._http = HttpListener(
            settings.http_listen,
            app,
            settings,
            ConnectionGate(limits),
            tls=None if self._certificates is None else self._certificates.http_context(),
            access=settings.http_access_log,
        )
        try:
            self._http.start()
        except OSError as error:
            await self.stop()
            raise ListenError(f"cannot listen on {settings.http_listen}: {error.strerror}") from error
        self.http_port = self._http.port

    def reload(self) -> None:
        """Reads the tokens file, the session token keys and the TLS files again (SIGHUP). Calls
        already admitted and open connections go on; new calls meet the new tokens and keys, new
        connections on either listener the new certificates. A file that no longer reads or
        validates leaves the current ones in force."""
        if (tokens := _reloaded(self.settings.auth_file, load_tokens, "tokens")) is not None:
            self._gatekeeper.tokens = tokens
        if (keys := _reloaded(self.settings.session_token_keys, load_keys, "session token keys")) is not None:
            self._gatekeeper.session_keys = keys
        if self._certificates is not None:
            try:
                self._certificates.reload()
                log.info("TLS certificates reloaded")
            except TlsError as error:
                log.error("kept the current TLS certificates: %s", error)

    async def stop(self, drain_delay: float = 0.0) -> None:
        """Drains, then closes (docs/deploying.md, Draining): health NOT_SERVING at once, watchers
        told first; `drain_delay` seconds more of serving so load balancers notice; then watch
        streams end with UNAVAILABLE (their clients resume elsewhere), no new call is taken, calls
        in flight get `shutdown_grace` to finish; then the background loops and the store close.
        The drain settles nothing: a turn in flight stays admitted for its runner to go on with."""
        self._health.drain()
        await asyncio.sleep(drain_delay)
        self._health.close()
        if self._hub is not None:
            self._hub.close()
        # Neither listener takes new calls; calls in flight on either get the grace to finish.
        await asyncio.gather(self._stop_http(), self._stop_grpc())
        await self.supervisor.stop()
        if self._backend is not None:
            await self._backend.close()

    async def _stop_http(self) -> None:
        if self._http is not None:
            await self._http.stop()
            self._http = None
        if self._bridge is not None:
            await self._bridge.close()
            self._bridge = None

    async def _stop_grpc(self) -> None:
        if self._grpc is not None:
            await self._grpc.stop(self.settings.shutdown_grace)
        if self._bridge_socket is not None:
            self._bridge_socket.remove()
            self._bridge_socket = None

    async def __aenter__(self) -> TurngateServer:
        await self.start()
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.stop()


def _served_names(listen: str) -> frozenset[str]:
    """The host names an HTTP listener with authentication off answers to besides loopback's:
    its listen address's host, unless that is every address."""
    from turngate.service.web.hosts import LOOPBACK_NAMES

    host = host_and_port(listen)[0]
    return frozenset() if host in ("0.0.0.0", "::") else frozenset({host}) - LOOPBACK_NAMES


@contextlib.asynccontextmanager
async def metrics_served(settings: Settings, registry: CollectorRegistry | None) -> AsyncIterator[None]:
    """`registry` as Prometheus text, with the probes, on `metrics_listen` for the block."""
    if settings.metrics_listen is None or registry is None:
        yield
        return
    from turngate.service.telemetry.listener import app as metrics_app
    from turngate.service.web.listener import HttpListener

    listener = HttpListener(
        settings.metrics_listen, metrics_app(registry), settings, ConnectionGate(METRICS_LIMITS)
    )
    try:
        listener.start()
    except OSError as error:
        raise ListenError(f"cannot serve metrics on {settings.metrics_listen}: {error.strerror}") from error
    try:
        yield
    finally:
        await listener.stop()


Loaded = TypeVar("Loaded", bound=Sized)


def _optional(path: Path | None, load: Callable[[Path], Loaded]) -> Loaded | None:
    return None if path is None else load(path)


def _reloaded(path: Path | None, load: Callable[[Path], Loaded], what: str) -> Loaded | None:
    """`path` read again, or None when it is not set or no longer reads or validates (then the
    current contents stay in force)."""
    try:
        loaded = _optional(path, load)
    except SecretsFileError as error:
        log.error("kept the current %s: %s", what, error)
        return None
    if loaded is not None:
        log.info("%s reloaded: %d", what, len(loaded))
    return loaded


def _grpc_options(settings: Settings) -> list[tuple[str, int]]:
    return [*_base_options(settings), *_connection_age_options(settings)]


def _connection_age_options(settings: Settings) -> list[tuple[str, int]]:
    if settings.max_connection_age is None:
        return []
    # grpc-core adds ±10% jitter to the age, so connections made together do not move together.
    return [
        ("grpc.max_connection_age_ms", round(settings.max_connection_age * 1000)),
        ("grpc.max_connection_age_grace_ms", round(settings.max_connection_age_grace * 1000)),
    ]


def _base_options(settings: Settings) -> list[tuple[str, int]]:
    return [
        # A second server on a busy port must fail, not silently share it; the workers of
        # `serve --workers` share theirs on purpose.
        ("grpc.so_reuseport", 0 if settings.worker_count == 1 else 1),
        ("grpc.max_receive_message_length", settings.max_message_bytes),
        # Ping every connection, busy or idle; one that does not answer is closed, ending its calls.
        ("grpc.keepalive_time_ms", round(settings.keepalive_time * 1000)),
        ("grpc.keepalive_timeout_ms", round(settings.keepalive_timeout * 1000)),
        # grpc-core times every unanswered ping with this one (default 60 s), keepalive's included.
        ("grpc.http2.ping_timeout_ms", round(settings.keepalive_timeout * 1000)),
        ("grpc.keepalive_permit_without_calls", 1),
        # Clients (the SDK) may ping as often as every 10 s without being told to go away.
        ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
    ]


def _first_signal() -> asyncio.Future[signal.Signals]:
    """The first SIGTERM or SIGINT received from now on (handled from now on, so one that comes
    while the process starts stops it once started, as any other would)."""
    received: asyncio.Future[signal.Signals] = asyncio.get_running_loop().create_future()

    def receive(sig: signal.Signals) -> None:
        if not received.done():
            received.set_result(sig)

    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, receive, sig)
    return received


async def serve(
    settings: Settings,
    prometheus: CollectorRegistry | None = None,
    *,
    on_serving: Callable[[], object] | None = None,
) -> None:
    """Runs one replica until SIGTERM or SIGINT, then drains it (`TurngateServer.stop`); SIGHUP
    reloads the tokens file, the session token keys and the TLS files. With `metrics_listen`,
    serves `prometheus` there from the start to the end. `on_serving` is called once it listens."""
    async with metrics_served(settings, prometheus):
        await _serve(settings, on_serving)


async def _serve(settings: Settings, on_serving: Callable[[], object] | None) -> None:
    if settings.insecure and settings.auth_file is None and settings.listens_beyond_loopback:
        log.warning(
            "INSECURE: listening on %s with no --auth-file: anyone who can connect may run and stop turns",
            " and ".join(settings.listens),
        )
    signalled = _first_signal()
    server = TurngateServer(settings)
    await server.start()
    _tune_garbage_collector()
    drain_delay = 0.0
    try:
        asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, server.reload)
        log.info(
            "turngate listening on %s (port %d, %s, %s)%s%s",
            settings.listen,
            server.port,
            "TLS" if settings.tls else "plaintext",
            "tokens" if settings.auth_file else "no authentication",
            f"; HTTP (Connect, gRPC-Web, console) on {settings.http_listen} (port {server.http_port})"
            if settings.http_listen
            else "",
            _stores(settings),
        )
        if on_serving is not None:
            on_serving()
        # Ctrl-C comes from a person at a terminal, not from an orchestrator behind a load balancer.
        if await signalled == signal.SIGTERM:
            drain_delay = settings.drain_delay
        log.info("turngate shutting down (draining for %gs)", drain_delay)
    finally:
        await server.stop(drain_delay)


def _stores(settings: Settings) -> str:
    """The store and, when it is apart, the ledger, as the start-up line names them."""
    where = f"; store: {_named(settings.store)}"
    return where if settings.ledger is None else f"{where}; ledger: {_named(settings.ledger)}"


def _named(url: str) -> str:
    """A database as an operator recognises it, never with its password: a SQLite file by its
    absolute path (a relative one depends on the working directory this start uses)."""
    if url.startswith(REDIS_SCHEMES):
        parts = urlsplit(url)
        login, at, nodes = parts.netloc.rpartition("@")
        user, colon, _ = login.partition(":")
        return "Redis " + parts._replace(netloc=f"{user}{colon and ':***'}{at}{nodes}").geturl()
    if (path := sqlite_file_of(url)) is not None:
        return f"SQLite file {path}"
    parsed = make_url(url)
    return (
        "SQLite in memory"
        if parsed.drivername.startswith("sqlite")
        else parsed.render_as_string(hide_password=True)
    )


def _tune_garbage_collector() -> None:
    """For a serving process, once started: what is alive then (modules, schemas, the stack's
    singletons) lives as long as the process, so it is frozen out of the collector's sight, and
    the youngest generation is collected after GC_THRESHOLD[0] net allocations, not 700. Measured
    during a fan-out to 1,000 watchers (200 events): collections took 1.9 s of 13 s, with pauses
    up to 120 ms (a full collection traversing the whole heap); frozen, 0.25 s of full
    collections (pauses up to 21 ms); with the threshold as well, 5 ms in all. Not done by
    `TurngateServer`: a process running several in turn (the tests) would keep their garbage."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLD)


async def project(settings: Settings, prometheus: CollectorRegistry | None = None) -> None:
    """Runs only the ledger projector (redis mode) until SIGTERM or SIGINT, once the ledger has this
    release's schema (migrated here unless told not to). With `metrics_listen`, serves
    `prometheus` there."""
    async with metrics_served(settings, prometheus):
        await _project(settings)


async def _project(settings: Settings) -> None:
    from turngate.service.backends.redis import projector_for  # the one kind that has a projector

    signalled = _first_signal()
    engine = make_engine(ledger_url(settings))
    projector = projector_for(settings, engine)
    schema = LedgerSchema(ledger_url(settings), migrate=settings.migrate)
    supervisor = Supervisor(grace=settings.loop_failure_grace)
    loops = {
        "schema": schema.run,
        "projector": lambda: when_migrated(schema, projector.run),
        **instrument.sampling(
            Sources(
                lag=projector.lag,
                dead_letters=lambda: projector.dead_letters,
                lost_histories=lambda: projector.lost_histories,
                loop_restarts=supervisor.restarts,
            )
        ),
    }
    for name, loop in loops.items():
        supervisor.start(name, loop)
    log.info("turngate projecting the outboxes of %s into the ledger", settings.redis_prefix)
    try:
        await signalled
    finally:
        await supervisor.stop()
        await projector.close()
        await dispose(engine)
