"""Bounds the core enforces on one session document, so every write stays small."""

# Defaults of the settings of the same names (commands carry the configured bounds).
MAX_OPEN_TOOL_CALLS = 1024
MAX_PENDING_INTERACTIONS = 256
# Closed calls stay in the document until settlement (for idempotent records), so the total is bounded too.
MAX_TOOL_CALLS = 4096
MAX_INTERACTIONS = 1024
RECENT_TURNS = 32
MAX_TOMBSTONES = 64
MAX_REQUEST_MEMOS = 64
