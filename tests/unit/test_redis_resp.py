"""The compare-and-set script's own packing sends the bytes redis-py would have sent."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from redis.asyncio.connection import Connection

from turngate.service.store.redis.resp import Argument, packed
from turngate.service.store.redis.script import CAS_SHA

# The command names the store sends first (one word each: redis-py would split "SCRIPT LOAD").
NAMES = st.sampled_from(["EVALSHA", "SET", "WAIT"])
ARGUMENTS = st.one_of(st.text(), st.binary(), st.integers(min_value=-(2**63), max_value=2**63 - 1))
COMMANDS = st.lists(st.tuples(NAMES, st.lists(ARGUMENTS, max_size=40)), min_size=1, max_size=4)


@given(COMMANDS)
def test_packed_commands_are_the_bytes_redis_py_packs(commands: list[tuple[str, list[Argument]]]) -> None:
    flat = [(name, *arguments) for name, arguments in commands]
    assert packed(flat) == b"".join(Connection().pack_commands(flat))


def test_a_script_call_with_a_document_and_unicode_is_packed_as_redis_py_packs_it() -> None:
    document = '{"turn": "é✓", "seq": 3}'.encode()
    command = ("EVALSHA", CAS_SHA, 2, "tg:{p/s}:doc", "tg:{p/s}:log", 0, 1733400000000000, "", document, "ü")
    assert packed([command]) == b"".join(Connection().pack_commands([command]))
