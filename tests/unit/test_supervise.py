"""The supervisor of background loops: a loop that fails unexpectedly is restarted with backoff,
its restarts counted, its failure streak logged once with its traceback and its end with the count,
reported while it lasts longer than the grace; stopping ends every loop, running or waiting to
restart; a loop handling its expected errors itself (the watchdog) is never restarted."""

from __future__ import annotations

import asyncio
import logging

import pytest
from redis.exceptions import ResponseError

from tests.support.memory_store import MemoryStore
from tests.support.waiting import eventually
from turngate.service.supervise import Backoff, Supervisor
from turngate.service.watchdog import Watchdog

# Restarts at once, and a run after a failure is stable as soon as it has started.
AT_ONCE = Backoff(first=0.001, cap=0.002, stable_after=0.001)
# Waits after a failure longer than any test runs.
NEVER = Backoff(first=3600.0, cap=3600.0, stable_after=3600.0)
# What redis-py raises when a Redis Cluster node no longer holds the slot a command needs.
MOVED = "MOVED 12182 10.0.0.7:6379"


class Breakable:
    """A loop that fails as a Redis Cluster redirect at each run while `broken` (or for its next
    `failures` runs), and otherwise runs until cancelled."""

    def __init__(self, *, failures: int = 0) -> None:
        self.broken = False
        self.failures = failures
        self.runs = 0
        self.running = asyncio.Event()
        self.cancelled = asyncio.Event()

    async def __call__(self) -> None:
        self.runs += 1
        if self.broken or self.failures:
            self.failures = max(0, self.failures - 1)
            raise ResponseError(MOVED)
        self.running.set()
        try:
            await asyncio.Event().wait()
        finally:
            self.running.clear()
            self.cancelled.set()


class Reports:
    """What a supervisor reported: condition → what is wrong now (absent: nothing)."""

    def __init__(self) -> None:
        self.now: dict[str, str] = {}
        self.count = 0

    def __call__(self, condition: str, problem: str | None) -> None:
        self.count += 1
        if problem is None:
            self.now.pop(condition, None)
        else:
            self.now[condition] = problem


def test_backoff_doubles_from_first_to_cap_and_jitters_the_upper_half_of_each_wait() -> None:
    backoff = Backoff(first=0.1, cap=5.0)
    for failures, ceiling in [(1, 0.1), (2, 0.2), (3, 0.4), (6, 3.2), (7, 5.0), (40, 5.0)]:
        waits = {backoff.delay(failures) for _ in range(50)}
        assert all(ceiling / 2 <= wait <= ceiling for wait in waits), (failures, waits)
        assert len(waits) > 1, "jittered"


async def test_a_loop_failing_unexpectedly_is_restarted_until_it_runs_and_each_restart_is_counted() -> None:
    supervisor = Supervisor(grace=3600.0, backoff=AT_ONCE)
    feed, other = Breakable(failures=3), Breakable()
    supervisor.start("watch_feed", feed)
    supervisor.start("other", other)
    try:
        await asyncio.wait_for(feed.running.wait(), timeout=5)
        assert feed.runs == 4
        assert supervisor.restarts() == {"watch_feed": 3, "other": 0}
    finally:
        await supervisor.stop()


async def test_a_failure_streak_logs_one_traceback_naming_the_loop_and_its_end_with_the_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    supervisor = Supervisor(grace=3600.0, backoff=AT_ONCE)
    feed = Breakable(failures=3)
    with caplog.at_level(logging.DEBUG, logger="turngate.loops"):
        supervisor.start("watch_feed", feed)
        try:
            await eventually(lambda: any("runs again" in r.getMessage() for r in caplog.records))
        finally:
            await supervisor.stop()

    tracebacks = [r for r in caplog.records if r.exc_info]
    assert [(r.levelno, str(r.exc_info[1]) if r.exc_info else None) for r in tracebacks] == [
        (logging.ERROR, MOVED)
    ]
    assert "'watch_feed'" in tracebacks[0].getMessage()
    later = [r for r in caplog.records if "failed again" in r.getMessage()]
    assert [r.levelno for r in later] == [logging.DEBUG, logging.DEBUG]
    ended = [r for r in caplog.records if "runs again" in r.getMessage()]
    assert [r.getMessage() for r in ended] == ["background loop 'watch_feed' runs again after 3 failure(s)"]


