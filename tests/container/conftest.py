"""The container tests share one image, built once per run (cached layers make rebuilds quick).
Where no container engine can run they skip, with one line saying why."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.container import podman

_REPORT: list[str] = []


@pytest.fixture(scope="session")
def built() -> podman.Built:
    try:
        podman.check_engine()
    except podman.Unavailable as why:
        pytest.skip(f"container tests: {why}")
    image = podman.build()
    _REPORT.append(
        f"image {image.image}: {image.size_bytes / 1e6:.0f} MB, built in {image.seconds:.1f}s "
        f"(on the stand-in base {podman.STAND_IN_BASE})"
    )
    return image


@pytest.fixture
def name() -> Iterator[str]:
    """A name for the test's container and volume, both removed afterwards."""
    name = f"turngate-test-{uuid.uuid4().hex[:8]}"
    yield name
    podman.podman("rm", "--force", "--time", "0", name, check=False)
    podman.podman("volume", "rm", "--force", name, check=False)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for line in _REPORT:
        terminalreporter.write_line(line)
