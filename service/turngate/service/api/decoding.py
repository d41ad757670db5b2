"""The services registered with request decoding that cannot fail: bytes that are not a valid
request message (bad wire format, a string field that is not UTF-8) become `Undecodable`, which
the edge refuses with INVALID_ARGUMENT, instead of gRPC's own UNKNOWN. A method a servicer names
in its `PRE_SERIALIZED` yields its responses already serialized: their bytes are sent as they are
(WatchSession: an event is encoded once for all its watchers, see encoded.py)."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf.message import DecodeError, Message
from google.protobuf.message_factory import GetMessageClass

from turngate.v1 import turngate_pb2 as pb


@dataclass(frozen=True, slots=True)
class Undecodable:
    """What arrived instead of a `message` (its full name)."""

    message: str


def _decoder(message: type[Message]) -> Callable[[bytes], Message | Undecodable]:
    def decode(raw: bytes) -> Message | Undecodable:
        try:
            return message.FromString(raw)
        except DecodeError:
            return Undecodable(message.DESCRIPTOR.full_name)

    return decode


def add_services(server: grpc.aio.Server, servicers: dict[str, Any]) -> None:
    """Registers each turngate service (by short name, e.g. "AdmissionService") on `server`."""
    for name, servicer in servicers.items():
        service = pb.DESCRIPTOR.services_by_name[name]
        pre_serialized: Collection[str] = getattr(servicer, "PRE_SERIALIZED", ())
        handlers = {}
        for method in service.methods:
            make = (
                grpc.unary_stream_rpc_method_handler
                if method.server_streaming
                else grpc.unary_unary_rpc_method_handler
            )
            handlers[method.name] = make(
                getattr(servicer, method.name),
                request_deserializer=_decoder(GetMessageClass(method.input_type)),
                # None: grpc sends what the handler yields, bytes, as they are.
                response_serializer=None
                if method.name in pre_serialized
                else GetMessageClass(method.output_type).SerializeToString,
            )
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service.full_name, handlers),))
        server.add_registered_method_handlers(service.full_name, handlers)
