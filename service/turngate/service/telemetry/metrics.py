"""Metrics (OpenTelemetry metrics API); docs/telemetry.md lists them.

Counters and histograms come from what the store decided: a store Observer sees each apply once,
after its commit, whoever called it and whether or not the caller is still waiting. Gauges report
at collection what a `Sampler` holds: the store's active turns and the projector's lag, which it
reads every SAMPLE_INTERVAL_S (a collection runs on an exporter's or the HTTP server's thread and
cannot wait on the event loop), and the hub's watchers, the projector's dead letters and lost
histories, the background loops' restarts and the rows history retention pruned as they are.

The instruments are made once per process, because an SDK meter keeps the callbacks an observable
instrument was first made with: they report the sampler of the server or projector started last.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import assert_never

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Meter, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.semconv._incubating.metrics.rpc_metrics import RPC_SERVER_CALL_DURATION

from turngate.client._version import __version__
from turngate.service.core import (
    AcknowledgeSteer,
    Admit,
    Admitted,
    Cancel,
    Cancelled,
    ClearQueue,
    Complete,
    Directive,
    Expire,
    Heartbeat,
    HeartbeatReply,
    Idle,
    Mismatch,
    MoveQueuedTurn,
    Queued,
    QueuePaused,
    QueueResumed,
    RecordInteraction,
    RecordToolCall,
    Refusal,
    Reply,
    ResolveInteraction,
    ResumeQueue,
    Retire,
    SessionKey,
    SettledTurn,
    SteerEnded,
    SteerTurn,
    TurnAdmitted,
    TurnDequeued,
    TurnOutcome,
    TurnQueued,
    TurnSettled,
)
from turngate.service.ports.store import Applied, StoreUnavailable
from turngate.service.telemetry import probes, rpc
from turngate.service.telemetry.attributes import Fields, prefixed

SAMPLE_INTERVAL_S = 1.0
_US = 1_000_000
# Histogram buckets in seconds: stops settle within the stop grace (30 s by default), leases last 20 s.
_SECONDS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 60.0, 300.0)
# Queued turns wait for the turns ahead of them, up to max_queue_wait (10 min by default, 1 h at most).
_WAIT_SECONDS = (0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)
# Queue depths: at most max_queue_depth (16 by default, 256 at most).
_DEPTHS = (1, 2, 3, 4, 6, 8, 12, 16, 32, 64, 128, 256)


@dataclass(frozen=True, slots=True)
class Sources:
    """Where the gauges of one server or projector read their values, handed in by whoever owns
    them (telemetry imports none of the things it reports on). None: not reported."""

    # Sampled every SAMPLE_INTERVAL_S: the store's active turns, the projector's outbox lag.
    active_turns: Callable[[], Awaitable[int]] | None = None
    lag: Callable[[], Awaitable[int]] | None = None
    # Read at collection: the hub's open streams, the projector's dead letters and lost histories,
    # how often each background loop was restarted after a failure, by its name, and the rows
    # history retention pruned, by table.
    watchers: Callable[[], int] | None = None
    dead_letters: Callable[[], int] | None = None
    lost_histories: Callable[[], int] | None = None
    loop_restarts: Callable[[], Mapping[str, int]] | None = None
    pruned: Callable[[], Mapping[str, int]] | None = None


class Sampler:
    """What the gauges of one server or projector report."""

    def __init__(self, sources: Sources) -> None:
        self.sources = sources
        self.active_turns: int | None = None
        self.lag: int | None = None

    async def run(self) -> None:
        """Reads the active turns and the lag until cancelled (then neither is reported any more);
        a read that fails reports nothing until one succeeds."""
        try:
            while True:
                if self.sources.active_turns is not None:
                    self.active_turns = await _read(self.sources.active_turns)
                if self.sources.lag is not None:
                    self.lag = await _read(self.sources.lag)
                await asyncio.sleep(SAMPLE_INTERVAL_S)
        finally:
            self.active_turns = self.lag = None

    def watchers(self) -> int | None:
        return None if self.sources.watchers is None else self.sources.watchers()

    def dead_letters(self) -> int | None:
        return None if self.sources.dead_letters is None else self.sources.dead_letters()

    def loop_restarts(self) -> Mapping[str, int]:
        return {} if self.sources.loop_restarts is None else self.sources.loop_restarts()

    def lost_histories(self) -> int | None:
        return None if self.sources.lost_histories is None else self.sources.lost_histories()

    def pruned(self) -> Mapping[str, int]:
        return {} if self.sources.pruned is None else self.sources.pruned()


async def _read(sample: Callable[[], Awaitable[int]]) -> int | None:
    try:
        return await sample()
    except StoreUnavailable:
        return None


class Metrics:
    """The process's instruments."""

    def __init__(self, meter: Meter) -> None:
        self.sampler: Sampler | None = None
        # What the build info gauge reports: turngate's version and the store's kind (set by `build`).
        self.build: Fields = {}
        self.rpc_duration = meter.create_histogram(
            RPC_SERVER_CALL_DURATION,
            "s",
            "Measures the duration of an incoming Remote Procedure Call (RPC).",
            explicit_bucket_boundaries_advisory=rpc.BUCKETS,
        )
        meter.create_observable_gauge(
            "turngate.build.info",
            [lambda _options: [Observation(1, self.build)] if self.build else []],
            "1",
            "1, with turngate's version and the kind of store this process uses",
        )
        meter.create_observable_gauge(
            "turngate.ready",
            [self._ready],
            "1",
            "1 while this replica's gRPC health is SERVING (ready for calls), else 0",
        )
        self._admissions = meter.create_counter(
            "turngate.admissions", "{admission}", "AdmitTurn answers: admitted, replayed, or refused and why"
        )
        self._cancels = meter.create_counter(
            "turngate.cancels", "{cancel}", "CancelTurn answers: cancelled, mismatch or idle; settled or not"
        )
        self._settlements = meter.create_counter(
            "turngate.settlements", "{turn}", "Turns settled, by outcome and by whom"
        )
        self._stop_to_settle = meter.create_histogram(
            "turngate.stop_to_settle",
            "s",
            "From a turn's accepted Stop to its settlement",
            explicit_bucket_boundaries_advisory=_SECONDS,
        )
        self._lease_margin = meter.create_histogram(
            "turngate.lease.margin",
            "s",
            "What was left of a live turn's lease when its heartbeat came",
            explicit_bucket_boundaries_advisory=_SECONDS,
        )
        self._queue_depth = meter.create_histogram(
            "turngate.queue.depth",
            "{turn}",
            "The turns waiting in a session's queue once a turn has joined it, that turn included",
            explicit_bucket_boundaries_advisory=_DEPTHS,
        )
        self._queue_wait = meter.create_histogram(
            "turngate.queue.wait",
            "s",
            "How long a turn waited in the queue: until admitted, or until it left it otherwise",
            explicit_bucket_boundaries_advisory=_WAIT_SECONDS,
        )
        self._steers = meter.create_counter(
            "turngate.steers", "{steer}", "Steers ended, by how: consumed, declined, unconsumed or expired"
        )
        self._retirements = meter.create_counter(
            "turngate.sessions.retired", "{session}", "Idle sessions removed from the hot store (R1)"
        )
        self._promotions = meter.create_counter(
            "turngate.queue.promotions", "{turn}", "Turns admitted from the queue"
        )
        self._pauses = meter.create_counter(
            "turngate.queue.pauses",
            "{pause}",
            "Queues paused, by the outcome of the turn whose end paused them",
        )
        self._resumes = meter.create_counter("turngate.queue.resumes", "{resume}", "Paused queues resumed")
        self._expiries = meter.create_counter(
            "turngate.queue.expiries", "{turn}", "Queued turns that waited past their max_queue_wait"
        )
        self._clears = meter.create_counter(
            "turngate.queue.clears", "{clear}", "Stops whose CLEAR cancelled the turns waiting in the queue"
        )
        meter.create_observable_gauge(
            "turngate.turns.active",
            [self._callback(lambda sampler: sampler.active_turns)],
            "{turn}",
            "Sessions with an active turn, in the whole store (sampled)",
        )
        meter.create_observable_up_down_counter(
            "turngate.watchers",
            [self._callback(Sampler.watchers)],
            "{watcher}",
            "WatchSession streams open on this replica",
        )
        meter.create_observable_gauge(
            "turngate.projector.lag",
            [self._callback(lambda sampler: sampler.lag)],
            "{entry}",
            "Outbox entries not yet recorded in the ledger (redis mode, sampled)",
        )
        meter.create_observable_counter(
            "turngate.projector.dead_letters",
            [self._callback(Sampler.dead_letters)],
            "{entry}",
            "What this process's projector could not record and dead-lettered",
        )
        meter.create_observable_counter(
            "turngate.loop.restarts",
            [self._restarts],
            "{restart}",
            "Background loops restarted after an unexpected failure, by loop",
        )
        meter.create_observable_counter(
            "turngate.projector.lost_histories",
            [self._callback(Sampler.lost_histories)],
            "{session}",
            "Sessions whose Redis log this process's projector found started again (Redis lost them)",
        )
        meter.create_observable_counter(
            "turngate.history.pruned",
            [self._pruned],
            "{row}",
            "History rows this process's history retention deleted, by table",
        )

    def _callback(
        self, value: Callable[[Sampler], int | None]
    ) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def observe(_options: CallbackOptions) -> Iterable[Observation]:
            reported = None if self.sampler is None else value(self.sampler)
            return [] if reported is None else [Observation(reported)]

        return observe

    def _ready(self, _options: CallbackOptions) -> Iterable[Observation]:
        ready = probes.readiness()
        return [] if ready is None else [Observation(int(ready))]

    def _restarts(self, _options: CallbackOptions) -> Iterable[Observation]:
        restarts = {} if self.sampler is None else self.sampler.loop_restarts()
        return [Observation(count, prefixed({"loop": name})) for name, count in restarts.items()]

    def _pruned(self, _options: CallbackOptions) -> Iterable[Observation]:
        pruned = {} if self.sampler is None else self.sampler.pruned()
        return [Observation(count, prefixed({"table": table})) for table, count in pruned.items()]

    def observe(self, _key: SessionKey, applied: Applied) -> None:
        """A store Observer: counts and measures one apply's decision."""
        reply = applied.decision.reply
        match applied.command:
            case Admit():
                self._admissions.add(1, _admission(reply))
            case Cancel():
                self._cancels.add(1, _cancel(reply))
            case Heartbeat():
                assert isinstance(reply, HeartbeatReply)
                # Not abandoned: it extended the lease of the turn that was active.
                if reply.directive is not Directive.ABANDON:
                    assert applied.state.active is not None
                    self._lease_margin.record((applied.state.active.lease_expires_at - applied.now) / _US)
            case (
                RecordToolCall()
                | RecordInteraction()
                | ResolveInteraction()
                | Complete()
                | ResumeQueue()
                | ClearQueue()
                | MoveQueuedTurn()
                | SteerTurn()
                | AcknowledgeSteer()
                | Expire()
            ):
                pass
            case Retire():
                if applied.decision.removed:
                    self._retirements.add(1)
            case _:
                assert_never(applied.command)
        for event in applied.decision.events:
            match event.body:
                case TurnSettled() as body:
                    self._settled(applied, body.turn)
                case SteerEnded() as body:
                    self._steers.add(1, prefixed({"status": body.status.name, "requeued": body.requeued}))
        self._queue(applied)

    def _queue(self, applied: Applied) -> None:
        """What the decision did to the session's queue (docs/design.md §7)."""
        cleared = False
        for event in applied.decision.events:
            match event.body:
                case TurnQueued() as body:
                    depth = len(applied.decision.state.queue)
                    self._queue_depth.record(depth, prefixed({"mode": _queued_by(applied, body)}))
                case TurnAdmitted(from_queue=True) as body:
                    self._promotions.add(1)
                    self._queue_wait.record(body.waited / _US, _left_queue("admitted"))
                case TurnDequeued() as body:
                    self._queue_wait.record((event.time - body.queued_at) / _US, _left_queue(_dequeued(body)))
                    if body.outcome is TurnOutcome.EXPIRED:
                        self._expiries.add(1)
                    cleared = cleared or body.cleared
                case QueuePaused() as body:
                    self._pauses.add(1, prefixed({"outcome": body.outcome.name}))
                case QueueResumed():
                    self._resumes.add(1)
        if cleared:
            self._clears.add(1)

    def _settled(self, applied: Applied, turn: SettledTurn) -> None:
        attributes = prefixed({"outcome": turn.outcome.name, "settled_by": turn.settled_by.name})
        self._settlements.add(1, attributes)
        if turn.stop_requested:
            # The settled turn was the active one; no Stop recorded there means this decision both
            # stopped and settled it (a forced Stop of a running turn).
            active = applied.state.active
            assert active is not None
            stopped_at = turn.settled_at if active.stop is None else active.stop.requested_at
            self._stop_to_settle.record((turn.settled_at - stopped_at) / _US, attributes)


