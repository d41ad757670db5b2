"""What is acknowledged only once replicas have it (docs/deploying.md, What a failover loses).

WAIT counts the writes of the connection it is sent on, so it follows, on that connection and in
the same round trip, whatever it must cover: the compare-and-set script, or a read. A call that
wrote nothing (a confirmation, a read) writes a replication mark first, so the wait covers every
write the primary had taken until then.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from turngate.service.ports.store import StoreUnavailable, WriteOutcomeUnknown

Command = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class Replication:
    """`replicas` (0: none) must confirm within `timeout_ms`."""

    replicas: int = 0
    timeout_ms: int = 500

    @classmethod
    def of(cls, replicas: int, timeout_s: float) -> Replication:
        return cls(replicas, round(timeout_s * 1000))

    def commands(self, mark: str | None) -> list[Command]:
        """What follows on the connection: nothing without replicas to wait for; else the write
        of `mark` (when the call itself wrote nothing) and WAIT."""
        if not self.replicas:
            return []
        return [*([("SET", mark, 1)] if mark is not None else []), ("WAIT", self.replicas, self.timeout_ms)]

    def check(self, replies: Sequence[Any], what: str, *, wrote: bool) -> None:
        """Nothing unless the replies of `commands` confirm that `replicas` have what preceded them:
        what only the primary holds may be lost by a failover, so it is not acknowledged. What
        `wrote` is then of unknown outcome (WriteOutcomeUnknown: it took effect on the primary, and
        a retry finds it there or not); a call that wrote nothing is unavailable (StoreUnavailable).
        A confirmation Redis failed (UNBLOCKED: its node turned replica under the WAIT) is the same
        shortfall."""
        if not self.replicas:
            return
        kind = WriteOutcomeUnknown if wrote else StoreUnavailable
        if failed := next((reply for reply in replies if isinstance(reply, Exception)), None):
            raise kind(f"{what}: its replication was not confirmed: {failed}") from failed
        confirmed = int(replies[-1])
        if confirmed < self.replicas:
            raise kind(
                f"{what}: only {confirmed} of {self.replicas} replicas confirmed it "
                f"within {self.timeout_ms} ms"
            )


# Nothing waited for: what one Redis server acknowledges is acknowledged.
NO_REPLICATION = Replication()
