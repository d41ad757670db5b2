"""The registry of the kinds of store: each kind opened by a module of its own, imported when a
process opens that kind."""

from __future__ import annotations

import importlib
import inspect

from turngate.service.backends import _OPENERS
from turngate.service.store_kinds import KINDS


def test_every_kind_of_store_is_opened_by_its_modules_opened() -> None:
    assert set(_OPENERS) == set(KINDS)
    for module in _OPENERS.values():
        assert inspect.iscoroutinefunction(importlib.import_module(module).opened), module
