"""The repository the tests check: its root, its tools (this environment's console scripts, run
there), and the versions constraints.txt pins."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
TOOLS = Path(sys.executable).parent


def run_tool(tool: str, *args: str) -> None:
    """Runs this environment's console script `tool` in the repository; it must succeed."""
    ran = subprocess.run([str(TOOLS / tool), *args], cwd=ROOT, capture_output=True, text=True, check=False)
    assert ran.returncode == 0, ran.stdout + ran.stderr


def pins_of_constraints() -> dict[str, Version]:
    """constraints.txt's pins: each distribution's version, by canonical name."""
    pins: dict[str, Version] = {}
    for text in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines():
        if line := text.partition("#")[0].strip():  # a pin may end in a comment
            name, _, version = line.partition("==")
            pins[canonicalize_name(name)] = Version(version)
    return pins
