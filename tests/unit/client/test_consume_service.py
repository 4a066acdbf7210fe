"""Consume-service helpers: retry-topic reset, and the send-back fallback to
``%RETRY%<group>`` against a real in-process broker (listener calls: test_listener)."""

from __future__ import annotations

from aiorocketmq.client.config import ClientConfig
from aiorocketmq.client.consume_service import RetrySender, reset_retry_topic
from aiorocketmq.client.errors import MQClientError
from aiorocketmq.client.producer import Producer
from aiorocketmq.client.pull_consumer import PullConsumer
from aiorocketmq.client.results import PullStatus
from aiorocketmq.common.message import Message, MessageExt, MessageQueue
from aiorocketmq.common.properties import MessageConst
from aiorocketmq.namesrv.server import NamesrvController
from tests.support.wait import wait_until
from tests.unit.client.conftest import StartBroker


def test_reset_retry_topic_only_for_the_group_retry_topic() -> None:
    retried = MessageExt("%RETRY%CG", b"", properties={MessageConst.PROPERTY_RETRY_TOPIC: "T"})
    other = MessageExt("%RETRY%OTHER", b"", properties={MessageConst.PROPERTY_RETRY_TOPIC: "T"})
    plain = MessageExt("T2", b"")
    reset_retry_topic([retried, other, plain], "CG")
    assert [m.topic for m in (retried, other, plain)] == ["T", "%RETRY%OTHER", "T2"]


def _client(namesrv: str, name: str) -> ClientConfig:
    return ClientConfig(namesrv_addr=namesrv, client_ip="127.0.0.1", instance_name=name)


async def test_send_back_falls_back_to_a_send_to_the_retry_topic(
    namesrv: NamesrvController, start_broker: StartBroker
) -> None:
    await start_broker("broker-a", messageDelayLevel=" ".join(["1s"] * 18))
    async with Producer("PG", client_config=_client(namesrv.address, "p")) as producer:
        sent = await producer.send(Message("TopicS", b"original", properties={"KEYS": "k1"}))
    async with PullConsumer("CG", client_config=_client(namesrv.address, "c")) as consumer:
        mq = sent.message_queue
        found = await wait_until(
            lambda: _pull(consumer, mq), timeout=10, what="the original message"
        )
        msg = found[0]
        msg.reconsume_times = 1
        sender = RetrySender(consumer.instance, "CG", _client(namesrv.address, "c"), 16)
        try:
            # No broker of that name: CONSUMER_SEND_MSG_BACK cannot be sent, so the
            # message is sent to %RETRY%CG as a new message (delay level 3 + 1).
            assert await sender.send_back(msg, 0, "no-such-broker") is True
        finally:
            await sender.shutdown()

        async def in_retry_topic() -> list[MessageExt]:
            try:
                mqs = await consumer.fetch_subscribe_message_queues("%RETRY%CG")
            except MQClientError:
                return []  # no route yet
            return [m for mq in mqs for m in await _pull(consumer, mq)]

        again = await wait_until(in_retry_topic, timeout=15, what="the message in %RETRY%CG")
    assert len(again) == 1
    back = again[0]
    assert back.body == b"original" and back.keys == ["k1"]
    assert back.get_property(MessageConst.PROPERTY_RETRY_TOPIC) == "TopicS"
    assert back.get_property(MessageConst.PROPERTY_ORIGIN_MESSAGE_ID) == msg.msg_id
    assert back.reconsume_times == 2


async def _pull(consumer: PullConsumer, mq: MessageQueue) -> list[MessageExt]:
    result = await consumer.pull(mq, "*", 0, 32)
    return result.msg_found_list if result.status is PullStatus.FOUND else []
