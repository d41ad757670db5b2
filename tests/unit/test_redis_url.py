"""The Redis store URL forms (docs/deploying.md, Redis topologies): what each names, and the refusals."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from turngate.service.config import Settings
from turngate.service.config_help import describe
from turngate.service.redis_url import RedisUrl
from turngate.service.store_kinds import REDIS

LEDGER = "postgresql+asyncpg://postgres@127.0.0.1/turngate"


def test_one_server_urls_are_passed_to_redis_as_they_are() -> None:
    for url in ("redis://127.0.0.1:6379/0", "rediss://cache:6380", "unix:///run/redis.sock"):
        assert RedisUrl.parse(url) == RedisUrl("standalone", url)


def test_a_cluster_url_names_its_startup_nodes_and_credentials() -> None:
    where = RedisUrl.parse("rediss+cluster://app:s%40cret@10.0.0.1:7000,10.0.0.2:7001,[::1]:7002")
    assert where.kind == "cluster"
    assert where.nodes == (("10.0.0.1", 7000), ("10.0.0.2", 7001), ("::1", 7002))
    assert (where.username, where.password, where.tls) == ("app", "s@cret", True)


def test_a_sentinel_url_names_the_sentinels_the_service_and_the_database() -> None:
    where = RedisUrl.parse("redis+sentinel://10.0.0.1:26379,10.0.0.2:26379/turngate/3")
    assert (where.kind, where.service, where.db, where.tls) == ("sentinel", "turngate", 3, False)
    assert where.nodes == (("10.0.0.1", 26379), ("10.0.0.2", 26379))


def test_a_cluster_node_keeps_the_clusters_credentials_and_tls() -> None:
    node = RedisUrl.parse("rediss+cluster://app:p%2Fw@10.0.0.1:7000").node("10.0.0.9", 7005)
    assert node.kind == "standalone"
    assert node.url == "rediss://app:p%2Fw@10.0.0.9:7005"


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("redis+sentinel://10.0.0.1:26379", "name the service"),
        ("redis+sentinel://10.0.0.1:26379/a/b/c", "name the service"),
        ("redis+cluster://10.0.0.1:7000/0", "one database"),
        ("redis+cluster://10.0.0.1", "is not HOST:PORT"),
        ("redis+cluster://10.0.0.1:port", "is not a port number"),
    ],
)
def test_a_bad_redis_url_refuses_to_start_with_one_line(url: str, says: str) -> None:
    with pytest.raises(ValidationError) as refused:
        Settings(store=url, ledger=LEDGER)
    line = describe(refused.value)
    assert says in line
    assert "\n" not in line


def test_every_topology_is_redis_mode() -> None:
    for url in ("redis+cluster://10.0.0.1:7000", "redis+sentinel://10.0.0.1:26379/turngate"):
        assert Settings(store=url, ledger=LEDGER).store_kind is REDIS
