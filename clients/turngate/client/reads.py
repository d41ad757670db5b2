"""Reading sessions and turns (SessionService), retried on network blips."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TypeVar

from turngate.client import convert
from turngate.client.connection import Connection
from turngate.client.models import ProjectSummary, SessionSnapshot, SessionSummary, TurnRecord
from turngate.v1 import turngate_pb2 as pb

T = TypeVar("T")


async def get_session(connection: Connection, session_id: str) -> SessionSnapshot:
    request = pb.GetSessionRequest(session=connection.session(session_id))
    return convert.snapshot((await connection.call(connection.sessions.GetSession, request)).snapshot)


async def get_turn(connection: Connection, session_id: str, turn_id: str) -> TurnRecord:
    request = pb.GetTurnRequest(session=connection.session(session_id), turn_id=turn_id)
    return convert.turn_record((await connection.call(connection.sessions.GetTurn, request)).turn)


async def _paged(fetch: Callable[[str], Awaitable[tuple[Sequence[T], str]]]) -> AsyncIterator[T]:
    token = ""
    while True:
        items, token = await fetch(token)
        for item in items:
            yield item
        if not token:
            return


def list_turns(connection: Connection, session_id: str, page_size: int) -> AsyncIterator[TurnRecord]:
    async def fetch(token: str) -> tuple[Sequence[TurnRecord], str]:
        request = pb.ListTurnsRequest(
            session=connection.session(session_id), page_size=page_size, page_token=token
        )
        page = await connection.call(connection.sessions.ListTurns, request)
        return [convert.turn_record(turn) for turn in page.turns], page.next_page_token

    return _paged(fetch)


def active_sessions(connection: Connection, page_size: int) -> AsyncIterator[SessionSnapshot]:
    async def fetch(token: str) -> tuple[Sequence[SessionSnapshot], str]:
        request = pb.ListActiveSessionsRequest(
            project_id=connection.project_id, page_size=page_size, page_token=token
        )
        page = await connection.call(connection.sessions.ListActiveSessions, request)
        return [convert.snapshot(snapshot) for snapshot in page.sessions], page.next_page_token

    return _paged(fetch)


def list_sessions(connection: Connection, page_size: int) -> AsyncIterator[SessionSummary]:
    async def fetch(token: str) -> tuple[Sequence[SessionSummary], str]:
        request = pb.ListSessionsRequest(
            project_id=connection.project_id, page_size=page_size, page_token=token
        )
        page = await connection.call(connection.sessions.ListSessions, request)
        return [convert.session_summary(summary) for summary in page.sessions], page.next_page_token

    return _paged(fetch)


def list_projects(connection: Connection, page_size: int) -> AsyncIterator[ProjectSummary]:
    async def fetch(token: str) -> tuple[Sequence[ProjectSummary], str]:
        request = pb.ListProjectsRequest(page_size=page_size, page_token=token)
        page = await connection.call(connection.sessions.ListProjects, request)
        return [convert.project_summary(project) for project in page.projects], page.next_page_token

    return _paged(fetch)
