"""The one Redis failure classifier (store/redis/connection.py `failure`), on every reply a node
gives while it fails or changes role, parsed from the wire as redis-py parses it: a reply that
says the command never ran is "not applied" even after the write was sent; a lost connection, a
timeout or UNBLOCKED (a blocking WAIT whose node turned replica, after the script it confirms had
run) is "outcome unknown" once the write was sent; anything else is not Redis failing (a bug)."""

from __future__ import annotations

import pytest
from redis import exceptions as redis_errors
from redis._parsers.base import BaseParser

from turngate.service.ports.store import StoreUnavailable, WriteOutcomeUnknown
from turngate.service.store.redis.connection import failure, unavailable, unavailable_on_failure


def reply(line: str) -> redis_errors.RedisError:
    """The exception redis-py raises for the error reply `line` (without its leading '-')."""
    parsed = BaseParser.parse_error(line)  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
    assert isinstance(parsed, redis_errors.RedisError)  # LOADING is a ConnectionError, the others replies
    return parsed


NOT_RUN = {
    "READONLY": "READONLY You can't write against a read only replica.",
    "OOM": "OOM command not allowed when used memory > 'maxmemory'.",
    "NOREPLICAS": "NOREPLICAS Not enough good replicas to write.",
    "MASTERDOWN": "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
    "LOADING": "LOADING Redis is loading the dataset in memory",
    "BUSY": "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.",
    "MISCONF": "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist",
    "TRYAGAIN": "TRYAGAIN Multiple keys request during rehashing of slot",
    "CLUSTERDOWN": "CLUSTERDOWN The cluster is down",
    "MOVED": "MOVED 3999 127.0.0.1:6381",
    "ASK": "ASK 3999 127.0.0.1:6381",
    "NOGROUP": "NOGROUP No such key 'tg:{0}:outbox' or consumer group 'ledger' in XREADGROUP",
}
LOST = {
    "UNBLOCKED": reply(
        "UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)"
    ),
    "connection closed": redis_errors.ConnectionError("Connection closed by server."),
    "read timeout": redis_errors.TimeoutError("Timeout reading from 127.0.0.1:6379"),
    "connection reset": ConnectionResetError(104, "Connection reset by peer"),
}


@pytest.mark.parametrize("line", NOT_RUN.values(), ids=NOT_RUN.keys())
@pytest.mark.parametrize("sent", [False, True], ids=["before-sending", "after-sending"])
def test_a_reply_that_says_the_command_never_ran_is_not_applied_even_after_sending(
    line: str, sent: bool
) -> None:
    assert failure(reply(line), sent=sent) is StoreUnavailable


@pytest.mark.parametrize("error", LOST.values(), ids=LOST.keys())
def test_a_lost_connection_a_timeout_or_unblocked_is_outcome_unknown_once_the_write_was_sent(
    error: Exception,
) -> None:
    assert failure(error, sent=True) is WriteOutcomeUnknown
    assert failure(error, sent=False) is StoreUnavailable


def test_a_read_only_reply_a_sentinel_connection_turned_into_a_connection_error_is_not_applied() -> None:
    """redis-py's Sentinel-managed connection raises READONLY from a deposed primary as a
    ConnectionError ("The previous master is now a slave"), while handling it."""
    with pytest.raises(redis_errors.ConnectionError) as converted:
        deposed_primary_answers()
    assert failure(converted.value, sent=True) is StoreUnavailable


def deposed_primary_answers() -> None:
    """What redis-py's Sentinel-managed connection does with a READONLY reply of its primary."""
    try:
        raise reply(NOT_RUN["READONLY"])
    except redis_errors.ReadOnlyError:
        raise redis_errors.ConnectionError("The previous master is now a slave")  # noqa: B904  (as redis-py)


def test_a_cluster_client_that_found_no_node_answering_is_unavailable() -> None:
    lost = redis_errors.RedisClusterException("Redis Cluster cannot be connected")
    lost.__cause__ = redis_errors.ConnectionError(
        "Error 111 connecting to 127.0.0.1:7000. Connection refused."
    )
    assert failure(lost, sent=False) is StoreUnavailable
    assert unavailable(lost)


@pytest.mark.parametrize(
    "error",
    [
        reply("ERR unknown command 'EVALSHA'"),
        reply("WRONGTYPE Operation against a key holding the wrong kind of value"),
        reply("ERR user_script:1: Script attempted to access nonexistent global variable 'x'"),
        ValueError("a bug"),
    ],
    ids=["unknown-command", "wrong-type", "script-error", "bug"],
)
def test_anything_else_is_not_redis_failing_and_is_raised_as_it_is(error: Exception) -> None:
    assert failure(error, sent=True) is None
    assert not unavailable(error)
    with pytest.raises(type(error)), unavailable_on_failure(sent=True):
        raise error


def test_the_block_raises_what_the_failure_is_with_redis_own_words() -> None:
    with (
        pytest.raises(WriteOutcomeUnknown, match="UNBLOCKED force unblock"),
        unavailable_on_failure(sent=True),
    ):
        raise LOST["UNBLOCKED"]
    with (
        pytest.raises(StoreUnavailable, match="Link with MASTER is down") as refused,
        unavailable_on_failure(sent=True),
    ):
        raise reply(NOT_RUN["MASTERDOWN"])
    assert not isinstance(refused.value, WriteOutcomeUnknown)
