"""Logs: a line per state change, and the two formats every record is written in.

Each committed event is logged by `turngate.events` at INFO: the event's kind as the message,
with fields (project_id, session_id, seq, turn_id, generation, and what changed: outcome and
settled_by, a tool call's or interaction's id and status…). `text` writes the usual line with the
fields after it as logfmt (`key=value`); `json` writes one object per record. Both add the
trace_id and span_id of the span current where the record is made, if there is one (records are
formatted where they are logged: the handler writes to stderr synchronously).
"""

from __future__ import annotations

import json
import logging
import re
import sys
from datetime import UTC, datetime
from typing import Literal

from opentelemetry import trace

from turngate.service.core import Decision, SessionKey
from turngate.service.telemetry.attributes import Fields, event_fields, session_fields

LogFormat = Literal["text", "json"]
# The LogRecord attribute holding a record's fields.
FIELDS = "turngate_fields"
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_BARE = re.compile(r'[^\s"=\\\x00-\x1f\x7f]+')
_events = logging.getLogger("turngate.events")


def configure(level: str, log_format: LogFormat, *, worker: int | None = None) -> None:
    """Every record to stderr, at `level` and above, in `log_format`; a worker of `serve --workers`
    names itself in each (field `worker`), as its records share the parent's stderr."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    if worker is not None:
        handler.addFilter(_WorkerField(worker))
    logging.basicConfig(level=level, handlers=[handler])
    # Alembic logs each migration step at INFO; migrate() says the one line that matters.
    logging.getLogger("alembic").setLevel(max(logging.WARNING, logging.getLogger().level))


class _WorkerField(logging.Filter):
    def __init__(self, worker: int) -> None:
        super().__init__()
        self._worker = worker

    def filter(self, record: logging.LogRecord) -> bool:
        setattr(record, FIELDS, {**getattr(record, FIELDS, {}), "worker": self._worker})
        return True


def log_events(key: SessionKey, decision: Decision) -> None:
    """A store CommitListener: one record per event committed."""
    if not _events.isEnabledFor(logging.INFO):
        return
    for event in decision.events:
        fields = {**session_fields(key), "seq": event.seq, **event_fields(event)}
        _events.info(event.body.kind, extra={FIELDS: fields})


def _fields(record: logging.LogRecord) -> Fields:
    """The record's fields, and the current span's ids."""
    fields: Fields = dict(getattr(record, FIELDS, {}))
    span = trace.get_current_span().get_span_context()
    if span.is_valid:
        fields.update(
            trace_id=trace.format_trace_id(span.trace_id), span_id=trace.format_span_id(span.span_id)
        )
    return fields


def _logfmt(value: str | int | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value)
    return text if _BARE.fullmatch(text) else json.dumps(text)


class TextFormatter(logging.Formatter):
    """`TEXT_FORMAT`, then the fields as logfmt (before a traceback, if any)."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def formatMessage(self, record: logging.LogRecord) -> str:
        pairs = [f"{name}={_logfmt(value)}" for name, value in _fields(record).items()]
        return " ".join([super().formatMessage(record), *pairs])


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time (UTC), level, logger, message, the fields, and the
    exception's traceback if there is one."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            **_fields(record),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)
