"""What several test directories share, one module per job (a test directory imports no other's
modules, and this package imports none of them: `lint-imports` checks both). The modules marked
(plugin) hold fixtures, registered for every directory by tests/conftest.py.

Servers and processes
- servers.py: a turngate server in this process on a real port, its settings, a client of its stubs
- served.py (plugin): the shared servers per store (SQLite, Redis, Cluster, Sentinel): `server`,
  `client`, `fast_server`, `embedded_server`, `session`, `own_server`
- guarded.py (plugin): the shared server that requires bearer tokens (`guarded`, `tokens_file`)
- processes.py: `turngate` as its own process (`spawn_server`, `run_cli`), free ports, health, SQLite files
- loops.py: a server's background loops made to fail, restarted with a backoff the test chooses
- replicas.py: several `turngate serve` replicas of one deployment (Redis and a PostgreSQL ledger)

Stores and databases
- stores.py: the stores as tests open them (SQL by URL, Redis by keyspace), with their test seams
- memory_store.py: the in-memory store (the store port over a dict) and its fake clock
- seams.py: the stores' seams as tests use them: a reply lost, a write refused before it leaves
- commands.py: the core commands the store tests send, with the defaults they share
- projection.py: the ledger projector's tests' reads of the Redis log, the outbox and the ledger
- logs.py: one session's events as Redis, the ledger and watchers keep them; the ledger catching up
- postgres.py: the test PostgreSQL: URLs, and databases made for a test and dropped after it
- shared_redis.py: the shared Redis: its URL, key prefixes and keyspaces of a test's own, deleted
- topologies.py: a Redis Cluster and a Sentinel setup of a test's own, which it can fail
- shared_topologies.py (plugin): this run's shared Cluster and Sentinel (`redis_cluster`,
  `redis_sentinel`)

Calls and waiting
- calls.py: runner, gateway and client calls over gRPC, refusals and their details, forced races
- watching.py: WatchSession streams: opened, read, and the traffic they watch
- http_calls.py: Connect and gRPC-Web calls to the HTTP listener (its HTTP client)
- sockets.py: raw connections to the HTTP listener (HTTP/1.1, or HTTP/2 through bare_h2.py)
- bare_h2.py: one request over a bare HTTP/2 connection, with headers no client sends
- relay.py: a TCP forwarder that starts when the test says, and can reach its server late
- waiting.py: `eventually()` for what nothing signals, and tasks cancelled until they end
- waiters.py: an SDK runner's turn in a task of its own (places in the queue, its body)
- backoff.py: the SDK's retries at test speed (`FAST`)

Identities and telemetry
- principals.py: the principals, the tokens file naming them, clients as them, signing keys
- certs.py: a CA and certificates made for the tests, and a TLS server's settings
- collector.py: an OTLP/gRPC collector that keeps what it is sent

The repository
- repository.py: its root, its tools (this environment's console scripts), constraints.txt's pins
"""
