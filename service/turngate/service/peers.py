"""Who is calling, as gRPC names peers (`ipv4:127.0.0.1:5000`, `ipv6:[::1]:5000`). A call that
the HTTP listener forwarded arrives over the private Unix socket (web/private_socket.py), which
says nothing of the browser: the bridge names the browser's address in metadata, and a call is
believed about it only when it came over that socket, which nobody else can reach."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# The metadata naming the HTTP client of a forwarded call.
FORWARDED_FOR = "x-forwarded-for"


def grpc_peer(address: str) -> str:
    """`host:port` (connectrpc's client address, IPv6 hosts unbracketed) as gRPC names a peer."""
    host, _, port = address.rpartition(":")
    return f"ipv6:[{host}]:{port}" if ":" in host else f"ipv4:{host}:{port}"


def caller(peer: str, metadata: Iterable[tuple[str, Any]]) -> str:
    """The calling peer: `peer` (the connection's), or for a forwarded call the HTTP client's."""
    if not peer.startswith("unix:"):
        return peer
    forwarded = [value for key, value in metadata if key == FORWARDED_FOR and isinstance(value, str)]
    return forwarded[0] if len(forwarded) == 1 else peer
