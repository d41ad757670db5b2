"""Every link between the project's documents reaches a file that exists and, when it names an
anchor, a heading (or an explicit `<a id>`) of that file: moving a section breaks this, not a
reader's click."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = sorted(
    [
        ROOT / "README.md",
        ROOT / "CHANGELOG.md",
        ROOT / "bench" / "README.md",
        ROOT / "clients" / "typescript" / "README.md",
        *(ROOT / "docs").glob("*.md"),
    ]
)
_FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6} (.+)$", re.MULTILINE)
_EXPLICIT = re.compile(r'<a id="([^"]+)"')


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"\[([^]]*)\]\([^)]*\)", r"\1", heading.strip())  # a link keeps its text
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(document: Path) -> set[str]:
    text = _FENCE.sub("", document.read_text(encoding="utf-8"))
    found: set[str] = set(_EXPLICIT.findall(text))
    seen: dict[str, int] = {}
    for heading in _HEADING.findall(text):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(document: Path) -> list[str]:
    text = _FENCE.sub("", document.read_text(encoding="utf-8"))
    return [
        target for target in _LINK.findall(text) if not target.startswith(("http://", "https://", "mailto:"))
    ]


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_link_of_the_document_reaches_its_file_and_anchor(document: Path) -> None:
    broken = []
    for target in links(document):
        path, _, anchor = target.partition("#")
        linked = (document.parent / path).resolve() if path else document
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target}: no such anchor in {linked.relative_to(ROOT)}")
    assert broken == []
