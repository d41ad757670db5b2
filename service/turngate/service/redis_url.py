"""Where Redis is, read from a store URL: one server, a Redis Cluster, or a primary managed by
Sentinel (docs/deploying.md, Redis topologies; the clients are made in store/redis/connection.py).

* one server: `redis://host:port/db`, `rediss://…` (TLS), `unix:///path`;
* a Redis Cluster: `redis+cluster://host:port[,host:port…]` (`rediss+cluster://` for TLS);
* Sentinel: `redis+sentinel://host:port[,host:port…]/service[/db]` (`rediss+sentinel://`: TLS to
  the data nodes).

Credentials in the URL (`user:password@`) are the data nodes'; sentinels are asked without.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from urllib.parse import quote, unquote, urlsplit

STANDALONE_SCHEMES = ("redis://", "rediss://", "unix://")
CLUSTER_SCHEMES = ("redis+cluster://", "rediss+cluster://")
SENTINEL_SCHEMES = ("redis+sentinel://", "rediss+sentinel://")
REDIS_SCHEMES = STANDALONE_SCHEMES + CLUSTER_SCHEMES + SENTINEL_SCHEMES
Kind = Literal["standalone", "cluster", "sentinel"]


class BadRedisUrl(ValueError):
    """A Redis store URL that names no usable topology."""


@dataclass(frozen=True)
class RedisUrl:
    kind: Kind
    url: str
    nodes: tuple[tuple[str, int], ...] = ()
    service: str = ""
    db: int = 0
    username: str | None = None
    password: str | None = None
    tls: bool = False

    @classmethod
    def parse(cls, url: str) -> RedisUrl:
        if url.startswith(STANDALONE_SCHEMES):
            return cls("standalone", url)
        if not url.startswith(CLUSTER_SCHEMES + SENTINEL_SCHEMES):
            raise BadRedisUrl(f"must start with one of {', '.join(REDIS_SCHEMES)}")
        parts = urlsplit(url)
        nodes = tuple(_host_port(node) for node in parts.netloc.rpartition("@")[2].split(","))
        kind: Kind = "cluster" if url.startswith(CLUSTER_SCHEMES) else "sentinel"
        path = [segment for segment in parts.path.split("/") if segment]
        service, db = "", 0
        if kind == "cluster" and path:
            raise BadRedisUrl("a Redis Cluster has one database: nothing after the nodes")
        if kind == "sentinel":
            if not 1 <= len(path) <= 2:
                raise BadRedisUrl(
                    "name the service the sentinels monitor: redis+sentinel://host:port/service"
                )
            service = unquote(path[0])
            db = _number(path[1], "database") if len(path) == 2 else 0
        return cls(
            kind,
            url,
            nodes,
            service,
            db,
            unquote(parts.username) if parts.username else None,
            unquote(parts.password) if parts.password else None,
            parts.scheme.startswith("rediss"),
        )

    def node(self, host: str, port: int) -> RedisUrl:
        """One server of this topology, with its credentials and TLS (a cluster node, say)."""
        login = ""
        if self.password is not None:
            login = f"{quote(self.username or '', safe='')}:{quote(self.password, safe='')}@"
        host_part = f"[{host}]" if ":" in host else host
        return RedisUrl.parse(f"{'rediss' if self.tls else 'redis'}://{login}{host_part}:{port}")


def _host_port(node: str) -> tuple[str, int]:
    host, sep, port = node.strip().rpartition(":")
    if not sep or not host:
        raise BadRedisUrl(f"{node!r} is not HOST:PORT")
    return host.strip("[]"), _number(port, "port")


def _number(text: str, what: str) -> int:
    if not text.isdigit():
        raise BadRedisUrl(f"{text!r} is not a {what} number")
    return int(text)
