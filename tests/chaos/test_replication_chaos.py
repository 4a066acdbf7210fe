"""Master-slave replication under chaos (issue 9), one master and its slave.

- kill -9 the slave under SYNC_MASTER: sends return SLAVE_NOT_AVAILABLE or
  FLUSH_SLAVE_TIMEOUT (with ``retry_another_broker_when_not_store_ok`` off the
  producer hands the broker's status back, as Java's does) and SEND_OK again
  once the slave is back.
- cut the master-slave link with a TCP proxy (drop, pause, delay) and heal it:
  the slave stops where the cut found it and resumes from that offset, so its
  CommitLog is byte-identical to the master's over the written range.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import time
from pathlib import Path

import pytest

from aiorocketmq.client.config import ProducerConfig
from aiorocketmq.client.producer import Producer
from aiorocketmq.client.results import SendStatus
from aiorocketmq.common.message import Message
from aiorocketmq.deploy import Layout, standard_layout
from aiorocketmq.testing import ClusterFactory, ClusterHandle
from tests.chaos.report import report
from tests.chaos.workload import Deliveries, client_config
from tests.support.cluster import commitlog_max_offset
from tests.support.tcp_proxy import TcpProxy
from tests.support.wait import wait_until

pytestmark = [pytest.mark.chaos]

TOPIC = "ChaosRepl"
NOT_STORED_OK = {SendStatus.SLAVE_NOT_AVAILABLE, SendStatus.FLUSH_SLAVE_TIMEOUT}


class Sender:
    """One producer; every result's status is counted, SEND_OK keys kept."""

    def __init__(self, producer: Producer) -> None:
        self.producer = producer
        self.acked: set[str] = set()
        self.statuses: list[SendStatus] = []

    async def send(self) -> SendStatus:
        key = f"r{len(self.statuses)}"
        result = await self.producer.send(Message(TOPIC, b"r" * 200, properties={"KEYS": key}))
        self.statuses.append(result.status)
        if result.status is SendStatus.SEND_OK:
            self.acked.add(key)
        return result.status

    async def batch(self, count: int) -> None:
        """``count`` messages in batches of 50, all acknowledged."""
        for first in range(0, count, 50):
            keys = [f"b{len(self.acked) + i}" for i in range(min(50, count - first))]
            msgs = [Message(TOPIC, b"b" * 512, properties={"KEYS": k}) for k in keys]
            result = await self.producer.send_batch(msgs)
            assert result.status is SendStatus.SEND_OK, result
            self.acked.update(keys)


async def _consume_all(cluster: ClusterHandle, acked: set[str], group: str) -> Deliveries:
    deliveries = Deliveries(cluster.namesrv_addr, TOPIC, group)
    await deliveries.consumer.start()
    try:
        await wait_until(
            lambda: not deliveries.missing(acked),
            timeout=30,
            interval=0.05,
            what="every acknowledged key consumed",
            describe=lambda: len(deliveries.missing(acked)),
        )
    finally:
        await deliveries.consumer.shutdown()
    return deliveries


@pytest.mark.timeout(120)
async def test_slave_kill_under_sync_master_reports_and_recovers(
    rocketmq_cluster: ClusterFactory,
) -> None:
    layout = standard_layout(("broker-a",), slaves=True, role="SYNC_MASTER")
    cluster = rocketmq_cluster(layout, settings={"syncFlushTimeout": 2_000})
    await cluster.create_topic_async(TOPIC)
    config = ProducerConfig(send_msg_timeout=10_000, retry_another_broker_when_not_store_ok=False)
    producer = Producer("PG_repl", config=config, client_config=client_config(
        cluster.namesrv_addr, "repl-producer"))  # fmt: skip
    async with producer:
        sender = Sender(producer)
        for _ in range(50):
            assert await sender.send() is SendStatus.SEND_OK
        await cluster.kill_async("broker-a-s")
        # The first send after the kill may still be acknowledged by a replica in
        # flight; from then on, every send reports that the slave did not store it.
        await wait_until(
            lambda: _sent_not_ok(sender), timeout=15, interval=0.01, what="a not-stored status"
        )
        during = [await sender.send() for _ in range(20)]
        assert set(during) <= NOT_STORED_OK, during
        restarted_at = time.monotonic()
        await cluster.restart_async("broker-a-s")
        await wait_until(
            lambda: _sent_ok(sender), timeout=30, interval=0.02, what="SEND_OK after the restart"
        )
        resume = time.monotonic() - restarted_at
        for _ in range(50):
            assert await sender.send() is SendStatus.SEND_OK
    deliveries = await _consume_all(cluster, sender.acked, "CG_repl_slave_kill")
    result = report("slave-kill", sender.acked, deliveries.seen, resume)
    print(f"statuses: { {s.name: sender.statuses.count(s) for s in set(sender.statuses)} }")
    assert result.lost == 0


