"""The `turngate` command as an operator runs it: bad settings refuse to start (exit 2, one line
naming the setting), `migrate` is idempotent, a busy port exits 1, and flags override TURNGATE_*.
"""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest
from alembic.script import ScriptDirectory

from tests.e2e.processes import database, dump, free_port, run_cli, spawn_server, sqlite_file, sqlite_url
from turngate.service.config import Settings
from turngate.service.sql.migrate import alembic_config
from turngate.service.sql.tables import metadata

TABLES = {"alembic_version", *metadata.tables}


@pytest.mark.parametrize(
    ("args", "env", "setting"),
    [
        (("--lease-ttl", "0.5"), {}, "lease_ttl"),
        (("--listen", "localhost"), {}, "listen"),
        (("--store", "mysql://admin:s3cret@db.example/turngate"), {}, "store"),
        ((), {"TURNGATE_STOP_GRACE": "abc"}, "stop_grace"),
        (("--workers", "2"), {}, "--workers needs a redis store"),
        (("--workers", "0"), {}, "workers"),
        ((), {"TURNGATE_WORKERS": "many"}, "workers"),
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
    [line] = [line for line in result.stderr.splitlines() if line.startswith("turngate:")]
    assert line.startswith(f"turngate: cannot listen on {address}")
    assert "Traceback" not in result.stderr


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


def test_serve_help_names_every_setting_by_its_variable(tmp_path: Path) -> None:
    shown = re.sub(r"\s+", "", run_cli(tmp_path, "serve", "--help").stdout)
    assert [name for name in Settings.model_fields if f"TURNGATE_{name.upper()}" not in shown] == []
