"""The request codecs of the HTTP listener: protobuf's binary and JSON forms (JSON refusing
fields the message does not have), whose refusals name the message expected and nothing of what
was sent. The libraries' own messages quote the input, and one that holds a lone surrogate
("\\ud800") cannot even be encoded into a response (a 500 with an empty body)."""

from __future__ import annotations

from typing import Any

from connectrpc.code import Code
from connectrpc.codec import Codec
from connectrpc.compat import google_protobuf_binary_codec, google_protobuf_json_codec
from connectrpc.errors import ConnectError
from google.protobuf.message import Message


class _Refusing:
    """`codec`, whose decoding failures are invalid_argument naming the message and the form."""

    def __init__(self, codec: Codec, form: str) -> None:
        self._codec = codec
        self._form = form

    def name(self) -> str:
        return self._codec.name()

    def encode(self, message: Message) -> bytes:
        return self._codec.encode(message)

    def decode(self, data: bytes | bytearray, message_class: type[Message]) -> Any:
        try:
            return self._codec.decode(data, message_class)
        except Exception:  # whatever the library raises about input, it is the input's fault
            name = message_class.DESCRIPTOR.full_name
            raise ConnectError(
                Code.INVALID_ARGUMENT, f"the request is not a {name} in {self._form}"
            ) from None


CODECS: list[Codec] = [
    _Refusing(google_protobuf_binary_codec(), "protobuf's binary form"),
    # A misspelt field is refused (invalid_argument), not silently dropped.
    _Refusing(google_protobuf_json_codec(ignore_unknown_fields=False), "protobuf's JSON form"),
]
