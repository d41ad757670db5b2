"""Hatch metadata hook of the service's distribution (`turngate`): its dependencies are the ones
listed in `[tool.hatch.metadata.hooks.custom]` plus `turngate-client` at exactly the version of
this release, which both distributions read from clients/turngate/client/_version.py (one
version source, written once)."""

from __future__ import annotations

from typing import Any

from hatchling.metadata.plugin.interface import MetadataHookInterface

CLIENT = "turngate-client"


class ServiceMetadata(MetadataHookInterface):
    def update(self, metadata: dict[str, Any]) -> None:
        dependencies = self.config.get("dependencies")
        if not isinstance(dependencies, list) or not all(isinstance(d, str) for d in dependencies):
            raise TypeError("[tool.hatch.metadata.hooks.custom] dependencies must be a list of strings")
        metadata["dependencies"] = [*dependencies, f"{CLIENT}=={metadata['version']}"]
