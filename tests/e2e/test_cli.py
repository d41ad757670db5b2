"""The `turngate` command as an operator runs it: bad settings refuse to start (exit 2, one line
naming the setting), `migrate` is idempotent, a busy port exits 1, and flags override TURNGATE_*.
"""

from __future__ import annotations

import asyncio
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from alembic.script import ScriptDirectory

from tests.support.processes import (
    PROCESS_TIMEOUT_S,
    TURNGATE,
    cli_env,
    database,
    dump,
    free_port,
    run_cli,
    serve_log,
    spawn_server,
    sqlite_file,
    sqlite_url,
)
from tests.support.waiting import eventually
from turngate.client import __version__
from turngate.service.config import Settings
from turngate.service.config_help import shown_default
from turngate.service.sql.migrate import alembic_config
from turngate.service.sql.tables import metadata

TABLES = {"alembic_version", *metadata.tables}


@pytest.mark.parametrize(
    ("args", "env", "setting"),
    [
        (("--lease-ttl", "0.5"), {}, "--lease-ttl or TURNGATE_LEASE_TTL=0.5: "),
        (("--listen", "localhost"), {}, "--listen or TURNGATE_LISTEN='localhost': "),
        (("--store", "mysql://admin:s3cret@db.example/turngate"), {}, "--store or TURNGATE_STORE: "),
        ((), {"TURNGATE_STOP_GRACE": "abc"}, "--stop-grace or TURNGATE_STOP_GRACE='abc': "),
        (("--workers", "2"), {}, "--workers needs a redis store"),
        (("--workers", "0"), {}, "--workers or TURNGATE_WORKERS='0': "),
        ((), {"TURNGATE_WORKERS": "many"}, "--workers or TURNGATE_WORKERS='many': "),
        (
            ("--workers", "auto", "--listen", "127.0.0.1:0", "--store", "redis://127.0.0.1:6379/0"),
            {"TURNGATE_LEDGER": "sqlite+aiosqlite:///ledger.db"},
            "--workers needs a fixed --listen port",
        ),
    ],
    ids=[
        "lease-below-1s",
        "listen-without-port",
        "store-scheme",
        "stop-grace-env-not-a-number",
        "workers-on-sqlite",
        "workers-zero",
        "workers-env-not-a-number",
        "workers-on-port-0",
    ],
)
def test_serve_refuses_invalid_settings_with_exit_2_and_one_line_naming_the_setting(
    tmp_path: Path, args: tuple[str, ...], env: dict[str, str], setting: str
) -> None:
    result = run_cli(tmp_path, "serve", *args, env=env)
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert line.startswith("turngate: invalid settings: ")
    assert setting in line
    assert "s3cret" not in line  # a store URL may carry a password: never echoed
    assert result.stdout == ""
    assert list(tmp_path.iterdir()) == []  # it never got as far as creating the default store


def test_migrate_creates_the_schema_and_a_second_run_changes_nothing(tmp_path: Path) -> None:
    store = tmp_path / "y.db"
    assert run_cli(tmp_path, "migrate", "--store", sqlite_url(store)).returncode == 0
    with sqlite_file(store) as db:
        tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        [(revision,)] = db.execute("SELECT version_num FROM alembic_version")
    assert tables == TABLES
    assert revision == ScriptDirectory.from_config(alembic_config()).get_current_head()

    schema = dump(store)
    again = run_cli(tmp_path, "migrate", "--store", sqlite_url(store))
    assert again.returncode == 0, again.stderr
    assert dump(store) == schema


def test_migrate_takes_no_calls_so_an_images_wildcard_listen_asks_for_no_tokens_file(tmp_path: Path) -> None:
    store = sqlite_url(tmp_path / "z.db")
    migrated = run_cli(tmp_path, "migrate", "--store", store, env={"TURNGATE_LISTEN": "0.0.0.0:50051"})
    assert migrated.returncode == 0, migrated.stderr
    refused = run_cli(tmp_path, "serve", "--store", store, env={"TURNGATE_LISTEN": "0.0.0.0:50051"})
    assert refused.returncode == 2
    assert "without --auth-file" in refused.stderr


def test_serve_on_a_port_in_use_exits_1_with_a_clear_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        result = run_cli(tmp_path, "serve", "--listen", address, "--store", sqlite_url(database(tmp_path)))
    assert result.returncode == 1
    # One line, before the store (here a SQLite file) is opened.
    assert result.stderr.splitlines() == [f"turngate: cannot listen on {address}: Address already in use"]
    assert list(tmp_path.iterdir()) == []


async def test_serve_workers_auto_on_sqlite_is_one_process_that_holds_its_port_alone(tmp_path: Path) -> None:
    """The image's TURNGATE_WORKERS=auto on its SQLite default: one process (SQLite has one
    writer), listening without SO_REUSEPORT, so a second server cannot share its port."""
    port = free_port()
    (tmp_path / "first").mkdir()
    async with spawn_server(tmp_path / "first", port=port, env={"TURNGATE_WORKERS": "auto"}):
        second = await asyncio.to_thread(
            run_cli,
            tmp_path,
            "serve",
            "--workers",
            "auto",
            "--listen",
            f"127.0.0.1:{port}",
            "--store",
            sqlite_url(database(tmp_path)),
        )
    assert second.returncode == 1
    assert second.stderr.splitlines() == [
        f"turngate: cannot listen on 127.0.0.1:{port}: Address already in use"
    ]


