"""INVOKE_BROKER_TO_RESET_OFFSET (222) and QUERY_TOPIC_CONSUME_BY_WHO (300).

Owns: RocketMQ 4.9.8's ``AdminBrokerProcessor.resetOffset`` /
``Broker2Client.resetOffset`` and ``queryTopicConsumeByWho``, plus their wire
pieces (``ResetOffsetRequestHeader``, ``ResetOffsetBody`` and its C++ list form,
RESET_CONSUMER_CLIENT_OFFSET's request) so mqadmin can use the same types.

* 222: for every write queue of the topic, the offset at ``timestamp`` (-1: the
  queue's max offset; a negative store answer becomes 0); with ``isForce`` false
  a queue keeps its committed offset unless the new one is smaller. Every online
  client of the group (client version >= V3_0_7_SNAPSHOT) gets
  RESET_CONSUMER_CLIENT_OFFSET (220) oneway with the table; the reply is SUCCESS
  with ``ResetOffsetBody``. As Java, the broker does not commit the offsets
  itself: the clients do. SYSTEM_ERROR when the topic is unknown here, the group
  has no committed offset on a queue, or a client is too old; CONSUMER_NOT_ONLINE
  when no client of the group is connected (mqadmin then falls back to the old
  way, UPDATE_CONSUMER_OFFSET per queue). A request in language CPP gets the C++
  body (a list of ``MessageQueueForC``) sent to its clients.
* 300: the groups consuming ``topic``: connected groups subscribed to it and groups
  with committed offsets on it, as ``{"groupList":[...]}`` (sorted).

Must not: persist offsets or wait for clients (notifications are oneway; one that
fails is logged and the others still go).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Final

from aiorocketmq.broker.context import BrokerContext
from aiorocketmq.common import fastjson as fj
from aiorocketmq.common.admin_bodies import ResetOffsetBody
from aiorocketmq.common.message import MessageQueue
from aiorocketmq.remoting.broker_admin_headers import ResetOffsetRequestHeader
from aiorocketmq.remoting.codes import LanguageCode, RequestCode, ResponseCode
from aiorocketmq.remoting.command import RPC_ONEWAY, RemotingCommand
from aiorocketmq.remoting.connection import ProcessorTable, RemotingConnection
from aiorocketmq.remoting.errors import RemotingError
from aiorocketmq.remoting.headers import ext_str

__all__ = [
    "MIN_RESET_CLIENT_VERSION",
    "OnewaySender",
    "ResetOffsetBody",
    "ResetOffsetProcessor",
    "ResetOffsetRequestHeader",
    "reset_consumer_client_offset_request",
]

log = logging.getLogger(__name__)

#: How a oneway request goes to a client (``RemotingServer.invoke_oneway`` bound).
OnewaySender = Callable[[RemotingConnection, RemotingCommand, float], Awaitable[None]]

MIN_RESET_CLIENT_VERSION: Final = 28
"""``MQVersion.Version.V3_0_7_SNAPSHOT.ordinal()``: older clients cannot be reset."""
RESET_ONEWAY_TIMEOUT_S: Final = 5.0
"""Java's 5000 ms oneway timeout for RESET_CONSUMER_CLIENT_OFFSET."""


def reset_consumer_client_offset_request(
    header: ResetOffsetRequestHeader, body: ResetOffsetBody, for_c: bool = False
) -> RemotingCommand:
    """RESET_CONSUMER_CLIENT_OFFSET (220), oneway, to one client of the group."""
    return RemotingCommand(
        code=RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
        flag=RPC_ONEWAY,
        language=LanguageCode.JAVA,
        ext_fields=header.to_ext_fields(),
        body=body.encode_for_c() if for_c else body.encode(),
    )


async def _connection_oneway(
    conn: RemotingConnection, request: RemotingCommand, timeout_s: float
) -> None:
    await conn.invoke_oneway(request, timeout_s)


