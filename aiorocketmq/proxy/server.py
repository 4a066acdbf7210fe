"""GrpcProxy: RocketMQ 5's gRPC messaging endpoint inside the broker process (the
proxy in local mode), on the broker's event loop (grpc.aio).

Owns: the gRPC server (plaintext h2c on ``grpcListenPort``; -1 picks a free port),
the ``apache.rocketmq.v2.MessagingService`` method table, reading each call's
metadata (``x-mq-client-id`` is required: CLIENT_ID_REQUIRED; ``authorization`` is
checked against the broker's plain ACL when ``aclEnable`` is on, ``proxy.auth``, and
ignored when it is off, as it must be: Python always sends one), turning
``ProxyError`` and any unexpected exception into the response's in-band status
(never a crash, never a hung call),
the Telemetry stream, and the lifecycle of the POP service and client registry.
RPCs not served (the pull/offset RPCs no SDK calls, RecallMessage, lite topics)
get gRPC's UNIMPLEMENTED, as RocketMQ 5's proxy answers them.

Must not: hold RPC logic (``messaging``) or POP state (``pop``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Final, Protocol

import grpc
from google.protobuf.message import Message
from grpc import aio

from aiorocketmq.broker.controller import BrokerController
from aiorocketmq.broker.timer import PROPERTY_TIMER_DELIVER_MS
from aiorocketmq.proxy.auth import refusal, unauthorized
from aiorocketmq.proxy.clients import ClientRegistry, ClientState, merged_settings
from aiorocketmq.proxy.messaging import CallInfo, MessagingActivities
from aiorocketmq.proxy.pop import PopService
from aiorocketmq.proxy.status import ProxyError, status
from aiorocketmq.proxy.transactions import ProxyTransactions
from aiorocketmq.proxy.v2 import definition_pb2 as pb
from aiorocketmq.proxy.v2 import service_pb2 as rpc
from aiorocketmq.runtime.lifecycle import Service
from aiorocketmq.store.inner_message import MessageExtBrokerInner
from aiorocketmq.store.results import PutMessageResult

__all__ = ["SERVICE_NAME", "GrpcProxy"]

log = logging.getLogger(__name__)

SERVICE_NAME: Final = "apache.rocketmq.v2.MessagingService"
CLIENT_ID_HEADER: Final = "x-mq-client-id"
_MAX_INBOUND_BYTES: Final = 130 * 1024 * 1024  # RocketMQ 5's GrpcServerBuilder
_SHUTDOWN_GRACE_S: Final = 1.0
_CLIENT_SCAN_S: Final = 10.0

_Unary = Callable[[Any, CallInfo], Message | Awaitable[Message]]


class _Context(Protocol):
    def invocation_metadata(self) -> Any: ...
    def peer(self) -> str: ...


def _client_id(context: _Context) -> str:
    for key, value in context.invocation_metadata() or ():
        if key == CLIENT_ID_HEADER and isinstance(value, str) and value.strip():
            return value
    return ""


def _metadata(context: _Context) -> dict[str, str]:
    return {k: v for k, v in context.invocation_metadata() or () if isinstance(v, str)}


def _peer(context: _Context) -> tuple[str, int]:
    """``ipv4:1.2.3.4:5`` / ``ipv6:[::1]:5`` -> (host, port); (peer text, 0) otherwise."""
    text = context.peer() or ""
    kind, _, rest = text.partition(":")
    if kind in ("ipv4", "ipv6"):
        host, _, port = rest.rpartition(":")
        return host.strip("[]"), int(port) if port.isdigit() else 0
    return text, 0


class GrpcProxy(Service):
    """The v2 endpoint of one broker.

    Args:
        controller: the broker (started before this, stopped after it).
    """

    def __init__(self, controller: BrokerController) -> None:
        super().__init__("grpc-proxy")
        self._controller = controller
        self._ctx = controller.ctx
        self._configured_port = controller.settings.broker.grpc_listen_port
        self._acl = controller.acl  # None: ACL off
        self.clients = ClientRegistry()
        self.pop = PopService(self._ctx)
        self.activities = MessagingActivities(self._ctx, self.pop, self.clients, 0)
        self.transactions = ProxyTransactions(self._ctx, controller.transactions, self.clients)
        self.activities.transactions = self.transactions
        self.timer = controller.timer  # started and stopped by the broker
        self.activities.delay_hook = self._delay
        self._server: aio.Server | None = None
        self.port = 0

    # -- lifecycle -----------------------------------------------------------------------

    async def on_start(self) -> None:
        """Replay POP state, then bind and serve."""
        await self.pop.start()
        server = aio.server(
            options=[
                ("grpc.max_receive_message_length", _MAX_INBOUND_BYTES),
                ("grpc.max_send_message_length", -1),
            ]
        )
        server.add_generic_rpc_handlers((self._handlers(),))
        port = max(self._configured_port, 0)
        try:
            self.port = server.add_insecure_port(f"0.0.0.0:{port}")
        except RuntimeError as exc:
            raise OSError(f"grpcListenPort {port}: cannot bind ({exc})") from exc
        if self.port == 0:
            raise OSError(f"grpcListenPort {port}: cannot bind")
        await server.start()
        self._server = server
        self.activities.grpc_port = self.port
        self.periodic(_CLIENT_SCAN_S, self._expire_clients, name="grpc-client-scan")
        # The broker's transaction check reaches gRPC producers through their Telemetry.
        self._controller.transaction_check.listener.other_producers = self.transactions.check
        log.info("gRPC messaging endpoint listening port=%d", self.port)

    async def on_shutdown(self) -> None:
        """End the Telemetry streams and long polls, stop serving, persist POP state."""
        self._controller.transaction_check.listener.other_producers = None
        self.clients.close_all()
        if self._server is not None:
            await self._server.stop(_SHUTDOWN_GRACE_S)
        await self.pop.shutdown()

    def _expire_clients(self) -> None:
        for client_id in self.clients.expire(self._ctx.clock.now_ms()):
            log.info("gRPC client expired client_id=%s", client_id)

    # -- method table --------------------------------------------------------------------

    def _handlers(self) -> grpc.GenericRpcHandler:
        a = self.activities
        unary: dict[str, tuple[type[Message], type[Message], _Unary]] = {
            "QueryRoute": (rpc.QueryRouteRequest, rpc.QueryRouteResponse, a.query_route),
            "Heartbeat": (rpc.HeartbeatRequest, rpc.HeartbeatResponse, a.heartbeat),
            "SendMessage": (rpc.SendMessageRequest, rpc.SendMessageResponse, a.send_message),
            "QueryAssignment": (
                rpc.QueryAssignmentRequest,
                rpc.QueryAssignmentResponse,
                a.query_assignment,
            ),
            "AckMessage": (rpc.AckMessageRequest, rpc.AckMessageResponse, a.ack_message),
            "ChangeInvisibleDuration": (
                rpc.ChangeInvisibleDurationRequest,
                rpc.ChangeInvisibleDurationResponse,
                a.change_invisible_duration,
            ),
            "ForwardMessageToDeadLetterQueue": (
                rpc.ForwardMessageToDeadLetterQueueRequest,
                rpc.ForwardMessageToDeadLetterQueueResponse,
                a.forward_message_to_dead_letter_queue,
            ),
            "EndTransaction": (
                rpc.EndTransactionRequest,
                rpc.EndTransactionResponse,
                self._end_transaction,
            ),
            "NotifyClientTermination": (
                rpc.NotifyClientTerminationRequest,
                rpc.NotifyClientTerminationResponse,
                a.notify_client_termination,
            ),
        }
        handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {
            name: grpc.unary_unary_rpc_method_handler(
                self._unary(name, resp, fn),
                request_deserializer=req.FromString,
                response_serializer=resp.SerializeToString,
            )
            for name, (req, resp, fn) in unary.items()
        }
        handlers["ReceiveMessage"] = grpc.unary_stream_rpc_method_handler(
            self._receive,
            request_deserializer=rpc.ReceiveMessageRequest.FromString,
            response_serializer=rpc.ReceiveMessageResponse.SerializeToString,
        )
        handlers["Telemetry"] = grpc.stream_stream_rpc_method_handler(
            self._telemetry,
            request_deserializer=rpc.TelemetryCommand.FromString,
            response_serializer=rpc.TelemetryCommand.SerializeToString,
        )
        return grpc.method_handlers_generic_handler(SERVICE_NAME, handlers)

    async def _delay(self, msg: MessageExtBrokerInner, now_ms: int) -> PutMessageResult:
        """A DELAY message: parked in the durable timer unless its time has come."""
        deliver = msg.properties.get(PROPERTY_TIMER_DELIVER_MS, "")
        if not deliver.isdigit() or int(deliver) <= now_ms:
            return await self._ctx.store.put_message(msg)
        return await self.timer.schedule(msg, int(deliver))

    def _end_transaction(
        self, req: rpc.EndTransactionRequest, call: CallInfo
    ) -> Awaitable[rpc.EndTransactionResponse]:
        return self.transactions.end_transaction(req, f"{call.client_id}@{call.peer[0]}")

    def _unary(
        self, name: str, response: type[Message], fn: _Unary
    ) -> Callable[[Message, _Context], Awaitable[Message]]:
        async def handle(request: Message, context: _Context) -> Message:
            client_id = _client_id(context)
            if not client_id:
                code, text = pb.Code.CLIENT_ID_REQUIRED, f"{CLIENT_ID_HEADER} is required"
                return response(status=status(code, text))
            denied = self._denied(context, name, request)
            if denied is not None:
                return response(status=unauthorized(denied))
            self.clients.touch(client_id, self._ctx.clock.now_ms())
            try:
                result = fn(request, CallInfo(client_id, _peer(context)))
                if not isinstance(result, Message):
                    result = await result
                return result
            except ProxyError as exc:
                return response(status=status(exc.code, exc.message))
            except Exception as exc:
                log.exception("gRPC %s failed client_id=%s", name, client_id)
                return response(status=status(pb.Code.INTERNAL_SERVER_ERROR, repr(exc)[:200]))

        return handle

    def _denied(self, context: _Context, method: str, request: Message | None) -> str | None:
        """With ACL on: why the call is refused (``proxy.auth``), else None."""
        if self._acl is None:
            return None
        metadata = _metadata(context)
        return refusal(self._acl.current(), metadata, _peer(context)[0], method, request)

    async def _receive(
        self, request: rpc.ReceiveMessageRequest, context: aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[rpc.ReceiveMessageResponse]:
        def failed(code: pb.Code, text: str) -> list[rpc.ReceiveMessageResponse]:
            now = self._ctx.clock.now_ms()
            return [
                rpc.ReceiveMessageResponse(status=status(code, text)),
                rpc.ReceiveMessageResponse(delivery_timestamp={"seconds": now // 1000}),
            ]

        denied = self._denied(context, "ReceiveMessage", request)
        if not _client_id(context):
            entries = failed(pb.Code.CLIENT_ID_REQUIRED, f"{CLIENT_ID_HEADER} is required")
        elif denied is not None:
            entries = failed(pb.Code.UNAUTHORIZED, denied)
        else:
            self.clients.touch(_client_id(context), self._ctx.clock.now_ms())
            try:
                entries = await self.activities.receive_message(
                    request, context.time_remaining(), _client_id(context)
                )
            except ProxyError as exc:
                entries = failed(exc.code, exc.message)
            except Exception as exc:
                log.exception("gRPC ReceiveMessage failed")
                entries = failed(pb.Code.INTERNAL_SERVER_ERROR, repr(exc)[:200])
        for entry in entries:
            yield entry

    # -- Telemetry -----------------------------------------------------------------------

    async def _telemetry(
        self,
        requests: AsyncIterator[rpc.TelemetryCommand],
        context: aio.ServicerContext[Any, Any],
    ) -> AsyncIterator[rpc.TelemetryCommand]:
        """Answer every settings command with the merged settings; relay server
        commands (transaction checks) queued for this client; end when the client
        ends its side or the proxy stops."""
        client_id = _client_id(context)
        if not client_id:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{CLIENT_ID_HEADER} is required")
        denied = self._denied(context, "Telemetry", None)
        if denied is not None:  # refused in band, as the settings reply would come
            yield rpc.TelemetryCommand(status=unauthorized(denied))
            return
        state = self.clients.touch(client_id, self._ctx.clock.now_ms())
        queue: asyncio.Queue[rpc.TelemetryCommand | None] = asyncio.Queue()
        state.streams.append(queue)

        def check(command: rpc.TelemetryCommand) -> str | None:
            return self._denied(context, "Telemetry", command)

        reader = asyncio.create_task(self._read_telemetry(requests, state, queue, check))
        try:
            while (command := await queue.get()) is not None:
                yield command
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
            if queue in state.streams:
                state.streams.remove(queue)

    async def _read_telemetry(
        self,
        requests: AsyncIterator[rpc.TelemetryCommand],
        state: ClientState,
        queue: asyncio.Queue[rpc.TelemetryCommand | None],
        check: Callable[[rpc.TelemetryCommand], str | None],
    ) -> None:
        try:
            async for command in requests:
                state.last_seen_ms = self._ctx.clock.now_ms()
                if command.HasField("settings"):
                    denied = check(command)
                    if denied is not None:
                        queue.put_nowait(rpc.TelemetryCommand(status=unauthorized(denied)))
                        continue
                    queue.put_nowait(self._settings_reply(state, command.settings))
                # Replies to server commands (stack traces, verify results) need nothing.
        except Exception as exc:  # the client went away mid-stream
            log.debug("telemetry stream of %s ended: %r", state.client_id, exc)
        finally:
            queue.put_nowait(None)

    def _settings_reply(self, state: ClientState, settings: pb.Settings) -> rpc.TelemetryCommand:
        if not (settings.HasField("publishing") or settings.HasField("subscription")):
            text = "settings have neither publishing nor subscription"
            return rpc.TelemetryCommand(status=status(pb.Code.BAD_REQUEST, text))
        state.settings = settings
        group = None
        if settings.HasField("subscription"):
            state.group = settings.subscription.group.name
            group = self.activities.subscription_defaults(state.group)
        max_body = self._ctx.store_config.max_message_size
        return rpc.TelemetryCommand(
            status=status(), settings=merged_settings(settings, max_body, group)
        )
