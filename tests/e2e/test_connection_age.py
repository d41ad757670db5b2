"""`max_connection_age`: a client connection is asked to move (GOAWAY) after about that long, and
its streams are ended when the grace that follows runs out, so long-lived clients spread over the
replicas started since; the client reconnects for its next call."""

from __future__ import annotations

import grpc

from tests.support.calls import snapshot
from tests.support.servers import OwnServer
from tests.support.watching import collect, ended, watch
from turngate.v1 import turngate_pb2 as pb


async def test_max_connection_age_ends_a_long_lived_stream_and_the_next_call_reconnects(
    own_server: OwnServer, session: pb.SessionRef
) -> None:
    async with own_server(max_connection_age=1.0, max_connection_age_grace=1.0) as (_, client):
        stream = watch(client, session)
        await collect(stream, 1)
        delivered, error = await ended(stream)
        assert delivered == []
        assert error.code() == grpc.StatusCode.UNAVAILABLE
        assert (await snapshot(client, session)).session == session
