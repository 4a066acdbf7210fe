"""CONSUMER_SEND_MSG_BACK (36): a consumer hands a failed message back for a retry.

Owns: RocketMQ 4.9.8's ``SendMessageProcessor.asyncConsumerSendMsgBack``, in its
order (specs/remoting.md §4.3, specs/store.md §13.3):

1. the subscription group must exist (SUBSCRIPTION_GROUP_NOT_EXIST) and the
   broker be writeable (NO_PERMISSION); a group with ``retryQueueNums <= 0``
   gets SUCCESS and nothing is stored;
2. ``%RETRY%<group>`` is created on demand (``retryQueueNums`` queues, perm RW,
   the unit-sub sysFlag in unit mode) and must be writeable (NO_PERMISSION);
3. the original is read by its CommitLog offset (SYSTEM_ERROR
   ``look message by offset failed, <offset>``);
4. ``RETRY_TOPIC`` = the original topic unless already set; ``WAIT`` = false;
5. ``reconsumeTimes >= maxReconsumeTimes`` (the group's ``retryMaxTimes``, or
   the header's ``maxReconsumeTimes`` from clients >= V3_4_9) or
   ``delayLevel < 0``: to ``%DLQ%<group>`` (``DLQ_NUMS_PER_GROUP`` queue, perm RW
   as 4.9.8 creates it) with ``DELAY`` = 0; otherwise ``DELAY`` = ``delayLevel``,
   or ``3 + reconsumeTimes`` when the request says 0, so the store routes it
   through ``SCHEDULE_TOPIC_XXXX`` (the store does the redirect);
6. the new message copies body (as stored, still compressed), flag, sysFlag,
   born host and time and store host; ``reconsumeTimes + 1``;
   ``ORIGIN_MESSAGE_ID`` = the original's, else its offset msgId;
7. a put that does not end PUT_OK answers SYSTEM_ERROR with the status name.

Must not: deliver delayed messages (``broker.schedule`` does) or duplicate the
send processor's helpers (``join_properties``, the FAQ suffix and the DLQ queue
count are imported from ``processors.send``).
"""

from __future__ import annotations

import logging
import random

from aiorocketmq.broker.context import BrokerContext
from aiorocketmq.broker.processors.send import (
    DLQ_NUMS_PER_GROUP,
    SUGGEST_TODO,
    TOPIC_SYS_FLAG_UNIT_SUB,
)
from aiorocketmq.broker.stored_copy import inner_from_stored
from aiorocketmq.common.constants import PERM_READ, PERM_WRITE, dlq_topic, is_writeable, retry_topic
from aiorocketmq.common.message import MessageExt
from aiorocketmq.common.properties import MessageConst
from aiorocketmq.common.subscription_group import SubscriptionGroupConfig
from aiorocketmq.common.topic_config import TopicConfig
from aiorocketmq.remoting.broker_headers import ConsumerSendMsgBackRequestHeader
from aiorocketmq.remoting.codes import MQVersion, RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.connection import ProcessorTable, RemotingConnection
from aiorocketmq.remoting.errors import ProcessorError
from aiorocketmq.store.inner_message import MessageExtBrokerInner
from aiorocketmq.store.results import PutMessageStatus

__all__ = ["SendBackProcessor"]

log = logging.getLogger(__name__)

#: Java's ``nextInt(99999999) % queueNums`` picks a queue uniformly enough.
_RANDOM_BOUND = 99999999
#: ``delayLevel == 0`` means the broker chooses: level 3 (10 s) for the first retry.
_FIRST_RETRY_LEVEL = 3


