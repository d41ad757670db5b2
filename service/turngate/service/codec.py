"""JSON for the session document and its events: how every store and the ledger persist the core."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field, TypeAdapter

from turngate.service.core import LEGACY_EPOCH, Event, EventBody, Session


def _legacy_epoch(raw: Any) -> Any:
    """A document written before epochs existed (0.1.0) has none: it is of the legacy epoch, not a
    new one (which its next write would otherwise start)."""
    if isinstance(raw, dict) and "epoch" not in raw:
        return {**raw, "epoch": LEGACY_EPOCH}
    return raw


_SESSION = TypeAdapter(Annotated[Session, BeforeValidator(_legacy_epoch)])
_EVENT_BODY: TypeAdapter[EventBody] = TypeAdapter(Annotated[EventBody, Field(discriminator="kind")])
_EVENT = TypeAdapter(Event)


def dump_session(state: Session) -> bytes:
    return _SESSION.dump_json(state)


def load_session(raw: str | bytes) -> Session:
    return _SESSION.validate_json(raw)


def dump_event_body(body: EventBody) -> bytes:
    return _EVENT_BODY.dump_json(body)


def load_event_body(raw: str | bytes) -> EventBody:
    return _EVENT_BODY.validate_json(raw)


def dump_event(event: Event) -> bytes:
    return _EVENT.dump_json(event)


def load_event(raw: str | bytes) -> Event:
    return _EVENT.validate_json(raw)
