"""Protobuf wire format by hand, so a fuzzed request can hold what no generated class would send:
strings that are not UTF-8, unknown fields, wrong wire types, varints beyond a field's range,
repeated singular fields and broken framing.

A request is a `Body` of parts; some parts are placeholders (`Fresh`, `LiveLease`) resolved only
when the request is sent, from what the server has answered so far (`Resolver`).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol, assert_never

from turngate.v1 import turngate_pb2 as pb

VARINT, I64, LEN, I32 = 0, 1, 2, 5
WIRE_TYPES = (VARINT, I64, LEN, I32)


@dataclass(frozen=True)
class Long:
    """`unit` repeated `count` times: a huge string with a short repr."""

    unit: bytes
    count: int

    def encode(self) -> bytes:
        return self.unit * self.count

    def __len__(self) -> int:
        return len(self.unit) * self.count


@dataclass(frozen=True)
class Raw:
    """One field as given: an int for VARINT/I64/I32 (taken modulo 2**64 or 2**32), bytes for LEN."""

    number: int
    wire: int
    payload: int | bytes | Long


@dataclass(frozen=True)
class Nested:
    """A message field whose body is fuzzed too."""

    number: int
    body: Body


@dataclass(frozen=True)
class Fresh:
    """A string field holding a valid identifier never sent before."""

    number: int


@dataclass(frozen=True)
class LiveLease:
    """A TurnLease field holding one the server issued (`pick` back from the newest), with its
    generation moved by `shift` (0: the real one)."""

    number: int
    pick: int
    shift: int


@dataclass(frozen=True)
class Garbage:
    """Bytes put in the body as they are (they may break the framing)."""

    data: bytes


Part = Raw | Nested | Fresh | LiveLease | Garbage
Body = tuple[Part, ...]


class Resolver(Protocol):
    def fresh_id(self) -> str: ...

    def live_lease(self, pick: int) -> pb.TurnLease | None: ...


def varint(value: int) -> bytes:
    value %= 2**64  # negative numbers travel as their 64-bit two's complement, as protobuf sends them
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def key(number: int, wire: int) -> bytes:
    return varint(number << 3 | wire)


def _payload(wire: int, payload: int | bytes | Long) -> bytes:
    match payload:
        case Long():
            data = payload.encode()
        case bytes():
            data = payload
        case int():
            if wire == I64:
                return struct.pack("<Q", payload % 2**64)
            if wire == I32:
                return struct.pack("<I", payload % 2**32)
            data = varint(payload)
            if wire == VARINT:
                return data
        case _:
            assert_never(payload)
    if wire == LEN:
        return varint(len(data)) + data
    return data


def encode(body: Body, resolver: Resolver) -> bytes:
    """The wire bytes of `body`, placeholders resolved now."""
    out = bytearray()
    for part in body:
        match part:
            case Raw(number, wire, payload):
                out += key(number, wire) + _payload(wire, payload)
            case Nested(number, inner):
                out += key(number, LEN) + _payload(LEN, encode(inner, resolver))
            case Fresh(number):
                out += key(number, LEN) + _payload(LEN, resolver.fresh_id().encode())
            case LiveLease(number, pick, shift):
                lease = resolver.live_lease(pick)
                if lease is not None:
                    lease = pb.TurnLease(
                        session=lease.session, turn_id=lease.turn_id, generation=lease.generation + shift
                    )
                    out += key(number, LEN) + _payload(LEN, lease.SerializeToString())
            case Garbage(data):
                out += data
    return bytes(out)


def strings(body: Body) -> Iterator[bytes | Long]:
    """Every length-delimited payload written by hand in `body`, nested ones included."""
    for part in body:
        match part:
            case Raw(_, wire, payload) if wire == LEN and not isinstance(payload, int):
                yield payload
            case Nested(_, inner):
                yield from strings(inner)


def prefix(value: bytes | Long, size: int) -> bytes:
    """The first `size` bytes of a payload, without building a huge one."""
    if isinstance(value, bytes):
        return value[:size]
    return (value.unit * (size // max(1, len(value.unit)) + 1))[: min(size, len(value))]
