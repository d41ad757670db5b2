"""The image, built and run with podman as these machines allow (docs/deploying.md, Image): the
runc runtime, explicit ulimits and the host's network; a local stand-in for the official base
image when no registry is reachable; the host's CA bundle and pip configuration mounted read-only
into the build so pip reaches the package index. The Dockerfile itself depends on none of this."""

from __future__ import annotations

import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[2]
STAND_IN_BASE = "localhost/turngate-stand-in-base:bookworm"
IMAGE = "localhost/turngate:test"
RUN_FLAGS = (
    "--runtime",
    "runc",
    "--ulimit",
    "nofile=20000:20000",
    "--ulimit",
    "nproc=4096:4096",
    "--network",
    "host",
    # The HEALTHCHECK stays defined (`podman healthcheck run`); no systemd timer runs it here.
    "--health-interval",
    "disable",
)
# The host's CA bundle and pip configuration, where they exist: what pip in the build needs.
BUILD_MOUNTS = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pip.conf", "/etc/xdg/pip")
# Building the stand-in base (debootstrap) or the image may take this long: reached only on failure.
BUILD_TIMEOUT_S = 900.0
COMMAND_TIMEOUT_S = 120.0


class Unavailable(Exception):
    """No container engine can run here; the message says why, in one line."""


def podman(
    *args: str, timeout: float = COMMAND_TIMEOUT_S, check: bool = True
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout, check=check)


def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """`podman run` of IMAGE (or what `args` name) with the flags these machines need."""
    return podman("run", *RUN_FLAGS, *args, check=check)


def check_engine() -> None:
    """Raises Unavailable unless podman is installed and can run a container with runc."""
    if shutil.which("podman") is None:
        raise Unavailable("podman is not installed (.ci/run installs podman, runc and debootstrap)")
    if shutil.which("runc") is None:
        raise Unavailable("runc is not installed (podman runs containers here only with runc)")
    ensure_stand_in_base()
    tried = run("--rm", STAND_IN_BASE, "true", check=False)
    if tried.returncode != 0:
        raise Unavailable(f"podman cannot run a container here: {tried.stderr.strip().splitlines()[-1:]}")


def ensure_stand_in_base() -> None:
    """The stand-in for python:3.12-slim (a minimal Debian with python3), built once and kept."""
    if podman("image", "exists", STAND_IN_BASE, check=False).returncode == 0:
        return
    if shutil.which("debootstrap") is None:
        raise Unavailable(
            "no registry is reachable and debootstrap, which builds a stand-in base, is missing"
        )
    built = subprocess.run(
        [str(Path(__file__).with_name("stand_in_base.sh")), STAND_IN_BASE],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
        check=False,
    )
    if built.returncode != 0:
        raise Unavailable(f"the stand-in base image did not build: {built.stderr.strip().splitlines()[-1:]}")


@dataclass(frozen=True)
class Built:
    image: str
    seconds: float
    size_bytes: int


def build() -> Built:
    """Builds IMAGE from the repository's Dockerfile on the stand-in base (cached layers reused)."""
    mounts = [flag for path in BUILD_MOUNTS if Path(path).exists() for flag in ("-v", f"{path}:{path}:ro")]
    started = time.monotonic()
    podman(
        "build",
        "--format",
        "docker",  # OCI images drop HEALTHCHECK
        "--build-arg",
        f"BASE_IMAGE={STAND_IN_BASE}",
        *mounts,
        "--tag",
        IMAGE,
        str(REPOSITORY),
        timeout=BUILD_TIMEOUT_S,
    )
    seconds = time.monotonic() - started
    size = int(podman("image", "inspect", "--format", "{{.Size}}", IMAGE).stdout.strip())
    return Built(IMAGE, seconds, size)


if __name__ == "__main__":
    # `python3 -m tests.container.podman`: .ci/run builds the stand-in base early, in the background.
    ensure_stand_in_base()
