"""Every target of issues 12 and 13 in one table: `python bench/targets.py` (about seven minutes).

Runs, one after another and each in its own process, the benchmarks that measure a target against
its floor in the same run: embedded.py (the embedded default), redis_mode.py (redis mode),
fanout.py (fan-out and memory per idle watch stream), settlement.py (runner death → settled, on the
embedded store and on Redis), admission_modes.py (REJECT admission before and after the queue, and
ENQUEUE → promotion, on the embedded store and on Redis), then workers.py (no target: how N
processes compare with one).
Their own tables go by as they finish; at the end, one Targets table holds every row and the exit
code is 1 if any failed (or a benchmark did). Needs what they need: Redis at 127.0.0.1:6379 and
PostgreSQL at 127.0.0.1:5432.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from report import TARGETS_FILE, Target, target_table

HERE = Path(__file__).resolve().parent
REDIS = "redis://127.0.0.1:6379/0"


def benchmarks(tmp: Path) -> list[list[str]]:
    """Each benchmark's arguments (after the script's name)."""
    redis_ledger = f"sqlite+aiosqlite:///{tmp / 'settlement-ledger.db'}"
    return [
        ["embedded.py"],
        ["redis_mode.py"],
        ["fanout.py"],
        ["settlement.py"],
        ["settlement.py", "--store", REDIS, "--ledger", redis_ledger],
        ["admission_modes.py"],
        ["admission_modes.py", "--store", "redis"],
        ["workers.py"],
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--skip",
        action="append",
        default=[],
        metavar="SCRIPT",
        help="a benchmark not to run (e.g. workers.py)",
    )
    skip = set(parser.parse_args(argv).skip)
    failed: list[str] = []
    with tempfile.TemporaryDirectory(prefix="turngate-targets-") as tmp:
        collected = Path(tmp) / "targets.jsonl"
        collected.touch()
        env = {**os.environ, TARGETS_FILE: str(collected)}
        for script, *args in benchmarks(Path(tmp)):
            if script in skip:
                continue
            print(f"=== {script} {' '.join(args)}", flush=True)
            if subprocess.run([sys.executable, str(HERE / script), *args], env=env, check=False).returncode:
                failed.append(script)
        targets = [Target(**json.loads(line)) for line in collected.read_text().splitlines()]
    print("=== every target")
    print(target_table(targets))
    for script in failed:
        print(f"FAILED: {script} exited with an error")
    return 1 if failed or not all(t.passed for t in targets) else 0


if __name__ == "__main__":
    sys.exit(main())
