"""The SDK's retries and reconnections at test speed (its defaults start at 50 ms and cap at 2 s)."""

from __future__ import annotations

from turngate.client import Backoff

FAST = Backoff(initial=0.02, maximum=0.2)
