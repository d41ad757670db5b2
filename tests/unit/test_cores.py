"""`--workers auto`: one worker per core the process may use, which a container's CPU limit (its
cgroup's quota) caps below the CPUs it may run on; and one worker on a SQL store."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from turngate.service.config import Settings
from turngate.service.cores import cpu_quota, usable_cores

CPUS = len(os.sched_getaffinity(0))


def cgroup_v2(tmp: Path, cpu_max: str) -> Path:
    (tmp / "cpu.max").write_text(cpu_max)
    return tmp


def cgroup_v1(tmp: Path, quota_us: int, period_us: int) -> Path:
    (tmp / "cpu").mkdir(parents=True)
    (tmp / "cpu" / "cpu.cfs_quota_us").write_text(f"{quota_us}\n")
    (tmp / "cpu" / "cpu.cfs_period_us").write_text(f"{period_us}\n")
    return tmp


@pytest.mark.parametrize(
    ("cpu_max", "quota"),
    [("max 100000\n", None), ("150000 100000\n", 1.5), ("50000 100000\n", 0.5), ("garbage", None)],
    ids=["no-limit", "one-and-a-half", "half", "unreadable"],
)
def test_the_quota_of_a_cgroup_v2_is_its_cpu_max_in_cores(
    tmp_path: Path, cpu_max: str, quota: float | None
) -> None:
    assert cpu_quota(cgroup_v2(tmp_path, cpu_max)) == quota


def test_the_quota_of_a_cgroup_v1_is_its_cfs_quota_over_its_period_and_minus_one_is_none(
    tmp_path: Path,
) -> None:
    assert cpu_quota(cgroup_v1(tmp_path / "limited", 250_000, 100_000)) == 2.5
    assert cpu_quota(cgroup_v1(tmp_path / "unlimited", -1, 100_000)) is None


def test_without_a_cgroup_file_there_is_no_quota_and_every_cpu_is_usable(tmp_path: Path) -> None:
    assert cpu_quota(tmp_path) is None
    assert usable_cores(tmp_path) == CPUS


def test_a_quota_caps_the_usable_cores_rounded_up_and_never_below_one(tmp_path: Path) -> None:
    assert usable_cores(cgroup_v2(tmp_path, "50000 100000")) == 1
    assert usable_cores(cgroup_v2(tmp_path, f"{CPUS * 100_000 + 1} 100000")) == CPUS
    assert usable_cores(cgroup_v2(tmp_path, f"{CPUS * 1_000_000} 100000")) == CPUS


def test_workers_auto_is_one_per_usable_core_in_redis_mode_and_one_on_a_sql_store() -> None:
    redis = Settings(workers="auto", store="redis://127.0.0.1:6379/0", ledger="sqlite+aiosqlite:///ledger.db")
    assert redis.worker_count == usable_cores()
    assert Settings(workers="auto").worker_count == 1
    assert Settings(workers="auto", store="postgresql+asyncpg://db.example/turngate").worker_count == 1
