"""Maintainer tasks: `nox -s lint`, `nox -s tests`, `nox -s fast`, `nox -s bench` (plain `nox` runs lint
and tests).

The sessions make no environment of their own: they run the tools of the environment nox itself
runs in, the project's `.venv` (`python3 -m venv .venv && .venv/bin/pip install -e '.[test]'`,
then `.venv/bin/nox …`). Every tool is called by its path in that environment's bin directory,
so the result does not depend on what else is on PATH.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
# Not resolved: a venv's python is a symlink, and its bin directory is the venv's, not the base's.
BIN = Path(sys.executable).parent
CHANGELOG = ROOT / "CHANGELOG.md"

MYPY_TARGETS = (
    "service/turngate/service",
    "clients/turngate/client",
    "tests",
    "bench",
    "examples",
    "hatch_build.py",
    "noxfile.py",
)
BENCHMARKS = {
    "redis_mode": "bench/redis_mode.py",
    "overhead": "bench/overhead.py",
    "fanout": "bench/fanout.py",
    "embedded": "bench/embedded.py",
    "admission_modes": "bench/admission_modes.py",
    "http_path": "bench/http_path.py",
    "capacity": "bench/capacity.py",
}

# xdist: tests that share a server or a Redis topology stay on one worker (tests/conftest.py);
# mostly waiting on servers, they run best with more workers than cores.
WORKERS = 4
PARALLEL = ("-n", str(WORKERS), "--dist", "loadgroup")
FAST_DIRECTORIES = tuple(f"tests/{name}" for name in ("unit", "contract", "sdk", "web", "cli", "e2e"))
# The README's tour: a minute of a real terminal session, for the full suite.
FAST_DESELECTED = ("tests/e2e/test_readme_tour.py",)

nox.needs_version = ">=2024.10.9"
nox.options.sessions = ["lint", "tests"]  # `bench` needs Redis and PostgreSQL and takes minutes


def tool(name: str) -> str:
    """A console script of this environment, by its full path."""
    return str(BIN / name)


def git(*args: str) -> str | None:
    """`git args…` in the repository: its output, or None if it fails."""
    done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)
    return done.stdout.strip() if done.returncode == 0 else None


def last_release(session: nox.Session) -> str | None:
    """The `buf breaking` baseline: the newest `v*` tag, else the commit CHANGELOG.md names.

    A release is the git tag `vX.Y.Z`; the newest one reachable from HEAD is the baseline. A fresh
    clone may carry no tags (CI may fetch without them; a tag made locally may not be pushed), so
    the fallback is the commit CHANGELOG.md names for its newest release that names one: a release
    section says "git tag `vX.Y.Z`, on commit `<sha>`" (a release commit cannot name itself, so
    the sha is added afterwards, hence "newest that names one"). The short sha is resolved to the
    full one, which buf fetches from the local `.git` whatever its depth in the history. None
    (logged) if neither is there, e.g. in a shallow clone: then the check fails, it is not skipped.
    """
    tag = git("describe", "--tags", "--abbrev=0", "--match", "v[0-9]*")
    if tag:
        return f".git#tag={tag}"
    text = CHANGELOG.read_text(encoding="utf-8")
    for section in re.split(r"^## ", text, flags=re.MULTILINE)[1:]:
        named = re.search(r"commit `([0-9a-f]{7,40})`", section)
        if not re.match(r"\[\d+\.\d+\.\d+\]", section) or named is None:
            continue  # [Unreleased], or a release that does not name its commit yet
        sha = git("rev-parse", "--verify", "--quiet", f"{named.group(1)}^{{commit}}")
        if sha is None:
            session.warn(f"CHANGELOG.md's release commit {named.group(1)} is not in this checkout")
            session.warn("fetch it: git fetch --tags --unshallow")
            return None
        session.log(f"no v* tag in this checkout: the last release is CHANGELOG.md's commit {sha}")
        return f".git#ref={sha}"
    session.warn("no v* tag, and CHANGELOG.md names no release commit")
    return None


@nox.session(venv_backend="none")
def lint(session: nox.Session) -> None:
    """ruff, ruff format, mypy, import-linter, buf lint, buf breaking, hadolint: all run, failures
    listed."""
    baseline = last_release(session)
    checks: list[tuple[str, list[str] | None]] = [
        ("ruff check", [tool("ruff"), "check", "."]),
        ("ruff format", [tool("ruff"), "format", "--check", "."]),
        ("mypy", [tool("mypy"), *MYPY_TARGETS]),
        ("lint-imports", [tool("lint-imports")]),
        ("buf lint", [tool("buf"), "lint"]),
        ("buf breaking", [tool("buf"), "breaking", "--against", baseline] if baseline else None),
        ("hadolint", [tool("hadolint"), "Dockerfile"]),
    ]
    failed = []
    for name, command in checks:
        if command is None:
            failed.append(f"{name} (no release to compare with)")
            continue
        try:
            session.run(*command, external=True)
        except nox.command.CommandFailed:
            failed.append(name)
    if failed:
        session.error(f"failed: {', '.join(failed)}")


@nox.session(venv_backend="none")
def tests(session: nox.Session) -> None:
    """The whole test suite, in parallel (the README's test command); arguments after `--` go to
    pytest (`-n 1` for one worker, `-p no:xdist` for none)."""
    # The slowest tests, in CI's log too: what to look at when the suite nears its ten minutes.
    session.run(tool("pytest"), *PARALLEL, "--durations=20", *session.posargs, external=True)


@nox.session(venv_backend="none")
def fast(session: nox.Session) -> None:
    """The fast tier, for quick edit loops (minutes): the unit, contract, SDK, HTTP, CLI and
    end-to-end tests on SQLite alone (no Redis, no PostgreSQL), without the README tour, with
    Hypothesis's `dev` profile (fewer examples), in parallel. Arguments after `--` go to pytest."""
    session.run(
        tool("pytest"),
        *PARALLEL,
        "--hypothesis-profile=dev",
        "-m",
        "not redis and not postgres",
        *(f"--deselect={test}" for test in FAST_DESELECTED),
        *(session.posargs or FAST_DIRECTORIES),
        external=True,
    )


@nox.session(venv_backend="none")
def bench(session: nox.Session) -> None:
    """The benchmarks of bench/README.md with their defaults (Redis and PostgreSQL on localhost).

    `nox -s bench` runs each in turn; `nox -s bench -- overhead --rounds 3` runs one benchmark
    (a key of BENCHMARKS: `redis_mode`, `overhead`, `fanout`, `embedded`, `admission_modes`,
    `http_path`, `capacity`) with those arguments; other arguments go to every benchmark, so options of one
    benchmark only (`--topology cluster`, `--wait-replicas 1`) need its name first:
    `nox -s bench -- redis_mode --topology cluster`.
    """
    args = list(session.posargs)
    names = list(BENCHMARKS)
    if args and args[0].removesuffix(".py") in BENCHMARKS:
        names = [args.pop(0).removesuffix(".py")]
    for name in names:
        session.run(sys.executable, BENCHMARKS[name], *args, external=True)
