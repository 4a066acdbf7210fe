"""Offset requests: QUERY/UPDATE_CONSUMER_OFFSET and the store offset queries.

Owns: QUERY_CONSUMER_OFFSET (14) and UPDATE_CONSUMER_OFFSET (15) of RocketMQ
4.9.8's ``ConsumerManageProcessor``, and GET_MAX_OFFSET (30), GET_MIN_OFFSET (31),
SEARCH_OFFSET_BY_TIMESTAMP (29) and GET_EARLIEST_MSG_STORETIME (32) of its
``AdminBrokerProcessor``; every value answered as a string.

Must not: persist offsets (``ConsumerOffsetFlushService`` does) or answer
GET_CONSUMER_LIST_BY_GROUP (``client_manage``).

Java's rules kept: a group with no committed offset on a queue whose ConsumeQueue
still starts at 0 with its first message not yet swapped out answers SUCCESS "0"
(a new group reads from the start); otherwise QUERY_NOT_FOUND. A negative commit
is ignored (``ConsumerOffsetManager.commit_offset``) and still answered SUCCESS.
The four store queries always answer SUCCESS.

On a master, QUERY_CONSUMER_OFFSET first waits (bounded) for a pending catch-up
of its slaves' offsets (``broker/ha/offset_catchup.py``).
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Final, Protocol

from aiorocketmq.broker.context import BrokerContext
from aiorocketmq.remoting.broker_headers import (
    GetEarliestMsgStoretimeResponseHeader,
    OffsetResponseHeader,
    QueryConsumerOffsetRequestHeader,
    SearchOffsetRequestHeader,
    TopicQueueRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.connection import ProcessorTable, RemotingConnection

__all__ = ["QUERY_NOT_FOUND_REMARK", "ConsumerManageProcessor", "OffsetGate"]

QUERY_NOT_FOUND_REMARK: Final = "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first"


def _offset_reply(request: RemotingCommand, offset: int) -> RemotingCommand:
    return request.response_to(
        ResponseCode.SUCCESS, None, OffsetResponseHeader(offset).to_ext_fields()
    )


class OffsetGate(Protocol):
    """What QUERY_CONSUMER_OFFSET waits for on a master (``SlaveOffsetCatchUp``)."""

    @property
    def caught_up(self) -> bool:
        """Nothing to wait for."""
        ...

    async def wait_caught_up(self) -> bool:
        """Wait, bounded; False when the bound was reached."""
        ...


class ConsumerManageProcessor:
    """Consumer offsets and the store's per-queue offsets for one broker.

    Args:
        ctx: the broker's parts.
        gate: on a master, the slave-offset catch-up: a query that arrives while
            it runs waits for it (bounded), so a restarted master never answers
            an offset older than what consumers committed to its slave.
    """

    def __init__(self, ctx: BrokerContext, gate: OffsetGate | None = None) -> None:
        self._ctx = ctx
        self._gate = gate

    def register(self, table: ProcessorTable) -> None:
        """Register the six offset codes."""
        table.register(RequestCode.QUERY_CONSUMER_OFFSET, self.query_consumer_offset)
        table.register(RequestCode.UPDATE_CONSUMER_OFFSET, self.update_consumer_offset)
        table.register(RequestCode.GET_MAX_OFFSET, self.get_max_offset)
        table.register(RequestCode.GET_MIN_OFFSET, self.get_min_offset)
        table.register(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, self.search_offset_by_timestamp)
        table.register(RequestCode.GET_EARLIEST_MSG_STORETIME, self.get_earliest_msg_storetime)

    def query_consumer_offset(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand | Awaitable[RemotingCommand]:
        """QUERY_CONSUMER_OFFSET: the committed offset, "0" for a fresh queue, or 22.

        While the catch-up gate is closed the answer waits for it (an awaitable);
        otherwise it is immediate.
        """
        header = QueryConsumerOffsetRequestHeader.from_ext_fields(request.ext_fields)
        if self._gate is not None and not self._gate.caught_up:
            return self._query_after_gate(self._gate, header, request)
        return self._query(header, request)

    async def _query_after_gate(
        self,
        gate: OffsetGate,
        header: QueryConsumerOffsetRequestHeader,
        request: RemotingCommand,
    ) -> RemotingCommand:
        await gate.wait_caught_up()
        return self._query(header, request)

    def _query(
        self, header: QueryConsumerOffsetRequestHeader, request: RemotingCommand
    ) -> RemotingCommand:
        ctx = self._ctx
        offset = ctx.offsets.query_offset(header.consumer_group, header.topic, header.queue_id)
        if offset >= 0:
            return _offset_reply(request, offset)
        min_offset = ctx.store.get_min_offset_in_queue(header.topic, header.queue_id)
        if min_offset <= 0 and not ctx.store.check_in_disk_by_consume_offset(
            header.topic, header.queue_id, 0
        ):
            return _offset_reply(request, 0)
        return request.response_to(ResponseCode.QUERY_NOT_FOUND, QUERY_NOT_FOUND_REMARK)

    def update_consumer_offset(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        """UPDATE_CONSUMER_OFFSET: store a commit (negative ones ignored); always SUCCESS."""
        header = UpdateConsumerOffsetRequestHeader.from_ext_fields(request.ext_fields)
        self._ctx.offsets.commit_offset(
            conn.remote_address,
            header.consumer_group,
            header.topic,
            header.queue_id,
            header.commit_offset,
        )
        return request.response_to(ResponseCode.SUCCESS)

    def get_max_offset(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """GET_MAX_OFFSET: the queue's max offset (0 for an unknown queue)."""
        header = TopicQueueRequestHeader.from_ext_fields(request.ext_fields)
        return _offset_reply(
            request, self._ctx.store.get_max_offset_in_queue(header.topic, header.queue_id)
        )

    def get_min_offset(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """GET_MIN_OFFSET: the queue's min offset (0 for an unknown queue)."""
        header = TopicQueueRequestHeader.from_ext_fields(request.ext_fields)
        return _offset_reply(
            request, self._ctx.store.get_min_offset_in_queue(header.topic, header.queue_id)
        )

    def search_offset_by_timestamp(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        """SEARCH_OFFSET_BY_TIMESTAMP: the store's ``getOffsetInQueueByTime``."""
        header = SearchOffsetRequestHeader.from_ext_fields(request.ext_fields)
        offset = self._ctx.store.get_offset_in_queue_by_time(
            header.topic, header.queue_id, header.timestamp
        )
        return _offset_reply(request, offset)

    def get_earliest_msg_storetime(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        """GET_EARLIEST_MSG_STORETIME: the first message's store time (-1 when none)."""
        header = TopicQueueRequestHeader.from_ext_fields(request.ext_fields)
        timestamp = self._ctx.store.get_earliest_message_time(header.topic, header.queue_id)
        fields = GetEarliestMsgStoretimeResponseHeader(timestamp).to_ext_fields()
        return request.response_to(ResponseCode.SUCCESS, None, fields)
