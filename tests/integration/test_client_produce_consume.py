"""The client library against real ``mqnamesrv`` + ``mqbroker`` processes.

- A producer sends messages with keys; a pull consumer reads every queue from 0 and
  gets each message exactly once.
- With two brokers, SIGKILL one mid-stream: sends retry on the other broker, routes
  refresh at once, and nothing acknowledged is lost.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from aiorocketmq.client.config import ClientConfig
from aiorocketmq.client.producer import Producer
from aiorocketmq.client.pull_consumer import PullConsumer
from aiorocketmq.client.results import PullStatus, SendResult, SendStatus
from aiorocketmq.common.message import Message, MessageQueue
from tests.support.cluster import start_broker, start_namesrv
from tests.support.procs import ManagedProcess
from tests.support.wait import wait_until

pytestmark = pytest.mark.timeout(120)

StartProcess = Callable[..., ManagedProcess]


def _client(namesrv: str, name: str) -> ClientConfig:
    return ClientConfig(namesrv_addr=namesrv, client_ip="127.0.0.1", instance_name=name)


async def _send_all(producer: Producer, topic: str, keys: list[str]) -> list[SendResult]:
    """Send one message per key, 64 in flight."""
    results: list[SendResult] = []
    for start in range(0, len(keys), 64):
        tasks = []
        for key in keys[start : start + 64]:
            msg = Message(topic, f"payload of {key}".encode() * 4)
            msg.keys, msg.tags = key, "TagA"
            tasks.append(producer.send_async(msg))
        results += await asyncio.gather(*tasks)
    return results


async def _read_all(consumer: PullConsumer, mqs: list[MessageQueue]) -> list[str]:
    """Every key in ``mqs``, each queue read from offset 0 to its end."""
    keys: list[str] = []
    for mq in mqs:
        offset = 0
        while True:
            result = await consumer.pull(mq, "*", offset, 32)
            if result.status is not PullStatus.FOUND:
                break
            keys += [m.keys[0] for m in result.msg_found_list]
            offset = result.next_begin_offset
    return keys


async def _wait_dispatched(consumer: PullConsumer, mqs: list[MessageQueue], total: int) -> None:
    async def done() -> bool:
        return sum([await consumer.max_offset(mq) for mq in mqs]) == total

    await wait_until(done, timeout=30, what=f"{total} messages in the queues")


async def test_every_message_produced_is_pulled_exactly_once(
    start_process: StartProcess, tmp_path: Path
) -> None:
    _, namesrv = await start_namesrv(start_process, tmp_path)
    await start_broker(start_process, tmp_path, namesrv, "broker-a")
    keys = [f"key-{i}" for i in range(3000)]
    async with Producer("PG", client_config=_client(namesrv, "producer")) as producer:
        results = await _send_all(producer, "ClientTopic", keys)
        batch = await producer.send_batch(
            [Message("ClientTopic", b"b", properties={"KEYS": f"batch-{i}"}) for i in range(100)]
        )
    assert (
        all(r.status is SendStatus.SEND_OK for r in results) and batch.status is SendStatus.SEND_OK
    )
    async with PullConsumer("CG", client_config=_client(namesrv, "consumer")) as consumer:
        mqs = await consumer.fetch_subscribe_message_queues("ClientTopic")
        assert len(mqs) == 4
        await _wait_dispatched(consumer, mqs, len(keys) + 100)
        pulled = await _read_all(consumer, mqs)
    # Each exactly once: 3000 single sends and one batch of 100.
    assert Counter(pulled) == Counter(keys + [f"batch-{i}" for i in range(100)])


async def test_sends_move_to_the_other_broker_when_one_is_killed(
    start_process: StartProcess, tmp_path: Path
) -> None:
    _, namesrv = await start_namesrv(start_process, tmp_path)
    a = await start_broker(start_process, tmp_path, namesrv, "broker-a")
    await start_broker(start_process, tmp_path, namesrv, "broker-b")
    async with Producer("PG", client_config=_client(namesrv, "producer")) as producer:
        before = await _send_all(producer, "FailTopic", [f"before-{i}" for i in range(200)])
        assert {r.message_queue.broker_name for r in before} == {"broker-a", "broker-b"}

        async def on_both() -> bool:
            await producer.instance.update_topic_route("FailTopic")  # not the 30 s timer
            queues = await producer.fetch_publish_message_queues("FailTopic")
            return {mq.broker_name for mq in queues} == {"broker-a", "broker-b"}

        # Each broker registers the auto-created topic on its own: a route refresh can
        # land between the two and leave only broker-a to retry on (failed once in CI).
        await wait_until(on_both, timeout=30, what="FailTopic routed to both brokers")
        a.proc.kill()
        after = await _send_all(producer, "FailTopic", [f"after-{i}" for i in range(300)])
        assert all(r.status is SendStatus.SEND_OK for r in after)
        assert {r.message_queue.broker_name for r in after} == {"broker-b"}

        async def a_gone() -> bool:
            queues = await producer.fetch_publish_message_queues("FailTopic")
            return {mq.broker_name for mq in queues} == {"broker-b"}

        # The name server dropped broker-a when its connection closed; the refresh that
        # the first failed send triggered (not the 30 s timer) brought that here.
        await wait_until(a_gone, what="broker-a gone from the producer's queues")
    async with PullConsumer("CG", client_config=_client(namesrv, "consumer")) as consumer:
        mqs = await consumer.fetch_subscribe_message_queues("FailTopic")
        assert {mq.broker_name for mq in mqs} == {"broker-b"}
        on_b_total = sum(r.message_queue.broker_name == "broker-b" for r in before + after)
        await _wait_dispatched(consumer, mqs, on_b_total)
        pulled = await _read_all(consumer, mqs)
    on_b = [
        f"before-{i}" for i, r in enumerate(before) if r.message_queue.broker_name == "broker-b"
    ]
    assert Counter(pulled) == Counter(on_b + [f"after-{i}" for i in range(300)])


@pytest.mark.slow
async def test_100k_messages_batched_are_all_pulled_none_lost(
    start_process: StartProcess, tmp_path: Path
) -> None:
    _, namesrv = await start_namesrv(start_process, tmp_path)
    await start_broker(start_process, tmp_path, namesrv, "broker-a")
    total, per_batch = 100_000, 100
    async with Producer("PG", client_config=_client(namesrv, "producer")) as producer:
        for start in range(0, total, per_batch * 4):
            batches = [
                [
                    Message("BigTopic", b"y" * 1024, properties={"KEYS": f"m{i}"})
                    for i in range(first, first + per_batch)
                ]
                for first in range(start, start + per_batch * 4, per_batch)
            ]
            results = await asyncio.gather(*[producer.send_batch(b) for b in batches])
            assert all(r.status is SendStatus.SEND_OK for r in results)
    async with PullConsumer("CG", client_config=_client(namesrv, "consumer")) as consumer:
        mqs = await consumer.fetch_subscribe_message_queues("BigTopic")
        await _wait_dispatched(consumer, mqs, total)
        pulled = await _read_all(consumer, mqs)
    assert len(pulled) == total and set(pulled) == {f"m{i}" for i in range(total)}
