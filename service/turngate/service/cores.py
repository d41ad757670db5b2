"""How many cores this process may use: the CPUs it may run on, capped by its cgroup's CPU quota
(a container's CPU limit), which the CPU affinity does not show."""

from __future__ import annotations

import math
import os
from pathlib import Path

CGROUP = Path("/sys/fs/cgroup")


def usable_cores(cgroup: Path = CGROUP) -> int:
    """The CPUs this process may run on, at most its CPU quota rounded up; at least 1."""
    cores = len(os.sched_getaffinity(0))
    quota = cpu_quota(cgroup)
    return max(1, cores if quota is None else min(cores, math.ceil(quota)))


def cpu_quota(cgroup: Path = CGROUP) -> float | None:
    """The cgroup's CPU quota in cores (cgroup v2 `cpu.max`, or v1 `cpu.cfs_quota_us` over
    `cpu.cfs_period_us`); None when there is none, or no cgroup file to say."""
    try:
        return _quota_v2((cgroup / "cpu.max").read_text())
    except OSError:
        pass
    try:
        quota = int((cgroup / "cpu" / "cpu.cfs_quota_us").read_text())
        period = int((cgroup / "cpu" / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return quota / period if quota > 0 and period > 0 else None


def _quota_v2(text: str) -> float | None:
    """`cpu.max`: "max PERIOD" (no quota) or "QUOTA PERIOD", in microseconds."""
    quota, _, period = text.strip().partition(" ")
    if quota == "max" or not quota.isdigit() or not period.isdigit() or int(period) == 0:
        return None
    return int(quota) / int(period)