async def test_serve_listens_where_turngate_listen_says_and_the_flag_overrides_it(tmp_path: Path) -> None:
    by_env, by_flag, overridden = free_port(), free_port(), free_port()
    (tmp_path / "env").mkdir()
    (tmp_path / "flag").mkdir()
    async with (
        spawn_server(tmp_path / "env", port=by_env, env={"TURNGATE_LISTEN": f"127.0.0.1:{by_env}"}),
        spawn_server(
            tmp_path / "flag",
            "--listen",
            f"127.0.0.1:{by_flag}",
            port=by_flag,
            env={"TURNGATE_LISTEN": f"127.0.0.1:{overridden}"},
        ),
    ):
        with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", overridden)):
            pass


def test_serve_help_names_every_setting_by_its_variable_and_default_and_no_bare_placeholder(
    tmp_path: Path,
) -> None:
    text = run_cli(tmp_path, "serve", "--help").stdout
    shown = re.sub(r"\s+", "", text)
    missing = [
        name
        for name in Settings.model_fields
        if f"[TURNGATE_{name.upper()},{shown_default(name)}]" not in shown
        and f"TURNGATE_{name.upper()}={shown_default(name)}" not in shown
    ]
    assert missing == []
    environment_only = [name for name in Settings.model_fields if f"[TURNGATE_{name.upper()}," not in shown]
    undescribed = [
        name
        for name in environment_only
        if not (about := Settings.model_fields[name].description) or re.sub(r"\s+", "", about) not in shown
    ]
    assert undescribed == []
    placeholders = re.findall(r"--([a-z-]+) ([A-Z_]+)\b", text)
    assert [flag for flag, shown in placeholders if shown == flag.upper().replace("-", "_")] == []


def test_version_is_the_clients_and_python_m_turngate_is_the_command(tmp_path: Path) -> None:
    command = run_cli(tmp_path, "--version")
    module = subprocess.run(
        [sys.executable, "-m", "turngate", "--version"],
        cwd=tmp_path,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=PROCESS_TIMEOUT_S,
        check=False,
    )
    assert (command.returncode, command.stdout) == (0, f"turngate {__version__}\n")
    assert (module.returncode, module.stdout) == (0, command.stdout)


def test_shell_completion_completes_a_command(tmp_path: Path) -> None:
    """argcomplete's protocol, as bash runs it after `eval "$(register-python-argcomplete turngate)"`."""
    answer = tmp_path / "completions"
    line = "turngate qu"
    completed = subprocess.run(
        [TURNGATE],
        cwd=tmp_path,
        env=cli_env(
            _ARGCOMPLETE="1",
            COMP_LINE=line,
            COMP_POINT=str(len(line)),
            _ARGCOMPLETE_STDOUT_FILENAME=str(answer),
        ),
        capture_output=True,
        text=True,
        timeout=PROCESS_TIMEOUT_S,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert answer.read_text().split() == ["queue"]


def test_an_unknown_turngate_variable_is_warned_about_with_the_closest_name_and_start_goes_on(
    tmp_path: Path,
) -> None:
    result = run_cli(
        tmp_path,
        "serve",
        "--lease-ttl",
        "0",
        env={
            "TURNGATE_LEASE_TLL": "5",
            # Read by the operator commands, the tests and a Kubernetes Service's links: known.
            "TURNGATE_TARGET": "127.0.0.1:1",
            "TURNGATE_TEST_REDIS": "redis://127.0.0.1:6379/0",
            "TURNGATE_PORT_50051_TCP": "tcp://10.0.0.1:50051",
        },
    )
    warning, refusal = result.stderr.splitlines()
    assert warning == (
        "turngate: warning: TURNGATE_LEASE_TLL is not a turngate setting and is ignored "
        "(did you mean TURNGATE_LEASE_TTL?)"
    )
    assert refusal.startswith("turngate: invalid settings: --lease-ttl or TURNGATE_LEASE_TTL=0.0: ")


def test_a_lower_case_log_level_is_taken_and_an_unusable_database_path_is_named(tmp_path: Path) -> None:
    (tmp_path / "file").touch()
    store = tmp_path / "file" / "turngate.db"
    result = run_cli(tmp_path, "serve", "--store", sqlite_url(store), env={"TURNGATE_LOG_LEVEL": "warning"})
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"turngate: cannot open the SQLite store {store}: {tmp_path / 'file'} is not a directory"
    ]


async def test_the_sqlite_file_is_named_with_its_absolute_path_at_start(tmp_path: Path) -> None:
    migrated = run_cli(tmp_path, "migrate", env={"TURNGATE_LOG_LEVEL": "info"})
    assert migrated.returncode == 0, migrated.stderr
    assert f"migrating the SQLite file {database(tmp_path)}\n" in migrated.stderr

    port = free_port()
    async with spawn_server(tmp_path, "--store", "sqlite+aiosqlite:///./turngate.db", port=port):
        listening = f"; store: SQLite file {database(tmp_path)}\n"
        await eventually(lambda: listening in serve_log(tmp_path, port).read_text())


async def test_a_first_start_says_the_schema_in_one_line_without_alembics_steps(tmp_path: Path) -> None:
    port = free_port()
    async with spawn_server(tmp_path, "--store", "sqlite+aiosqlite:///./turngate.db", port=port):
        listening = f"; store: SQLite file {database(tmp_path)}\n"
        await eventually(lambda: listening in serve_log(tmp_path, port).read_text())
    lines = serve_log(tmp_path, port).read_text().splitlines()
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    schema = [line for line in lines if "turngate.schema" in line]
    assert len(schema) == 1, lines
    assert f"schema at version {head} (migrated from none)" in schema[0]
    assert not [line for line in lines if "alembic" in line], "Alembic's steps are not logged at INFO"
