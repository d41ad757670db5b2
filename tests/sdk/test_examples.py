"""The examples run as documented against a real server: a fake agent honouring a gateway's Stop,
and a watcher printing what happened."""

from __future__ import annotations

import asyncio
import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.e2e.calls import get_turn, snapshot
from tests.e2e.processes import PROCESS_TIMEOUT_S, cli_env
from tests.e2e.servers import Client as Raw
from tests.sdk.conftest import PROJECT
from tests.waiting import eventually
from turngate.client.defaults import DEFAULT_PROJECT, DEFAULT_TARGET
from turngate.service.operate.commands import Target
from turngate.v1 import turngate_pb2 as pb

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_demo_runner_honours_the_demo_stop_and_the_demo_watcher_shows_it(
    target: str, raw: Raw, ref: pb.SessionRef, capsys: pytest.CaptureFixture[str]
) -> None:
    runner, stop, watch = example("demo_runner"), example("demo_stop"), example("demo_watch")
    agent = asyncio.create_task(
        runner.run_agent(target, PROJECT, ref.session_id, "t1", steps=3, step_seconds=30)
    )

    async def calling() -> bool:
        active = (await snapshot(raw, ref)).active.turn_id == "t1"
        return active and bool((await get_turn(raw, ref, "t1")).tool_calls)

    await eventually(calling)
    await stop.stop(target, PROJECT, ref.session_id, "t1")
    assert await asyncio.wait_for(agent, 5) == pb.TURN_OUTCOME_CANCELLED
    await watch.watch(target, PROJECT, ref.session_id, after_seq=1, limit=4)

    printed = capsys.readouterr().out
    for line in (
        "cancelled: t1 is stopping",
        "stop requested ('demo stop'): call-1 cancelled, winding down",
        "t1 settled TURN_OUTCOME_CANCELLED",
        "seq=2 tool_call call-1 search TOOL_CALL_STATUS_OPEN",
        "seq=3 stop_requested t1 reason='demo stop'",
        "seq=4 tool_call call-1 search TOOL_CALL_STATUS_INTERRUPTED",
        "seq=5 turn_settled t1 TURN_OUTCOME_CANCELLED by SETTLED_BY_RUNNER",
    ):
        assert line in printed


async def test_demo_stop_waits_then_forces_a_turn_nobody_ends(
    target: str, raw: Raw, ref: pb.SessionRef, capsys: pytest.CaptureFixture[str]
) -> None:
    await raw.admission.AdmitTurn(pb.AdmitTurnRequest(session=ref, turn_id="t1", runner_id="stuck"))
    await example("demo_stop").stop(target, PROJECT, ref.session_id, "t1", wait=0.2)
    assert "t1 settled TURN_OUTCOME_CANCELLED by SETTLED_BY_GATEWAY" in capsys.readouterr().out


async def test_the_examples_read_the_clis_target_and_project_variables_and_defaults(
    target: str, raw: Raw, ref: pb.SessionRef
) -> None:
    """An example run as documented, with no flag: TURNGATE_TARGET and TURNGATE_PROJECT (which the
    `turngate` command reads too) say where it plays; the defaults are the command's."""
    await raw.admission.AdmitTurn(pb.AdmitTurnRequest(session=ref, turn_id="t1", runner_id="stuck"))
    env = cli_env(TURNGATE_TARGET=target, TURNGATE_PROJECT=PROJECT)
    stopped = await asyncio.create_subprocess_exec(
        sys.executable,
        EXAMPLES / "demo_stop.py",
        ref.session_id,
        "t1",
        "--force",
        env=env,
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await asyncio.wait_for(stopped.communicate(), PROCESS_TIMEOUT_S)
    assert out.decode() == "cancelled and settled at once: t1\n"
    assert (await snapshot(raw, ref)).last_settled.turn_id == "t1"

    [target_flag] = [line for line in _help("demo_runner") if line.lstrip().startswith("--target")]
    assert (Target.model_fields["target"].default, Target.model_fields["project"].default) == (
        DEFAULT_TARGET,
        DEFAULT_PROJECT,
    )
    assert f"[TURNGATE_TARGET, {DEFAULT_TARGET}]" in target_flag


def _help(name: str) -> list[str]:
    shown = subprocess.run(
        [sys.executable, EXAMPLES / f"{name}.py", "--help"],
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=PROCESS_TIMEOUT_S,
        check=True,
    )
    return shown.stdout.splitlines()
