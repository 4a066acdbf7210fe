"""PushConsumer against real ``mqnamesrv`` + ``mqbroker`` processes.

- 100,000 messages produced in batches are all consumed by one push consumer
  (``async for``), none lost, counted by key.
- Three consumers of one group join and leave while consuming: once settled every
  queue has exactly one owner and every message was consumed at least once.
- Broadcasting delivers every message to each of two consumers.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from aiorocketmq.client import (
    ClientConfig,
    ConsumeConcurrentlyStatus,
    Message,
    MessageExt,
    Producer,
    ProducerConfig,
    PushConsumer,
    PushConsumerConfig,
)
from aiorocketmq.common.protocol_bodies import ConsumerConnection, ConsumeType
from aiorocketmq.remoting.codes import RequestCode
from aiorocketmq.remoting.command import RemotingCommand
from tests.support.cluster import broker_request, create_topic, start_broker, start_namesrv
from tests.support.procs import ManagedProcess
from tests.support.wait import wait_until

pytestmark = pytest.mark.timeout(120)

StartProcess = Callable[..., ManagedProcess]


def client(namesrv: str, name: str) -> ClientConfig:
    """A client whose routes refresh every second (retry topics appear quickly)."""
    return ClientConfig(
        namesrv_addr=namesrv,
        client_ip="127.0.0.1",
        instance_name=name,
        poll_name_server_interval=1_000,
    )


async def produce(namesrv: str, topic: str, keys: list[str], per_batch: int = 100) -> None:
    """Send one 64-byte message per key in batches, 8 batches in flight."""
    config = ProducerConfig(default_topic_queue_nums=8)
    async with Producer("PG", config=config, client_config=client(namesrv, "producer")) as producer:
        batches = [
            [
                Message(topic, b"x" * 64, properties={"KEYS": key, "TAGS": "TagA"})
                for key in keys[start : start + per_batch]
            ]
            for start in range(0, len(keys), per_batch)
        ]
        for first in range(0, len(batches), 8):
            await asyncio.gather(*(producer.send_batch(b) for b in batches[first : first + 8]))


async def test_100k_messages_all_consumed_by_one_push_consumer(
    start_process: StartProcess, tmp_path: Path
) -> None:
    _, namesrv = await start_namesrv(start_process, tmp_path)
    await start_broker(start_process, tmp_path, namesrv, "broker-a")
    keys = [f"k{i}" for i in range(100_000)]
    started = time.monotonic()
    await produce(namesrv, "PushBig", keys)
    produced = time.monotonic()
    config = PushConsumerConfig(consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer = PushConsumer("CG-big", config=config, client_config=client(namesrv, "c1"))
    consumer.subscribe("PushBig", "TagA || TagB")
    seen: Counter[str] = Counter()
    async with consumer:
        async for msg in consumer.messages():
            seen[msg.keys[0]] += 1
            if len(seen) == len(keys):
                break
    consumed = time.monotonic()
    print(
        f"\nproduce {len(keys) / (produced - started):,.0f} msgs/s, "
        f"push consume {len(keys) / (consumed - produced):,.0f} msgs/s"
    )
    assert set(seen) == set(keys)
    # One consumer, no rebalance: nothing was delivered twice.
    assert max(seen.values()) == 1


class Recorder:
    """A concurrent listener that counts keys and remembers who consumed what."""

    def __init__(
        self, name: str, seen: Counter[str], who: dict[str, list[tuple[str, str]]] | None = None
    ) -> None:
        self.name = name
        self.seen = seen
        self.who = who

    def __call__(self, msgs: list[MessageExt], _context: object) -> ConsumeConcurrentlyStatus:
        for msg in msgs:
            self.seen[msg.keys[0]] += 1
            if self.who is not None:
                queue = f"{msg.store_host}:{msg.queue_id}"  # one broker per store host
                self.who.setdefault(msg.keys[0], []).append((self.name, queue))
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS


def owners(consumers: dict[str, PushConsumer], topic: str) -> dict[tuple[str, int], list[str]]:
    """Queue -> the consumers that hold a live process queue of it."""
    table: dict[tuple[str, int], list[str]] = {}
    for name, consumer in consumers.items():
        for mq, pq in consumer.rebalance.process_queue_table.items():
            if mq.topic == topic and not pq.dropped:
                table.setdefault((mq.broker_name, mq.queue_id), []).append(name)
    return table


async def test_three_consumers_join_and_leave_each_queue_one_owner(
    start_process: StartProcess, tmp_path: Path
) -> None:
    _, namesrv = await start_namesrv(start_process, tmp_path)
    a = await start_broker(start_process, tmp_path, namesrv, "broker-a", defaultTopicQueueNums=8)
    b = await start_broker(start_process, tmp_path, namesrv, "broker-b", defaultTopicQueueNums=8)
    topic, seen, who = "PushGroup", Counter[str](), dict[str, list[tuple[str, str]]]()
    # Created on both brokers first: auto-creation by the first sends could leave it on
    # one (a producer that learns the real route from the first broker to create it
    # sends there only), and then 8 queues would be all there is.
    for broker in (a, b):
        await create_topic(broker.addr, topic, queues=8)
    first = [f"a{i}" for i in range(3_000)]
    await produce(namesrv, topic, first)
    config = PushConsumerConfig(consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumers: dict[str, PushConsumer] = {}

    async def join(name: str) -> PushConsumer:
        consumer = PushConsumer("CG-group", config=config, client_config=client(namesrv, name))
        consumer.subscribe(topic, "*")
        consumer.register_message_listener(Recorder(name, seen, who))
        await consumer.start()
        consumers[name] = consumer
        return consumer

    c1 = await join("c1")
    await join("c2")
    second = [f"b{i}" for i in range(3_000)]
    await produce(namesrv, topic, second)
    c3 = await join("c3")
    await c1.shutdown()
    del consumers["c1"]
    third = [f"c{i}" for i in range(3_000)]
    await produce(namesrv, topic, third)
    all_keys = set(first + second + third)

    def settled() -> bool:
        table = owners(consumers, topic)
        return len(table) == 16 and all(len(v) == 1 for v in table.values())

    try:
        await wait_until(
            settled,
            timeout=40,
            what="16 queues, one owner each",
            describe=lambda: owners(consumers, topic),
        )
        await wait_until(lambda: all_keys <= set(seen), timeout=40, what="every key consumed")
        # The broker knows the group from our heartbeats: both clients, each with the
        # topic and the group's retry topic, consumed passively.
        reply = await broker_request(
            a.addr,
            RemotingCommand.request(
                RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "CG-group"}
            ),
        )
        info = ConsumerConnection.decode(reply.body)
        assert {c.client_id for c in info.connections} == {
            consumers[n].instance.client_id for n in ("c2", "c3")
        }
        assert set(info.subscriptions) == {topic, "%RETRY%CG-group"}
        assert info.consume_type is ConsumeType.CONSUME_PASSIVELY
        table = owners(consumers, topic)
        per_consumer = Counter(v[0] for v in table.values())
        # Averagely: 16 queues over two consumers, 8 each.
        assert per_consumer == Counter({"c2": 8, "c3": 8})
        assert c3.rebalance_count >= 1
    finally:
        for consumer in consumers.values():
            await consumer.shutdown()
    assert set(seen) == all_keys
    # A message is delivered twice only on a queue that changed owner.
    consumers_of: dict[str, set[str]] = {}
    for deliveries in who.values():
        for name, queue in deliveries:
            consumers_of.setdefault(queue, set()).add(name)
    twice = {key: d for key, d in who.items() if len(d) > 1}
    assert all(len(consumers_of[d[0][1]]) > 1 for d in twice.values()), twice
    assert len(twice) < len(all_keys) // 2


async def test_broadcasting_delivers_every_message_to_each_consumer(
    start_process: StartProcess, tmp_path: Path
) -> None:
    _, namesrv = await start_namesrv(start_process, tmp_path)
    await start_broker(start_process, tmp_path, namesrv, "broker-a")
    keys = [f"k{i}" for i in range(2_000)]
    await produce(namesrv, "PushBcast", keys[:1])  # the topic exists before consumers start
    config = PushConsumerConfig(
        message_model="BROADCASTING",
        consume_from_where="CONSUME_FROM_FIRST_OFFSET",
        offset_store_dir=tmp_path / "offsets",
    )
    seen = {name: Counter[str]() for name in ("b1", "b2")}
    consumers = []
    for name, counter in seen.items():
        consumer = PushConsumer("CG-bcast", config=config, client_config=client(namesrv, name))
        consumer.subscribe("PushBcast", "TagA")
        consumer.register_message_listener(Recorder(name, counter))
        await consumer.start()
        consumers.append(consumer)
    try:
        await produce(namesrv, "PushBcast", keys[1:])
        for name, counter in seen.items():
            await wait_until(
                lambda counter=counter: set(counter) == set(keys),  # type: ignore[misc]
                timeout=30,
                what=f"{name} got every key",
            )
        for consumer in consumers:
            assert len(consumer.rebalance.process_queue_table) == 8  # every queue, each
    finally:
        for consumer in consumers:
            await consumer.shutdown()
    assert seen["b1"] == seen["b2"] == Counter(keys)
    # Local offsets were written at shutdown, one file per client id.
    assert len(list((tmp_path / "offsets").glob("*/CG-bcast/offsets.json"))) == 2


async def test_messages_loop_that_raises_gets_the_message_again_and_ends_at_shutdown(
    start_process: StartProcess, tmp_path: Path
) -> None:
    _, namesrv = await start_namesrv(start_process, tmp_path)
    await start_broker(
        start_process, tmp_path, namesrv, "broker-a", messageDelayLevel=" ".join(["1s"] * 18)
    )
    await produce(namesrv, "PushIter", ["m0", "m1", "m2"], per_batch=1)
    config = PushConsumerConfig(consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer = PushConsumer("CG-iter", config=config, client_config=client(namesrv, "i1"))
    consumer.subscribe("PushIter", "*")
    seen: list[tuple[str, int]] = []

    async def second_loop() -> None:
        async for msg in consumer.messages():
            seen.append((msg.keys[0], msg.reconsume_times))

    async with consumer:
        with pytest.raises(RuntimeError, match="boom"):
            # aclosing: the failed message is sent back when the loop exits, not
            # whenever the garbage collector finalizes the generator.
            async with contextlib.aclosing(consumer.messages()) as messages:
                async for msg in messages:
                    if msg.keys[0] == "m1":
                        raise RuntimeError("boom")
                    seen.append((msg.keys[0], msg.reconsume_times))
        loop_task = asyncio.create_task(second_loop())
        await wait_until(
            lambda: {("m0", 0), ("m2", 0), ("m1", 1)} <= set(seen),
            timeout=30,
            what="m1 back with reconsumeTimes 1",
            describe=lambda: seen,
        )
    # The shutdown ended the loop: the task finishes without being cancelled.
    await wait_until(loop_task.done, timeout=5, what="the messages() loop to end")
    assert loop_task.exception() is None
    assert sorted(seen) == [("m0", 0), ("m1", 1), ("m2", 0)]
