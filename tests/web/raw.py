"""Plain HTTP requests to the listener (what a browser's fetch sends), for what the protocol
clients never send: bodies that are not requests, CORS preflights, the console's files."""

from __future__ import annotations

import asyncio
import http.client
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Answer:
    status: int
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def _request(port: int, method: str, path: str, body: bytes | None, headers: Mapping[str, str]) -> Answer:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request(method, path, body=body, headers=dict(headers))
        response = connection.getresponse()
        return Answer(response.status, {k.lower(): v for k, v in response.getheaders()}, response.read())
    finally:
        connection.close()


async def request(
    port: int, method: str, path: str, body: bytes | None = None, headers: Mapping[str, str] | None = None
) -> Answer:
    return await asyncio.to_thread(_request, port, method, path, body, headers or {})


async def post(port: int, path: str, body: bytes, content_type: str = "application/json") -> Answer:
    return await request(port, "POST", path, body, {"content-type": content_type})
