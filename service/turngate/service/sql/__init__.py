"""The SQL database every SQL part shares: engines (`engine`), the schema (`tables`), and how a
database gets it (`migrate`: built on a blank one, Alembic's `migrations/` on an older one)."""