def _admission(reply: Reply) -> Fields:
    if isinstance(reply, Refusal):
        return prefixed({"result": "refused", "refusal": reply.reason.name})
    assert isinstance(reply, Admitted | Queued)
    if reply.replayed:
        return prefixed({"result": "replayed"})
    return prefixed({"result": "admitted" if isinstance(reply, Admitted) else "queued"})


def _queued_by(applied: Applied, body: TurnQueued) -> str:
    """How a turn joined the queue: its admission's mode, or STEER for a turn a steer became (S6, S7)."""
    if body.steer is not None:
        return "STEER"
    assert isinstance(applied.command, Admit)
    return applied.command.mode.name


def _left_queue(result: str) -> Fields:
    return prefixed({"result": result})


def _dequeued(body: TurnDequeued) -> str:
    """How a queued turn left the queue without running."""
    if body.outcome is TurnOutcome.EXPIRED:
        return "expired"
    return "cleared" if body.cleared else "cancelled"


def _cancel(reply: Reply) -> Fields:
    assert isinstance(reply, Cancelled | Mismatch | Idle)
    return prefixed({"result": reply.kind, "settled": isinstance(reply, Cancelled) and reply.settled})


_metrics: Metrics | None = None


def process_metrics() -> Metrics | None:
    """The process's instruments, made the first time an SDK meter provider is found installed;
    None until then."""
    global _metrics
    provider = metrics.get_meter_provider()
    if _metrics is None and isinstance(provider, MeterProvider):
        _metrics = Metrics(provider.get_meter("turngate", __version__))
    return _metrics
