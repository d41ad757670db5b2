"""Hypothesis strategies for the request of every turngate.v1 RPC, generated from the message
descriptors, so a new RPC or field is fuzzed without touching this file.

Half of the requests are valid-looking: identifiers from a small pool (so calls meet real
sessions, turns, tool calls and interactions), leases the server issued, durations, sizes and
enums in range. The other half are hostile: every field may also be ill-formed, huge (beyond
the 64 KiB message limit too), negative, out of its enum, not UTF-8, repeated, of the wrong wire
type, or followed by unknown fields and broken framing.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

from google.protobuf.descriptor import Descriptor, FieldDescriptor, MethodDescriptor
from hypothesis import strategies as st

from tests.security.fuzz_wire import (
    I32,
    I64,
    LEN,
    VARINT,
    WIRE_TYPES,
    Body,
    Fresh,
    Garbage,
    LiveLease,
    Long,
    Nested,
    Part,
    Raw,
)
from turngate.v1 import turngate_pb2 as pb

F = FieldDescriptor
ID_REGEX = r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}"
KIB = 1024
MAX_MESSAGE = 64 * KIB

# Every RPC of the package, as (full method path, method descriptor), services in file order.
METHODS: tuple[tuple[str, MethodDescriptor], ...] = tuple(
    (f"/{service.full_name}/{method.name}", method)
    for service in pb.DESCRIPTOR.services_by_name.values()
    for method in service.methods
)

_WIRE_OF_TYPE = {
    **dict.fromkeys(
        (F.TYPE_INT32, F.TYPE_INT64, F.TYPE_UINT32, F.TYPE_UINT64, F.TYPE_SINT32, F.TYPE_SINT64),
        VARINT,
    ),
    F.TYPE_BOOL: VARINT,
    F.TYPE_ENUM: VARINT,
    **dict.fromkeys((F.TYPE_FIXED64, F.TYPE_SFIXED64, F.TYPE_DOUBLE), I64),
    **dict.fromkeys((F.TYPE_FIXED32, F.TYPE_SFIXED32, F.TYPE_FLOAT), I32),
    **dict.fromkeys((F.TYPE_STRING, F.TYPE_BYTES, F.TYPE_MESSAGE), LEN),
}
_BITS_32 = {F.TYPE_INT32, F.TYPE_UINT32, F.TYPE_SINT32, F.TYPE_FIXED32, F.TYPE_SFIXED32, F.TYPE_ENUM}

# The bytes limits of docs/design.md §3.8 and the API (identifiers are 128 characters).
TEXT_LIMITS = {"reason": KIB, "error": KIB, "resolution": 16 * KIB, "name": 256, "kind": 128}
ID_LIMIT = 128
# Free text that is mostly left empty (an error is only allowed with a FAILED status or outcome).
OPTIONAL_TEXT = frozenset({"error", "reason", "resolution"})

INT64_EDGES = (0, 1, -1, 2, 2**31 - 1, 2**31, -(2**31), 2**32, 2**53 + 1, 2**63 - 1, -(2**63), 2**64 - 1)
INT32_EDGES = (0, 1, -1, 2, 500, 501, 2**31 - 1, -(2**31), 2**32 + 1)
ILL_FORMED_IDS = ("-t", ".t", "a b", "tür", "a/b", "a\x00b", "a\nb", "*", "t;drop", "a" * (ID_LIMIT + 1))
# Well-formed UTF-8 that stores, terminals and logs may still choke on.
TRICKY_TEXT = (
    "\x00",
    "a\x00b",
    "\t\r\n",
    "\x1b[2J\x1b[31m",
    "\u202etxt.exe",
    "\ufeff",
    "\U0010ffff",
    "%s%n{0}",
)
NOT_UTF8 = (b"\xff", b"\xc3", b"\xc0\xaf", b"\xed\xa0\x80", b"a\x80b", b"\xf8\x88\x80\x80\x80", b"ok\xfe")
BAD_TAILS = (
    b"\x0a",  # field 1, length missing
    b"\x0a\xff\xff\xff\xff\x0f",  # a length far past the end
    b"\x80",  # a varint cut short
    b"\x0b",  # a group start never ended
    b"\x0c",  # a group end never started
    b"\x07",  # wire type 7 does not exist
    b"\x00\x00",  # field number 0
    b"\xff" * 11,  # a varint longer than 10 bytes
)


@dataclass(frozen=True)
class Vocabulary:
    """The small pools of valid identifiers requests draw from, so they collide with real state."""

    projects: tuple[str, ...]
    sessions: tuple[str, ...] = ("s1", "s2")
    turns: tuple[str, ...] = ("t1", "t2", "t3")
    runners: tuple[str, ...] = ("r1", "r2")
    calls: tuple[str, ...] = ("c1", "c2", "c3")
    interactions: tuple[str, ...] = ("i1", "i2")
    requests: tuple[str, ...] = ("q1", "q2")

    def pool(self, field: str) -> tuple[str, ...]:
        by_field = {
            "project_id": self.projects,
            "session_id": self.sessions,
            "turn_id": self.turns,
            "expected_turn_id": self.turns,
            "runner_id": self.runners,
            "call_id": self.calls,
            "interaction_id": self.interactions,
            "request_id": self.requests,
        }
        return by_field.get(field, self.turns)


def _present(chance_in_20: int) -> st.SearchStrategy[bool]:
    # Shrinks toward "absent", so a failing example keeps only the fields that matter.
    return st.integers(0, 19).map(lambda n: n < chance_in_20)


def _long(units: tuple[bytes, ...], counts: tuple[int, ...]) -> st.SearchStrategy[bytes | Long]:
    return st.builds(Long, st.sampled_from(units), st.sampled_from(counts))


def _huge(limit: int) -> st.SearchStrategy[bytes | Long]:
    """Strings at and past `limit` bytes (multi-byte ones too), and past the message limit."""
    counts = (limit, limit + 1, limit // 2 + 1, 16 * KIB + 1, MAX_MESSAGE - 200, MAX_MESSAGE + 1, 200_000)
    return _long((b"x", "é".encode(), "\U0001f600".encode(), b"\xff"), counts)


class Requests:
    """The strategies of one vocabulary."""

    def __init__(self, vocabulary: Vocabulary) -> None:
        self.vocabulary = vocabulary

    def for_method(self, method: MethodDescriptor) -> st.SearchStrategy[Body]:
        return self.message(method.input_type)

    def message(self, descriptor: Descriptor, depth: int = 0) -> st.SearchStrategy[Body]:
        """A valid-looking body two times in three, a hostile one otherwise."""
        hostile = st.integers(0, 2).map(lambda n: n == 2)
        return hostile.flatmap(lambda hostile: self._body(descriptor, hostile, depth))

    def _body(self, descriptor: Descriptor, hostile: bool, depth: int) -> st.SearchStrategy[Body]:
        fields = [self._field(field, hostile, depth) for field in descriptor.fields]
        extras: list[st.SearchStrategy[list[Part]]] = [
            st.lists(self._unknown(descriptor), max_size=3 if hostile else 1)
        ]
        if hostile and depth == 0:
            extras.append(st.lists(st.sampled_from(BAD_TAILS).map(Garbage), max_size=1))
        combined = st.tuples(*fields, *extras).map(lambda groups: [p for group in groups for p in group])
        if hostile:
            return combined.flatmap(st.permutations).map(tuple)
        return combined.map(tuple)

    def _field(self, field: FieldDescriptor, hostile: bool, depth: int) -> st.SearchStrategy[list[Part]]:
        value = self._value(field, hostile, depth)
        if hostile or field.is_repeated:
            return st.lists(value, max_size=2 if hostile else 3)
        return st.tuples(_present(19), value).map(lambda pv: [pv[1]] if pv[0] else [])

    def _value(self, field: FieldDescriptor, hostile: bool, depth: int) -> st.SearchStrategy[Part]:
        wire = _WIRE_OF_TYPE.get(field.type, LEN)
        number = field.number
        if field.type == F.TYPE_MESSAGE:
            return self._nested(field, hostile, depth)
        if field.type == F.TYPE_STRING:
            return self._string(field, hostile)
        if field.type == F.TYPE_BYTES:
            return st.binary(max_size=64).map(lambda b: Raw(number, LEN, b))
        if field.type == F.TYPE_ENUM:
            assert field.enum_type is not None
            values = [v.number for v in field.enum_type.values if v.number] or [0]
            good: st.SearchStrategy[int] = st.sampled_from(values)
            bad = st.one_of(st.sampled_from(INT32_EDGES), st.integers(-(2**31), 2**31 - 1))
        elif field.type == F.TYPE_BOOL:
            good, bad = st.sampled_from((0, 1)), st.sampled_from((2, 2**64 - 1))
        else:
            good, bad = _numbers(field)
        ints = st.one_of(good, bad) if hostile else good
        return ints.map(lambda n: Raw(number, wire, n))

    def _nested(self, field: FieldDescriptor, hostile: bool, depth: int) -> st.SearchStrategy[Part]:
        message = field.message_type
        assert message is not None
        number, full_name = field.number, message.full_name
        inner = self._body(message, hostile, depth + 1) if depth < 3 else st.just(())
        options: list[st.SearchStrategy[Part]] = [inner.map(lambda body: Nested(number, body))]
        if full_name == "turngate.v1.TurnLease":
            shift = st.sampled_from((0, 0, 0, 1, -1)) if not hostile else st.integers(-(2**40), 2**40)
            options += [st.builds(LiveLease, st.just(number), st.integers(0, 7), shift)] * 3
        if full_name == "turngate.v1.SessionRef":
            options += [self._pool_session(number)] * 2
        if hostile:
            options.append(st.one_of(st.binary(max_size=40), _huge(KIB)).map(lambda b: Raw(number, LEN, b)))
        return st.one_of(options)

    def _pool_session(self, number: int) -> st.SearchStrategy[Part]:
        v = self.vocabulary
        return st.builds(
            lambda project, session: Nested(
                number, (Raw(1, LEN, project.encode()), Raw(2, LEN, session.encode()))
            ),
            st.sampled_from(v.projects),
            st.sampled_from(v.sessions),
        )

    def _string(self, field: FieldDescriptor, hostile: bool) -> st.SearchStrategy[Part]:
        number, name = field.number, field.name
        good: st.SearchStrategy[Part]
        if name.endswith("_id"):
            pool = st.sampled_from(self.vocabulary.pool(name)).map(str.encode)
            valid_id = st.from_regex(ID_REGEX, fullmatch=True).map(str.encode)
            good = st.one_of(
                st.one_of(pool, pool, pool, valid_id).map(lambda b: Raw(number, LEN, b)),
                st.just(Fresh(number)),
            )
            limit = ID_LIMIT
        elif name == "page_token":
            good = _page_tokens(self.vocabulary).map(lambda b: Raw(number, LEN, b))
            limit = 400
        else:
            limit = TEXT_LIMITS.get(name, KIB)
            text = st.text(max_size=40).map(str.encode).filter(lambda b: len(b) <= limit)
            tricky = st.sampled_from(TRICKY_TEXT).map(str.encode)
            at_limit = _long((b"y",), (limit,))
            empty = st.just(b"")
            texts = (
                (empty, empty, empty, text, tricky, at_limit)
                if name in OPTIONAL_TEXT
                else (empty, text, tricky, at_limit)
            )
            good = st.one_of(texts).map(lambda b: Raw(number, LEN, b))
        if not hostile:
            return good
        bad = st.one_of(
            st.sampled_from(ILL_FORMED_IDS).map(str.encode),
            st.text(max_size=200).map(str.encode),
            st.sampled_from(NOT_UTF8),
            st.binary(max_size=40),
            _huge(limit),
        ).map(lambda b: Raw(number, LEN, b))
        return st.one_of(good, bad)

    def _unknown(self, descriptor: Descriptor) -> st.SearchStrategy[Part]:
        """A field this message does not have, or one it has with a wrong wire type."""
        known = {f.number: _WIRE_OF_TYPE.get(f.type, LEN) for f in descriptor.fields}
        number = st.one_of(
            st.integers(1, 2**29 - 1),
            st.sampled_from((max(known, default=0) + 1, 1000, 19_000, 2**29 - 1)),
            st.sampled_from(sorted(known) or [1]),
        )
        return (
            st.tuples(number, st.sampled_from(WIRE_TYPES))
            .flatmap(lambda nw: _any_payload(nw[1]).map(lambda p: Raw(nw[0], nw[1], p)))
            .filter(lambda raw: known.get(raw.number) != raw.wire)
        )


def _any_payload(wire: int) -> st.SearchStrategy[int | bytes | Long]:
    if wire == LEN:
        return st.one_of(st.binary(max_size=40), _long((b"u",), (KIB, 20 * KIB)))
    return st.one_of(st.sampled_from(INT64_EDGES), st.integers(0, 2**64 - 1))


def _numbers(field: FieldDescriptor) -> tuple[st.SearchStrategy[int], st.SearchStrategy[int]]:
    """(in range, anything) for an integer field, biased by what its name means."""
    by_name: dict[str, st.SearchStrategy[int]] = {
        "after_seq": st.integers(0, 40),
        "page_size": st.one_of(st.integers(0, 60), st.sampled_from((1, 500))),
        "seconds": st.one_of(st.integers(1, 3600), st.sampled_from((1, 20, 86_400))),
        "nanos": st.one_of(st.just(0), st.integers(0, 999_999_999)),
        "generation": st.integers(1, 2**63 - 1),
    }
    good = by_name.get(field.name, st.integers(0, 100))
    if field.type in _BITS_32:
        bad = st.one_of(st.sampled_from(INT32_EDGES), st.integers(-(2**31), 2**31 - 1))
    else:
        bad = st.one_of(st.sampled_from(INT64_EDGES), st.integers(-(2**63), 2**63 - 1))
    if field.name == "nanos":
        bad = st.one_of(bad, st.sampled_from((10**9, -(10**9), -1, -999_999_999)))
    return good, bad


def _page_tokens(vocabulary: Vocabulary) -> st.SearchStrategy[bytes]:
    """Empty, well-formed (as the server writes them) and near-miss tokens."""
    position = st.one_of(st.integers(0, 2**63 - 1), st.sampled_from((0, 1, 2**63, 10**30)))
    session = st.one_of(st.sampled_from(vocabulary.sessions), st.sampled_from(ILL_FORMED_IDS))
    texts: list[st.SearchStrategy[str]] = [
        position.map(lambda n: f"g{n}"),
        st.tuples(position, session).map(lambda ps: f"d{ps[0]}/{ps[1]}"),
        st.sampled_from(("g", "d", "d1", "g-1", "g²", "d1/", "x1")),
    ]
    encoded = st.one_of(texts).map(lambda t: base64.urlsafe_b64encode(t.encode()))
    return st.one_of(st.just(b""), encoded, encoded)


TRACEPARENT_REGEX = r"[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}"


def trace_metadata() -> st.SearchStrategy[tuple[tuple[str, str], ...]]:
    """No metadata, or a W3C traceparent: well-formed (kept with an admitted turn), garbage, or
    huge (printable ASCII only: grpc's client sends nothing else)."""
    printable = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=80)
    value = st.one_of(
        st.from_regex(TRACEPARENT_REGEX, fullmatch=True),
        printable,
        st.sampled_from(("00-" + "f" * 5_000, "00-" + "0" * 32 + "-" + "0" * 16 + "-00-extra")),
    )
    return st.one_of(st.just(()), value.map(lambda v: (("traceparent", v),)))


