"""Reading the files that name secrets (the tokens file, the session-token keys): TOML, or JSON
when the name ends in `.json`, validated by a pydantic model, with errors that never show a value."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

Model = TypeVar("Model", bound=BaseModel)


class SecretsFileError(Exception):
    """The file is missing, unreadable or invalid; the message names the problem."""


def read_validated(path: Path, model: type[Model], what: str, failure: type[SecretsFileError]) -> Model:
    """`path` as `model`; else `failure` naming `what` (e.g. "tokens file") and the problem."""
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise failure(f"cannot read {what} {path}: {error.strerror}") from error
    try:
        data = json.loads(raw) if path.suffix == ".json" else tomllib.loads(raw.decode())
        return model.model_validate(data)
    except (ValueError, UnicodeDecodeError) as error:
        raise failure(f"{what} {path} is invalid: {describe_invalid(error)}") from error


def describe_invalid(error: ValueError | UnicodeDecodeError) -> str:
    """Where and what, never the offending value (it may be a secret pasted in the wrong field)."""
    if isinstance(error, ValidationError):
        return "; ".join(
            f"{'.'.join(str(part) for part in item['loc'])}: {item['msg']}" for item in error.errors()
        )
    if isinstance(error, UnicodeDecodeError):
        return "not UTF-8"
    return str(error).split("\n", 1)[0]
