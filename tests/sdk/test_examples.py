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

from tests.sdk.conftest import PROJECT
from tests.support.calls import get_turn, snapshot
from tests.support.processes import PROCESS_TIMEOUT_S, cli_env, free_port
from tests.support.servers import Client as Raw
from tests.support.waiting import eventually
from turngate.client.defaults import DEFAULT_PROJECT, DEFAULT_TARGET
from turngate.service.operate.operations import Target
from turngate.v1 import turngate_pb2 as pb

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def example(name: str) -> ModuleType:
    """The example's module, its siblings importable as `python examples/NAME.py` makes them."""
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
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
    assert await asyncio.wait_for(agent, 5) == 0  # the turn ran, and ended as it was told
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


async def test_the_demo_runner_says_when_a_stop_gave_no_reason(
    target: str, raw: Raw, ref: pb.SessionRef, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = asyncio.create_task(
        example("demo_runner").run_agent(target, PROJECT, ref.session_id, "t1", steps=3, step_seconds=30)
    )

    async def calling() -> bool:
        active = (await snapshot(raw, ref)).active.turn_id == "t1"
        return active and bool((await get_turn(raw, ref, "t1")).tool_calls)

    await eventually(calling)
    await raw.control.CancelTurn(pb.CancelTurnRequest(session=ref, expected_turn_id="t1"))
    assert await asyncio.wait_for(agent, 5) == 0
    assert "stop requested (no reason given): call-1 cancelled, winding down" in capsys.readouterr().out


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


async def _run_example(name: str, *args: str, target: str) -> tuple[int, str, str]:
    """`python examples/NAME.py *args` at `target` in PROJECT: its exit code, stdout and stderr."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        EXAMPLES / f"{name}.py",
        *args,
        env=cli_env(TURNGATE_TARGET=target, TURNGATE_PROJECT=PROJECT),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), PROCESS_TIMEOUT_S)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_demo_runner_answers_each_admission_refusal_with_one_line_and_exit_code_3(
    target: str, raw: Raw, ref: pb.SessionRef, session_id: str
) -> None:
    """A reader who re-runs the README's command (the turn already ran), names a turn a Stop
    cancelled before it started, or meets a busy session or a paused queue gets one line, no
    traceback, and exit code 3."""
    done = await _run_example(
        "demo_runner", session_id, "t1", "--steps", "1", "--step-seconds", "0", target=target
    )
    assert done == (
        0,
        f"admitted t1 in {session_id} (generation {_generation(done[1])})\n"
        "   call-1: searching for 0.0s\nt1 settled TURN_OUTCOME_COMPLETED\n",
        "",
    )

    again = await _run_example("demo_runner", session_id, "t1", target=target)
    assert again == (
        3,
        "t1 already ran (it ended TURN_OUTCOME_COMPLETED): a turn runs once; name a new one\n",
        "",
    )

    await raw.control.CancelTurn(pb.CancelTurnRequest(session=ref, expected_turn_id="t2"))
    tombstoned = await _run_example("demo_runner", session_id, "t2", target=target)
    assert tombstoned == (3, "t2 was stopped before it started: it will not run; name a new turn\n", "")

    await raw.admission.AdmitTurn(pb.AdmitTurnRequest(session=ref, turn_id="t3", runner_id="other"))
    busy = await _run_example("demo_runner", session_id, "t4", target=target)
    assert (busy[0], busy[1].startswith(f"busy: t3 holds {session_id}; retry in "), busy[2]) == (3, True, "")
    elsewhere = await _run_example("demo_runner", session_id, "t3", target=target)
    assert elsewhere == (3, "t3 is running under another runner\n", "")


async def test_demo_runner_reports_a_paused_queue_and_leaving_the_queue_in_one_line(
    target: str, raw: Raw, ref: pb.SessionRef, session_id: str
) -> None:
    await raw.admission.AdmitTurn(pb.AdmitTurnRequest(session=ref, turn_id="t1", runner_id="other"))
    queued = asyncio.create_task(_run_example("demo_runner", session_id, "t2", "--queue", target=target))

    async def waiting() -> bool:
        return len((await snapshot(raw, ref)).queue) == 1

    await eventually(waiting)
    await raw.control.CancelTurn(pb.CancelTurnRequest(session=ref, expected_turn_id="t1", force=True))
    paused = await _run_example("demo_runner", session_id, "t3", target=target)
    assert paused == (3, f"{session_id}'s queue is paused (t2 waits first): resume it, or pass --queue\n", "")

    await raw.control.CancelTurn(pb.CancelTurnRequest(session=ref, expected_turn_id="t2"))
    assert await queued == (
        3,
        "queued t2: position 1\nt2 left the queue without running: TURN_OUTCOME_CANCELLED\n",
        "",
    )


async def test_demo_stop_exits_as_turngate_stop_does_for_each_answer(
    target: str, raw: Raw, ref: pb.SessionRef, session_id: str
) -> None:
    """0 stopped, 3 mismatch, 4 idle, 8 nothing running was stopped: one line each."""
    assert await _run_example("demo_stop", session_id, target=target) == (
        4,
        "idle: nothing runs (last turn -)\n",
        "",
    )
    await raw.admission.AdmitTurn(pb.AdmitTurnRequest(session=ref, turn_id="t1", runner_id="stuck"))
    early = await _run_example("demo_stop", session_id, "t0", target=target)
    assert early == (
        8,
        "nothing running was stopped: t0 will be refused if it starts; t1 is still running\n",
        "",
    )
    stopped = await _run_example("demo_stop", session_id, "t1", target=target)
    assert (stopped[0], stopped[1].startswith("cancelled: t1 is stopping (deadline "), stopped[2]) == (
        0,
        True,
        "",
    )
    await raw.control.CancelTurn(pb.CancelTurnRequest(session=ref, expected_turn_id="t1", force=True))
    await raw.admission.AdmitTurn(pb.AdmitTurnRequest(session=ref, turn_id="t2", runner_id="stuck"))
    mismatch = await _run_example("demo_stop", session_id, "t1", target=target)
    assert mismatch == (3, "mismatch: t1 already ended; t2 runs on, untouched\n", "")


async def test_the_watch_examples_fail_at_once_with_one_line_when_the_service_is_down() -> None:
    """Nothing listens on the port: exit code 1 and one line on stderr, without retrying for long
    (the bound is PROCESS_TIMEOUT_S; the SDK's read retries would take 30 s)."""
    down = f"127.0.0.1:{free_port()}"
    code, out, err = await _run_example("demo_watch", "chat-1", target=down)
    assert (code, out, len(err.splitlines())) == (1, "", 1)
    assert err.startswith(f"{EXAMPLES / 'demo_watch.py'}: turngate at {down} unavailable (UNAVAILABLE): ")


def _generation(printed: str) -> str:
    return printed.split("(generation ", 1)[1].split(")", 1)[0]
