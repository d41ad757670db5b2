"""The contract's generated code is fresh (and the check notices when it is not), and the contract
passes `buf lint` with the STANDARD rules (docs/design.md §3)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
CONTRACT = Path("protos/turngate/v1/turngate.proto")


def gen_protos_check(root: Path) -> subprocess.CompletedProcess[str]:
    # protoc finds its mypy plugins on PATH: put this environment's bin first.
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(
        [sys.executable, "scripts/gen_protos.py", "--check"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_generated_code_is_fresh() -> None:
    result = gen_protos_check(ROOT)
    assert result.returncode == 0, result.stderr


def test_generated_code_check_fails_when_the_contract_changed(tmp_path: Path) -> None:
    for part in ("scripts", "protos", "clients/turngate/v1"):
        shutil.copytree(ROOT / part, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__"))
    contract = tmp_path / CONTRACT
    contract.write_text(
        contract.read_text().replace(
            "  string session_id = 2;\n}", "  string session_id = 2;\n  string probe = 3;\n}", 1
        )
    )
    assert "probe" in contract.read_text()

    result = gen_protos_check(tmp_path)
    assert result.returncode == 1
    assert "stale" in result.stderr
    assert "turngate_pb2.py" in result.stderr


def test_contract_passes_buf_lint() -> None:
    buf = shutil.which("buf", path=str(BIN)) or shutil.which("buf")
    assert buf is not None, "buf is not installed (pip package buf-bin)"
    result = subprocess.run([buf, "lint"], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == ""