class SendBackProcessor:
    """Handles CONSUMER_SEND_MSG_BACK for one broker.

    Args:
        ctx: the broker's parts (groups, topics, store, config).
    """

    def __init__(self, ctx: BrokerContext) -> None:
        self._ctx = ctx
        self._random = random.Random()

    def register(self, table: ProcessorTable) -> None:
        """Register CONSUMER_SEND_MSG_BACK."""
        table.register(RequestCode.CONSUMER_SEND_MSG_BACK, self.process)

    async def process(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """One send-back -> its reply (a bad header raises ``HeaderFieldError``)."""
        header = ConsumerSendMsgBackRequestHeader.from_ext_fields(request.ext_fields)
        try:
            return await self._send_back(request, header)
        except ProcessorError as exc:
            return request.response_to(exc.code, exc.remark)

    async def _send_back(
        self, request: RemotingCommand, header: ConsumerSendMsgBackRequestHeader
    ) -> RemotingCommand:
        """Steps 1-7 of the module docstring."""
        group_config = self._checked_group(header.group)
        if group_config.retry_queue_nums <= 0:
            return request.response_to(ResponseCode.SUCCESS)
        topic, queue_id = self._retry_target(header, group_config)
        # Read in a thread first when it left memory (store/read_ahead.py).
        original = await self._ctx.store.read_ahead.read_message(header.offset)
        if original is None:
            log.warning("send back look-up failed group=%s offset=%s", header.group, header.offset)
            raise ProcessorError(
                ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {header.offset}"
            )
        props = original.properties
        props.setdefault(MessageConst.PROPERTY_RETRY_TOPIC, original.topic)
        props[MessageConst.PROPERTY_WAIT_STORE_MSG_OK] = "false"
        max_times = group_config.retry_max_times
        if request.version >= MQVersion.V3_4_9 and header.max_reconsume_times is not None:
            max_times = header.max_reconsume_times
        if original.reconsume_times >= max_times or header.delay_level < 0:
            topic = dlq_topic(header.group)
            queue_id = self._random.randrange(_RANDOM_BOUND) % DLQ_NUMS_PER_GROUP
            self._ctx.topics.create_topic_in_send_message_back_method(
                topic, DLQ_NUMS_PER_GROUP, PERM_WRITE | PERM_READ, 0
            )
            props[MessageConst.PROPERTY_DELAY_TIME_LEVEL] = "0"
        else:
            level = header.delay_level or _FIRST_RETRY_LEVEL + original.reconsume_times
            props[MessageConst.PROPERTY_DELAY_TIME_LEVEL] = str(level)
        msg = _retry_message(original, topic, queue_id)
        result = await self._ctx.store.put_message(msg)
        if result.status is not PutMessageStatus.PUT_OK:
            log.warning(
                "send back put failed group=%s offset=%s status=%s",
                header.group,
                header.offset,
                result.status.name,
            )
            return request.response_to(ResponseCode.SYSTEM_ERROR, result.status.name)
        return request.response_to(ResponseCode.SUCCESS)

    def _checked_group(self, group: str) -> SubscriptionGroupConfig:
        """The group's config, or SUBSCRIPTION_GROUP_NOT_EXIST / NO_PERMISSION."""
        ctx = self._ctx
        group_config = ctx.groups.find_subscription_group_config(group)
        if group_config is None:
            raise ProcessorError(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group not exist, {group} {SUGGEST_TODO}",
            )
        if not is_writeable(ctx.config.broker_permission):
            raise ProcessorError(
                ResponseCode.NO_PERMISSION,
                f"the broker[{ctx.config.broker_ip1}] sending message is forbidden",
            )
        return group_config

    def _retry_target(
        self, header: ConsumerSendMsgBackRequestHeader, group_config: SubscriptionGroupConfig
    ) -> tuple[str, int]:
        """``%RETRY%<group>`` (created on demand) and a random queue of it."""
        topic = retry_topic(header.group)
        queue_nums = group_config.retry_queue_nums
        queue_id = self._random.randrange(_RANDOM_BOUND) % queue_nums
        sys_flag = TOPIC_SYS_FLAG_UNIT_SUB if header.unit_mode else 0
        config: TopicConfig = self._ctx.topics.create_topic_in_send_message_back_method(
            topic, queue_nums, PERM_WRITE | PERM_READ, sys_flag
        )
        if not is_writeable(config.perm):
            raise ProcessorError(
                ResponseCode.NO_PERMISSION, f"the topic[{topic}] sending message is forbidden"
            )
        return topic, queue_id


def _retry_message(original: MessageExt, topic: str, queue_id: int) -> MessageExtBrokerInner:
    """The message to store: the original's content, one more reconsume, its origin id."""
    props = original.properties
    if not props.get(MessageConst.PROPERTY_ORIGIN_MESSAGE_ID, "").strip():
        # Java's UtilAll.isBlank: an empty or blank id counts as none.
        props[MessageConst.PROPERTY_ORIGIN_MESSAGE_ID] = original.msg_id
    return inner_from_stored(
        original, topic=topic, queue_id=queue_id, properties=props,
        reconsume_times=original.reconsume_times + 1,
    )  # fmt: skip
