"""The clock window of a decision (I8, I10): the instants around `now` between which decide()
answers a document the same way. A store that writes a decision later than it took it (the Redis
store) writes it only while its clock lies inside, so no deadline or expiry passes unseen between
deciding and writing (docs/decisions.md, "Redis's clock")."""

from __future__ import annotations

from turngate.service.core import ClockWindow, Session, clock_window

from .helpers import SECOND, STOP_GRACE, T0, TOMBSTONE_TTL, Timeline, cancel, running


def test_i10_a_session_with_nothing_to_expire_decides_the_same_at_every_instant() -> None:
    assert clock_window(Session(), T0) == ClockWindow(None, None)


def test_i8_a_running_turns_decisions_hold_until_its_lease_expires() -> None:
    timeline, _ = running("t1")
    expiry = timeline.active.lease_expires_at

    assert clock_window(timeline.state, expiry - 1) == ClockWindow(None, expiry)
    assert clock_window(timeline.state, expiry) == ClockWindow(expiry, None), "settled from then on"


def test_i8_a_stopping_turns_decisions_hold_until_its_earlier_deadline() -> None:
    timeline, _ = running("t1")
    timeline.do(cancel("t1", stop_grace=STOP_GRACE), after=SECOND)
    stop = timeline.active.stop
    assert stop is not None
    assert stop.deadline > timeline.active.lease_expires_at  # the lease comes first here

    assert clock_window(timeline.state, timeline.now) == ClockWindow(None, timeline.active.lease_expires_at)


def test_i10_tombstones_and_remembered_stops_bound_the_window_on_both_sides() -> None:
    timeline = Timeline()
    timeline.do(cancel("early", request_id="q1"))  # a tombstone and a request id, both kept TOMBSTONE_TTL
    forgotten = T0 + TOMBSTONE_TTL
    timeline.do(cancel("later"), after=10 * SECOND)

    assert clock_window(timeline.state, timeline.now) == ClockWindow(None, forgotten)
    assert clock_window(timeline.state, forgotten) == ClockWindow(forgotten, forgotten + 10 * SECOND)