# The HTTP listener's headers that mean something to it (forwarded, protocol), and one that does not.
HTTP_HEADERS = (
    "authorization",
    "traceparent",
    "tracestate",
    "connect-timeout-ms",
    "grpc-timeout",
    "connect-protocol-version",
    "content-encoding",
    "connect-content-encoding",
    "x-fuzz",
)


def header_values() -> st.SearchStrategy[bytes]:
    """Any bytes, bytes that are not UTF-8, control characters, and UTF-8 that encodes lone
    surrogates (which Python decodes only with `surrogatepass`)."""
    surrogates = st.text(st.characters(categories=["Cs"]), min_size=1, max_size=4)
    return st.one_of(
        st.binary(min_size=1, max_size=48),
        st.sampled_from(NOT_UTF8),
        st.sampled_from(TRICKY_TEXT).map(str.encode),
        surrogates.map(lambda text: text.encode("utf-8", "surrogatepass")),
        st.text(max_size=48).map(str.encode),
    )


def connect_json(descriptor: Descriptor) -> st.SearchStrategy[bytes]:
    """A JSON object for a request of `descriptor` whose keys and strings may hold lone surrogates
    (as JSON spells them: `\\ud800`, valid JSON but no Unicode text), at any depth, as keys, enum
    names, durations and plain strings."""
    surrogate = st.integers(0xD800, 0xDFFF).map(lambda code: f"\\u{code:04x}")
    text = st.lists(st.one_of(surrogate, st.text("abcmsR0123456789", max_size=3)), min_size=1, max_size=4)
    strings = text.map(lambda parts: '"' + "".join(parts) + '"')
    key = st.one_of(st.sampled_from([f'"{field.json_name}"' for field in descriptor.fields]), strings)
    scalar = st.one_of(
        strings, st.integers(-(2**64), 2**64).map(str), st.sampled_from(("true", "null", "1.5e3"))
    )
    value = st.recursive(
        scalar, lambda inner: st.dictionaries(key, inner, max_size=3).map(_object), max_leaves=6
    )
    return st.dictionaries(key, value, min_size=1, max_size=4).map(lambda fields: _object(fields).encode())


def _object(fields: dict[str, str]) -> str:
    return "{" + ", ".join(f"{name}: {value}" for name, value in fields.items()) + "}"