async def test_a_loop_failing_longer_than_the_grace_is_reported_by_name_until_it_runs_again() -> None:
    reports = Reports()
    supervisor = Supervisor(grace=0.0, report=reports, backoff=AT_ONCE)
    watchdog = Breakable()
    watchdog.broken = True
    supervisor.start("watchdog", watchdog)
    try:
        await eventually(lambda: "loop watchdog" in reports.now)
        problem = reports.now["loop watchdog"]
        assert "background loop 'watchdog' has been failing for" in problem
        assert f"ResponseError: {MOVED}" in problem

        watchdog.broken = False
        await eventually(lambda: reports.now == {})
        assert watchdog.running.is_set()
    finally:
        await supervisor.stop()


async def test_a_loop_failing_within_the_grace_is_not_reported() -> None:
    reports = Reports()
    supervisor = Supervisor(grace=3600.0, report=reports, backoff=AT_ONCE)
    feed = Breakable(failures=5)
    supervisor.start("watch_feed", feed)
    try:
        await asyncio.wait_for(feed.running.wait(), timeout=5)
    finally:
        await supervisor.stop()
    assert supervisor.restarts() == {"watch_feed": 5}
    assert reports.count == 0


async def test_stop_ends_loops_running_and_waiting_to_restart_alike_and_clears_what_it_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reports = Reports()
    supervisor = Supervisor(grace=0.0, report=reports, backoff=NEVER)
    others = asyncio.all_tasks()
    running, waiting = Breakable(), Breakable()
    waiting.broken = True
    supervisor.start("running", running)
    supervisor.start("waiting", waiting)
    await asyncio.wait_for(running.running.wait(), timeout=5)
    await eventually(lambda: "loop waiting" in reports.now)

    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="turngate.loops"):
        await supervisor.stop()

    assert running.cancelled.is_set()
    assert (waiting.runs, supervisor.restarts()) == (1, {"running": 0, "waiting": 0})
    assert reports.now == {}
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert not {"running", "waiting"} & {task.get_name() for task in asyncio.all_tasks() - others}


async def test_a_loop_failing_as_it_is_cancelled_is_not_restarted(caplog: pytest.LogCaptureFixture) -> None:
    """redis-py may turn a cancellation into a ConnectionError: the loop stops all the same."""
    supervisor = Supervisor(grace=3600.0, backoff=AT_ONCE)
    started = asyncio.Event()
    runs = 0

    async def turns_cancellation_into_an_error() -> None:
        nonlocal runs
        runs += 1
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            raise ConnectionError("connection closed while reading") from None

    supervisor.start("feed", turns_cancellation_into_an_error)
    await asyncio.wait_for(started.wait(), timeout=5)
    with caplog.at_level(logging.DEBUG, logger="turngate.loops"):
        await supervisor.stop()

    assert (runs, supervisor.restarts()) == (1, {"feed": 0})
    assert [r.levelno for r in caplog.records] == [logging.DEBUG]
    assert "'feed' failed while stopping" in caplog.records[0].getMessage()


async def test_a_loop_that_returns_has_finished_and_is_not_restarted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    supervisor = Supervisor(grace=3600.0, backoff=AT_ONCE)
    finished = asyncio.Event()
    runs = 0

    async def one_shot() -> None:
        nonlocal runs
        runs += 1
        finished.set()

    with caplog.at_level(logging.INFO, logger="turngate.loops"):
        supervisor.start("schema", one_shot)
        await asyncio.wait_for(finished.wait(), timeout=5)
        await eventually(lambda: any("finished" in r.getMessage() for r in caplog.records))
    await supervisor.stop()
    assert (runs, supervisor.restarts()) == (1, {"schema": 0})


async def test_the_watchdog_handles_an_unreachable_store_itself_and_is_never_restarted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = MemoryStore()
    store.data.down = True
    supervisor = Supervisor(grace=0.0, backoff=AT_ONCE)
    with caplog.at_level(logging.WARNING):
        supervisor.start("watchdog", Watchdog(store, max_sleep=0.001).run)
        try:
            await eventually(
                lambda: sum("watchdog sweep failed, retrying" in r.getMessage() for r in caplog.records) >= 3
            )
        finally:
            await supervisor.stop()
    assert supervisor.restarts() == {"watchdog": 0}
    assert not [r for r in caplog.records if r.name == "turngate.loops"]
