"""SessionService: what clients call to stream a session and read its history."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TypeVar

import grpc

from turngate.service.api import convert, errors, page_tokens, parse
from turngate.service.api.edge import current_principal
from turngate.service.api.encoded import EncodedEvents, snapshot_response
from turngate.service.api.errors import guarded
from turngate.service.api.quota import WatchLimit, WatchQuota
from turngate.service.api.replies import Context
from turngate.service.auth import access
from turngate.service.ports.history import SessionDirectory, SessionHistory
from turngate.service.ports.store import Store
from turngate.service.watch import Snapshot, WatchClosed, WatchHub, WatchOverflow
from turngate.v1 import turngate_pb2 as pb

_Item = TypeVar("_Item")


class SessionService:
    """The SessionService servicer (registered by `decoding.add_services`). Its WatchSession
    yields each response serialized (PRE_SERIALIZED), so it is not a generated
    `SessionServiceServicer`, whose WatchSession yields messages."""

    PRE_SERIALIZED = frozenset({"WatchSession"})

    def __init__(
        self,
        store: Store,
        history: SessionHistory,
        directory: SessionDirectory,
        hub: WatchHub,
        quota: WatchQuota,
    ) -> None:
        self._store = store
        self._history = history
        self._directory = directory
        self._hub = hub
        self._quota = quota
        self._encoded = EncodedEvents()

    async def WatchSession(self, request: pb.WatchSessionRequest, context: Context) -> AsyncIterator[bytes]:
        """Each response as the bytes sent: an event's are encoded once for every stream that
        sends it; a snapshot's for this stream."""
        try:
            query = parse.watch(request)
            with self._quota.hold(current_principal.get().name, query.key):
                async with contextlib.aclosing(
                    self._hub.follow(query.key, query.after_seq, query.epoch)
                ) as stream:
                    async for item in stream:
                        if isinstance(item, Snapshot):
                            yield snapshot_response(query.key, item)
                        elif not query.turn_id or item.turn_id == query.turn_id:
                            yield self._encoded.response(query.key, item)
                        del item  # a waiting stream keeps no snapshot (a document) nor event
        except grpc.aio.AbortError:
            raise
        except WatchLimit as over:
            await errors.abort(context, errors.limit_exceeded(over.limit, str(over)))
        except WatchOverflow as overflow:
            await errors.abort(context, errors.limit_exceeded("watch_buffer", str(overflow)))
        except WatchClosed as closed:
            await errors.abort(context, errors.unavailable(str(closed)))
        except Exception as error:  # mapped to a status, logged when unexpected
            await errors.abort(context, errors.for_exception(error))

    @guarded
    async def GetSession(self, request: pb.GetSessionRequest, context: Context) -> pb.GetSessionResponse:
        key = parse.get_session(request)
        return pb.GetSessionResponse(snapshot=convert.snapshot(key, await self._history.session(key)))

    @guarded
    async def GetTurn(self, request: pb.GetTurnRequest, context: Context) -> pb.GetTurnResponse:
        key, turn_id = parse.get_turn(request)
        view = await self._history.get_turn(key, turn_id)
        if view is None:
            await errors.abort(
                context, errors.not_found(f"turn {turn_id} was never admitted in this session")
            )
        return pb.GetTurnResponse(turn=convert.turn_record(view))

    @guarded
    async def ListTurns(self, request: pb.ListTurnsRequest, context: Context) -> pb.ListTurnsResponse:
        page = parse.list_turns(request)
        views = await self._history.list_turns(page.key, page.before_generation, page.size + 1)
        turns, token = _one_page(views, page.size, lambda last: page_tokens.turns_page_token(last.generation))
        return pb.ListTurnsResponse(
            turns=[convert.turn_record(v, with_calls=False) for v in turns], next_page_token=token
        )

    @guarded
    async def ListActiveSessions(
        self, request: pb.ListActiveSessionsRequest, context: Context
    ) -> pb.ListActiveSessionsResponse:
        page = parse.list_active_sessions(request)
        found = await self._store.active(page.project_id, page.after, page.size + 1)
        shown, token = _one_page(
            found, page.size, lambda last: page_tokens.active_page_token(last[1], last[0].session_id)
        )
        states = await asyncio.gather(*(self._store.load(key) for key, _ in shown))
        return pb.ListActiveSessionsResponse(
            sessions=[convert.snapshot(key, state) for (key, _), state in zip(shown, states, strict=True)],
            next_page_token=token,
        )

    @guarded
    async def ListSessions(
        self, request: pb.ListSessionsRequest, context: Context
    ) -> pb.ListSessionsResponse:
        page = parse.list_sessions(request)
        found = await self._directory.sessions(page.project_id, page.before, page.size + 1)
        shown, token = _one_page(
            found,
            page.size,
            lambda last: page_tokens.sessions_page_token(last.last_activity_at, last.key.session_id),
        )
        states = await self._history.listed(shown)
        return pb.ListSessionsResponse(
            sessions=[convert.session_summary(a, state) for a, state in zip(shown, states, strict=True)],
            next_page_token=token,
        )

    @guarded
    async def ListProjects(
        self, request: pb.ListProjectsRequest, context: Context
    ) -> pb.ListProjectsResponse:
        page = parse.list_projects(request)
        among = access.visible_projects(current_principal.get())
        found = await self._directory.projects(page.after, page.size + 1, among)
        shown, token = _one_page(
            found, page.size, lambda last: page_tokens.projects_page_token(last.project_id)
        )
        return pb.ListProjectsResponse(
            projects=[convert.project_summary(project) for project in shown], next_page_token=token
        )


def _one_page(found: Sequence[_Item], size: int, token_of: Callable[[_Item], str]) -> tuple[list[_Item], str]:
    """The page in `found` (read one item beyond it, to tell whether more follow), and the token
    of the next page, from the page's last item ("" when none follows)."""
    shown = list(found[:size])
    return shown, token_of(shown[-1]) if len(found) > size else ""
