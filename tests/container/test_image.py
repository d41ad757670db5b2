"""The image (Dockerfile; docs/deploying.md, Image), built and run: the versions CI tested
(constraints.txt), a non-root user, secure by
default, SERVING on the embedded default with a passing HEALTHCHECK, the contract through its
port with a token, state kept in its volume across a restart, and a SIGTERM that exits 0."""

from __future__ import annotations

import os
import re
import time
import urllib.request
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.container import podman
from tests.support.calls import admit, snapshot, stop
from tests.support.processes import free_port
from tests.support.repository import pins_of_constraints
from tests.support.servers import Client, client_for
from tests.support.watching import collect, watch
from turngate.client._version import __version__
from turngate.client.connection import open_channel
from turngate.service.auth.issue import entry_for, new_token
from turngate.v1 import turngate_pb2 as pb

# The first test builds the stand-in base and the image (the `built` fixture, within their own
# timeouts): on a fresh, loaded machine that takes longer than a test's usual bound.
pytestmark = pytest.mark.timeout(2 * podman.BUILD_TIMEOUT_S)

SESSION = pb.SessionRef(project_id="demo", session_id="chat-1")
# Starting the container, and its HEALTHCHECK passing: reached only when a test fails.
START_TIMEOUT_S = 60.0
# `podman stop` waits this long for the exit, then SIGKILLs (exit 137): above drain delay + grace.
STOP_TIMEOUT_S = 30


def scrape(port: int) -> bytes:
    """The Prometheus text the container serves on `port`."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as metrics:
        body: bytes = metrics.read()
    return body


def wait_healthy(name: str) -> None:
    """Until the image's own HEALTHCHECK passes in the container `name`."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while podman.podman("healthcheck", "run", name, check=False).returncode != 0:
        assert time.monotonic() < deadline, podman.podman("logs", name).stderr
        time.sleep(0.2)


class Container:
    """A turngate container on the host's network, its tokens file mounted, its volume named."""

    def __init__(self, name: str, image: str, tmp: Path) -> None:
        self.name, self.image = name, image
        self.port, self.metrics_port = free_port(), free_port()
        self.token = new_token()
        tokens = tmp / "tokens.toml"
        tokens.write_text(entry_for(self.token, "ops", ["admin"], ["*"]))
        tokens.chmod(0o644)
        self.tokens = tokens

    def start(self) -> None:
        podman.run(
            "--detach",
            "--name",
            self.name,
            "--volume",
            f"{self.name}:/var/lib/turngate",
            "--volume",
            f"{self.tokens}:/run/secrets/turngate-tokens.toml:ro",
            "--env",
            "TURNGATE_AUTH_FILE=/run/secrets/turngate-tokens.toml",
            "--env",
            f"TURNGATE_LISTEN=0.0.0.0:{self.port}",
            "--env",
            f"TURNGATE_METRICS_LISTEN=127.0.0.1:{self.metrics_port}",
            self.image,
        )
        self.wait_healthy()

    def wait_healthy(self) -> None:
        wait_healthy(self.name)

    def stop(self) -> tuple[int, float]:
        """SIGTERM (the image's STOPSIGNAL), then the exit code and how long the exit took."""
        started = time.monotonic()
        podman.podman("stop", "--time", str(STOP_TIMEOUT_S), self.name)
        took = time.monotonic() - started
        code = podman.podman("inspect", "--format", "{{.State.ExitCode}}", self.name).stdout.strip()
        return int(code), took

    @asynccontextmanager
    async def client(self) -> AsyncIterator[Client]:
        channel = open_channel(
            f"127.0.0.1:{self.port}",
            credentials=None,
            token=self.token,
            options=(),
            interceptors=(),
            tracer_provider=None,
        )
        async with channel:
            yield client_for(channel)


def test_the_image_runs_as_a_non_root_user_with_a_fixed_uid(built: podman.Built) -> None:
    ran = podman.run("--rm", "--entrypoint", "id", built.image)
    assert re.search(r"uid=10001\(turngate\) gid=10001\(turngate\)", ran.stdout), ran.stdout


def test_the_image_is_labelled_with_its_version_source_and_licence(built: podman.Built) -> None:
    labels = podman.podman("image", "inspect", "--format", "{{json .Labels}}", built.image).stdout
    assert f'"org.opencontainers.image.version":"{__version__}"' in labels
    assert '"org.opencontainers.image.licenses":"Apache-2.0"' in labels
    assert '"org.opencontainers.image.source":' in labels


