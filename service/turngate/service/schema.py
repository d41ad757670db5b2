"""The ledger's schema, brought to this release's once its database answers (unless this process
is told not to migrate), and what readiness waits for until then.

Every process kind runs it, so the order they start in never matters: one that may migrate does;
one that may not reports readiness NOT_SERVING, naming the database it waits for, until another
has. A ledger that does not answer is no reason not to serve (coordination goes on without it and
its reads answer UNAVAILABLE); one that answers without this release's schema is, as GetTurn and
ListTurns could not work there.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from sqlalchemy import make_url

from turngate.service.ports.store import StoreUnavailable
from turngate.service.sql.migrate import is_migrated, migrate

log = logging.getLogger("turngate.schema")

# The readiness condition a LedgerSchema reports.
LEDGER = "ledger"
# How often the schema is looked at again while the ledger does not answer or another process
# is to migrate it.
RETRY_S = 1.0


class LedgerSchema:
    """The schema of the ledger at `url`: `run()` migrates it (if `migrate`) or waits for its
    migration, telling `report` what readiness waits for (None: nothing); `migrated` is set once
    it is this release's. `announce` False: the store's own schema, which the store's migration
    has announced already, is found ready without a line of its own."""

    def __init__(
        self,
        url: str,
        *,
        migrate: bool,
        report: Callable[[str | None], None] | None = None,
        announce: bool = True,
    ) -> None:
        self.migrated = asyncio.Event()
        self._url = url
        self._migrate = migrate
        self._report = report
        self._where = make_url(url).render_as_string(hide_password=True)
        self._state = ""
        self._announce = announce

    async def run(self) -> None:
        """Returns once the schema is this release's, migrated here or by another process."""
        while True:
            try:
                if await is_migrated(self._url):
                    break
                if self._migrate:
                    self._enter(logging.INFO, f"ledger not migrated yet: migrating {self._where}")
                    await migrate(self._url)
                    break
                self._enter(
                    logging.WARNING,
                    f"ledger not migrated yet: waiting for another process to migrate {self._where}",
                )
            except StoreUnavailable as error:
                # Whether it is migrated is unknown: no reason not to serve (see above).
                self._enter(logging.WARNING, None, f"ledger unreachable, looking at it again: {error}")
            await asyncio.sleep(RETRY_S)
        level = logging.INFO if self._announce or self._state else logging.DEBUG
        log.log(level, "ledger schema is this release's: %s", self._where)
        if self._report is not None:
            self._report(None)
        self.migrated.set()

    def _enter(self, level: int, problem: str | None, news: str | None = None) -> None:
        """Reports `problem` (None: readiness waits for nothing) and logs it (or `news`), when the
        schema's state changes, not at every look."""
        # An unreachable ledger's error text varies from look to look: it is one state.
        state = problem or "unreachable"
        if state == self._state:
            return
        self._state = state
        log.log(level, "%s", problem or news)
        if self._report is not None:
            self._report(problem)
