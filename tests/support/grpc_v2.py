"""A raw v2 gRPC client for tests, and an in-process broker with its gRPC endpoint.

Owns: calling ``apache.rocketmq.v2.MessagingService`` methods by name with the
metadata the SDKs send (``x-mq-client-id`` and friends), and building v2 messages,
so component tests can drive the proxy without an SDK. The official SDKs are
driven in their own venv by ``tests/interop``.

Must not: fake the server: the broker and its proxy are the real ones.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
from google.protobuf.message import Message

from aiorocketmq.broker.config import load_broker_settings
from aiorocketmq.broker.controller import BrokerController
from aiorocketmq.common.properties_file import parse_properties
from aiorocketmq.proxy.server import SERVICE_NAME, GrpcProxy
from aiorocketmq.proxy.v2 import definition_pb2 as pb
from aiorocketmq.proxy.v2 import service_pb2 as rpc
from tests.support.cluster import broker_properties

__all__ = ["V2Client", "in_process_grpc_broker", "v2_message"]

_RESPONSES: dict[str, type[Message]] = {
    "QueryRoute": rpc.QueryRouteResponse,
    "Heartbeat": rpc.HeartbeatResponse,
    "SendMessage": rpc.SendMessageResponse,
    "QueryAssignment": rpc.QueryAssignmentResponse,
    "AckMessage": rpc.AckMessageResponse,
    "ChangeInvisibleDuration": rpc.ChangeInvisibleDurationResponse,
    "ForwardMessageToDeadLetterQueue": rpc.ForwardMessageToDeadLetterQueueResponse,
    "NotifyClientTermination": rpc.NotifyClientTerminationResponse,
    "EndTransaction": rpc.EndTransactionResponse,
    "PullMessage": rpc.PullMessageResponse,
}


def v2_message(topic: str, body: bytes, **system: Any) -> pb.Message:
    """A message as the SDKs send it (a fresh 34-hex-char id unless given)."""
    user = system.pop("user_properties", {})
    system.setdefault("message_id", "01" + uuid.uuid4().hex.upper())
    system.setdefault("message_type", pb.MessageType.NORMAL)
    system.setdefault("body_encoding", pb.Encoding.IDENTITY)
    return pb.Message(
        topic=pb.Resource(name=topic),
        body=body,
        user_properties=user,
        system_properties=pb.SystemProperties(**system),
    )


class V2Client:
    """Unary and receive calls to one endpoint, with an SDK-like client id; signed as
    the Python SDK signs (``access_key``/``secret_key``; ``authorization`` replaces the
    whole header when given)."""

    def __init__(
        self,
        target: str,
        client_id: str | None = None,
        *,
        access_key: str = "",
        secret_key: str = "",
        authorization: str | None = None,
    ) -> None:
        self.channel = grpc.aio.insecure_channel(target)
        self.client_id = client_id if client_id is not None else f"test@{uuid.uuid4().hex[:8]}"
        self.access_key, self.secret_key = access_key, secret_key
        self.authorization = authorization

    @property
    def metadata(self) -> list[tuple[str, str]]:
        """What Python 5.1.2 sends (an empty credential included)."""
        headers = [("x-mq-language", "PYTHON"), ("x-mq-protocol", "GRPC_V2")]
        date_time = time.strftime("%Y%m%dT%H%M%SZ")
        mac = hmac.new(self.secret_key.encode(), date_time.encode(), hashlib.sha1).hexdigest()
        headers.append(("x-mq-date-time", date_time))
        headers.append(
            (
                "authorization",
                self.authorization
                or f"MQv2-HMAC-SHA1 Credential={self.access_key}, "
                f"SignedHeaders=x-mq-date-time, Signature={mac if self.access_key else ''}",
            )
        )
        if self.client_id:
            headers.append(("x-mq-client-id", self.client_id))
        return headers

    async def call(self, method: str, request: Message, timeout: float = 10) -> Any:
        """A unary RPC; the decoded response."""
        response = _RESPONSES[method]
        stub = self.channel.unary_unary(
            f"/{SERVICE_NAME}/{method}",
            request_serializer=type(request).SerializeToString,
            response_deserializer=response.FromString,
        )
        return await stub(request, metadata=self.metadata, timeout=timeout)

    async def receive(
        self, request: rpc.ReceiveMessageRequest, timeout: float = 25
    ) -> list[rpc.ReceiveMessageResponse]:
        """ReceiveMessage's whole stream."""
        stub = self.channel.unary_stream(
            f"/{SERVICE_NAME}/ReceiveMessage",
            request_serializer=rpc.ReceiveMessageRequest.SerializeToString,
            response_deserializer=rpc.ReceiveMessageResponse.FromString,
        )
        return [entry async for entry in stub(request, metadata=self.metadata, timeout=timeout)]

    def telemetry(self) -> Any:
        """An open Telemetry stream call (write commands, read replies)."""
        stub = self.channel.stream_stream(
            f"/{SERVICE_NAME}/Telemetry",
            request_serializer=rpc.TelemetryCommand.SerializeToString,
            response_deserializer=rpc.TelemetryCommand.FromString,
        )
        return stub(metadata=self.metadata)

    async def close(self) -> None:
        """Close the channel."""
        await self.channel.close()


@contextlib.asynccontextmanager
async def in_process_grpc_broker(
    directory: Path, name: str = "broker-a", **settings: Any
) -> AsyncIterator[tuple[BrokerController, GrpcProxy]]:
    """A started broker with its gRPC endpoint on a free port, in this process."""
    settings.setdefault("grpcListenPort", -1)
    settings.setdefault("metricsPort", 0)
    path = broker_properties(directory, name, None, **settings)
    broker = BrokerController(load_broker_settings(parse_properties(path.read_text("utf-8"))))
    proxy = GrpcProxy(broker)
    broker.extensions.append(proxy)
    await broker.start()
    try:
        yield broker, proxy
    finally:
        await broker.shutdown()