async def _sent_not_ok(sender: Sender) -> bool:
    status = await sender.send()
    assert status in NOT_STORED_OK | {SendStatus.SEND_OK}, status
    return status is not SendStatus.SEND_OK


async def _sent_ok(sender: Sender) -> bool:
    status = await sender.send()
    assert status in NOT_STORED_OK | {SendStatus.SEND_OK}, status
    return status is SendStatus.SEND_OK


def _proxied_layout(proxy: TcpProxy) -> Layout:
    """broker-a (ASYNC_MASTER) and a slave whose haMasterAddress is the proxy."""
    base = standard_layout(("broker-a",), slaves=True, role="ASYNC_MASTER")
    nodes = tuple(
        dataclasses.replace(n, properties={**n.properties, "haMasterAddress": proxy.address})
        if n.is_slave
        else n
        for n in base.nodes
    )
    return dataclasses.replace(base, nodes=nodes)


def _commitlog_digest(store: Path, end: int) -> str:
    digest = hashlib.sha256()
    left = end
    for path in sorted((store / "commitlog").iterdir()):
        data = path.read_bytes()[: max(left, 0)]
        digest.update(data)
        left -= len(data)
    assert left <= 0, f"{store}: CommitLog ends {left} bytes short of {end}"
    return digest.hexdigest()


async def _cut_produce_heal(
    cluster: ClusterHandle, proxy: TcpProxy, sender: Sender, cut: str
) -> float:
    """Cut the link (``drop`` or ``pause``), produce, check the slave stood still,
    heal; seconds from the heal until the slave caught up."""
    slave, master = cluster.address("broker-a-s"), cluster.address("broker-a")
    before = await commitlog_max_offset(slave)
    getattr(proxy, cut)()
    await sender.batch(500)
    assert await commitlog_max_offset(master) > before
    # Nothing crossed the cut: the slave is exactly where the cut found it.
    assert await commitlog_max_offset(slave) == before, cut
    healed_at = time.monotonic()
    proxy.heal()
    await cluster.wait_caught_up_async(30)
    return time.monotonic() - healed_at


@pytest.mark.timeout(120)
async def test_cut_master_slave_link_resumes_from_the_right_offset(
    rocketmq_cluster: ClusterFactory,
) -> None:
    proxy = await TcpProxy().start()
    try:
        # The factory blocks while it starts processes: keep this loop (the proxy) free.
        cluster = await asyncio.to_thread(rocketmq_cluster, _proxied_layout(proxy))
        proxy.target = f"127.0.0.1:{cluster.layout.node('broker-a').ha_port}"
        await cluster.create_topic_async(TOPIC)
        async with Producer("PG_proxy", client_config=client_config(
                cluster.namesrv_addr, "proxy-producer")) as producer:  # fmt: skip
            sender = Sender(producer)
            await sender.batch(500)
            await cluster.wait_caught_up_async(30)
            accepted = proxy.accepted
            resume = await _cut_produce_heal(cluster, proxy, sender, "drop")
            assert proxy.accepted > accepted  # the slave reconnected through the proxy
            resume = max(resume, await _cut_produce_heal(cluster, proxy, sender, "pause"))
            proxy.delay_s = 0.02
            await sender.batch(500)
            await cluster.wait_caught_up_async(30)
            proxy.delay_s = 0.0
        deliveries = await _consume_all(cluster, sender.acked, "CG_repl_proxy")
        end = (await cluster.wait_caught_up_async(30))["broker-a-s"]
        await cluster.stop_async("broker-a")
        await cluster.stop_async("broker-a-s")
    finally:
        await proxy.close()
    stores = cluster.directory / "store"
    assert _commitlog_digest(stores / "broker-a", end) == _commitlog_digest(
        stores / "broker-a-s", end
    )
    result = report("ha-link-cut", sender.acked, deliveries.seen, resume)
    assert result.lost == 0
