"""What a database plans to do for a statement: the tests that show a read or a delete finds its
rows by index, never by a scan."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.sql import ClauseElement


async def plan(engine: AsyncEngine, statement: ClauseElement, *, executemany: bool = False) -> str:
    """The database's plan of `statement`: its own values bound in it, or for an executemany's
    statement (SQLite's), NULLs in place of each row's (the plan is the same for every row)."""
    if executemany:
        compiled = statement.compile(dialect=engine.dialect)
        sql, args = compiled.string, (None,) * len(compiled.params)
    else:
        sql, args = str(statement.compile(dialect=engine.dialect, compile_kwargs={"literal_binds": True})), ()
    explain = "EXPLAIN QUERY PLAN " if engine.dialect.name == "sqlite" else "EXPLAIN "
    async with engine.connect() as conn:
        return "\n".join(str(row[-1]) for row in await conn.exec_driver_sql(explain + sql, args))
