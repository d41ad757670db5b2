"""What the HTTP listener serves besides the RPCs: the console's page and files with headers that
keep anything a runner wrote from running as script, its settings, and 404 elsewhere."""

from __future__ import annotations

from tests.web.conftest import TRACE_URL
from tests.web.raw import request
from turngate.service.server import TurngateServer
from turngate.service.web.app import CONSOLE


async def test_the_console_page_is_served_at_the_root_with_a_strict_content_security_policy(
    server: TurngateServer,
) -> None:
    answer = await request(server.http_port, "GET", "/")
    assert answer.status == 200
    assert answer.headers["content-type"].startswith("text/html")
    assert answer.body == (CONSOLE / "index.html").read_bytes()
    policy = answer.headers["content-security-policy"]
    assert "default-src 'self'" in policy
    assert "frame-ancestors 'none'" in policy
    assert answer.headers["x-content-type-options"] == "nosniff"


async def test_the_console_reads_the_trace_url_template_from_its_config(server: TurngateServer) -> None:
    answer = await request(server.http_port, "GET", "/console/config.json")
    assert answer.status == 200
    assert answer.json() == {"traceUrl": TRACE_URL}


async def test_every_console_file_is_served_under_console(server: TurngateServer) -> None:
    for path in CONSOLE.rglob("*"):
        if path.is_file():
            answer = await request(server.http_port, "GET", f"/console/{path.relative_to(CONSOLE)}")
            assert answer.status == 200, path
            assert answer.body == path.read_bytes()


async def test_the_favicon_is_an_svg_image_the_page_links(server: TurngateServer) -> None:
    answer = await request(server.http_port, "GET", "/console/favicon.svg")
    assert answer.status == 200
    assert answer.headers["content-type"] == "image/svg+xml"
    assert answer.body.startswith(b'<svg xmlns="http://www.w3.org/2000/svg"')
    page = (CONSOLE / "index.html").read_text(encoding="utf-8")
    assert '<link rel="icon" href="/console/favicon.svg" type="image/svg+xml">' in page


async def test_anything_else_is_not_found_and_nothing_outside_the_console_is_reachable(
    server: TurngateServer,
) -> None:
    for path in ("/nope", "/console/nope.js", "/console/../web/app.py", "/console/%2e%2e/app.py"):
        answer = await request(server.http_port, "GET", path)
        assert answer.status == 404, path
    assert (await request(server.http_port, "GET", "/turngate.v1.SessionService/Nope")).status == 404
