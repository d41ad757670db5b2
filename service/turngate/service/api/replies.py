"""From a committed decision to the caller: a refusal aborts the RPC with its rich status."""

from __future__ import annotations

from typing import Any

import grpc

from turngate.service import core
from turngate.service.api import errors

Context = grpc.aio.ServicerContext[Any, Any]


async def answer(context: Context, reply: core.Reply, *, admission: bool = False) -> core.Reply:
    """Returns a non-refusal reply; aborts the RPC with the refusal's status otherwise."""
    if isinstance(reply, core.Refusal):
        await errors.abort(context, errors.refusal(reply, admission=admission))
    return reply
