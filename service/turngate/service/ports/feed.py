"""What the watch hub needs when several replicas share a store: a feed that follows the logs of
the sessions watched in this process, so that another replica's commits reach the watchers here."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from turngate.service.core import NO_EPOCH, Event, SessionKey


class Feed(Protocol):
    """Follows the store's log of the sessions watched in this process, from another replica's writes."""

    def deliver_to(self, deliver: Callable[[SessionKey, Sequence[Event]], None]) -> None:
        """Where the events it reads go (the hub)."""
        ...

    def track(self, key: SessionKey, after_seq: int, epoch: int = NO_EPOCH) -> None:
        """Starts following `key` after `after_seq` of its log of `epoch` (NO_EPOCH: not known), a
        no-op if already followed."""
        ...

    def untrack(self, key: SessionKey) -> None: ...
