"""The stores' test seams as the tests use them (ports/store.py): a write whose reply is lost
(`after_write`), or that fails before it leaves (`before_write`), on one session."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from tests.support.stores import ContractStore
from turngate.service.core import Command, SessionKey
from turngate.service.ports.store import AfterWrite, BeforeWrite


def losing_a_reply(key: SessionKey, then: Callable[[], None] = lambda: None) -> AfterWrite:
    """An `after_write` seam that loses the reply of the next write to `key`, once (the write is
    made: a connection lost with its reply); `then` runs as it is lost."""
    armed = True

    async def lose(written: SessionKey, _: Command) -> None:
        nonlocal armed
        if written == key and armed:
            armed = False
            then()
            raise ConnectionResetError("the connection was lost with the reply")

    return lose


def refusing_before_writing(key: SessionKey) -> BeforeWrite:
    """A `before_write` seam that fails every write to `key` before it leaves (nothing is sent)."""

    async def refuse(written: SessionKey, _: Command) -> None:
        if written == key:
            raise ConnectionRefusedError("the store refused the connection")

    return refuse


@contextmanager
def reply_lost(
    store: ContractStore, key: SessionKey, then: Callable[[], None] = lambda: None
) -> Iterator[None]:
    """The next write to `key` through `store` is made and its reply lost, within the block."""
    store.after_write = losing_a_reply(key, then)
    try:
        yield
    finally:
        store.after_write = None


@contextmanager
def unreachable_before_writing(store: ContractStore, key: SessionKey) -> Iterator[None]:
    """Every write to `key` through `store` fails before it leaves, within the block."""
    store.before_write = refusing_before_writing(key)
    try:
        yield
    finally:
        store.before_write = None
