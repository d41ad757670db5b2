"""docs/deploying.md's settings reference is the one `Settings` and `serve`'s flags generate
(scripts/settings_reference.py): a setting added, renamed or given a new default or bound without
regenerating it fails here."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEPLOYING = ROOT / "docs" / "deploying.md"


def settings_reference(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "settings_reference.py"), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def test_the_settings_reference_in_deploying_md_is_current() -> None:
    result = settings_reference("--check")
    assert result.returncode == 0, result.stderr


def test_a_stale_reference_is_found_and_rewritten(tmp_path: Path) -> None:
    copy = tmp_path / "deploying.md"
    shutil.copy(DEPLOYING, copy)
    text = copy.read_text(encoding="utf-8")
    copy.write_text(text.replace("| `TURNGATE_LEASE_TTL` |", "| `TURNGATE_LEASE` |"))

    stale = settings_reference("--check", "--document", str(copy))
    assert stale.returncode == 1
    assert "stale" in stale.stderr
    assert settings_reference("--document", str(copy)).returncode == 0
    assert copy.read_text(encoding="utf-8") == DEPLOYING.read_text(encoding="utf-8")
