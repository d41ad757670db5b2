"""What the two distributions ship besides code: the licence their metadata names, classifiers,
the constraints file of the versions CI tested, and the contract's package options for other
languages (issue 14)."""

from __future__ import annotations

import hashlib
import re
import tomllib
from importlib import metadata
from typing import Any

import pytest
import trove_classifiers
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from ruamel.yaml import YAML

from tests.support.repository import ROOT, pins_of_constraints
from turngate.v1 import turngate_pb2

PROJECTS = {"turngate": ROOT / "pyproject.toml", "turngate-client": ROOT / "clients" / "pyproject.toml"}
# sha256 of the Apache License 2.0's terms, from its first line to "END OF TERMS AND CONDITIONS",
# as apache.org publishes them (LICENSE-2.0.txt, whose whole-file sha256 is cfc7749b…d30).
APACHE_2_TERMS_SHA256 = "0cec06e0e55fbc3dc5cee4fca9b607f66cb8f4e4dbcf3b3c013594dd156732e9"
PROTO = ROOT / "protos" / "turngate" / "v1" / "turngate.proto"
# The values other languages' generated code is built with; buf breaking no longer watches them
# (buf.yaml), so this is what notices a change.
PACKAGE_OPTIONS = {
    "csharp_namespace": "Turngate.V1",
    "go_package": "turngate/v1;turngatev1",
    "java_multiple_files": "true",
    "java_outer_classname": "TurngateProto",
    "java_package": "turngate.v1",
    "php_namespace": "Turngate\\V1",
    "ruby_package": "Turngate::V1",
}


def _project(name: str) -> dict[str, Any]:
    project: dict[str, Any] = tomllib.loads(PROJECTS[name].read_text(encoding="utf-8"))["project"]
    return project


def _requirements() -> list[Requirement]:
    """The project's own requirements, every extra included, from the two pyproject.toml files
    (the service's dependencies are its metadata hook's, plus turngate-client)."""
    service = tomllib.loads(PROJECTS["turngate"].read_text(encoding="utf-8"))
    texts = list(service["tool"]["hatch"]["metadata"]["hooks"]["custom"]["dependencies"])
    for name in PROJECTS:
        project = _project(name)
        texts += project.get("dependencies", [])
        for extra in project.get("optional-dependencies", {}).values():
            texts += extra
    return [Requirement(text) for text in texts]


def _installed_closure(roots: list[Requirement]) -> set[str]:
    """Every distribution the requirements pull in, as installed here (markers and extras
    evaluated), found through the installed distributions' own metadata."""
    names: set[str] = set()
    visited: set[tuple[str, frozenset[str]]] = set()
    pending = [(root.name, frozenset(root.extras)) for root in roots]
    while pending:
        name, extras = pending.pop()
        key = (canonicalize_name(name), extras)
        if key in visited:
            continue
        visited.add(key)
        names.add(key[0])
        environments = [{"extra": extra} for extra in extras] or [{"extra": ""}]
        for text in metadata.requires(name) or []:
            child = Requirement(text)
            if child.marker is None or any(child.marker.evaluate(env) for env in environments):
                pending.append((child.name, frozenset(child.extras)))
    return names


def test_the_licence_is_apache_2_and_both_distributions_name_it() -> None:
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    terms = text[: text.index("END OF TERMS AND CONDITIONS") + len("END OF TERMS AND CONDITIONS")]
    assert hashlib.sha256(terms.encode()).hexdigest() == APACHE_2_TERMS_SHA256
    assert "   Copyright 2026 The turngate Authors\n" in text
    assert "[name of copyright owner]" not in text
    # The client's distribution is built from clients/: it ships the same file.
    assert (ROOT / "clients" / "LICENSE").read_text(encoding="utf-8") == text
    for name in PROJECTS:
        assert _project(name)["license"] == "Apache-2.0", name


@pytest.mark.parametrize("name", sorted(PROJECTS))
def test_the_metadata_has_valid_classifiers_and_no_made_up_urls(name: str) -> None:
    project = _project(name)
    classifiers = project["classifiers"]
    assert classifiers == sorted(classifiers)
    assert not set(classifiers) - trove_classifiers.classifiers
    # PEP 639: the SPDX expression is the licence; a License :: classifier would say it twice.
    assert not [c for c in classifiers if c.startswith("License ::")]
    lowest = re.fullmatch(r">=(\d+\.\d+)", project["requires-python"])
    assert lowest is not None
    assert f"Programming Language :: Python :: {lowest.group(1)}" in classifiers
    # No canonical home yet (docs/decisions.md): a URL, once there, is a real https one.
    for label, url in project.get("urls", {}).items():
        assert url.startswith("https://"), (label, url)
        assert "example" not in url, (label, url)


def test_the_constraints_pin_every_installed_dependency_within_the_projects_bounds() -> None:
    pins = pins_of_constraints()
    requirements = _requirements()
    own = {canonicalize_name(name) for name in PROJECTS}
    roots = [r for r in requirements if canonicalize_name(r.name) not in own]
    missing = sorted(_installed_closure(roots) - set(pins))
    assert not missing, f"constraints.txt lacks {missing}: regenerate it (its header says how)"
    outside = {
        str(r): str(pins[canonicalize_name(r.name)])
        for r in roots
        if pins[canonicalize_name(r.name)] not in r.specifier
    }
    assert not outside, outside
    assert not own & set(pins), "the project's own distributions are not constrained"


def test_the_contract_carries_the_package_options_of_other_languages() -> None:
    written = dict(re.findall(r'^option (\w+) = "?(.*?)"?;$', PROTO.read_text(encoding="utf-8"), re.M))
    assert {key: value.replace("\\\\", "\\") for key, value in written.items()} == PACKAGE_OPTIONS
    # The committed Python code was generated from this proto (scripts/gen_protos.py).
    options = turngate_pb2.DESCRIPTOR.GetOptions()
    assert options.go_package == PACKAGE_OPTIONS["go_package"]
    assert options.java_multiple_files
    assert options.csharp_namespace == PACKAGE_OPTIONS["csharp_namespace"]


def test_buf_gen_yaml_generates_go_and_typescript() -> None:
    config = YAML(typ="safe").load((ROOT / "buf.gen.yaml").read_text(encoding="utf-8"))
    assert config["version"] == "v2"
    outputs = {plugin["remote"]: plugin["out"] for plugin in config["plugins"]}
    assert outputs == {
        "buf.build/protocolbuffers/go": "gen/go",
        "buf.build/grpc/go": "gen/go",
        "buf.build/bufbuild/es": "gen/ts",
    }


def test_the_protocol_guide_is_linked_and_its_links_resolve() -> None:
    guide = ROOT / "docs" / "protocol.md"
    text = guide.read_text(encoding="utf-8")
    assert "(docs/protocol.md)" in (ROOT / "README.md").read_text(encoding="utf-8")
    assert "(protocol.md)" in (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    assert text.count("```mermaid") >= 4
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text):
        assert (guide.parent / target).exists(), target
