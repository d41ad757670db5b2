"""The settings the core needs with commands, as the API hands them over."""

from __future__ import annotations

from dataclasses import dataclass

from turngate.service.config import Settings, microseconds
from turngate.service.core import limits


@dataclass(frozen=True, slots=True)
class Policy:
    """Settings the core needs with commands (durations in µs)."""

    lease_ttl: int
    stop_grace: int
    tombstone_ttl: int
    max_open_tool_calls: int = limits.MAX_OPEN_TOOL_CALLS
    max_pending_interactions: int = limits.MAX_PENDING_INTERACTIONS
    max_active_sessions_per_project: int = 0
    # The turn queue (§7): an admission's wait when it names none, the most it may name, and how
    # many turns may wait per session.
    queue_wait: int = limits.DEFAULT_MAX_QUEUE_WAIT
    max_queue_wait: int = limits.DEFAULT_QUEUE_WAIT_CAP
    max_queue_depth: int = limits.DEFAULT_MAX_QUEUE_DEPTH
    # Steers (§9): the most content one carries, how many a turn takes, how long one waits for its
    # acknowledgement.
    max_steer_bytes: int = limits.DEFAULT_MAX_STEER_BYTES
    max_steers_per_turn: int = limits.DEFAULT_MAX_STEERS_PER_TURN
    steer_wait: int = limits.DEFAULT_STEER_WAIT

    @classmethod
    def from_settings(cls, settings: Settings) -> Policy:
        """The settings' policy, durations in µs."""
        return cls(
            lease_ttl=microseconds(settings.lease_ttl),
            stop_grace=microseconds(settings.stop_grace),
            tombstone_ttl=microseconds(settings.tombstone_ttl),
            max_open_tool_calls=settings.max_open_tool_calls,
            max_pending_interactions=settings.max_pending_interactions,
            max_active_sessions_per_project=settings.max_active_sessions_per_project,
            queue_wait=microseconds(settings.queue_wait),
            max_queue_wait=microseconds(settings.max_queue_wait),
            max_queue_depth=settings.max_queue_depth,
            max_steer_bytes=settings.max_steer_bytes,
            max_steers_per_turn=settings.max_steers_per_turn,
            steer_wait=microseconds(settings.steer_wait),
        )
