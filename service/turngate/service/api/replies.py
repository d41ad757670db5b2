"""From a command to the caller: apply it, abort the RPC with a refusal's rich status, or hand
back the reply the handler expects."""

from __future__ import annotations

from typing import Any, TypeVar, overload

import grpc

from turngate.service import core
from turngate.service.api import errors
from turngate.service.core import SessionKey
from turngate.service.ports.store import Store

Context = grpc.aio.ServicerContext[Any, Any]
_R = TypeVar("_R")
_R2 = TypeVar("_R2")
_R3 = TypeVar("_R3")


@overload
async def decided(
    store: Store,
    context: Context,
    key: SessionKey,
    command: core.Command,
    expected: type[_R],
    *,
    admission: bool = False,
) -> _R: ...


@overload
async def decided(
    store: Store,
    context: Context,
    key: SessionKey,
    command: core.Command,
    expected: tuple[type[_R], type[_R2]],
    *,
    admission: bool = False,
) -> _R | _R2: ...


@overload
async def decided(
    store: Store,
    context: Context,
    key: SessionKey,
    command: core.Command,
    expected: tuple[type[_R], type[_R2], type[_R3]],
    *,
    admission: bool = False,
) -> _R | _R2 | _R3: ...


async def decided(
    store: Store,
    context: Context,
    key: SessionKey,
    command: core.Command,
    expected: type[Any] | tuple[type[Any], ...],
    *,
    admission: bool = False,
) -> Any:
    """The reply `store` gives `command`, of the `expected` type(s); a refusal aborts the RPC
    with its status (AdmitTurn's with an AdmissionRefusal detail)."""
    reply = (await store.apply(key, command)).reply
    if isinstance(reply, core.Refusal):
        await errors.abort(context, errors.refusal(reply, admission=admission))
    if not isinstance(reply, expected):
        raise TypeError(f"{type(command).__name__} was answered {type(reply).__name__}")
    return reply
