"""`turngate token`: a new random token and the tokens-file entry that names it by its digest."""

from __future__ import annotations

import json
import secrets

from turngate.service.auth.principals import ALL_PROJECTS, Entry, token_digest

TOKEN_PREFIX = "tg_"


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def entry_for(token: str, name: str, roles: list[str], projects: list[str]) -> str:
    """The TOML entry for `token`; raises ValueError (pydantic's) for an invalid name, role or project."""
    entry = Entry.model_validate(
        {
            "name": name,
            "token_sha256": token_digest(token).hex(),
            "roles": roles,
            "projects": ALL_PROJECTS if ALL_PROJECTS in projects else projects,
        }
    )
    listed = json.dumps(entry.projects) if isinstance(entry.projects, list) else f'"{entry.projects}"'
    return (
        "[[principals]]\n"
        f'name = "{entry.name}"\n'
        f'token_sha256 = "{entry.token_sha256}"\n'
        f"roles = {json.dumps([role.value for role in entry.roles])}\n"
        f"projects = {listed}\n"
    )
