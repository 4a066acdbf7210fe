"""RocketMQ 5's timed messages from a remoting producer, on a running ``mqbroker``.

Our remoting producer sends with RocketMQ 5's properties (``TIMER_DELIVER_MS``,
``TIMER_DELAY_SEC``, ``TIMER_DELAY_MS``, as Java 5's ``Message.setDeliverTimeMs /
setDelayTimeSec / setDelayTimeMs``): each message waits in the broker's durable timer
and reaches its topic at its time, never before (its store timestamp and the moment
a consumer sees it), including across a SIGTERM restart. A time already past is
stored at once; a delay level wins over the timer properties (RocketMQ 5 drops
them); a value that is not an integer, or a time beyond ``timerMaxDelaySec``, is
refused with MESSAGE_ILLEGAL; ``timerWheelEnable=false`` refuses timed messages.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from aiorocketmq.client import ConsumeConcurrentlyStatus, PushConsumer, PushConsumerConfig
from aiorocketmq.client.config import ClientConfig, ProducerConfig
from aiorocketmq.client.errors import MQBrokerError, SendFailedError
from aiorocketmq.client.producer import Producer
from aiorocketmq.common.message import Message, MessageExt
from aiorocketmq.remoting.codes import ResponseCode
from tests.support.cluster import create_topic, start_broker, start_namesrv
from tests.support.procs import ManagedProcess
from tests.support.wait import wait_until

pytestmark = pytest.mark.timeout(120)

StartProcess = Callable[..., ManagedProcess]
TOPIC = "TimedTopic"


def _config(namesrv: str, name: str) -> ClientConfig:
    return ClientConfig(namesrv_addr=namesrv, client_ip="127.0.0.1", instance_name=name)


def _message(key: str, **properties: str) -> Message:
    message = Message(TOPIC, key.encode(), properties=dict(properties))
    message.keys = [key]
    return message


async def _send(producer: Producer, key: str, **properties: str) -> None:
    await producer.send(_message(key, **properties))


async def _consume(namesrv: str, group: str, want: int) -> list[tuple[MessageExt, float]]:
    """A push consumer from the first offset until ``want`` messages arrived; each with
    the wall-clock ms at which the listener saw it."""
    out: list[tuple[MessageExt, float]] = []
    done = asyncio.Event()

    # async: it sets an asyncio.Event (a def listener would run on a pool thread)
    async def listener(msgs: list[MessageExt], _context: object) -> ConsumeConcurrentlyStatus:
        seen_at = time.time() * 1000
        out.extend((m, seen_at) for m in msgs)
        if len(out) >= want:
            done.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    push = PushConsumerConfig(consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer = PushConsumer(group, config=push, client_config=_config(namesrv, group))
    consumer.subscribe(TOPIC, "*")
    consumer.register_message_listener(listener)
    async with consumer:
        await wait_until(done, timeout=30, what=f"{want} timed messages")
    return out


async def test_timed_messages_arrive_at_their_time_never_before(
    start_process: StartProcess, tmp_path: Path
) -> None:
    _, namesrv = await start_namesrv(start_process, tmp_path)
    broker = await start_broker(start_process, tmp_path, namesrv, metricsPort=0)
    await create_topic(broker.addr, TOPIC)
    config = ProducerConfig(retry_times_when_send_failed=0)
    async with Producer("PG_timer", config=config, client_config=_config(namesrv, "p")) as p:
        now = int(time.time() * 1000)
        due = {"deliver": now + 3000, "sec": now + 2000, "ms": now + 2500}
        await _send(p, "deliver", TIMER_DELIVER_MS=str(due["deliver"]))
        await _send(p, "sec", TIMER_DELAY_SEC="2")
        await _send(p, "ms", TIMER_DELAY_MS="2500")
        await _send(p, "past", TIMER_DELIVER_MS=str(now - 1000))  # stored at once
        await _send(p, "level", DELAY="1", TIMER_DELAY_SEC="60")  # the 1 s level wins
        for bad in ({"TIMER_DELAY_SEC": "soon"}, {"TIMER_DELIVER_MS": str(now + 4 * 86_400_000)}):
            with pytest.raises(MQBrokerError) as refused:
                await _send(p, "bad", **bad)
            assert refused.value.code == ResponseCode.MESSAGE_ILLEGAL
            assert "timer message illegal" in (refused.value.remark or "")
    arrived = await _consume(namesrv, "GID_timer", 5)
    by_key = {m.keys[0]: (m, seen_at) for m, seen_at in arrived}
    assert sorted(m.keys[0] for m, _ in arrived) == ["deliver", "level", "ms", "past", "sec"]
    assert by_key["past"][0].store_timestamp < now + 1000  # not parked
    for key, deliver_ms in due.items():
        message, seen_at = by_key[key]
        # Stored in its topic no earlier than asked (the sender's clock is the
        # broker's: one machine), and seen no earlier either.
        assert message.store_timestamp >= deliver_ms, key
        assert seen_at >= deliver_ms, key
    level, _ = by_key["level"]
    assert "TIMER_DELAY_SEC" not in level.properties
    assert level.store_timestamp - level.born_timestamp < 30_000


async def test_a_timed_message_survives_a_restart_and_the_timer_can_be_off(
    start_process: StartProcess, tmp_path: Path
) -> None:
    _, namesrv = await start_namesrv(start_process, tmp_path)
    broker = await start_broker(start_process, tmp_path, namesrv, metricsPort=0)
    await create_topic(broker.addr, TOPIC)
    config = ProducerConfig(retry_times_when_send_failed=0)
    async with Producer("PG_timer", config=config, client_config=_config(namesrv, "p")) as p:
        deliver_ms = int(time.time() * 1000) + 4000
        await _send(p, "kept", TIMER_DELIVER_MS=str(deliver_ms))
    assert broker.proc.stop() == 0  # SIGTERM while the message waits in the timer
    port = broker.addr.rpartition(":")[2]
    # The same remoting port (the store names it); HA on a free one, not port + 1, which
    # another process may hold by now.
    again = await start_broker(
        start_process, tmp_path, namesrv, listenPort=port, haListenPort=0, metricsPort=0
    )
    ((message, seen_at),) = await _consume(namesrv, "GID_timer_restart", 1)
    assert message.keys == ["kept"] and message.store_timestamp >= deliver_ms
    assert seen_at >= deliver_ms
    assert again.proc.stop() == 0
    off = await start_broker(
        start_process, tmp_path / "off", namesrv, "broker-b", metricsPort=0, timerWheelEnable=False
    )
    await create_topic(off.addr, "OffTopic")
    async with Producer("PG_off", config=config, client_config=_config(namesrv, "q")) as p:
        message = Message("OffTopic", b"x", properties={"TIMER_DELAY_SEC": "5"})
        with pytest.raises(SendFailedError) as failed:  # SYSTEM_ERROR: the client retries
            await p.send(message)
    refused = failed.value.__cause__
    assert isinstance(refused, MQBrokerError) and refused.code == ResponseCode.SYSTEM_ERROR
    assert "timerWheelEnable is false" in (refused.remark or "")
