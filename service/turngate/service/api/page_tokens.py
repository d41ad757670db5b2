"""Page tokens of ListTurns, ListActiveSessions, ListSessions and ListProjects: opaque to callers,
base64url of a short text this module writes and reads back (None for anything else). Each names
the last item of its page by the keys the listing is ordered by."""

from __future__ import annotations

import base64
import binascii

from turngate.service.api.fields import is_identifier
from turngate.service.core import limits

_MAX_TOKEN = 400


def turns_page_token(before_generation: int) -> str:
    return _encode(f"g{before_generation}")


def turns_page_position(token: str) -> int | None:
    raw = _decode(token)
    return _int64(raw[1:]) if raw is not None and raw.startswith("g") else None


def active_page_token(deadline: int, session_id: str) -> str:
    return _encode(f"d{deadline}/{session_id}")


def active_page_position(token: str) -> tuple[int, str] | None:
    return _instant_and_session("d", token)


def sessions_page_token(last_activity_at: int, session_id: str) -> str:
    return _encode(f"a{last_activity_at}/{session_id}")


def sessions_page_position(token: str) -> tuple[int, str] | None:
    return _instant_and_session("a", token)


def projects_page_token(project_id: str) -> str:
    return _encode(f"p{project_id}")


def projects_page_position(token: str) -> str | None:
    raw = _decode(token)
    return raw[1:] if raw is not None and raw.startswith("p") and is_identifier(raw[1:]) else None


def _instant_and_session(kind: str, token: str) -> tuple[int, str] | None:
    """The (instant, session id) pair of a token of `kind` (its first letter)."""
    raw = _decode(token)
    if raw is None or not raw.startswith(kind) or "/" not in raw:
        return None
    instant, session_id = raw[1:].split("/", 1)
    position = _int64(instant)
    return None if position is None or not is_identifier(session_id) else (position, session_id)


def _encode(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode()


def _decode(token: str) -> str | None:
    if len(token) > _MAX_TOKEN:
        return None
    try:
        return base64.urlsafe_b64decode(token.encode()).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None


def _int64(digits: str) -> int | None:
    # ASCII only: str.isdigit() also accepts digits int() cannot parse (e.g. superscripts).
    if not (digits.isascii() and digits.isdigit()):
        return None
    value = int(digits)
    return value if value <= limits.MAX_INT64 else None
