"""What the operator commands do when they cannot do what was asked: usage errors and invalid
arguments exit 2, an unreachable service exits 1, each with one clear line on stderr; --help
lists the exit codes."""

from __future__ import annotations

import asyncio

from tests.cli.conftest import Turngate
from tests.support.processes import free_port
from turngate.service.operate import ExitCode
from turngate.service.operate.exits import MEANINGS

USAGE_ERRORS = [
    (("stop",), "turngate stop: error: the following arguments are required: SESSION"),
    (("stop", "chat", "--force", "--wait", "1"), "argument --wait: not allowed with argument --force"),
    (("stop", "chat", "--wait", "-1"), "argument --wait: must be a number > 0, not '-1'"),
    (("turn", "show", "t1"), "the following arguments are required: --session"),
    (("watch", "chat", "--after", "x"), "argument --after: invalid int value: 'x'"),
    (("turn",), "turngate turn: error: the following arguments are required: COMMAND"),
    (("queue",), "turngate queue: error: the following arguments are required: COMMAND"),
    (("queue", "show"), "turngate queue show: error: the following arguments are required: SESSION"),
    (("stop", "chat", "--queue", "drop"), "argument --queue: invalid choice: 'drop'"),
]


async def test_usage_errors_exit_2_with_argparse_usage(turngate: Turngate) -> None:
    runs = await asyncio.gather(*(turngate.run(*args) for args, _ in USAGE_ERRORS))
    for (args, message), ran in zip(USAGE_ERRORS, runs, strict=True):
        assert (ran.code, ran.out) == (ExitCode.USAGE, ""), args
        assert message in ran.err.splitlines()[-1], args


async def test_an_invalid_argument_or_setting_exits_2_with_one_line(turngate: Turngate) -> None:
    bad_id, bad_timeout = await asyncio.gather(
        turngate.run("status", "no spaces allowed"),
        turngate.run("sessions", "busy", TURNGATE_TIMEOUT="0"),
    )
    assert (bad_id.code, bad_id.out) == (2, "")
    assert bad_id.err == (
        "turngate: invalid request: session.session_id: must match [A-Za-z0-9][A-Za-z0-9._:-]{0,127}\n"
    )
    assert (bad_timeout.code, bad_timeout.out) == (2, "")
    assert bad_timeout.err == (
        "turngate: invalid settings: --timeout or TURNGATE_TIMEOUT='0': Input should be greater than 0\n"
    )


async def test_an_unreachable_service_exits_1_with_one_line_naming_it(turngate: Turngate) -> None:
    nowhere = f"127.0.0.1:{free_port()}"
    by_flag, by_env = await asyncio.gather(
        turngate.run("status", "chat", "--target", nowhere, "--timeout", "0.3"),
        turngate.run("watch", "chat", TURNGATE_TARGET=nowhere, TURNGATE_TIMEOUT="0.3"),
    )
    for ran in (by_flag, by_env):
        assert (ran.code, ran.out) == (1, "")
        [line] = ran.err.splitlines()
        assert line.startswith(f"turngate: {nowhere} unavailable (UNAVAILABLE): ")


async def test_help_lists_the_exit_codes(turngate: Turngate) -> None:
    ran = await turngate.run("stop", "--help")
    assert ran.code == 0
    epilog = ran.out.split("exit codes:\n")[1].splitlines()
    assert epilog == [f"  {int(code)}  {meaning}" for code, meaning in MEANINGS.items()]
