"""Stores: where session documents, their events and deadlines live, behind the port
`ports.store.Store`. `cas` is the compare-and-set loop every store shares; `sql` the embedded
and PostgreSQL store; `redis/` the production coordination store and what feeds from it."""
