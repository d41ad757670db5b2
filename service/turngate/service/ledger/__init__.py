"""The durable history of turns, tool calls, interactions and events, kept in SQL."""

from turngate.service.ledger.migrate import migrate
from turngate.service.ledger.reads import Ledger
from turngate.service.ledger.record import record
from turngate.service.ledger.tables import metadata
from turngate.service.ledger.views import InteractionView, ToolCallView, TurnHistory, TurnView

__all__ = [
    "InteractionView",
    "Ledger",
    "ToolCallView",
    "TurnHistory",
    "TurnView",
    "metadata",
    "migrate",
    "record",
]
