"""The unary v2 RPCs and ReceiveMessage, as RocketMQ 5's proxy activities do them in
local mode (specs/grpc-v5.md §3): QueryRoute, Heartbeat, SendMessage,
QueryAssignment, ReceiveMessage, AckMessage, ChangeInvisibleDuration,
ForwardMessageToDeadLetterQueue, NotifyClientTermination.

Owns: request checks with their v2 codes, topic and group lookups (auto-create as
the broker's settings allow), server-side queue choice, routes whose endpoints are
those the client used (so a client behind NAT or a compose network reaches the
broker the way it reached the access point), and the receive stream's entries.

Must not: hold POP state (``pop``), convert messages (``convert``), or touch gRPC
transport objects (``server`` passes plain values in).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

from google.protobuf.timestamp_pb2 import Timestamp

from aiorocketmq.broker.context import BrokerContext
from aiorocketmq.broker.transaction.half_service import put_half_message
from aiorocketmq.common.constants import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    is_readable,
    is_writeable,
)
from aiorocketmq.common.errors import RemoteProtocolError
from aiorocketmq.common.subscription_group import SubscriptionGroupConfig
from aiorocketmq.common.tag_hash import java_string_hash
from aiorocketmq.common.topic_attributes import MIXED, topic_message_type
from aiorocketmq.common.topic_config import TopicConfig
from aiorocketmq.common.validators import validate_group, validate_topic
from aiorocketmq.proxy.clients import LONG_POLLING_MS, ClientRegistry, SubscriptionDefaults
from aiorocketmq.proxy.convert import (
    check_message,
    message_type_of,
    sent_message_type,
    to_stored,
    to_v2,
)
from aiorocketmq.proxy.pop import PopRequest, PopService, TagFilter
from aiorocketmq.proxy.status import PUT_STATUS_CODES, ProxyError, status
from aiorocketmq.proxy.transactions import ProxyTransactions
from aiorocketmq.proxy.v2 import definition_pb2 as pb
from aiorocketmq.proxy.v2 import service_pb2 as rpc
from aiorocketmq.store.inner_message import MessageExtBrokerInner
from aiorocketmq.store.results import PutMessageResult

__all__ = ["CallInfo", "DelayHook", "MessagingActivities"]

log = logging.getLogger(__name__)

ALL_MESSAGE_TYPES: Final = (
    pb.MessageType.NORMAL,
    pb.MessageType.FIFO,
    pb.MessageType.DELAY,
    pb.MessageType.TRANSACTION,
)
"""What a MIXED topic accepts: every type but LITE and PRIORITY."""
_ACCEPTED_TYPES: Final = {
    "NORMAL": (pb.MessageType.NORMAL,),
    "FIFO": (pb.MessageType.FIFO,),
    "DELAY": (pb.MessageType.DELAY,),
    "TRANSACTION": (pb.MessageType.TRANSACTION,),
    MIXED: ALL_MESSAGE_TYPES,
}
"""Routes' ``accept_message_types`` by topic type (RocketMQ 5's mapping; any other type,
UNSPECIFIED included, accepts nothing: [MESSAGE_TYPE_UNSPECIFIED]). The SDKs refuse
locally to send a type not listed; ``SendMessage`` refuses it again."""


def accepted_message_types(config: TopicConfig) -> tuple[pb.MessageType, ...]:
    """What a route of ``config``'s topic advertises: its ``message.type`` attribute
    (``mqadmin updateTopic -a +message.type=FIFO``); a topic without one, a 4.x topic,
    is MIXED (``common.topic_attributes``)."""
    kind = topic_message_type(config.attributes_map)
    return _ACCEPTED_TYPES.get(kind, (pb.MessageType.MESSAGE_TYPE_UNSPECIFIED,))


def check_topic_message_type(config: TopicConfig, kind: pb.MessageType) -> None:
    """RocketMQ 5's ``DefaultTopicMessageTypeValidator``: a message's type must be its
    topic's unless the topic is MIXED; retry and DLQ topics are not checked.

    Raises:
        ProxyError: MESSAGE_PROPERTY_CONFLICT_WITH_TYPE.
    """
    name = config.topic_name
    if name.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)):
        return
    expected = topic_message_type(config.attributes_map)
    actual = pb.MessageType.Name(kind)
    if expected not in (MIXED, actual):
        raise ProxyError(
            pb.Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
            f"TopicMessageType validate failed, the expected type is {expected}, "
            f"but actual type is {actual}",
        )


_MAX_BATCH: Final = 32
_RELEASE_MS: Final = 1_000  # a terminated push consumer's messages: visible in 1 s
_MIN_INVISIBLE_MS: Final = 10_000
_MAX_INVISIBLE_MS: Final = 12 * 3600 * 1000
_POLL_MARGIN_MS: Final = 1_500


DelayHook = Callable[[MessageExtBrokerInner, int], Awaitable[PutMessageResult]]
"""Stores a DELAY message (a durable timer; ``timer``) given it and the time now."""


@dataclass(frozen=True, slots=True)
class CallInfo:
    """What the server read from a call: client id and peer address."""

    client_id: str
    peer: tuple[str, int]


def _ms(duration_seconds: int, nanos: int) -> int:
    return duration_seconds * 1000 + nanos // 1_000_000


def now_timestamp(now_ms: int) -> Timestamp:
    """A protobuf timestamp of ``now_ms``."""
    return Timestamp(seconds=now_ms // 1000, nanos=(now_ms % 1000) * 1_000_000)


class MessagingActivities:
    """The RPCs of one broker's proxy.

    Args:
        ctx: the broker's parts.
        pop: POP state.
        clients: the gRPC client registry.
        grpc_port: the endpoint's port (for routes when a client names none).
    """

    def __init__(
        self, ctx: BrokerContext, pop: PopService, clients: ClientRegistry, grpc_port: int
    ) -> None:
        self._ctx = ctx
        self._pop = pop
        self._clients = clients
        self.grpc_port = grpc_port
        self._round_robin = itertools.count()
        self.delay_hook: DelayHook | None = None
        self.transactions: ProxyTransactions | None = None

    # -- lookups -------------------------------------------------------------------------

    def topic_config(self, topic: str, peer: str = "", *, create: bool = False) -> TopicConfig:
        """A client topic's config (auto-created when allowed and asked).

        Raises:
            ProxyError: ILLEGAL_TOPIC (bad or system name), TOPIC_NOT_FOUND.
        """
        remark = validate_topic(topic)
        if remark is not None:
            raise ProxyError(pb.Code.ILLEGAL_TOPIC, remark)
        topics = self._ctx.topics
        if topics.is_system_topic(topic) or topic.startswith(("rmq_sys_", "%")):
            raise ProxyError(pb.Code.ILLEGAL_TOPIC, f"topic {topic} is a system topic")
        config = topics.select_topic_config(topic)
        if config is None and create and self._ctx.config.auto_create_topic_enable:
            config = topics.create_topic_in_send_message_method(
                topic,
                AUTO_CREATE_TOPIC_KEY_TOPIC,
                peer,
                self._ctx.config.default_topic_queue_nums,
                0,
            )
        if config is None:
            raise ProxyError(pb.Code.TOPIC_NOT_FOUND, f"topic {topic} not found")
        return config

    def group_config(self, group: str) -> SubscriptionGroupConfig:
        """A consumer group's config (auto-created when allowed).

        Raises:
            ProxyError: ILLEGAL_CONSUMER_GROUP, CONSUMER_GROUP_NOT_FOUND, FORBIDDEN.
        """
        remark = validate_group(group)
        if remark is not None:
            raise ProxyError(pb.Code.ILLEGAL_CONSUMER_GROUP, remark)
        config = self._ctx.groups.find_subscription_group_config(group)
        if config is None:
            raise ProxyError(pb.Code.CONSUMER_GROUP_NOT_FOUND, f"group {group} not found")
        if not config.consume_enable:
            raise ProxyError(pb.Code.FORBIDDEN, f"group {group} may not consume")
        return config

    def subscription_defaults(self, group: str) -> SubscriptionDefaults | None:
        """The settings-reply values of a group, or None when it cannot be had."""
        try:
            config = self.group_config(group)
        except ProxyError:
            return None
        return SubscriptionDefaults(config.retry_max_times + 1, config.consume_message_orderly)

    # -- routes --------------------------------------------------------------------------

    def _endpoints(self, asked: pb.Endpoints) -> pb.Endpoints:
        if asked.addresses:
            return asked
        host = self._ctx.store_host[0]
        return pb.Endpoints(
            scheme=pb.AddressScheme.IPv4, addresses=[pb.Address(host=host, port=self.grpc_port)]
        )

    def _queues(self, topic: str, endpoints: pb.Endpoints) -> list[pb.MessageQueue]:
        """Java's per-broker queue list: ids from 0, broker id 0 (Node uses queue 0)."""
        config = self.topic_config(topic, create=True)
        broker = pb.Broker(name=self._ctx.config.broker_name, id=0, endpoints=endpoints)
        perm = config.perm & self._ctx.config.broker_permission
        accepted = accepted_message_types(config)
        out = []
        for qid in range(max(config.read_queue_nums, config.write_queue_nums, 1)):
            readable = is_readable(perm) and qid < config.read_queue_nums
            writeable = is_writeable(perm) and qid < config.write_queue_nums
            permission = (
                pb.Permission.READ_WRITE
                if readable and writeable
                else pb.Permission.READ
                if readable
                else pb.Permission.WRITE
                if writeable
                else pb.Permission.NONE
            )
            out.append(
                pb.MessageQueue(
                    topic=pb.Resource(name=topic),
                    id=qid,
                    permission=permission,
                    broker=broker,
                    accept_message_types=accepted,
                )
            )
        return out

    def query_route(self, req: rpc.QueryRouteRequest, call: CallInfo) -> rpc.QueryRouteResponse:
        """QueryRoute: the topic's queues on this broker."""
        queues = self._queues(req.topic.name, self._endpoints(req.endpoints))
        return rpc.QueryRouteResponse(status=status(), message_queues=queues)

    def query_assignment(
        self, req: rpc.QueryAssignmentRequest, call: CallInfo
    ) -> rpc.QueryAssignmentResponse:
        """QueryAssignment: queue -1 ("any") unless the group is orderly."""
        group = self.group_config(req.group.name)
        queues = [
            q
            for q in self._queues(req.topic.name, self._endpoints(req.endpoints))
            if q.permission in (pb.Permission.READ, pb.Permission.READ_WRITE)
        ]
        if not queues:
            raise ProxyError(pb.Code.FORBIDDEN, "no readable queue")
        if not group.consume_message_orderly:
            any_queue = pb.MessageQueue()
            any_queue.CopyFrom(queues[0])
            any_queue.id = -1
            queues = [any_queue]
        return rpc.QueryAssignmentResponse(
            status=status(), assignments=[pb.Assignment(message_queue=q) for q in queues]
        )

    # -- clients -------------------------------------------------------------------------

    def heartbeat(self, req: rpc.HeartbeatRequest, call: CallInfo) -> rpc.HeartbeatResponse:
        """Heartbeat: the client is alive (a consumer's group must be usable)."""
        if req.HasField("group") and req.group.name:
            self.group_config(req.group.name)
        state = self._clients.touch(call.client_id, self._ctx.clock.now_ms())
        if req.HasField("group"):
            state.group = req.group.name
        return rpc.HeartbeatResponse(status=status())

    async def notify_client_termination(
        self, req: rpc.NotifyClientTerminationRequest, call: CallInfo
    ) -> rpc.NotifyClientTerminationResponse:
        """NotifyClientTermination: forget the client and end its streams; what it
        received as a push consumer and did not ack comes back in 1 s (RocketMQ 5's
        receipt handle manager on CLIENT_UNREGISTER), not after its whole invisible
        time."""
        state = self._clients.remove(call.client_id)
        if state is not None:
            for handle, group in state.in_flight.items():
                try:
                    await self._pop.change_invisible(group, handle, _RELEASE_MS)
                except ProxyError:  # acked, expired or gone meanwhile: nothing to release
                    continue
            state.in_flight.clear()
        return rpc.NotifyClientTerminationResponse(status=status())

    # -- send ----------------------------------------------------------------------------

    def _queue_for(self, msg: pb.Message, config: TopicConfig) -> int:
        """Server-side choice: a message group hashes to one queue; others round robin."""
        nums = config.write_queue_nums
        if nums <= 0 or not is_writeable(config.perm & self._ctx.config.broker_permission):
            raise ProxyError(pb.Code.FORBIDDEN, f"topic {config.topic_name} is not writeable")
        sysp = msg.system_properties
        if sysp.HasField("message_group"):
            return abs(java_string_hash(sysp.message_group)) % nums
        return next(self._round_robin) % nums

    async def send_message(
        self, req: rpc.SendMessageRequest, call: CallInfo
    ) -> rpc.SendMessageResponse:
        """SendMessage: every message checked first, then stored one by one."""
        if not req.messages:
            raise ProxyError(pb.Code.MESSAGE_CORRUPTED, "no message")
        topic = req.messages[0].topic.name
        if any(m.topic.name != topic for m in req.messages):
            raise ProxyError(pb.Code.MESSAGE_CORRUPTED, "messages of different topics")
        ctx = self._ctx
        now = ctx.clock.now_ms()
        config = self.topic_config(topic, f"{call.peer[0]}:{call.peer[1]}", create=True)
        for msg in req.messages:
            check_message(msg, ctx.store_config.max_message_size, now)
            check_topic_message_type(config, sent_message_type(msg))
        entries = [await self._send_one(msg, config, call, now) for msg in req.messages]
        codes = {e.status.code for e in entries}
        top = status(entries[0].status.code, entries[0].status.message)
        if len(codes) > 1:
            top = status(pb.Code.MULTIPLE_RESULTS, "multiple results")
        return rpc.SendMessageResponse(status=top, entries=entries)

    async def _send_one(
        self, msg: pb.Message, config: TopicConfig, call: CallInfo, now: int
    ) -> rpc.SendResultEntry:
        ctx = self._ctx
        stored = to_stored(
            msg,
            self._queue_for(msg, config),
            cluster=ctx.config.broker_cluster_name,
            peer_host=call.peer,
            store_host=ctx.store_host,
            now_ms=now,
        )
        kind = message_type_of(stored.properties)
        result: PutMessageResult
        if kind == pb.MessageType.TRANSACTION:
            if ctx.config.reject_transaction_message:
                raise ProxyError(pb.Code.FORBIDDEN, "transaction messages are refused")
            result = await put_half_message(ctx.store, stored)
            if result.ok and self.transactions is not None:
                self.transactions.record(
                    msg.system_properties.message_id,
                    msg.topic.name,
                    result.queue_offset,
                    result.physical_offset,
                )
        elif kind == pb.MessageType.DELAY and self.delay_hook is not None:
            result = await self.delay_hook(stored, now)
        else:
            result = await ctx.store.put_message(stored)
        message_id = msg.system_properties.message_id
        code = PUT_STATUS_CODES.get(result.status, pb.Code.INTERNAL_SERVER_ERROR)
        return rpc.SendResultEntry(
            status=status(code, result.status.name if code != pb.Code.OK else "OK"),
            message_id=message_id,
            transaction_id=message_id,
            offset=max(result.queue_offset, 0),
        )

    # -- receive -------------------------------------------------------------------------

    def _pop_request(self, req: rpc.ReceiveMessageRequest) -> PopRequest:
        group = self.group_config(req.group.name)
        topic = req.message_queue.topic.name
        self.topic_config(topic)
        expression = req.filter_expression
        if expression.type == pb.FilterType.SQL:
            raise ProxyError(pb.Code.ILLEGAL_FILTER_EXPRESSION, "SQL92 filtering is not supported")
        if req.auto_renew:
            invisible = self._ctx.config.pop_auto_renew_invisible_time_millis
        else:
            duration = req.invisible_duration
            invisible = _ms(duration.seconds, duration.nanos)
            if not _MIN_INVISIBLE_MS <= invisible <= _MAX_INVISIBLE_MS:
                raise ProxyError(
                    pb.Code.ILLEGAL_INVISIBLE_TIME,
                    f"invisible duration {invisible} ms is outside [10 s, 12 h]",
                )
        if req.batch_size <= 0:
            raise ProxyError(pb.Code.BAD_REQUEST, "batch size must be positive")
        return PopRequest(
            group.group_name,
            topic,
            min(req.batch_size, _MAX_BATCH),
            invisible,
            TagFilter.parse(expression.expression),
            group.consume_message_orderly,
        )

    def poll_ms(self, req: rpc.ReceiveMessageRequest, time_remaining_s: float | None) -> int:
        """Long-polling time: asked (≤ 20 s, as Java), ending before the call's deadline."""
        poll = LONG_POLLING_MS
        if req.HasField("long_polling_timeout"):
            poll = _ms(req.long_polling_timeout.seconds, req.long_polling_timeout.nanos)
        poll = min(max(poll, 0), LONG_POLLING_MS)
        if time_remaining_s is not None:
            poll = min(poll, int(time_remaining_s * 1000) - _POLL_MARGIN_MS)
        return max(poll, 0)

    async def receive_message(
        self, req: rpc.ReceiveMessageRequest, time_remaining_s: float | None, client_id: str = ""
    ) -> list[rpc.ReceiveMessageResponse]:
        """ReceiveMessage's stream entries: one status, the messages, the server time.
        A push consumer's (``auto_renew``) handles are remembered for its termination."""
        pop_req = self._pop_request(req)
        popped = await self._pop.receive(pop_req, self.poll_ms(req, time_remaining_s))
        now = self._ctx.clock.now_ms()
        out = []
        max_body = self._ctx.store_config.max_message_size
        for item in popped:
            try:
                message = to_v2(
                    item.message,
                    receipt_handle=item.handle.encode(),
                    delivery_attempt=item.attempt,
                    max_body=max_body,
                )
            except RemoteProtocolError as exc:
                log.warning("undeliverable stored message %s: %s", item.message.msg_id, exc)
                await self._pop.forward_to_dlq(pop_req.group, item.handle.encode())
                continue
            out.append(rpc.ReceiveMessageResponse(message=message))
        state = self._clients.get(client_id) if req.auto_renew else None
        if state is not None:
            state.track([e.message.system_properties.receipt_handle for e in out], pop_req.group)
        head = status() if out else status(pb.Code.MESSAGE_NOT_FOUND, "no new message")
        return [
            rpc.ReceiveMessageResponse(status=head),
            *out,
            rpc.ReceiveMessageResponse(delivery_timestamp=now_timestamp(now)),
        ]

    # -- ack / change invisible / DLQ ----------------------------------------------------

    async def ack_message(
        self, req: rpc.AckMessageRequest, call: CallInfo
    ) -> rpc.AckMessageResponse:
        """AckMessage: one status per entry; the top status their common code."""
        group = self.group_config(req.group.name).group_name
        entries = []
        state = self._clients.get(call.client_id)
        for entry in req.entries:
            if state is not None:
                state.in_flight.pop(entry.receipt_handle, None)
            try:
                await self._pop.ack(group, entry.receipt_handle)
                entry_status = status()
            except ProxyError as exc:
                entry_status = status(exc.code, exc.message)
            entries.append(
                rpc.AckMessageResultEntry(
                    message_id=entry.message_id,
                    receipt_handle=entry.receipt_handle,
                    status=entry_status,
                )
            )
        codes = {e.status.code for e in entries}
        if not entries:
            raise ProxyError(pb.Code.BAD_REQUEST, "no entry to ack")
        top = entries[0].status if len(codes) == 1 else status(pb.Code.MULTIPLE_RESULTS, "")
        return rpc.AckMessageResponse(status=top, entries=entries)

    async def change_invisible_duration(
        self, req: rpc.ChangeInvisibleDurationRequest, call: CallInfo
    ) -> rpc.ChangeInvisibleDurationResponse:
        """ChangeInvisibleDuration: [0, 12 h] from now; a new handle."""
        group = self.group_config(req.group.name).group_name
        invisible = _ms(req.invisible_duration.seconds, req.invisible_duration.nanos)
        if not 0 <= invisible <= _MAX_INVISIBLE_MS:
            raise ProxyError(pb.Code.ILLEGAL_INVISIBLE_TIME, "invisible duration outside [0, 12 h]")
        state = self._clients.get(call.client_id)
        if state is not None:  # a nack: the client chose when it comes back
            state.in_flight.pop(req.receipt_handle, None)
        handle = await self._pop.change_invisible(group, req.receipt_handle, invisible)
        return rpc.ChangeInvisibleDurationResponse(status=status(), receipt_handle=handle)

    async def forward_message_to_dead_letter_queue(
        self, req: rpc.ForwardMessageToDeadLetterQueueRequest, call: CallInfo
    ) -> rpc.ForwardMessageToDeadLetterQueueResponse:
        """ForwardMessageToDeadLetterQueue: copy to ``%DLQ%<group>``, then ack."""
        group = self.group_config(req.group.name).group_name
        state = self._clients.get(call.client_id)
        if state is not None:
            state.in_flight.pop(req.receipt_handle, None)
        await self._pop.forward_to_dlq(group, req.receipt_handle)
        return rpc.ForwardMessageToDeadLetterQueueResponse(status=status())