def test_the_image_installs_the_versions_ci_tested(built: podman.Built) -> None:
    """Every distribution in the image but turngate's own is at the version constraints.txt pins."""
    listing = "import importlib.metadata as m; print(*(f'{d.name}=={d.version}' for d in m.distributions()))"
    ran = podman.run("--rm", "--entrypoint", "python", built.image, "-c", listing)
    installed = {
        canonicalize_name(name): Version(version)
        for name, _, version in (pin.partition("==") for pin in ran.stdout.split())
    }
    ours = {"turngate", "turngate-client"}
    pins = pins_of_constraints()
    assert {
        name: version for name, version in installed.items() if name not in ours and pins.get(name) != version
    } == {}


def test_without_a_tokens_file_the_container_refuses_to_listen_beyond_loopback(built: podman.Built) -> None:
    ran = podman.run("--rm", "--env", f"TURNGATE_LISTEN=0.0.0.0:{free_port()}", built.image, check=False)
    assert ran.returncode == 2
    assert "without --auth-file" in ran.stderr


def test_with_turngate_insecure_set_on_purpose_it_serves_without_tokens(
    built: podman.Built, name: str
) -> None:
    port = free_port()
    podman.run(
        "--detach",
        "--name",
        name,
        "--env",
        f"TURNGATE_LISTEN=0.0.0.0:{port}",
        "--env",
        "TURNGATE_INSECURE=1",
        "--env",
        "TURNGATE_METRICS_LISTEN=",
        built.image,
    )
    wait_healthy(name)
    assert "INSECURE" in podman.podman("logs", name).stderr


async def test_the_container_serves_the_contract_with_a_token_and_keeps_state_in_its_volume(
    built: podman.Built, name: str, tmp_path: Path
) -> None:
    container = Container(name, built.image, tmp_path)
    container.start()
    async with container.client() as client:
        stream = watch(client, SESSION)
        await collect(stream, 1)
        lease = (await admit(client, SESSION, "t1", lease_ttl=600)).lease
        stopped = await stop(client, SESSION, "t0")
        assert stopped.cancelled.before_start
        (admitted,) = await collect(stream, 1)
        assert admitted.turn_admitted.turn.turn_id == "t1"
        stream.cancel()
    assert b"turngate_admissions" in scrape(container.metrics_port)

    code, _ = container.stop()
    assert code == 0
    podman.podman("start", name)
    container.wait_healthy()
    async with container.client() as client:
        after = await snapshot(client, SESSION)
    assert after.active.turn_id == "t1"
    assert after.active.generation == lease.generation


def test_sigterm_drains_and_exits_0_well_within_the_stop_timeout(
    built: podman.Built, name: str, tmp_path: Path
) -> None:
    container = Container(name, built.image, tmp_path)
    container.start()
    code, took = container.stop()
    assert code == 0, podman.podman("logs", name).stderr
    assert "turngate shutting down" in podman.podman("logs", name).stderr
    print(f"\ncontainer exit after SIGTERM: {took:.2f}s (drain delay 2s)")


@pytest.mark.redis
@pytest.mark.parametrize(
    ("cpus", "workers"), [(None, len(os.sched_getaffinity(0))), ("1", 1)], ids=["host", "cpus-1"]
)
def test_in_redis_mode_the_image_runs_a_worker_per_core_its_cpu_limit_allows(
    built: podman.Built, name: str, cpus: str | None, workers: int
) -> None:
    """The image's TURNGATE_WORKERS=auto: one worker per core the container may use, so a CPU
    limit (`--cpus`, a cgroup quota) caps them below the host's cores."""
    limit = () if cpus is None else ("--cpus", cpus)
    podman.run(
        "--detach",
        "--name",
        name,
        *limit,
        "--volume",
        f"{name}:/var/lib/turngate",
        "--env",
        f"TURNGATE_LISTEN=127.0.0.1:{free_port()}",
        "--env",
        "TURNGATE_METRICS_LISTEN=",
        "--env",
        "TURNGATE_STORE=redis://127.0.0.1:6379/0",
        "--env",
        f"TURNGATE_REDIS_PREFIX=container-{name}",
        "--env",
        "TURNGATE_LEDGER=sqlite+aiosqlite:////var/lib/turngate/ledger.db",
        built.image,
    )
    wait_healthy(name)
    deadline = time.monotonic() + START_TIMEOUT_S
    while (logs := podman.podman("logs", name).stderr).count("turngate listening on") < workers:
        assert time.monotonic() < deadline, logs
        time.sleep(0.2)
    assert logs.count("turngate listening on") == workers
    assert ("workers" in logs) == (workers > 1)  # the parent of several says how many it started
