"""`turngate serve --workers N`: N processes serving one port (SO_REUSEPORT), each a full replica.

The parent serves nothing itself. It starts the workers, passes SIGTERM and SIGINT on to them and
exits once every one has drained (0 if each exited 0). A worker that exits on its own is started
again, unless it failed before it served (exited with an error code before it said it was serving:
a port taken, a store refused): then the others are stopped and the parent exits 1, as a single
`serve` would have.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Sequence
from multiprocessing.connection import wait
from multiprocessing.process import BaseProcess
from multiprocessing.synchronize import Event
from types import FrameType

from turngate.service.config import Settings, host_and_port

log = logging.getLogger("turngate.workers")

# How long after a worker exits on its own it is started again.
RESTART_DELAY_S = 1.0

# A worker is called with its settings, its index and the event it sets once it serves.
Worker = Callable[[Settings, int, Event], None]


def worker_settings(settings: Settings, index: int) -> Settings:
    """Worker `index`'s settings: metrics on a port of its own (the given port + `index`), so each
    worker is scraped as the replica it is."""
    if settings.metrics_listen is None:
        return settings
    host, port = host_and_port(settings.metrics_listen)
    shown_host = f"[{host}]" if ":" in host else host
    return settings.model_copy(update={"metrics_listen": f"{shown_host}:{port + index}"})


class Workers:
    """The worker processes of one `serve --workers`, by index."""

    def __init__(self, settings: Settings, worker: Worker) -> None:
        self._settings = settings
        self._worker = worker
        # Spawned, not forked: gRPC's core must not be inherited half-initialised.
        self._context = multiprocessing.get_context("spawn")
        self._running: dict[int, tuple[BaseProcess, Event]] = {}
        self._stopping: signal.Signals | None = None
        self._failed = False

    def run(self) -> int:
        """Starts the workers and returns the exit code once every one has exited."""
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._pass_on)
        for index in range(self._settings.worker_count):
            self._start(index)
        log.info("turngate serving %s with %d workers", self._settings.listen, len(self._running))
        while self._running:
            self._reap(wait([process.sentinel for process, _ in self._running.values()]))
        log.info("turngate stopped: every worker has exited")
        return 1 if self._failed else 0

    def _start(self, index: int) -> None:
        if self._stopping is not None:
            return
        serving = self._context.Event()
        process = self._context.Process(
            target=self._worker, args=(self._settings, index, serving), name=f"turngate-worker-{index}"
        )
        process.start()
        self._running[index] = (process, serving)

    def _reap(self, ready: Sequence[object]) -> None:
        for index, (process, serving) in list(self._running.items()):
            if process.sentinel not in ready:
                continue
            process.join()
            del self._running[index]
            code = process.exitcode
            if self._stopping is not None:
                # Signalled before it set its handlers, it stopped before it served anything.
                self._failed |= code not in (0, -self._stopping)
            # Judged by what the worker said, not by a clock: a loaded machine starts slowly.
            elif code is not None and code > 0 and not serving.is_set():
                log.error("worker %d failed at start (exit code %s): stopping the others", index, code)
                self._failed = True
                self._stop_all(signal.SIGINT)  # they have just started: nothing to drain
            else:
                log.warning("worker %d exited (exit code %s): starting it again", index, code)
                time.sleep(RESTART_DELAY_S)
                self._start(index)

    def _pass_on(self, signum: int, _frame: FrameType | None) -> None:
        self._stop_all(signal.Signals(signum))

    def _stop_all(self, sig: signal.Signals) -> None:
        self._stopping = sig
        for process, _ in self._running.values():
            if process.pid is not None and process.exitcode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.pid, sig)


def run_workers(settings: Settings, worker: Worker) -> int:
    """Runs `settings.worker_count` processes, each `worker(settings, index, serving)`, until
    signalled."""
    return Workers(settings, worker).run()
