"""Whether an address stays on this host: shared by the SDK (a token sent in plaintext) and the
service (listening without tokens)."""

from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """`localhost`, or an IPv4/IPv6 loopback address (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
