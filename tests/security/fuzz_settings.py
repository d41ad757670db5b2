"""How long the fuzz tests run, and the Hypothesis settings they share: the profile loaded by
tests/conftest.py (TURNGATE_HYPOTHESIS_PROFILE; turngate-thorough makes a long run)."""

from __future__ import annotations

from hypothesis import HealthCheck, settings

PROFILE = settings.get_current_profile_name()
THOROUGH = PROFILE == "turngate-thorough"
# Examples are real RPCs (some with huge strings), so they are slow and large by design.
FUZZ = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
SECRET_LENGTH = 24  # a header value this long is a would-be token: no answer may echo it
