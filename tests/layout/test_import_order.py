"""Each package of the service imports first, in a fresh interpreter: no import-order guard keeps
the layers working (their direction is `lint-imports`' job, configured in pyproject.toml)."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

import turngate.service

# Import a package, then every module under it, the way a process that starts there would.
_PROGRAM = """
import importlib, pkgutil, sys
first = importlib.import_module(sys.argv[1])
for module in pkgutil.walk_packages(getattr(first, "__path__", []), first.__name__ + "."):
    importlib.import_module(module.name)
"""


def _top_level() -> list[str]:
    return sorted(
        module.name for module in pkgutil.iter_modules(turngate.service.__path__, "turngate.service.")
    )


def _import_first(name: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _PROGRAM, name], capture_output=True, text=True, timeout=60, check=False
    )


def test_every_package_of_the_service_imports_first_in_a_fresh_interpreter() -> None:
    names = _top_level()
    assert {"core", "ports", "store", "ledger", "sql", "api", "server"} <= {
        n.rsplit(".", 1)[1] for n in names
    }
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = dict(zip(names, pool.map(_import_first, names), strict=True))
    failed = {
        name: result.stderr.strip().splitlines()[-1] for name, result in results.items() if result.returncode
    }
    assert not failed, failed


@pytest.mark.parametrize("client_module", ["turngate.client", "turngate.v1"])
def test_the_sdk_imports_without_the_service(client_module: str) -> None:
    program = (
        f"import sys, {client_module}\n"
        "loaded = sorted(name for name in sys.modules if name.startswith('turngate.service'))\n"
        "assert not loaded, loaded\n"
    )
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
