"""Rebalance: queue diffing, computePullFromWhere and the process-queue table, against a
real in-process broker."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from aiorocketmq.client.allocate import allocate_averagely
from aiorocketmq.client.config import ClientConfig
from aiorocketmq.client.offset_store import LocalFileOffsetStore, RemoteBrokerOffsetStore
from aiorocketmq.client.process_queue import ProcessQueue
from aiorocketmq.client.producer import Producer
from aiorocketmq.client.pull_consumer import PullConsumer
from aiorocketmq.client.rebalance import RebalanceImpl, compute_pull_from_where, diff_queues
from aiorocketmq.common.message import Message, MessageQueue
from aiorocketmq.common.protocol_bodies import (
    ConsumeFromWhere,
    LockBatchRequestBody,
    MessageModel,
)
from aiorocketmq.namesrv.server import NamesrvController
from aiorocketmq.runtime import BlockingExecutor
from tests.support.wait import wait_until
from tests.unit.client.conftest import StartBroker

W = ConsumeFromWhere


def mqs(topic: str, *ids: int, broker: str = "broker-a") -> list[MessageQueue]:
    return [MessageQueue(topic, broker, i) for i in ids]


def test_diff_queues_only_looks_at_the_topic() -> None:
    current = mqs("T", 0, 1, 2) + mqs("U", 0)
    removed, added = diff_queues(current, mqs("T", 2, 3, 4), "T")
    assert removed == mqs("T", 0, 1)
    assert added == mqs("T", 3, 4)
    assert diff_queues(current, mqs("T", 0, 1, 2), "T") == ([], [])
    assert diff_queues([], [], "T") == ([], [])


def _client(namesrv: str, name: str) -> ClientConfig:
    return ClientConfig(namesrv_addr=namesrv, client_ip="127.0.0.1", instance_name=name)


async def _produce(namesrv: str, topic: str, n: int) -> None:
    """Send ``n`` messages alternately to queues 0 and 1; wait until they are dispatched."""
    async with Producer("PG", client_config=_client(namesrv, "p")) as producer:
        last = [0, 0]
        for i in range(n):
            mq = MessageQueue(topic, "broker-a", i % 2)
            last[i % 2] = (await producer.send(Message(topic, b"x"), mq=mq)).queue_offset + 1
    async with PullConsumer("CG-wait", client_config=_client(namesrv, "w")) as reader:

        async def dispatched() -> bool:
            got = [await reader.max_offset(MessageQueue(topic, "broker-a", i)) for i in (0, 1)]
            return all(g >= want for g, want in zip(got, last, strict=True))

        await wait_until(dispatched, timeout=10, what=f"{n} messages in {topic}'s queues")


async def test_compute_pull_from_where(
    namesrv: NamesrvController, start_broker: StartBroker, tmp_path: Path
) -> None:
    await start_broker("broker-a")
    await _produce(namesrv.address, "TopicA", 1)  # creates the topic (4 queues)
    before = int(time.time() * 1000) - 60_000
    await _produce(namesrv.address, "TopicA", 9)  # queue 0: 6 messages in all, queue 1: 4
    future = int(time.time() * 1000) + 60_000
    q0, q3 = MessageQueue("TopicA", "broker-a", 0), MessageQueue("TopicA", "broker-a", 3)
    retry = MessageQueue("%RETRY%CG", "broker-a", 0)
    ts = W.CONSUME_FROM_TIMESTAMP
    executor = BlockingExecutor("offsets-test")
    async with PullConsumer("CG", client_config=_client(namesrv.address, "c")) as admin:
        # A local store without an entry reads -1: the setting decides.
        local = LocalFileOffsetStore(tmp_path / "offsets", "cid", "CG", executor)
        assert await compute_pull_from_where(q0, W.CONSUME_FROM_LAST_OFFSET, local, admin) == 6
        assert await compute_pull_from_where(q3, W.CONSUME_FROM_LAST_OFFSET, local, admin) == 0
        assert await compute_pull_from_where(q0, W.CONSUME_FROM_FIRST_OFFSET, local, admin) == 0
        assert await compute_pull_from_where(retry, W.CONSUME_FROM_LAST_OFFSET, local, admin) == 0
        assert await compute_pull_from_where(q0, ts, local, admin, before) == 0
        # Retry topics ignore the timestamp: they start at their end.
        assert await compute_pull_from_where(retry, ts, local, admin, before) == (
            await admin.max_offset(retry)
        )
        # A committed offset wins over every setting.
        local.update_offset(q0, 4)
        await local.persist_all([q0])
        for where in (W.CONSUME_FROM_LAST_OFFSET, W.CONSUME_FROM_FIRST_OFFSET, ts):
            assert await compute_pull_from_where(q0, where, local, admin, future) == 4
        # The broker answers 0 for a group without an offset on a queue whose first
        # message is still in memory (Java's QUERY_CONSUMER_OFFSET does the same).
        remote = admin.offset_store
        assert isinstance(remote, RemoteBrokerOffsetStore)
        assert await compute_pull_from_where(q0, W.CONSUME_FROM_LAST_OFFSET, remote, admin) == 0
        await remote.update_consume_offset_to_broker(q0, 3, oneway=False)
        for where in (W.CONSUME_FROM_LAST_OFFSET, W.CONSUME_FROM_FIRST_OFFSET, ts):
            assert await compute_pull_from_where(q0, where, remote, admin, future) == 3
    await executor.shutdown()


class Host:
    """The push-consumer side of a rebalance: offsets from a pull consumer, dispatches kept."""

    def __init__(self, admin: PullConsumer) -> None:
        self.admin = admin
        self.dispatched: list[tuple[MessageQueue, int]] = []

    async def max_offset(self, mq: MessageQueue) -> int:
        return await self.admin.max_offset(mq)

    async def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        return await self.admin.search_offset(mq, timestamp_ms)

    def dispatch_pull_request(self, mq: MessageQueue, pq: ProcessQueue, next_offset: int) -> None:
        self.dispatched.append((mq, next_offset))


async def test_update_process_queue_table_drops_persists_and_adds(
    namesrv: NamesrvController, start_broker: StartBroker
) -> None:
    await start_broker("broker-a")
    await _produce(namesrv.address, "TopicB", 4)  # queues 0 and 1: 2 messages each
    async with PullConsumer("CG-admin", client_config=_client(namesrv.address, "a")) as admin:
        host = Host(admin)
        store = RemoteBrokerOffsetStore(admin.instance, "CG-rb")
        rb = RebalanceImpl(
            admin.instance,
            "CG-rb",
            MessageModel.CLUSTERING,
            strategy=allocate_averagely,
            store=store,
            host=host,
            consume_from_where=W.CONSUME_FROM_LAST_OFFSET,
        )
        assert await rb.update_process_queue_table("TopicB", set(mqs("TopicB", 0, 1))) is True
        # The broker answers 0 for the new group (its queues are young, see above).
        assert host.dispatched == [(mqs("TopicB", 0)[0], 0), (mqs("TopicB", 1)[0], 0)]
        old = rb.process_queue_table[mqs("TopicB", 1)[0]]
        store.update_offset(mqs("TopicB", 1)[0], 1)  # consumed one message of queue 1
        # Queue 1 goes to another consumer, queue 2 comes in.
        assert await rb.update_process_queue_table("TopicB", set(mqs("TopicB", 0, 2))) is True
        assert old.dropped
        assert set(rb.process_queue_table) == set(mqs("TopicB", 0, 2))
        assert host.dispatched[-1] == (mqs("TopicB", 2)[0], 0)
        assert mqs("TopicB", 1)[0] not in store.offset_table
        # The dropped queue's offset was persisted, so its next owner starts there.
        fresh = RemoteBrokerOffsetStore(admin.instance, "CG-rb")
        assert await fresh.fetch_consume_offset_from_broker(mqs("TopicB", 1)[0]) == 1
        # Nothing changed: nothing done.
        assert await rb.update_process_queue_table("TopicB", set(mqs("TopicB", 0, 2))) is False
        assert len(host.dispatched) == 3


async def test_orderly_queue_is_added_only_once_its_broker_lock_is_ours(
    namesrv: NamesrvController, start_broker: StartBroker
) -> None:
    broker = await start_broker("broker-a")
    await _produce(namesrv.address, "TopicC", 2)
    async with PullConsumer("CG-admin", client_config=_client(namesrv.address, "a")) as admin:
        host = Host(admin)
        rb = RebalanceImpl(
            admin.instance,
            "CG-lock",
            MessageModel.CLUSTERING,
            strategy=allocate_averagely,
            store=RemoteBrokerOffsetStore(admin.instance, "CG-lock"),
            host=host,
            orderly=True,
        )
        await admin.instance.update_topic_route("TopicC")
        q0 = mqs("TopicC", 0)[0]
        other = LockBatchRequestBody("CG-lock", "another-client", [q0])
        assert await admin.instance.api.lock_batch_mq(broker.address, other, 3_000) == {q0}
        # Another client holds the lock: the queue is not taken, and a retry is due soon.
        assert await rb.update_process_queue_table("TopicC", {q0}) is False
        assert rb.retry_soon and host.dispatched == [] and q0 not in rb.process_queue_table
        await admin.instance.api.unlock_batch_mq(broker.address, other, 3_000)
        assert await rb.update_process_queue_table("TopicC", {q0}) is True
        assert [mq for mq, _ in host.dispatched] == [q0]
        assert rb.process_queue_table[q0].locked
        # Dropping it releases the lock: the other client can take it at once.
        assert await rb.update_process_queue_table("TopicC", set()) is True
        assert await admin.instance.api.lock_batch_mq(broker.address, other, 3_000) == {q0}


class StuckOffsetStore(RemoteBrokerOffsetStore):
    """A broker offset store whose reads never answer (a start-offset lookup in flight)."""

    entered: asyncio.Event

    async def read_offset(self, mq: MessageQueue, type_: object) -> int:  # type: ignore[override]
        self.entered.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


async def test_unlock_all_releases_a_lock_granted_to_a_cancelled_rebalance(
    namesrv: NamesrvController, start_broker: StartBroker
) -> None:
    broker = await start_broker("broker-a")
    await _produce(namesrv.address, "TopicD", 2)
    async with PullConsumer("CG-admin", client_config=_client(namesrv.address, "a")) as admin:
        store = StuckOffsetStore(admin.instance, "CG-cancel")
        store.entered = asyncio.Event()
        rb = RebalanceImpl(
            admin.instance,
            "CG-cancel",
            MessageModel.CLUSTERING,
            strategy=allocate_averagely,
            store=store,
            host=Host(admin),
            orderly=True,
        )
        await admin.instance.update_topic_route("TopicD")
        q0 = mqs("TopicD", 0)[0]
        other = LockBatchRequestBody("CG-cancel", "another-client", [q0])
        # Shutdown cancels the rebalance after the broker granted the lock, while the
        # queue's start offset is being looked up (so it is not in the table yet).
        adding = asyncio.create_task(rb.update_process_queue_table("TopicD", {q0}))
        async with asyncio.timeout(5):
            await store.entered.wait()
        adding.cancel()
        await asyncio.gather(adding, return_exceptions=True)
        assert q0 not in rb.process_queue_table
        assert await admin.instance.api.lock_batch_mq(broker.address, other, 3_000) == set()
        await rb.unlock_all()
        assert await admin.instance.api.lock_batch_mq(broker.address, other, 3_000) == {q0}
