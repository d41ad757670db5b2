"""What every directory of the suite shares: the fixtures of tests/support registered as plugins,
and the Hypothesis profiles.

The profile is TURNGATE_HYPOTHESIS_PROFILE's (or `--hypothesis-profile`'s): `turngate-unit` by
default (the full suite), `dev` for quick edit loops (`nox -s fast`), `turngate-thorough` for a
long run.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

# The support modules' asserts explain themselves as the tests' own do (registered before any of
# them is imported).
pytest.register_assert_rewrite("tests.support")
pytest_plugins = [
    "tests.support.shared_topologies",
    "tests.support.served",
    "tests.support.guarded",
]

settings.register_profile(
    "turngate-unit",
    max_examples=300,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "turngate-thorough",
    max_examples=5_000,
    stateful_step_count=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "dev",
    max_examples=25,
    stateful_step_count=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("TURNGATE_HYPOTHESIS_PROFILE", "turngate-unit"))
