"""`--json` (`render.json_line`) prints every field of the contract's messages: scalars with their
zero values, an unset message as null, of a oneof the member set; and the line parses back into
the message it came from."""

from __future__ import annotations

import json

import pytest
from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor
from google.protobuf.message import Message

from turngate.service.operate.render import json_line
from turngate.v1 import turngate_pb2 as pb

MESSAGES = sorted(pb.DESCRIPTOR.message_types_by_name.values(), key=lambda kind: kind.name)


def _new(kind: Descriptor) -> Message:
    message: Message = getattr(pb, kind.name)()
    return message


def _every_field_shown(message: Message, shown: dict[str, object]) -> None:
    for field in message.DESCRIPTOR.fields:
        if field.containing_oneof is not None and not message.HasField(field.name):
            assert field.json_name not in shown, field.full_name
            continue
        assert field.json_name in shown, field.full_name
        value = shown[field.json_name]
        if field.message_type is None or field.message_type.full_name.startswith("google.protobuf."):
            continue
        if field.is_repeated:
            for item, item_shown in zip(getattr(message, field.name), value, strict=True):  # type: ignore[call-overload]
                _every_field_shown(item, item_shown)
        elif message.HasField(field.name):
            assert isinstance(value, dict)
            _every_field_shown(getattr(message, field.name), value)
        else:
            assert value is None, field.full_name


@pytest.mark.parametrize("kind", MESSAGES, ids=lambda kind: kind.name)
def test_an_empty_message_shows_every_field_and_parses_back(kind: Descriptor) -> None:
    message = _new(kind)
    shown = json.loads(json_line(message))
    _every_field_shown(message, shown)
    assert json_format.Parse(json_line(message), _new(kind)) == message


def test_nested_and_repeated_messages_show_their_unset_fields_as_null_and_the_oneof_member_set() -> None:
    event = pb.SessionEvent(
        seq=3,
        snapshot=pb.SessionSnapshot(
            session=pb.SessionRef(project_id="p", session_id="s"),
            queue=[pb.QueuedTurn(turn_id="t2", position=1)],
        ),
    )
    shown = json.loads(json_line(event))
    _every_field_shown(event, shown)
    assert (shown["time"], shown["snapshot"]["active"], shown["snapshot"]["lastSettled"]) == (
        None,
        None,
        None,
    )
    assert shown["snapshot"]["queue"][0]["queuedAt"] is None
    assert "turnAdmitted" not in shown
    assert json_format.Parse(json_line(event), pb.SessionEvent()) == event
