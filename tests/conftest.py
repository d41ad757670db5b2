"""What every directory of the suite shares: the fixtures of tests/support registered as plugins,
the Hypothesis profiles, and Ctrl-C as a terminal sends it.

The profile is TURNGATE_HYPOTHESIS_PROFILE's (or `--hypothesis-profile`'s): `turngate-unit` by
default (the full suite), `dev` for quick edit loops (`nox -s fast`), `turngate-thorough` for a
long run.
"""

from __future__ import annotations

import os
import signal

import pytest
from _pytest.nodeid import NodeId
from hypothesis import HealthCheck, settings

# The support modules' asserts explain themselves as the tests' own do (registered before any of
# them is imported).
pytest.register_assert_rewrite("tests.support")

from tests.support.shared_topologies import TOPOLOGIES  # noqa: E402

pytest_plugins = [
    "tests.support.shared_topologies",
    "tests.support.served",
    "tests.support.guarded",
]

# The files tests and their servers write (Redis AOFs fsynced at every write, the sentinels' and
# cluster nodes' rewritten configs, SQLite files) live in memory where the machine has /dev/shm:
# on the shared disk an fsync took up to 2.65 s during the suite, beyond the 2 s Redis timeout
# tests run with. What survives a process's SIGKILL is the same in memory as on disk.
if os.path.isdir("/dev/shm"):
    os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", "/dev/shm")

# A suite started as a background job (`cmd &` in a script) inherits SIGINT ignored, and so would
# every process it starts: the tests that press Ctrl-C on a `turngate` command would wait forever.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# The examples each property test tries, and the steps of each state machine run, by profile.
PROFILES = {"turngate-unit": (300, 50), "turngate-thorough": (5_000, 100), "dev": (25, 20)}
for name, (examples, steps) in PROFILES.items():
    settings.register_profile(
        name,
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
settings.load_profile(os.environ.get("TURNGATE_HYPOTHESIS_PROFILE", "turngate-unit"))


# The directories whose tests share what is slow to make and cannot be made twice at once: the
# fault tests' private PostgreSQL and durable Redis deployments, the container image, the
# browser, the TypeScript package's node_modules and generated code; the telemetry tests'
# OpenTelemetry providers, installed once for all of them and uninstalled after them.
DIRECTORY_GROUPS = frozenset({"faults", "container", "console", "typescript", "telemetry"})


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under xdist (`--dist loadgroup`), tests that share an expensive server or topology run on
    one worker, which starts it once: see `xdist_group_of`."""
    if not config.pluginmanager.hasplugin("xdist"):
        return  # `-p no:xdist`: no groups, and no marker for them
    for item in items:
        group = xdist_group_of(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
            _name_the_group(item, group)


def _name_the_group(item: pytest.Item, group: str) -> None:
    """xdist (3.8) tells its scheduler a test's group by a suffix of the test's node id, which it
    writes to a field pytest 9.2 no longer reads (its node ids are structured): the groups would
    be ignored (pytest-dev/pytest-xdist#1386). Written here where pytest reads it, as the fix
    proposed there does; a later xdist that writes it itself finds it written."""
    # `loadgroup`: set on xdist's workers when the run is `--dist loadgroup`.
    if not getattr(item.config.option, "loadgroup", False) or "@" in item.nodeid.rsplit("]", 1)[-1]:
        return
    item._id = NodeId.parse(f"{item.nodeid}@{group}")


def xdist_group_of(item: pytest.Item) -> str | None:
    """The group of a test that shares something slow to start: its directory's (DIRECTORY_GROUPS);
    the run's Redis Cluster or Sentinel deployment, by the parameter that names it (whatever the
    directory); else its module's, if it uses a fixture of module or package scope (a server, or
    replicas, of the module's own). None (any worker) for a test whose fixtures are its own, or
    cheap to make once per worker."""
    directory = item.path.parent.name
    if directory in DIRECTORY_GROUPS:
        return directory
    if not isinstance(item, pytest.Function):
        return None
    callspec = getattr(item, "callspec", None)
    parameters = [] if callspec is None else list(callspec.params.values())
    for topology in TOPOLOGIES:
        if any(isinstance(value, str) and value == topology for value in parameters):
            return topology
    for definitions in item._fixtureinfo.name2fixturedefs.values():
        if definitions[-1].scope in ("module", "package"):
            return f"module:{item.path.relative_to(item.config.rootpath)}"
    return None
