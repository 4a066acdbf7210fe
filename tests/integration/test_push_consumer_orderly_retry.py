"""PushConsumer orderly consumption and retries against real processes.

- Orderly: messages sent by sharding key (hash selector) are consumed in per-key
  order, and two orderly consumers of one group never consume one queue at the same
  time (intervals recorded while the second joins and takes half of the queues).
- Orderly retry: a message the listener suspends is retried in place (nothing
  after it runs meanwhile) up to ``max_reconsume_times``, then goes to the DLQ and
  the queue moves on in order.
- Retry: a listener failing a message 3 times sees it again with reconsumeTimes
  0, 1, 2, 3 and then consumes it; a message that always fails lands in
  ``%DLQ%<group>`` after ``max_reconsume_times`` (3: four deliveries in all).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import pytest

from aiorocketmq.client import (
    ClientConfig,
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyStatus,
    Message,
    MessageExt,
    MessageQueue,
    MQClientError,
    Producer,
    PullConsumer,
    PullStatus,
    PushConsumer,
    PushConsumerConfig,
    select_by_hash,
)
from aiorocketmq.common.protocol_bodies import LockBatchRequestBody
from tests.integration.test_mqadmin import mqadmin
from tests.support.cluster import start_broker, start_namesrv
from tests.support.procs import ManagedProcess
from tests.support.wait import wait_until

pytestmark = pytest.mark.timeout(120)

StartProcess = Callable[..., ManagedProcess]

FAST_DELAYS = " ".join(["1s"] * 18)
"""Every delay level 1 s, so retries come back quickly."""


def client(namesrv: str, name: str) -> ClientConfig:
    """A client whose routes refresh every second (retry topics appear quickly)."""
    return ClientConfig(
        namesrv_addr=namesrv,
        client_ip="127.0.0.1",
        instance_name=name,
        poll_name_server_interval=1_000,
    )


async def yield_to_loop() -> None:
    """Let other tasks run once (the other consumer could start inside this interval)."""
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    loop.call_soon(done.set_result, None)
    await done


class OrderlyRecorder:
    """An orderly listener recording per-key sequences and per-queue intervals."""

    def __init__(
        self,
        name: str,
        by_key: dict[str, list[int]],
        intervals: dict[MessageQueue, list[tuple[float, float, str]]],
    ) -> None:
        self.name = name
        self.by_key = by_key
        self.mine: dict[str, list[int]] = defaultdict(list)
        self.intervals = intervals

    async def __call__(self, msgs: list[MessageExt], context: object) -> ConsumeOrderlyStatus:
        start = time.monotonic()
        await yield_to_loop()
        for msg in msgs:
            key, seq = msg.keys[0].split(":")
            self.by_key[key].append(int(seq))
            self.mine[key].append(int(seq))
        mq = getattr(context, "message_queue")  # noqa: B009 - the context's public field
        self.intervals[mq].append((start, time.monotonic(), self.name))
        return ConsumeOrderlyStatus.SUCCESS


def overlapping(intervals: dict[MessageQueue, list[tuple[float, float, str]]]) -> list[object]:
    """Pairs of intervals of one queue, by different consumers, that overlap."""
    found: list[object] = []
    for mq, spans in intervals.items():
        ordered = sorted(spans)
        for (s1, e1, n1), (s2, e2, n2) in itertools.pairwise(ordered):
            if n1 != n2 and s2 < e1:
                found.append((mq, (s1, e1, n1), (s2, e2, n2)))
    return found


async def send_by_key(producer: Producer, topic: str, keys: list[str], first: int, n: int) -> None:
    """Send sequence numbers ``first..first+n-1`` of every key, each key to its hash queue."""
    for seq in range(first, first + n):
        await asyncio.gather(
            *(
                producer.send(
                    Message(topic, b"o", properties={"KEYS": f"{key}:{seq}"}),
                    selector=select_by_hash,
                    arg=key,
                )
                for key in keys
            )
        )


async def test_orderly_keeps_per_key_order_and_one_consumer_per_queue(
    start_process: StartProcess, tmp_path: Path
) -> None:
    _, namesrv = await start_namesrv(start_process, tmp_path)
    await start_broker(start_process, tmp_path, namesrv, "broker-a")
    topic, keys = "PushOrder", [f"order-{i}" for i in range(16)]
    by_key: dict[str, list[int]] = defaultdict(list)
    intervals: dict[MessageQueue, list[tuple[float, float, str]]] = defaultdict(list)
    config = PushConsumerConfig(consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    recorders = {n: OrderlyRecorder(n, by_key, intervals) for n in ("o1", "o2")}
    consumers: list[PushConsumer] = []
    async with Producer("PG", client_config=client(namesrv, "producer")) as producer:
        await send_by_key(producer, topic, keys, 0, 50)
        try:
            for name, recorder in recorders.items():
                consumer = PushConsumer(
                    "CG-order", config=config, client_config=client(namesrv, name)
                )
                consumer.subscribe(topic, "*")
                consumer.register_message_listener(recorder, orderly=True)
                await consumer.start()
                consumers.append(consumer)
                await send_by_key(producer, topic, keys, 50 if name == "o1" else 100, 50)
            await wait_until(
                lambda: all(len(set(by_key[k])) == 150 for k in keys),
                timeout=60,
                what="150 messages of every key",
            )
            owned = [
                {
                    mq
                    for mq, pq in c.rebalance.process_queue_table.items()
                    if pq.locked and mq.topic == topic
                }
                for c in consumers
            ]
        finally:
            for consumer in consumers:
                await consumer.shutdown()
    locked_after, committed, ends = await after_shutdown(namesrv, "CG-order", topic)
    # Shutdown released the locks (another client gets them at once) and persisted
    # every queue's offset at its end.
    assert locked_after == 4
    assert committed == ends
    # Both consumers held broker locks of their own, disjoint halves of the 4 queues.
    assert len(owned[0]) == len(owned[1]) == 2 and not owned[0] & owned[1]
    assert not overlapping(intervals)
    assert {name for spans in intervals.values() for _, _, name in spans} == {"o1", "o2"}
    for key in keys:
        first_seen = list(dict.fromkeys(by_key[key]))
        assert first_seen == list(range(150)), key
        for recorder in recorders.values():
            mine = recorder.mine[key]
            assert mine == sorted(mine), (recorder.name, key)


async def dlq_keys(namesrv: str, group: str) -> list[str]:
    """The keys in queue 0 of ``%DLQ%<group>`` (empty while it has no route or message)."""
    async with PullConsumer("CG-dlq-reader", client_config=client(namesrv, "dlq")) as reader:
        try:
            mqs = await reader.fetch_subscribe_message_queues(f"%DLQ%{group}")
        except MQClientError:
            return []
        result = await reader.pull(mqs[0], "*", 0, 32)
    if result.status is not PullStatus.FOUND:
        return []
    return [m.keys[0] for m in result.msg_found_list]


async def after_shutdown(namesrv: str, group: str, topic: str) -> tuple[int, list[int], list[int]]:
    """(queues another client can lock now, committed offsets, queue ends) of ``topic``."""
    async with PullConsumer(group, client_config=client(namesrv, "checker")) as checker:
        mqs = await checker.fetch_subscribe_message_queues(topic)
        await checker.instance.update_topic_route(topic)
        address = checker.instance.find_broker_address_in_publish("broker-a")
        assert address is not None
        body = LockBatchRequestBody(group, "someone-else", mqs)
        locked = await checker.instance.api.lock_batch_mq(address, body, 3_000)
        committed = [await checker.fetch_consume_offset(mq, from_store=True) for mq in mqs]
        ends = [await checker.max_offset(mq) for mq in mqs]
    return len(locked), committed, ends


class FlakyListener:
    """Fails ``flaky`` 3 times and ``poison`` always; records reconsume times."""

    def __init__(self) -> None:
        self.attempts: dict[str, list[int]] = defaultdict(list)
        self.consumed: set[str] = set()

    def __call__(self, msgs: list[MessageExt], _context: object) -> ConsumeConcurrentlyStatus:
        for msg in msgs:
            key = msg.keys[0]
            self.attempts[key].append(msg.reconsume_times)
            if key == "poison" or (key == "flaky" and msg.reconsume_times < 3):
                return ConsumeConcurrentlyStatus.RECONSUME_LATER
            self.consumed.add(key)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS


async def test_failed_messages_come_back_then_go_to_the_dlq(
    start_process: StartProcess, tmp_path: Path
) -> None:
    _, namesrv = await start_namesrv(start_process, tmp_path)
    await start_broker(start_process, tmp_path, namesrv, "broker-a", messageDelayLevel=FAST_DELAYS)
    async with Producer("PG", client_config=client(namesrv, "producer")) as producer:
        await producer.send(Message("PushRetry", b"first", properties={"KEYS": "warmup"}))
        listener = FlakyListener()
        config = PushConsumerConfig(
            consume_from_where="CONSUME_FROM_FIRST_OFFSET", max_reconsume_times=3
        )
        consumer = PushConsumer("CG-retry", config=config, client_config=client(namesrv, "r1"))
        consumer.subscribe("PushRetry", "*")
        consumer.register_message_listener(listener)
        async with consumer:
            for key in ("flaky", "poison", "fine"):
                await producer.send(Message("PushRetry", key.encode(), properties={"KEYS": key}))
            await wait_until(
                lambda: (
                    {"warmup", "fine", "flaky"} <= listener.consumed
                    and len(listener.attempts["poison"]) >= 4
                ),
                timeout=60,
                what="flaky consumed after retries, poison tried 4 times",
                describe=lambda: dict(listener.attempts),
            )
            dlq = await wait_until(
                lambda: dlq_keys(namesrv, "CG-retry"), timeout=30, what="poison in the DLQ"
            )
    assert listener.attempts["flaky"] == [0, 1, 2, 3]
    assert listener.attempts["poison"] == [0, 1, 2, 3]
    assert listener.attempts["fine"] == [0]
    assert dlq == ["poison"]
    assert "poison" not in listener.consumed
    # Where an operator finds it: mqadmin queryMsgByKey on the group's DLQ topic.
    found = await mqadmin("queryMsgByKey", "-n", namesrv, "-t", "%DLQ%CG-retry", "-k", "poison")
    assert found.returncode == 0, found.err
    rows = [line.split() for line in found.out.splitlines()[1:] if line.strip()]
    assert len(rows) == 1, found.out


async def test_orderly_retries_locally_then_sends_the_message_to_the_dlq(
    start_process: StartProcess, tmp_path: Path
) -> None:
    _, namesrv = await start_namesrv(start_process, tmp_path)
    await start_broker(start_process, tmp_path, namesrv, "broker-a", messageDelayLevel=FAST_DELAYS)
    keys = ["s:0", "s:1", "poison", "s:2", "s:3"]
    attempts: dict[str, list[int]] = defaultdict(list)
    order: list[str] = []

    def listener(msgs: list[MessageExt], _context: object) -> ConsumeOrderlyStatus:
        for msg in msgs:
            attempts[msg.keys[0]].append(msg.reconsume_times)
            if msg.keys[0] == "poison":
                return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
            order.append(msg.keys[0])
        return ConsumeOrderlyStatus.SUCCESS

    config = PushConsumerConfig(
        consume_from_where="CONSUME_FROM_FIRST_OFFSET",
        max_reconsume_times=2,
        suspend_current_queue_time_millis=10,
    )
    consumer = PushConsumer("CG-osusp", config=config, client_config=client(namesrv, "s1"))
    consumer.subscribe("PushOrderRetry", "*")
    consumer.register_message_listener(listener, orderly=True)
    async with Producer("PG", client_config=client(namesrv, "producer")) as producer:
        for key in keys:  # all to one queue, in this order
            msg = Message("PushOrderRetry", key.encode(), properties={"KEYS": key})
            await producer.send(msg, selector=select_by_hash, arg="same-key")
        async with consumer:
            await wait_until(lambda: len(order) == 4, timeout=30, what="the 4 good messages")
        dlq = await wait_until(
            lambda: dlq_keys(namesrv, "CG-osusp"), timeout=30, what="poison in the DLQ"
        )
    # The poison message was tried 3 times in place (nothing after it ran meanwhile),
    # then sent to the DLQ, and the queue went on in order.
    assert attempts["poison"] == [0, 1, 2]
    assert order == ["s:0", "s:1", "s:2", "s:3"]
    assert dlq == ["poison"]
