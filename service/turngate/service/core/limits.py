"""Every bound of the state machine and its contract, once (docs/design.md §2.5 timing, §3.8 input
limits). The API validates requests against them, settings take their defaults and ranges from
them, and decide() enforces the per-turn and per-session ones. Durations are µs, like every time
in the core; sizes of texts are bytes of UTF-8.
"""

SECOND = 1_000_000
DAY = 24 * 3600 * SECOND

# Identifiers (project, session, turn, runner, call, interaction, request, principal names).
ID_PATTERN = "[A-Za-z0-9][A-Za-z0-9._:-]{0,127}"

# Free texts.
MAX_TEXT = 1024  # a Stop's reason, a tool call's or a turn's error
MAX_RESOLUTION = 16 * 1024
MAX_TOOL_NAME = 256
MAX_KIND = 128

# Reads that page.
MAX_PAGE_SIZE = 500
DEFAULT_PAGE_SIZE = 50

# Generations and times are int64 in every store.
MAX_INT64 = 2**63 - 1

# The timing contract: defaults and the ranges the settings accept (a runner may ask for its own
# lease within the same range).
DEFAULT_LEASE_TTL = 20 * SECOND
MIN_LEASE_TTL = 1 * SECOND
MAX_LEASE_TTL = DAY
DEFAULT_STOP_GRACE = 30 * SECOND
MIN_STOP_GRACE = 1 * SECOND
MAX_STOP_GRACE = DAY
# How long a tombstone and a request_id's answer are remembered.
DEFAULT_TOMBSTONE_TTL = 600 * SECOND
MIN_TOMBSTONE_TTL = 1 * SECOND
MAX_TOMBSTONE_TTL = 7 * DAY

# Retirement (R1): how long a session stays idle in the hot store before it is removed.
DEFAULT_IDLE_RETENTION = DAY
MIN_IDLE_RETENTION = 1 * SECOND
MAX_IDLE_RETENTION = 365 * DAY

# Per turn. The open and pending bounds are settings (these are their defaults; commands carry
# the configured ones) and cannot exceed the totals, which bound the document: closed calls stay
# in it until settlement, for idempotent records.
MAX_OPEN_TOOL_CALLS = 1024
MAX_PENDING_INTERACTIONS = 256
MAX_TOOL_CALLS = 4096
MAX_INTERACTIONS = 1024

# The turn queue (§7): how long a queued turn may wait when its admission does not say (a
# setting), the most an admission may ask (a setting, at most MAX_QUEUE_WAIT), and how many turns
# may wait per session (a setting; commands carry it).
DEFAULT_MAX_QUEUE_WAIT = 600 * SECOND
DEFAULT_QUEUE_WAIT_CAP = 3600 * SECOND
MIN_QUEUE_WAIT = 1 * SECOND
MAX_QUEUE_WAIT = DAY
DEFAULT_MAX_QUEUE_DEPTH = 16
MAX_QUEUE_DEPTH = 256  # the most a setting may allow: it bounds the document

# Steers (§9): the most content a steer may carry (a setting, at most MAX_STEER_BYTES: content
# stays in the document while it waits for its runner), how many steers a turn may take (a setting,
# at most MAX_STEERS_PER_TURN) and how long a steer waits for its acknowledgement (a setting).
DEFAULT_MAX_STEER_BYTES = 4 * 1024
MAX_STEER_BYTES = 64 * 1024
MAX_CONTENT_TYPE = 128
DEFAULT_MAX_STEERS_PER_TURN = 16
MAX_STEERS_PER_TURN = 256
DEFAULT_STEER_WAIT = 600 * SECOND
MIN_STEER_WAIT = 1 * SECOND
MAX_STEER_WAIT = DAY

# History retention (a setting; `turngate prune --before` keeps to the same floor): never less than
# the longest a turn may wait in the queue, since a queued turn has no ledger row to protect its
# events by (what is never pruned: docs/decisions.md, History retention).
MIN_HISTORY_RETENTION = MAX_QUEUE_WAIT
MAX_HISTORY_RETENTION = 3650 * DAY

# Per session: what the document remembers, so every write stays small.
RECENT_TURNS = 32
MAX_TOMBSTONES = 64
MAX_REQUEST_MEMOS = 64
