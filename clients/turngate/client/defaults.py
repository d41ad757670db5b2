"""Where a program reaches turngate and in which project, when nobody said: one place, so the
`turngate` operator commands and the examples (which need only this SDK) agree. A flag beats the
variable, which beats the default."""

from __future__ import annotations

import os

DEFAULT_TARGET = "127.0.0.1:50051"
DEFAULT_PROJECT = "default"
TARGET_VARIABLE = "TURNGATE_TARGET"
PROJECT_VARIABLE = "TURNGATE_PROJECT"


def default_target() -> str:
    """TURNGATE_TARGET, else 127.0.0.1:50051."""
    return os.environ.get(TARGET_VARIABLE) or DEFAULT_TARGET


def default_project() -> str:
    """TURNGATE_PROJECT, else `default`."""
    return os.environ.get(PROJECT_VARIABLE) or DEFAULT_PROJECT
