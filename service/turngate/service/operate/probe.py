"""`turngate health`: a server's gRPC health status (grpc.health.v1), for a container's
HEALTHCHECK, an exec probe or an operator. Prints the status; exits 0 only on SERVING."""

from __future__ import annotations

import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from turngate.client import ClientOptions
from turngate.client.connection import open_channel
from turngate.service.operate.exits import ExitCode

SERVING = health_pb2.HealthCheckResponse.SERVING


async def check(target: str, options: ClientOptions, service: str) -> ExitCode:
    """The health of `service` ("" = the whole server) at `target`; the health service needs no
    token, so none is sent."""
    channel = open_channel(
        target,
        credentials=options.get("credentials"),
        token=None,
        options=(),
        interceptors=(),
        tracer_provider=None,
    )
    async with channel:
        try:
            reply = await health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=service), timeout=options.get("call_timeout")
            )
        except grpc.aio.AioRpcError as error:
            if error.code() == grpc.StatusCode.NOT_FOUND:
                print(
                    health_pb2.HealthCheckResponse.ServingStatus.Name(
                        health_pb2.HealthCheckResponse.SERVICE_UNKNOWN
                    )
                )
                return ExitCode.FAILURE
            print(f"turngate: {target} unavailable ({error.code().name}): {error.details()}", file=sys.stderr)
            return ExitCode.FAILURE
    print(health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status))
    return ExitCode.OK if reply.status == SERVING else ExitCode.FAILURE