class ResetOffsetProcessor:
    """Handles INVOKE_BROKER_TO_RESET_OFFSET and QUERY_TOPIC_CONSUME_BY_WHO.

    Args:
        ctx: the broker's parts (topics, offsets, store, consumers, broker name).
        invoke_oneway: how RESET_CONSUMER_CLIENT_OFFSET goes to a client; the
            controller passes ``RemotingServer.invoke_oneway`` (default: the
            connection's own ``invoke_oneway``).

    Attributes:
        notified: RESET_CONSUMER_CLIENT_OFFSET requests written so far.
    """

    def __init__(self, ctx: BrokerContext, invoke_oneway: OnewaySender | None = None) -> None:
        self._ctx = ctx
        self._invoke_oneway = invoke_oneway or _connection_oneway
        self.notified = 0

    def register(self, table: ProcessorTable) -> None:
        """Register INVOKE_BROKER_TO_RESET_OFFSET and QUERY_TOPIC_CONSUME_BY_WHO."""
        table.register(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, self.reset_offset)
        table.register(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, self.query_topic_consume_by_who)

    def query_topic_consume_by_who(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        """QUERY_TOPIC_CONSUME_BY_WHO: online subscribers and groups with offsets."""
        topic = ext_str(request.ext_fields, "topic")
        groups = self._ctx.consumers.groups_of_topic(topic)
        groups |= self._ctx.offsets.which_group_by_topic(topic)
        body = fj.dumps_bytes({"groupList": sorted(groups)})
        return request.response_to(ResponseCode.SUCCESS, None, None, body)

    def compute_offsets(
        self, header: ResetOffsetRequestHeader
    ) -> dict[MessageQueue, int] | tuple[int, str]:
        """The per-queue offsets to reset to, or the error ``(code, remark)``."""
        ctx = self._ctx
        topic_config = ctx.topics.select_topic_config(header.topic)
        if topic_config is None:
            remark = (
                f"[reset-offset] reset offset failed, no topic in this broker. topic={header.topic}"
            )
            return ResponseCode.SYSTEM_ERROR, remark
        table: dict[MessageQueue, int] = {}
        for queue_id in range(topic_config.write_queue_nums):
            mq = MessageQueue(header.topic, ctx.config.broker_name, queue_id)
            committed = ctx.offsets.query_offset(header.group, header.topic, queue_id)
            if committed == -1:
                return ResponseCode.SYSTEM_ERROR, f"THe consumer group <{header.group}> not exist"
            if header.timestamp == -1:
                offset = ctx.store.get_max_offset_in_queue(header.topic, queue_id)
            else:
                offset = ctx.store.get_offset_in_queue_by_time(
                    header.topic, queue_id, header.timestamp
                )
            if offset < 0:
                log.warning(
                    "reset offset is invalid. topic=%s, queueId=%d, timeStampOffset=%d",
                    header.topic, queue_id, offset,
                )  # fmt: skip
                offset = 0
            table[mq] = offset if header.is_force or offset < committed else committed
        return table

    async def reset_offset(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        """INVOKE_BROKER_TO_RESET_OFFSET: compute, tell the group's clients, reply the table."""
        header = ResetOffsetRequestHeader.from_ext_fields(request.ext_fields)
        computed = self.compute_offsets(header)
        if isinstance(computed, tuple):
            return request.response_to(*computed)
        body = ResetOffsetBody(computed)
        group = self._ctx.consumers.get_group(header.group)
        channels = [] if group is None else list(group.channels.values())
        if not channels:
            remark = (
                "Consumer not online, so can not reset offset, Group: "
                f"{header.group} Topic: {header.topic} Timestamp: {header.timestamp}"
            )
            log.error(remark)
            return request.response_to(ResponseCode.CONSUMER_NOT_ONLINE, remark)
        too_old = [info for info in channels if info.version < MIN_RESET_CLIENT_VERSION]
        if too_old:
            # Java stops at the first old client, after notifying those before it; we
            # check first so that no client is reset while the reply says failure.
            return request.response_to(
                ResponseCode.SYSTEM_ERROR,
                f"the client does not support this feature. version={too_old[0].version}",
            )
        notify = reset_consumer_client_offset_request(
            header, body, for_c=request.language is LanguageCode.CPP
        )
        for info in channels:
            channel = info.channel
            if not isinstance(channel, RemotingConnection) or channel.is_closed:
                continue
            try:
                await self._invoke_oneway(channel, notify, RESET_ONEWAY_TIMEOUT_S)
            except RemotingError as exc:
                log.error(
                    "[reset-offset] reset offset exception. topic=%s, group=%s, error=%s",
                    header.topic, header.group, exc,
                )  # fmt: skip
                continue
            self.notified += 1
            log.info(
                "[reset-offset] reset offset success. topic=%s, group=%s, clientId=%s",
                header.topic, header.group, info.client_id,
            )  # fmt: skip
        return request.response_to(ResponseCode.SUCCESS, None, None, body.encode())
