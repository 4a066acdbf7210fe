"""SendBackProcessor (CONSUMER_SEND_MSG_BACK) on a real store and server."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from aiorocketmq.broker.context import BrokerContext
from aiorocketmq.broker.processors.send import SendProcessor
from aiorocketmq.broker.processors.send_back import SendBackProcessor
from aiorocketmq.common.constants import PERM_READ, PERM_WRITE, RMQ_SYS_SCHEDULE_TOPIC
from aiorocketmq.common.message import MessageExt
from aiorocketmq.common.msg_id import decode_offset_msg_id
from aiorocketmq.common.properties import MessageConst
from aiorocketmq.common.subscription_group import SubscriptionGroupConfig
from aiorocketmq.common.topic_config import TopicConfig
from aiorocketmq.remoting.broker_headers import ConsumerSendMsgBackRequestHeader
from aiorocketmq.remoting.codes import MQVersion, RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.connection import ProcessorTable
from aiorocketmq.store.message_store import MessageStore
from tests.unit.broker.broker_support import GROUP, TOPIC, Harness, harness
from tests.unit.broker.processor_support import send_request
from tests.unit.store.store_support import dispatched

RETRY = f"%RETRY%{GROUP}"
DLQ = f"%DLQ%{GROUP}"
C = MessageConst


def _register(ctx: BrokerContext, table: ProcessorTable) -> None:
    SendProcessor(ctx).register(table)
    SendBackProcessor(ctx).register(table)


@contextlib.asynccontextmanager
async def back_harness(tmp_path: Path, **kwargs: Any) -> AsyncIterator[Harness]:
    """The shared harness with the send and send-back processors."""
    async with harness(tmp_path, extra=_register, **kwargs) as h:
        yield h


def back_request(
    offset: int, *, delay_level: int = 0, version: int | None = None, **fields: Any
) -> RemotingCommand:
    """A CONSUMER_SEND_MSG_BACK as a client builds it."""
    header = ConsumerSendMsgBackRequestHeader(
        offset=offset, group=fields.pop("group", GROUP), delay_level=delay_level, **fields
    )
    request = RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, header.to_ext_fields())
    if version is not None:
        request.version = version
    return request


async def _send(h: Harness, body: bytes = b"payload", **kwargs: Any) -> tuple[int, str]:
    """Send one message; its CommitLog offset and msgId."""
    reply = await h.invoke(send_request(body, **kwargs))
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    msg_id = reply.ext_fields["msgId"]
    return decode_offset_msg_id(msg_id)[2], msg_id


async def _last_in(store: MessageStore, topic: str, queue_id: int) -> MessageExt:
    """The last message of a queue, once dispatched."""
    await dispatched(store)
    queue = store.cq_table.get(topic, queue_id)
    assert queue is not None, f"no queue {topic}-{queue_id}"
    unit = queue.get_unit(queue.max_offset - 1)
    assert unit is not None
    msg = store.look_message_by_offset(unit[0])
    assert msg is not None
    return msg


async def _back(h: Harness, offset: int, **kwargs: Any) -> RemotingCommand:
    reply = await h.invoke(back_request(offset, **kwargs))
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    return reply


async def test_first_send_back_goes_to_retry_through_level_3(tmp_path: Path) -> None:
    async with back_harness(tmp_path) as h:
        offset, msg_id = await _send(h, b"body-1", properties="TAGS\x01TagA\x02KEYS\x01k1\x02")
        original = h.ctx.store.look_message_by_offset(offset)
        assert original is not None
        await _back(h, offset)
        retry_config = h.ctx.topics.select_topic_config(RETRY)
        assert retry_config is not None
        assert (retry_config.read_queue_nums, retry_config.write_queue_nums) == (1, 1)
        assert retry_config.perm == PERM_READ | PERM_WRITE
        # Level 3 -> queue 2 of the schedule topic, real topic the retry topic.
        msg = await _last_in(h.ctx.store, RMQ_SYS_SCHEDULE_TOPIC, 2)
        assert msg.reconsume_times == 1
        assert msg.body == b"body-1"
        assert msg.properties[C.PROPERTY_DELAY_TIME_LEVEL] == "3"
        assert msg.properties[C.PROPERTY_REAL_TOPIC] == RETRY
        assert msg.properties[C.PROPERTY_REAL_QUEUE_ID] == "0"
        assert msg.properties[C.PROPERTY_RETRY_TOPIC] == TOPIC
        assert msg.properties[C.PROPERTY_ORIGIN_MESSAGE_ID] == msg_id
        assert msg.properties[C.PROPERTY_WAIT_STORE_MSG_OK] == "false"
        assert msg.properties[C.PROPERTY_TAGS] == "TagA"
        assert msg.properties[C.PROPERTY_KEYS] == "k1"
        # Born host and time and the store host are the original's (Java copies them).
        assert msg.born_host == original.born_host
        assert msg.born_timestamp == original.born_timestamp
        assert msg.store_host == original.store_host
        assert msg.flag == original.flag


async def test_reconsume_times_raise_the_delay_level(tmp_path: Path) -> None:
    async with back_harness(tmp_path) as h:
        offset, msg_id = await _send(h)
        # A message that was retried twice already (as a retry topic holds it).
        await _back(h, offset)
        first = await _last_in(h.ctx.store, RMQ_SYS_SCHEDULE_TOPIC, 2)
        await _back(h, first.commit_log_offset)
        second = await _last_in(h.ctx.store, RMQ_SYS_SCHEDULE_TOPIC, 3)
        assert second.reconsume_times == 2
        assert second.properties[C.PROPERTY_DELAY_TIME_LEVEL] == "4"
        # The origin and retry topic stay the first message's.
        assert second.properties[C.PROPERTY_ORIGIN_MESSAGE_ID] == msg_id
        assert second.properties[C.PROPERTY_RETRY_TOPIC] == TOPIC
        # An explicit level wins over 3 + reconsumeTimes.
        await _back(h, second.commit_log_offset, delay_level=7)
        third = await _last_in(h.ctx.store, RMQ_SYS_SCHEDULE_TOPIC, 6)
        assert third.reconsume_times == 3
        assert third.properties[C.PROPERTY_DELAY_TIME_LEVEL] == "7"


async def test_level_beyond_the_last_is_clamped_by_the_store(tmp_path: Path) -> None:
    async with back_harness(tmp_path, store={"message_delay_level": "1s 2s"}) as h:
        offset, _ = await _send(h)
        await _back(h, offset)  # 3 + 0 = level 3, only 2 levels exist
        msg = await _last_in(h.ctx.store, RMQ_SYS_SCHEDULE_TOPIC, 1)
        assert msg.properties[C.PROPERTY_DELAY_TIME_LEVEL] == "2"
        assert msg.properties[C.PROPERTY_REAL_TOPIC] == RETRY


async def test_dlq_after_group_retry_max_times(tmp_path: Path) -> None:
    async with back_harness(tmp_path) as h:
        h.ctx.groups.update_subscription_group_config(
            SubscriptionGroupConfig(GROUP, retry_max_times=1)
        )
        offset, msg_id = await _send(h, b"to-dlq")
        await _back(h, offset)
        retried = await _last_in(h.ctx.store, RMQ_SYS_SCHEDULE_TOPIC, 2)
        assert h.ctx.topics.select_topic_config(DLQ) is None
        await _back(h, retried.commit_log_offset)
        dlq_config = h.ctx.topics.select_topic_config(DLQ)
        assert dlq_config is not None
        assert (dlq_config.read_queue_nums, dlq_config.write_queue_nums) == (1, 1)
        assert dlq_config.perm == PERM_READ | PERM_WRITE
        dead = await _last_in(h.ctx.store, DLQ, 0)
        assert dead.body == b"to-dlq"
        assert dead.reconsume_times == 2
        assert dead.properties[C.PROPERTY_DELAY_TIME_LEVEL] == "0"
        assert dead.properties[C.PROPERTY_RETRY_TOPIC] == TOPIC
        assert dead.properties[C.PROPERTY_ORIGIN_MESSAGE_ID] == msg_id
        assert dead.topic == DLQ


async def test_header_max_reconsume_times_overrides_from_v3_4_9(tmp_path: Path) -> None:
    async with back_harness(tmp_path) as h:
        offset, _ = await _send(h)
        # An old client's header value is ignored: group default 16 -> retry.
        await _back(h, offset, max_reconsume_times=0, version=MQVersion.V3_4_9 - 1)
        assert h.ctx.store.get_max_offset_in_queue(DLQ, 0) == 0
        retried = await _last_in(h.ctx.store, RMQ_SYS_SCHEDULE_TOPIC, 2)
        assert retried.reconsume_times == 1
        # From V3_4_9 on it counts: 1 >= 1 -> DLQ.
        await _back(h, retried.commit_log_offset, max_reconsume_times=1, version=MQVersion.V3_4_9)
        dead = await _last_in(h.ctx.store, DLQ, 0)
        assert dead.reconsume_times == 2
        # And a higher header value keeps retrying past the group's limit.
        h.ctx.groups.update_subscription_group_config(
            SubscriptionGroupConfig(GROUP, retry_max_times=1)
        )
        await _back(h, retried.commit_log_offset, max_reconsume_times=5)
        again = await _last_in(h.ctx.store, RMQ_SYS_SCHEDULE_TOPIC, 3)
        assert again.reconsume_times == 2


async def test_negative_delay_level_goes_straight_to_dlq(tmp_path: Path) -> None:
    async with back_harness(tmp_path) as h:
        offset, _ = await _send(h)
        await _back(h, offset, delay_level=-1)
        dead = await _last_in(h.ctx.store, DLQ, 0)
        assert dead.reconsume_times == 1
        assert h.ctx.store.get_max_offset_in_queue(RMQ_SYS_SCHEDULE_TOPIC, 2) == 0


async def test_refusals(tmp_path: Path) -> None:
    broker = {"auto_create_subscription_group": False}
    async with back_harness(tmp_path, broker=broker) as h:
        offset, _ = await _send(h)
        reply = await h.invoke(back_request(offset, group="CID_unknown"))
        assert reply.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
        assert reply.remark is not None
        assert reply.remark.startswith("subscription group not exist, CID_unknown ")
        h.ctx.groups.update_subscription_group_config(SubscriptionGroupConfig(GROUP))
        bad = await h.invoke(back_request(offset + 999_999))
        assert bad.code == ResponseCode.SYSTEM_ERROR
        assert bad.remark == f"look message by offset failed, {offset + 999_999}"
        missing = RemotingCommand.request(
            RequestCode.CONSUMER_SEND_MSG_BACK, {"group": GROUP, "delayLevel": "0"}
        )
        reply = await h.invoke(missing)
        assert reply.code == ResponseCode.SYSTEM_ERROR
        assert reply.remark is not None and "offset" in reply.remark
        # The retry topic was created before the lookup failed (Java's order) ...
        assert h.ctx.topics.select_topic_config(RETRY) is not None
        # ... and refuses once it loses its write perm.
        h.ctx.topics.update_topic_config(TopicConfig(RETRY, 1, 1, PERM_READ))
        reply = await h.invoke(back_request(offset))
        assert reply.code == ResponseCode.NO_PERMISSION
        assert reply.remark == f"the topic[{RETRY}] sending message is forbidden"
        # Still serving after every refusal.
        h.ctx.topics.delete_topic_config(RETRY)
        await _back(h, offset)


async def test_read_only_broker_and_no_retry_queues(tmp_path: Path) -> None:
    async with back_harness(tmp_path, broker={"broker_permission": PERM_READ}) as h:
        reply = await h.invoke(back_request(0))
        assert reply.code == ResponseCode.NO_PERMISSION
        ip = h.ctx.config.broker_ip1
        assert reply.remark == f"the broker[{ip}] sending message is forbidden"
    async with back_harness(tmp_path / "b") as h:
        offset, _ = await _send(h)
        h.ctx.groups.update_subscription_group_config(
            SubscriptionGroupConfig(GROUP, retry_queue_nums=0)
        )
        max_before = h.ctx.store.max_phy_offset
        await _back(h, offset)
        assert h.ctx.store.max_phy_offset == max_before
        assert h.ctx.topics.select_topic_config(RETRY) is None


async def test_unit_mode_and_several_retry_queues(tmp_path: Path) -> None:
    async with back_harness(tmp_path) as h:
        h.ctx.groups.update_subscription_group_config(
            SubscriptionGroupConfig(GROUP, retry_queue_nums=4)
        )
        offset, _ = await _send(h)
        for _ in range(12):
            await _back(h, offset, unit_mode=True)
        retry_config = h.ctx.topics.select_topic_config(RETRY)
        assert retry_config is not None
        assert retry_config.write_queue_nums == 4
        assert retry_config.topic_sys_flag == 0x2
        await dispatched(h.ctx.store)
        queue = h.ctx.store.cq_table.get(RMQ_SYS_SCHEDULE_TOPIC, 2)
        assert queue is not None and queue.max_offset == 12
        real_qids = set()
        for i in range(12):
            unit = queue.get_unit(i)
            assert unit is not None
            msg = h.ctx.store.look_message_by_offset(unit[0])
            assert msg is not None
            real_qids.add(int(msg.properties[C.PROPERTY_REAL_QUEUE_ID]))
        assert real_qids <= {0, 1, 2, 3}
        assert len(real_qids) > 1  # 12 random picks of 4 queues: all one has p = 4^-11
