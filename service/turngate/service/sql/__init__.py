"""The SQL database every SQL part shares: engines (`engine`), the schema (`tables`) and its
Alembic migrations (`migrate`, `migrations/`)."""
