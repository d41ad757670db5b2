"""Settings as people meet them: their environment variables, their defaults as --help shows
them, a warning for a TURNGATE_* variable nothing reads, and one line for settings that refuse to
start."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from turngate.service.config import PREFIX, Settings

# Settings whose values are never echoed: a URL may carry a password, a file name is a token's.
_UNSHOWN = frozenset(
    {"store", "ledger", "token", "token_file", "auth_file", "session_token_keys", "settings"}
)
# TURNGATE_* variables read by other programs than the service: the test suite, the benchmarks,
# and a Kubernetes Service named turngate (its service links: TURNGATE_PORT, TURNGATE_SERVICE_HOST…).
_OTHER_PROGRAMS = re.compile(
    r"^TURNGATE_(TEST_[A-Z0-9_]+|HYPOTHESIS_PROFILE|FUZZ_BACKEND|BENCH_TARGETS|PORT(_[A-Z0-9_]+)?|SERVICE_[A-Z0-9_]+)$"
)


def variable(name: str) -> str:
    """The environment variable of setting `name`."""
    return PREFIX + name.upper()


def shown_default(name: str) -> str:
    """Setting `name`'s default as --help shows it."""
    value: Any = Settings.model_fields[name].default
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def unknown_variables(environ: Mapping[str, str], known: Iterable[str]) -> list[str]:
    """One line for each TURNGATE_* variable in `environ` that nothing reads (a misspelling, most
    likely), naming the closest known one."""
    names = sorted(set(known))
    lines = []
    for name in sorted(environ):
        if not name.startswith(PREFIX) or name in names or _OTHER_PROGRAMS.match(name):
            continue
        close = difflib.get_close_matches(name, names, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        lines.append(f"turngate: warning: {name} is not a turngate setting and is ignored{hint}")
    return lines


def describe(error: ValidationError, what: str = "settings", flags: Mapping[str, str] | None = None) -> str:
    """One line naming every bad setting (or field of `what`) by its flag (`flags`: setting ->
    option) and variable, with its value unless it may be secret, for a refusal to start."""
    parts = []
    for item in error.errors():
        name = ".".join(str(p) for p in item["loc"]) or "settings"
        message = item["msg"].removeprefix("Value error, ")
        if name == "settings":  # a rule across several settings: its message names them
            parts.append(message)
            continue
        shown = "" if name in _UNSHOWN else repr(item.get("input"))
        value = f"={shown}" if shown and len(shown) <= 40 else ""
        if flags is None:
            parts.append(f"{name}{value}: {message}")
            continue
        names = f"{flags[name]} or {variable(name)}" if name in flags else variable(name)
        parts.append(f"{names}{value}: {message}")
    return f"invalid {what}: " + "; ".join(parts)
