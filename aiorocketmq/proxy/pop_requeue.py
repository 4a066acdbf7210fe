"""Copies of popped messages: into the group's pop-retry topic (a redelivery with
one more attempt) or into ``%DLQ%<group>`` (RocketMQ 5's ``PopReviveService.reviveRetry``
and the proxy's DLQ forwarding).

Owns: finding a popped message by its queue offset, the copy's properties
(``RETRY_TOPIC`` = the topic the client subscribed to, ``ORIGIN_MESSAGE_ID``,
``DLQ_ORIGIN_*`` for dead letters), and creating both topics on demand (one
queue, RW, as RocketMQ).

Must not: keep state.
"""

from __future__ import annotations

from aiorocketmq.broker.context import BrokerContext
from aiorocketmq.broker.stored_copy import inner_from_stored, join_properties
from aiorocketmq.common.constants import PERM_READ, PERM_WRITE, dlq_topic
from aiorocketmq.common.message import MessageExt
from aiorocketmq.common.properties import MessageConst
from aiorocketmq.proxy.status import ProxyError
from aiorocketmq.proxy.v2 import definition_pb2 as pb
from aiorocketmq.store.inner_message import MessageExtBrokerInner

__all__ = ["Requeue", "pop_retry_topic"]

_C = MessageConst
_RW = PERM_READ | PERM_WRITE


def pop_retry_topic(group: str, topic: str) -> str:
    """RocketMQ 5's v1 pop-retry topic (``KeyBuilder.buildPopRetryTopicV1``)."""
    return f"%RETRY%{group}_{topic}"


def original_topic(message: MessageExt) -> str:
    """The topic a consumer subscribed to, for a message or a retry copy of it."""
    return message.properties.get(_C.PROPERTY_RETRY_TOPIC) or message.topic


class Requeue:
    """Reads popped messages back and stores their copies.

    Args:
        ctx: the broker's parts.
    """

    def __init__(self, ctx: BrokerContext) -> None:
        self._ctx = ctx

    async def look(self, topic: str, queue_id: int, queue_offset: int) -> MessageExt | None:
        """The message at a queue offset, or None when it is gone (read in a thread
        first when it left memory: a revive comes long after the receive)."""
        store = self._ctx.store
        if not store.get_min_offset_in_queue(topic, queue_id) <= queue_offset:
            return None
        physical = store.get_commit_log_offset_in_queue(topic, queue_id, queue_offset)
        message = await store.read_ahead.read_message(physical)
        if message is None or message.topic != topic or message.queue_offset != queue_offset:
            return None
        return message

    async def to_retry(self, group: str, message: MessageExt) -> None:
        """Store ``message`` again in the group's pop-retry topic, attempt + 1."""
        topic = pop_retry_topic(group, original_topic(message))
        self._ctx.topics.create_topic_in_send_message_back_method(topic, 1, _RW, 0)
        await self._put(self._copy(message, topic, message.reconsume_times + 1))

    async def to_dlq(self, group: str, message: MessageExt) -> None:
        """Store ``message`` in ``%DLQ%<group>``."""
        topic = dlq_topic(group)
        self._ctx.topics.create_topic_in_send_message_back_method(topic, 1, _RW, 0)
        copy = self._copy(message, topic, message.reconsume_times)
        copy.properties["DLQ_ORIGIN_TOPIC"] = original_topic(message)
        copy.properties["DLQ_ORIGIN_MESSAGE_ID"] = (
            message.properties.get(_C.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or message.msg_id
        )
        copy.properties_string = join_properties(copy.properties)
        await self._put(copy)

    def _copy(self, message: MessageExt, topic: str, reconsume: int) -> MessageExtBrokerInner:
        props = dict(message.properties)
        props.setdefault(_C.PROPERTY_RETRY_TOPIC, message.topic)
        if not props.get(_C.PROPERTY_ORIGIN_MESSAGE_ID, "").strip():
            props[_C.PROPERTY_ORIGIN_MESSAGE_ID] = message.msg_id
        props.pop(_C.PROPERTY_DELAY_TIME_LEVEL, None)  # never through the schedule topic
        props.pop(_C.PROPERTY_WAIT_STORE_MSG_OK, None)
        return inner_from_stored(
            message, topic=topic, queue_id=0, properties=props,
            store_host=self._ctx.store_host, reconsume_times=reconsume,
        )  # fmt: skip

    async def _put(self, msg: MessageExtBrokerInner) -> None:
        result = await self._ctx.store.put_message(msg)
        if not result.ok:
            raise ProxyError(
                pb.Code.INTERNAL_SERVER_ERROR,
                f"copy to {msg.topic} not stored: {result.status.name}",
            )
