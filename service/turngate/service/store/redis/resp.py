"""Commands in the Redis protocol (RESP), as the compare-and-set script's hot path sends them.

redis-py packs a command in Python one argument at a time, copying the buffer at each: for the
script's thirty arguments that cost five times what one join does (docs/performance.md, "What
changed"). This packs the same bytes, for the argument types the store sends.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

Argument = str | int | bytes


def packed(commands: Iterable[Sequence[Argument]]) -> bytes:
    """`commands`, each an array of bulk strings: bytes as they are, a str in UTF-8, an int in
    decimal (as redis-py encodes them)."""
    parts: list[bytes] = []
    for command in commands:
        parts.append(b"*%d\r\n" % len(command))
        for argument in command:
            data = argument if isinstance(argument, bytes) else str(argument).encode()
            parts += (b"$%d\r\n" % len(data), data, b"\r\n")
    return b"".join(parts)


# Sends packed commands and answers with their next replies, this many (an error reply as its
# exception): on a connection held for the call, or through a node's pipe.
Exchange = Callable[[bytes, int], Awaitable[list[Any]]]
