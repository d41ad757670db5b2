"""The durable history of turns, tool calls, interactions and events, kept in SQL: how events
become rows (`record`), how they are read back (`reads`), and how far a session's events have
been recorded in redis mode (`cursors`)."""
