"""The embedded mode's floor: a bare grpc.aio server, run in its own process like turngate, whose
`SqliteWrite` method runs one aiosqlite transaction under an `asyncio.Lock` (one writer, as SQLite
has): SELECT a row by key, UPSERT it with a 400-byte value, COMMIT, on a SQLite file in WAL mode
with `synchronous=NORMAL` (turngate's embedded defaults). The key is the request's bytes, so
callers choose whether they write new rows or the same one. `Empty` answers at once, as
floor_server.py's does (the same method name, so servers.floor_answers probes both).
Run: `python bench/sqlite_floor.py PORT PATH`; it exits on SIGTERM.
"""

from __future__ import annotations

import asyncio
import sys

import aiosqlite
import grpc

from floor_server import EMPTY, SERVICE, serve_until_terminated

SQLITE_WRITE = f"/{SERVICE}/SqliteWrite"
VALUE = b"v" * 400
_SCHEMA = "CREATE TABLE IF NOT EXISTS floor (key TEXT PRIMARY KEY, value BLOB NOT NULL)"
_UPSERT = (
    "INSERT INTO floor (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)


async def open_database(path: str) -> aiosqlite.Connection:
    """`path` in WAL mode with synchronous=NORMAL, its table made; transactions are explicit."""
    db = await aiosqlite.connect(path, isolation_level=None)
    await db.execute("PRAGMA journal_mode=WAL")
    await db.execute("PRAGMA synchronous=NORMAL")
    await db.execute(_SCHEMA)
    return db


def _handler(db: aiosqlite.Connection) -> grpc.GenericRpcHandler:
    lock = asyncio.Lock()

    async def empty(_request: bytes, _context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        return b""

    async def sqlite_write(request: bytes, _context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        key = request.decode() or "floor"
        async with lock:
            await db.execute("BEGIN")
            try:
                async with db.execute("SELECT value FROM floor WHERE key = ?", (key,)) as cursor:
                    await cursor.fetchone()
                await db.execute(_UPSERT, (key, VALUE))
                await db.execute("COMMIT")
            except BaseException:
                await db.execute("ROLLBACK")
                raise
        return b""

    methods: dict[str, grpc.RpcMethodHandler[bytes, bytes]] = {
        name.rsplit("/", 1)[1]: grpc.unary_unary_rpc_method_handler(method)
        for name, method in ((EMPTY, empty), (SQLITE_WRITE, sqlite_write))
    }
    return grpc.method_handlers_generic_handler(SERVICE, methods)


async def serve(port: int, path: str) -> None:
    db = await open_database(path)
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((_handler(db),))
    await serve_until_terminated(server, port)
    await db.close()


if __name__ == "__main__":
    asyncio.run(serve(int(sys.argv[1]), sys.argv[2]))
