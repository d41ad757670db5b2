"""The HTTP listener's settings: off by default, origins that are origins (never `*`), a trace
URL template that names the trace, the secure default across both listeners, and a taken port
reported in one line before anything is written."""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest
from pydantic import ValidationError

from tests.support.processes import run_cli
from turngate.service.config import Settings


def test_the_http_listener_is_off_by_default_and_an_empty_variable_turns_it_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert Settings().http_listen is None
    monkeypatch.setenv("TURNGATE_HTTP_LISTEN", "")
    assert Settings().http_listen is None


def test_cors_origins_are_read_comma_separated_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TURNGATE_HTTP_CORS_ORIGINS", "https://app.example.com, http://localhost:5173")
    assert Settings().http_cors_origins == ("https://app.example.com", "http://localhost:5173")


@pytest.mark.parametrize(
    "origins",
    [
        "*",
        "https://*.example.com",
        "https://app.example.com/",
        "https://app.example.com/path",
        "app.example.com",
    ],
)
def test_a_cors_origin_that_is_not_exactly_an_origin_is_refused(origins: str) -> None:
    with pytest.raises(ValidationError, match="is not an origin"):
        Settings(http_cors_origins=origins)


@pytest.mark.parametrize("template", ["http://jaeger/trace/", "ftp://x/{trace_id}", "javascript:{trace_id}"])
def test_a_trace_url_template_must_be_http_and_name_the_trace(template: str) -> None:
    with pytest.raises(ValidationError, match="trace_id"):
        Settings(console_trace_url=template)


def test_an_http_listener_beyond_loopback_needs_a_tokens_file_like_grpc() -> None:
    with pytest.raises(
        ValidationError, match=re.escape("listening on 127.0.0.1:50051 and 0.0.0.0:8080 without --auth-file")
    ):
        Settings(http_listen="0.0.0.0:8080")
    assert Settings(http_listen="0.0.0.0:8080", insecure=True).listens_beyond_loopback


def test_serve_on_an_http_port_in_use_exits_1_with_one_line_before_writing_anything(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        store = f"sqlite+aiosqlite:///{tmp_path}/turngate.db"
        result = run_cli(
            tmp_path, "serve", "--listen", "127.0.0.1:0", "--http-listen", address, "--store", store
        )
    assert result.returncode == 1
    assert result.stderr.splitlines() == [f"turngate: cannot listen on {address}: Address already in use"]
    assert list(tmp_path.iterdir()) == []


def test_migrate_takes_no_calls_so_an_images_wildcard_http_listen_asks_for_no_tokens_file(
    tmp_path: Path,
) -> None:
    store = f"sqlite+aiosqlite:///{tmp_path}/z.db"
    wildcard = {"TURNGATE_HTTP_LISTEN": "0.0.0.0:8080"}
    migrated = run_cli(tmp_path, "migrate", "--store", store, env=wildcard)
    assert migrated.returncode == 0, migrated.stderr
    refused = run_cli(tmp_path, "serve", "--store", store, env=wildcard)
    assert refused.returncode == 2
    assert "without --auth-file" in refused.stderr
