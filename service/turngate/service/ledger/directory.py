"""Which sessions and projects history holds, read from `session_activity` (kept by `record()`):
a project's sessions a page at a time by their last activity, newest first, and the projects that
have sessions. Every read seeks through an index and reads the rows it answers, never a scan: a
page of sessions is one range of the (project, last activity, session) index; the projects are
found one index seek each, skipping over each project's sessions (a recursive query)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import ScalarSelect, Select, String, and_, literal, select, tuple_, union_all
from sqlalchemy.ext.asyncio import AsyncEngine

from turngate.service.core import SessionKey
from turngate.service.ledger.reads import turn_view_of
from turngate.service.ports.history import ProjectActivity, SessionActivity
from turngate.service.sql.engine import unavailable_on_failure
from turngate.service.sql.tables import session_activity, turns

# Projects of a token's own list looked up per statement (a compound SELECT each).
_PROJECTS_AT_ONCE = 100


class Directory:
    """`SessionDirectory` over one SQL engine."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def sessions(
        self, project_id: str, before: tuple[int, str] | None, limit: int
    ) -> list[SessionActivity]:
        query = page_of_sessions(project_id, limit)
        if before is not None:
            query = query.where(
                tuple_(session_activity.c.last_activity_at, session_activity.c.session_id) < tuple_(*before)
            )
        with unavailable_on_failure():
            async with self._engine.connect() as conn:
                rows = (await conn.execute(query)).all()
        return [
            SessionActivity(
                SessionKey(project_id, row.listed_session_id),
                row.listed_at,
                None if row.generation is None else turn_view_of(row._mapping),
            )
            for row in rows
        ]

    async def projects(
        self, after: str | None, limit: int, among: frozenset[str] | None
    ) -> list[ProjectActivity]:
        with unavailable_on_failure():
            async with self._engine.connect() as conn:
                if among is None:
                    rows = (await conn.execute(next_projects(after or "", limit))).all()
                    return [ProjectActivity(row.project_id, row.last_activity_at) for row in rows]
                found: list[ProjectActivity] = []
                wanted = sorted(project for project in among if after is None or project > after)
                for start in range(0, len(wanted), _PROJECTS_AT_ONCE):
                    chunk = wanted[start : start + _PROJECTS_AT_ONCE]
                    rows = (await conn.execute(newest_of(chunk))).all()
                    found += (
                        ProjectActivity(row.project_id, row.last_activity_at)
                        for row in rows
                        if row.last_activity_at is not None
                    )
                    if len(found) >= limit:
                        break
        return found[:limit]


def page_of_sessions(project_id: str, limit: int) -> Select[Any]:
    """The project's sessions, newest activity first, each with its last settled turn's row (NULLs
    when there is none, or history no longer holds it)."""
    of_session = and_(
        turns.c.project_id == session_activity.c.project_id,
        turns.c.session_id == session_activity.c.session_id,
        turns.c.generation == session_activity.c.settled_generation,
    )
    return (
        select(
            session_activity.c.session_id.label("listed_session_id"),
            session_activity.c.last_activity_at.label("listed_at"),
            turns,
        )
        .select_from(session_activity.outerjoin(turns, of_session))
        .where(session_activity.c.project_id == project_id)
        .order_by(session_activity.c.last_activity_at.desc(), session_activity.c.session_id.desc())
        .limit(limit)
    )


def next_projects(after: str, limit: int) -> Select[Any]:
    """Up to `limit` projects after `after`, in id order: each the next one the index holds after
    the one before (one seek each, however many sessions each project has)."""
    found = select(_next_project(literal(after, String)).label("project_id"), literal(1).label("n")).cte(
        "found", recursive=True
    )
    found = found.union_all(
        select(_next_project(found.c.project_id), found.c.n + 1).where(
            found.c.project_id.is_not(None), found.c.n < limit
        )
    )
    return (
        select(found.c.project_id, _newest(found.c.project_id).label("last_activity_at"))
        .where(found.c.project_id.is_not(None))
        .order_by(found.c.project_id)
    )


def _next_project(after: Any) -> ScalarSelect[str]:
    return (
        select(session_activity.c.project_id)
        .where(session_activity.c.project_id > after)
        .order_by(session_activity.c.project_id)
        .limit(1)
        .scalar_subquery()
    )


def _newest(project_id: Any) -> ScalarSelect[int]:
    """When the newest event of the project's sessions was written (NULL: it has none)."""
    return (
        select(session_activity.c.last_activity_at)
        .where(session_activity.c.project_id == project_id)
        .order_by(session_activity.c.last_activity_at.desc())
        .limit(1)
        .scalar_subquery()
    )


def newest_of(projects: Sequence[str]) -> Any:
    """Each of `projects` with the time of its newest event (NULL: it has no sessions)."""
    return union_all(
        *(
            select(
                literal(project, String).label("project_id"),
                _newest(literal(project, String)).label("last_activity_at"),
            )
            for project in projects
        )
    )
