"""LitePullConsumer against real ``mqnamesrv`` + ``mqbroker`` processes.

- Subscribe: two consumers of one group share the topic's queues (half each once
  rebalanced), poll every message between them, and auto-commit: after shutdown the
  committed offsets are the queues' ends.
- Assign with manual commit: nothing is stored until ``commit_sync``; ``seek``,
  ``seek_to_begin`` and an illegal seek; ``pause`` and ``resume``.
- subscribe and assign are mutually exclusive, and one of them is needed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from aiorocketmq.client import (
    ClientConfig,
    ClientStateError,
    InvalidArgumentError,
    LitePullConsumer,
    LitePullConsumerConfig,
    Message,
    MessageExt,
    MessageQueue,
    Producer,
    ProducerConfig,
    PullConsumer,
)
from tests.support.cluster import start_broker, start_namesrv
from tests.support.procs import ManagedProcess
from tests.support.wait import wait_until

pytestmark = pytest.mark.timeout(120)

StartProcess = Callable[..., ManagedProcess]
FIRST = "CONSUME_FROM_FIRST_OFFSET"


def client(namesrv: str, name: str) -> ClientConfig:
    return ClientConfig(
        namesrv_addr=namesrv, client_ip="127.0.0.1", instance_name=name,
        poll_name_server_interval=1_000,
    )  # fmt: skip


async def send_keys(namesrv: str, topic: str, keys: list[str]) -> None:
    """Key i goes to queue i % 4 (chosen, not round robin: a retried send would move one)."""
    config = ProducerConfig(default_topic_queue_nums=4)
    async with Producer("PG", config=config, client_config=client(namesrv, "p")) as producer:
        for i, key in enumerate(keys):
            msg = Message(topic, key.encode(), keys=key)
            await producer.send(msg, selector=_queue_numbered, arg=i % 4)


def _queue_numbered(queues: list[MessageQueue], _msg: Message, queue_id: object) -> MessageQueue:
    return next(mq for mq in queues if mq.queue_id == queue_id)


async def test_two_subscribers_share_the_queues_and_auto_commit(
    start_process: StartProcess, tmp_path: Path
) -> None:
    _, namesrv = await start_namesrv(start_process, tmp_path)
    await start_broker(start_process, tmp_path, namesrv, "broker-a")
    keys = [f"k{i}" for i in range(40)]
    await send_keys(namesrv, "LiteSub", keys)
    config = LitePullConsumerConfig(consume_from_where=FIRST, rebalance_interval_millis=1_000)
    consumers = [
        LitePullConsumer("CG-lite", config=config, client_config=client(namesrv, f"l{i}"))
        for i in range(2)
    ]
    for consumer in consumers:
        consumer.subscribe("LiteSub", "*")
    seen: Counter[str] = Counter()
    async with consumers[0], consumers[1]:
        await wait_until(
            lambda: [len(c.assignment()) for c in consumers] == [2, 2],
            timeout=30, what="two queues each",
            describe=lambda: [c.assignment() for c in consumers],
        )  # fmt: skip
        assert consumers[0].assignment().isdisjoint(consumers[1].assignment())

        async def polled_everything() -> bool:
            for consumer in consumers:
                seen.update(m.keys[0] for m in await consumer.poll(timeout_s=0.2))
            return set(seen) == set(keys)

        await wait_until(polled_everything, timeout=30, what="every key polled")
    assert max(seen.values()) == 1  # no rebalance after they settled: once each
    # Auto commit, and a last one at shutdown: the group's offsets are the queues' ends.
    async with PullConsumer("CG-lite", client_config=client(namesrv, "checker")) as checker:
        for mq in await checker.fetch_subscribe_message_queues("LiteSub"):
            committed = await checker.fetch_consume_offset(mq, from_store=True)
            assert committed == await checker.max_offset(mq), mq


async def test_assign_manual_commit_seek_pause(start_process: StartProcess, tmp_path: Path) -> None:
    _, namesrv = await start_namesrv(start_process, tmp_path)
    await start_broker(start_process, tmp_path, namesrv, "broker-a")
    await send_keys(namesrv, "LiteAssign", [f"a{i}" for i in range(12)])
    config = LitePullConsumerConfig(consume_from_where=FIRST, auto_commit=False, pull_batch_size=2)
    consumer = LitePullConsumer("CG-assign", config=config, client_config=client(namesrv, "a"))
    with pytest.raises(ClientStateError, match="subscribe or assign"):
        await consumer.start()
    probe = LitePullConsumer("CG-probe", client_config=client(namesrv, "probe"))
    probe.assign([MessageQueue("LiteAssign", "broker-a", 0)])
    with pytest.raises(ClientStateError, match="mutually exclusive"):
        probe.subscribe("LiteAssign")
    mq = MessageQueue("LiteAssign", "broker-a", 0)
    consumer.assign([mq])
    async with consumer:
        got: list[MessageExt] = []

        async def three_in_queue_zero() -> bool:
            got.extend(await consumer.poll(timeout_s=0.2))
            return len(got) >= 3

        await wait_until(three_in_queue_zero, timeout=30, what="queue 0's three messages")
        assert [m.queue_offset for m in got] == [0, 1, 2]
        assert all(m.queue_id == 0 for m in got)
        # Manual: nothing stored yet (0 is a broker's answer for a group without an
        # offset in a queue that never lost messages, as Java's).
        assert await consumer.committed(mq) == 0
        await consumer.commit_sync()
        assert await consumer.committed(mq) == 3

        await consumer.seek_to_begin(mq)
        again = await wait_until(lambda: _poll(consumer), timeout=30, what="queue 0 again")
        assert again[0].queue_offset == 0
        with pytest.raises(InvalidArgumentError, match="Seek offset illegal"):
            await consumer.seek(mq, 99)
        with pytest.raises(ClientStateError, match="not in assigned list"):
            await consumer.seek(MessageQueue("LiteAssign", "broker-a", 3), 0)

        await consumer.seek_to_end(mq)
        consumer.pause([mq])
        await send_keys(namesrv, "LiteAssign", [f"b{i}" for i in range(8)])  # 2 to queue 0
        consumer.resume([mq])
        later = await wait_until(lambda: _poll(consumer), timeout=30, what="a message after resume")
        assert later[0].keys[0].startswith("b") and later[0].queue_offset == 3
        await consumer.commit({mq: 4})
        assert await consumer.committed(mq) == 4


async def _poll(consumer: LitePullConsumer) -> list[MessageExt] | None:
    return await consumer.poll(timeout_s=0.2) or None
