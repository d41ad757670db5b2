"""Settings as people meet them: their environment variables, their defaults as --help shows
them, the values each takes, the reference table of docs/deploying.md, a warning for a TURNGATE_*
variable nothing reads, and one line for settings that refuse to start."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import NoneType, UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from annotated_types import Ge, Gt, Le
from pydantic import ValidationError

from turngate.service.config import PREFIX, Settings, Values

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
    if value == ():
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def values(name: str) -> str:
    """What setting `name` takes, read from its type and its bounds (or its `Values`)."""
    field = Settings.model_fields[name]
    marked = _marked([*field.metadata, field.annotation])
    if marked is not None:
        return marked
    kind = _bare(field.annotation)
    if get_origin(kind) is Literal:
        return ", ".join(f"`{choice}`" for choice in get_args(kind))
    if kind is bool:
        return "`true`, `false`"
    if kind is Path:
        return "a file"
    low = next((_number(m.ge) for m in field.metadata if isinstance(m, Ge)), None)
    above = next((f"more than {_number(m.gt)}" for m in field.metadata if isinstance(m, Gt)), None)
    high = next((_number(m.le) for m in field.metadata if isinstance(m, Le)), None)
    pattern = next((m.pattern for m in field.metadata if getattr(m, "pattern", None)), None)
    if pattern is not None:
        return f"`{pattern}`"
    unit = " s" if kind is float else ""
    if low is not None and high is not None:
        return f"{low} to {high}{unit}"
    if above is not None and high is not None:
        return f"{above}, up to {high}{unit}"
    return "text"


def _marked(annotations: Iterable[Any]) -> str | None:
    """The `Values` among `annotations`, or inside them (an Annotated type, a union with None)."""
    for annotation in annotations:
        if isinstance(annotation, Values):
            return annotation.text
        if get_origin(annotation) is Annotated:
            found = _marked(annotation.__metadata__)
        elif get_origin(annotation) in (Union, UnionType):
            found = _marked(get_args(annotation))
        else:
            continue
        if found is not None:
            return found
    return None


def _bare(annotation: Any) -> Any:
    """`annotation` without None (an optional setting) and without Annotated's metadata."""
    if get_origin(annotation) in (Union, UnionType):
        (annotation,) = (arg for arg in get_args(annotation) if arg is not NoneType)
    if get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    return annotation


def _number(value: Any) -> str:
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


def reference(flags: Mapping[str, tuple[str, str]]) -> str:
    """Every setting as a Markdown table, in the order `Settings` declares them: its variable, its
    flag and what that flag's help says (`flags`: setting -> (flag, help)), else its docstring,
    its default and the values it takes (docs/deploying.md, Settings)."""
    rows = ["| variable | flag | default | values | what it sets |", "|---|---|---|---|---|"]
    for name, field in Settings.model_fields.items():
        flag, about = flags.get(name, ("", field.description or ""))
        cells = (
            f"`{variable(name)}`",
            f"`{flag}`" if flag else "",
            f"`{shown_default(name)}`",
            values(name),
            " ".join(about.split()).replace("|", "\\|"),
        )
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


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
