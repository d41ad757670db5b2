"""Logs: a line per state change, and the two formats every record is written in.

Each committed event is logged by `turngate.events` at INFO: the event's kind as the message,
with fields (project_id, session_id, seq, turn_id, generation, and what changed: outcome and
settled_by, a tool call's or interaction's id and status…). `text` writes the usual line with the
fields after it as logfmt (`key=value`); `json` writes one object per record. Both add the
trace_id and span_id of the span current where the record is made, if there is one.

Once `configure` has run (`turngate serve`), the event loop only makes records: a thread formats
and writes them (a QueueHandler and its listener), so a slow stderr or a long line never delays a
call; the queue is bounded, and a caller waits for room as it waited for a synchronous write. An
event's record carries the event itself, and its fields are built where it is formatted.
"""

from __future__ import annotations

import atexit
import json
import logging
import queue
import re
import sys
from datetime import UTC, datetime
from logging.handlers import QueueHandler, QueueListener
from typing import Literal

from opentelemetry import trace

from turngate.service.core import Decision, SessionKey
from turngate.service.telemetry.attributes import Fields, event_fields, session_fields

LogFormat = Literal["text", "json"]
# The LogRecord attributes holding a record's fields; the session and event an event's record is
# about (its fields are built from them when it is formatted); the ids of the span it was made in.
FIELDS = "turngate_fields"
EVENT = "turngate_event"
SPAN = "turngate_span"
# Records made and not yet written: beyond this, a caller waits for the writer to catch up.
QUEUED_RECORDS = 10_000
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
    if not logging.root.handlers:  # as basicConfig: the first configuration of a process holds
        logging.basicConfig(level=level, handlers=[_written_by_a_thread(handler)])
        # No format of ours shows them: not looked up for every record (the logging HOWTO's
        # "Optimization").
        logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    # Alembic logs each migration step at INFO; migrate() says the one line that matters.
    logging.getLogger("alembic").setLevel(max(logging.WARNING, logging.getLogger().level))


def _written_by_a_thread(handler: logging.Handler) -> QueueHandler:
    """A handler that queues records for `handler`, which a thread of its own writes until exit."""
    records: queue.Queue[logging.LogRecord] = queue.Queue(QUEUED_RECORDS)
    listener = QueueListener(records, handler, respect_handler_level=True)
    listener.start()
    atexit.register(listener.stop)
    return _Queued(records)


class _Queued(QueueHandler):
    """Queues a record as it is, with the ids of the span current where it is made (a context of
    the event loop's thread), and its message merged with its arguments (they may change later);
    the writer thread formats the rest."""

    def __init__(self, records: queue.Queue[logging.LogRecord]) -> None:
        super().__init__(records)
        self._records = records

    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        record.msg, record.args = record.getMessage(), None
        setattr(record, SPAN, _span_ids())
        return record

    def enqueue(self, record: logging.LogRecord) -> None:
        self._records.put(record)


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
        # Made directly: Logger.info would also look up its caller's frame, which no line shows.
        made = _events.makeRecord(
            _events.name, logging.INFO, __file__, 0, event.body.kind, (), None, extra={EVENT: (key, event)}
        )
        _events.handle(made)


def _fields(record: logging.LogRecord) -> Fields:
    """The record's fields (an event's first), and the ids of the span it was made in."""
    fields: Fields = {}
    if (about := getattr(record, EVENT, None)) is not None:
        key, event = about
        fields.update(session_fields(key), seq=event.seq, **event_fields(event))
    fields.update(getattr(record, FIELDS, {}))
    fields.update(getattr(record, SPAN) if hasattr(record, SPAN) else _span_ids())
    return fields


def _span_ids() -> Fields:
    """The trace and span ids of the current span, if there is one."""
    span = trace.get_current_span().get_span_context()
    if not span.is_valid:
        return {}
    return {"trace_id": trace.format_trace_id(span.trace_id), "span_id": trace.format_span_id(span.span_id)}


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
