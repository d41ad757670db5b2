"""`turngate.client.sync` has exactly the async SDK's public surface: the same classes, methods,
attributes, parameters (names, kinds, defaults, annotations) and return types, made synchronous
(async def -> def, async iterators -> iterators, async context managers -> context managers,
asyncio.Event -> threading.Event, `aclose`/`__aenter__`/`__aiter__`... -> `close`/`__enter__`/
`__iter__`...). Read with `inspect` and `typing.get_type_hints`, without a server."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from dataclasses import dataclass
from typing import Any, get_args, get_origin, get_type_hints

import pytest

from turngate.client import Client, ClientOptions, Gateway, Runner, Turn, Watch, sync
from turngate.client.steers import Steers

PAIRS: list[tuple[type, type]] = [
    (Client, sync.Client),
    (Runner, sync.Runner),
    (Turn, sync.Turn),
    (Gateway, sync.Gateway),
    (Watch, sync.Watch),
    (Steers, sync.Steers),
]
SYNCED: dict[Any, Any] = {
    **dict(PAIRS),
    AsyncIterator: Iterator,
    AbstractAsyncContextManager: AbstractContextManager,
    asyncio.Event: threading.Event,
}
SYNCED_NONE: dict[Any, Any] = {}
"""The sync SDK's own types are what they are."""
RENAMED = {
    "aclose": "close",
    "__aenter__": "__enter__",
    "__aexit__": "__exit__",
    "__aiter__": "__iter__",
    "__anext__": "__next__",
}
PROTOCOL = {"__init__", *RENAMED, *RENAMED.values()}
"""Dunder methods that are part of the surface (`__init__` only where users call it: Client)."""


@dataclass(frozen=True)
class Parameter:
    name: str
    kind: inspect._ParameterKind
    default: object
    annotation: object


@dataclass(frozen=True)
class Method:
    parameters: tuple[Parameter, ...]
    returns: object


def synced(hint: object, mapping: dict[Any, Any]) -> object:
    """`hint` with every async type replaced by its synchronous twin (by `mapping`), as a
    comparable tree of (origin, arguments)."""
    if isinstance(hint, list):  # a Callable's parameter types
        return tuple(synced(arg, mapping) for arg in hint)
    hint = mapping.get(hint, hint)
    origin = get_origin(hint)
    if origin is None:
        return hint
    return (mapping.get(origin, origin), tuple(synced(arg, mapping) for arg in get_args(hint)))


def _sdk_members(cls: type) -> dict[str, object]:
    """The members defined by the SDK's own classes (not by object, abc or typing bases)."""
    members: dict[str, object] = {}
    for klass in reversed(cls.__mro__):
        if klass.__module__.startswith("turngate."):
            members.update(vars(klass))
    return members


def surface(cls: type, mapping: dict[Any, Any], constructed: bool) -> dict[str, object]:
    """Public attributes (annotated or properties) by their type, and public methods by their
    signature, under their synchronous names."""
    found: dict[str, object] = {}
    for name, hint in get_type_hints(cls).items():
        if not name.startswith("_"):
            found[name] = ("attribute", synced(hint, mapping))
    for name, member in _sdk_members(cls).items():
        if name.startswith("_") and name not in PROTOCOL:
            continue
        if name == "__init__" and not constructed:
            continue
        if isinstance(member, property):
            assert member.fget is not None
            found[name] = ("attribute", synced(get_type_hints(member.fget)["return"], mapping))
        elif inspect.isfunction(member):
            hints = get_type_hints(member)
            parameters = tuple(
                Parameter(p.name, p.kind, p.default, synced(hints.get(p.name), mapping))
                for p in list(inspect.signature(member).parameters.values())[1:]
            )
            assert not (mapping is SYNCED_NONE and inspect.iscoroutinefunction(member)), (
                f"{cls.__qualname__}.{name} is async in the sync SDK"
            )
            found[RENAMED.get(name, name)] = Method(parameters, synced(hints.get("return"), mapping))
    return found


@pytest.mark.parametrize(("aio", "threaded"), PAIRS, ids=[aio.__name__ for aio, _ in PAIRS])
def test_the_sync_class_has_exactly_the_async_ones_surface(aio: type, threaded: type) -> None:
    constructed = aio is Client
    expected = surface(aio, SYNCED, constructed)
    actual = surface(threaded, SYNCED_NONE, constructed)
    assert sorted(actual) == sorted(expected), "methods or attributes missing or extra"
    for name, member in expected.items():
        assert actual[name] == member, f"{aio.__qualname__}.{name} differs"


def test_the_surface_is_what_the_sdk_documents() -> None:
    """A guard on the comparison itself: it sees the methods and attributes it should."""
    turn = surface(Turn, SYNCED, constructed=False)
    assert {"tool_call", "interaction", "stop_requested", "outcome", "settled", "lease"} <= set(turn)
    watch = surface(Watch, SYNCED, constructed=False)
    assert {"cursor", "close", "__iter__", "__next__", "__enter__", "__exit__"} == set(watch)
    runner = surface(Runner, SYNCED, constructed=False)["turn"]
    assert isinstance(runner, Method)
    assert [p.name for p in runner.parameters][-1] == "on_queued"
    gateway = surface(Gateway, SYNCED, constructed=False)
    assert {"stop", "resume_queue", "clear_queue", "steer", "move_queued_turn"} <= set(gateway)
    assert {"steers", "steer", "acknowledge"} <= set(turn)
    assert {"received", "__iter__", "__next__"} == set(surface(Steers, SYNCED, constructed=False))
    client = surface(Client, SYNCED, constructed=True)
    init = client["__init__"]
    assert isinstance(init, Method)
    assert [p.name for p in init.parameters][:3] == ["target", "project_id", "token"]
    assert client["list_turns"] == surface(sync.Client, SYNCED_NONE, constructed=True)["list_turns"]


def test_client_options_are_the_clients_keyword_options() -> None:
    keywords = {
        name: get_type_hints(Client.__init__)[name]
        for name, p in inspect.signature(Client.__init__).parameters.items()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    }
    assert get_type_hints(ClientOptions) == keywords
