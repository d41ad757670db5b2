"""The TypeScript client's package for the suite: where it is, npm run in it, and the wait for
the HTTP listener its code talks to."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
from asyncio.subprocess import PIPE, STDOUT
from collections.abc import Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "clients" / "typescript"
# npm ci from the registry: reached only when the network or the registry hangs.
INSTALL_TIMEOUT_S = 300.0

needs_npm = pytest.mark.skipif(
    shutil.which("node") is None or shutil.which("npm") is None,
    reason="node and npm are not installed: the TypeScript client's tests need them",
)


async def npm(*args: str, timeout_s: float, env: Mapping[str, str] | None = None) -> str:
    """`npm *args` in the package, to its end; its output (stdout and stderr), which the
    assertion shows when it fails."""
    if not (PACKAGE / "node_modules").is_dir() and args[:1] != ("ci",):
        # .ci/run installs them first; a checkout that never did gets them here.
        await npm("ci", "--no-audit", "--no-fund", timeout_s=INSTALL_TIMEOUT_S)
    process = await asyncio.create_subprocess_exec(
        "npm",
        *args,
        cwd=PACKAGE,
        env={**os.environ, **(env or {})},
        stdout=PIPE,
        stderr=STDOUT,
        start_new_session=True,
    )
    try:
        async with asyncio.timeout(timeout_s):
            output, _ = await process.communicate()
    finally:
        if process.returncode is None:  # timed out: npm and the node processes under it
            os.killpg(process.pid, signal.SIGKILL)
            await process.wait()
    report = output.decode()
    assert process.returncode == 0, report
    return report


async def accepts_connections(port: int) -> bool:
    """Whether something listens on 127.0.0.1:`port` (the HTTP listener, once it has started)."""
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return False
    writer.close()
    await writer.wait_closed()
    return True
