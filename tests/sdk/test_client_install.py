"""The client installs alone: `turngate-client`, built from clients/ into a fresh virtual
environment, brings none of the service's dependencies (read from this installation's metadata
of `turngate`, not from a hand-made list) and no OpenTelemetry, cannot import turngate.service,
and its examples run with it against a real server. The two wheels do not overlap: the client's
holds turngate/client and turngate/v1 only, the service's turngate/service only.

pip installs from its index and reuses its cache, as a user's would."""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import os
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.sdk.conftest import PROJECT

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
# Creating a venv and installing grpcio and protobuf from pip's cache takes ~20 s here; a cold
# cache downloads them.
INSTALL_TIMEOUT_S = 600.0


def dependencies(distribution: str) -> set[str]:
    """The normalized names `distribution` requires (its extras left out)."""
    required = (Requirement(text) for text in importlib.metadata.requires(distribution) or ())
    return {canonicalize_name(r.name) for r in required if r.marker is None or "extra" not in str(r.marker)}


def isolated_env() -> dict[str, str]:
    """This environment without what would let the new venv's python see this repository or
    this venv."""
    hidden = {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP"}
    return {k: v for k, v in os.environ.items() if k not in hidden and not k.startswith("TURNGATE_")}


async def run(*command: str | Path, cwd: Path, within: float = INSTALL_TIMEOUT_S, exit_code: int = 0) -> str:
    """Runs `command` to its end, within `within` seconds, which must exit with `exit_code`;
    returns its stdout (and shows its output when it fails)."""
    process = await asyncio.create_subprocess_exec(
        *map(str, command),
        cwd=cwd,
        env=isolated_env(),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(within):
            out, err = await process.communicate()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == exit_code, (
        f"{command} exited {process.returncode}:\n{out.decode()}\n{err.decode()}"
    )
    return out.decode()


def wheel(directory: Path, distribution: str) -> Path:
    [found] = directory.glob(f"{distribution}-*.whl")
    return found


def members(wheel: Path) -> set[str]:
    """The top two levels of the wheel's files (`turngate/client`, ...), dist-info left out."""
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    return {"/".join(name.split("/")[:2]) for name in names if ".dist-info/" not in name}


@pytest.fixture(scope="module")
async def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Both wheels, built from this checkout as pip builds them."""
    built = tmp_path_factory.mktemp("wheels")
    pip = (sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", built)
    await asyncio.gather(run(*pip, ROOT / "clients", cwd=built), run(*pip, ROOT, cwd=built))
    return built


async def test_the_two_wheels_hold_each_their_own_packages(wheels: Path) -> None:
    client, service = wheel(wheels, "turngate_client"), wheel(wheels, "turngate")
    assert members(client) == {"turngate/client", "turngate/v1"}
    # `python -m turngate` runs the service's command: its __main__ sits in the namespace package.
    assert members(service) == {"turngate/service", "turngate/__main__.py"}
    with zipfile.ZipFile(service) as archive:
        metadata = archive.read(f"{service.name.split('-py')[0]}.dist-info/METADATA").decode()
    version = importlib.metadata.version("turngate-client")
    assert f"Requires-Dist: turngate-client=={version}" in metadata
    assert client.name.startswith(f"turngate_client-{version}-")
    assert service.name.startswith(f"turngate-{version}-")


@pytest.mark.timeout(INSTALL_TIMEOUT_S + 60)
async def test_the_client_installs_alone_and_runs_the_examples(
    wheels: Path, tmp_path: Path, target: str, session_id: str
) -> None:
    venv = tmp_path / "venv"
    python = venv / "bin" / "python"
    await run(sys.executable, "-m", "venv", venv, cwd=tmp_path)
    client = wheel(wheels, "turngate_client")
    await run(python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", client, cwd=tmp_path)

    listed = json.loads(await run(python, "-m", "pip", "list", "--format=json", cwd=tmp_path))
    installed = {canonicalize_name(item["name"]) for item in listed}
    server_only = dependencies("turngate") - dependencies("turngate-client") - {"turngate-client"}
    assert {"sqlalchemy", "redis", "alembic", "pydantic", "opentelemetry-sdk"} <= server_only
    assert installed & server_only == set(), "the client brought the service's dependencies"
    assert not {name for name in installed if name.startswith("opentelemetry")}
    assert {"grpcio", "protobuf", "grpcio-status", "googleapis-common-protos", "turngate-client"} <= installed

    probe = (
        "import importlib.util, turngate.client as c, turngate.client.sync;"
        "assert importlib.util.find_spec('turngate.service') is None;"
        "assert not c.telemetry.ENABLED;"
        "print(c.__version__)"
    )
    assert (await run(python, "-c", probe, cwd=tmp_path)).strip() == importlib.metadata.version("turngate")

    where = ("--target", target, "--project", PROJECT)
    steps = ("--steps", "2", "--step-seconds", "0.05")
    ran = await run(
        python, EXAMPLES / "demo_runner.py", session_id, "t1", *steps, *where, cwd=tmp_path, within=30
    )
    assert "admitted t1" in ran
    assert "t1 settled TURN_OUTCOME_COMPLETED" in ran
    stopped = await run(
        python, EXAMPLES / "demo_stop.py", session_id, "t1", *where, cwd=tmp_path, within=30, exit_code=4
    )  # idle: nothing runs
    assert stopped.strip() == "idle: nothing runs (last turn t1)"
