"""Consume progress made on the slave survives the master's return (issue 24).

The story, as a user saw it against mqnamesrv plus a SYNC_MASTER and its slave:
a group consumed part of a topic and stopped; the master was SIGKILLed; the group
restarted and consumed the rest from the slave, committing its offsets there; the
master came back, 500 new messages were sent and the group started again. It got
the 500, and every message it had consumed during the outage a second time: the
master still held its old offsets, and nothing carried the slave's to it.

Here the same five steps run on real processes (mqcluster's launcher). Once the
master is back, the group re-receives at most what was in flight when it stopped
(<= 1 % of what it consumed during the outage), and gets every new message.
"""

from __future__ import annotations

import pytest

from aiorocketmq.client.producer import Producer
from aiorocketmq.client.results import SendStatus
from aiorocketmq.common.message import Message
from aiorocketmq.deploy.layout import standard_layout
from aiorocketmq.testing import ClusterFactory, ClusterHandle
from tests.chaos.workload import Deliveries, client_config, committed_offsets
from tests.support.cluster import runtime_info
from tests.support.wait import wait_until

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(180)]

TOPIC = "ProgressTopic"
GROUP = "CG_progress"
QUEUES = 4
BEFORE, OUTAGE, AFTER = 1_000, 1_000, 500


async def start_master_slave(rocketmq_cluster: ClusterFactory) -> ClusterHandle:
    """One SYNC_MASTER ``broker-a`` with its slave ``broker-a-s`` and a 4-queue topic."""
    cluster = rocketmq_cluster(standard_layout(("broker-a",), slaves=True, role="SYNC_MASTER"))
    await cluster.create_topic_async(TOPIC, QUEUES)
    return cluster


async def send(namesrv: str, prefix: str, count: int) -> list[str]:
    """``count`` messages keyed ``<prefix>-<i>``, each acknowledged SEND_OK."""
    producer = Producer(f"PG_{prefix}", client_config=client_config(namesrv, f"{prefix}-p"))
    await producer.start()
    keys = [f"{prefix}-{i}" for i in range(count)]
    try:
        for key in keys:
            result = await producer.send(Message(TOPIC, b"p" * 64, properties={"KEYS": key}))
            assert result.status is SendStatus.SEND_OK, result
    finally:
        await producer.shutdown()
    return keys


async def wait_committed(addr: str, total: int, what: str) -> list[int]:
    """Wait until the group's committed offsets at ``addr`` add up to ``total``."""

    async def check() -> list[int] | None:
        offsets = await committed_offsets(addr, GROUP, TOPIC, QUEUES)
        return offsets if sum(offsets) == total else None

    return await wait_until(check, timeout=30, interval=0.1, what=what)  # type: ignore[no-any-return]


async def consume(namesrv: str, keys: set[str]) -> Deliveries:
    """Start the group, wait until it has every key of ``keys``, stop it (its
    shutdown commits the final offsets, to the master or else the slave)."""
    deliveries = Deliveries(namesrv, TOPIC, GROUP)
    await deliveries.consumer.start()
    try:
        await wait_until(
            lambda: not deliveries.missing(keys),
            timeout=60,
            interval=0.05,
            what=f"{len(keys)} keys consumed",
            describe=lambda: len(deliveries.missing(keys)),
        )
    finally:
        await deliveries.consumer.shutdown()
    return deliveries


@pytest.mark.timeout(180)
async def test_group_consumed_on_the_slave_is_not_sent_back_by_the_returning_master(
    rocketmq_cluster: ClusterFactory,
) -> None:
    cluster = await start_master_slave(rocketmq_cluster)
    namesrv, master, slave = (
        cluster.namesrv_addr, cluster.address("broker-a"), cluster.address("broker-a-s")
    )  # fmt: skip
    # 1. The group consumes part of the topic and stops; the slave syncs its offsets.
    first = set(await send(namesrv, "before", BEFORE))
    await consume(namesrv, first)
    await wait_committed(master, BEFORE, "offsets committed on the master")
    await wait_committed(slave, BEFORE, "the master's offsets synced to the slave")
    outage = set(await send(namesrv, "outage", OUTAGE))
    await cluster.wait_caught_up_async(30)
    # 2. The master dies.
    await cluster.kill_async("broker-a")
    # 3. The group restarts and consumes the rest from the slave, committing there.
    during = await consume(namesrv, outage)
    assert not set(during.seen) & first, "phase-1 messages came again from the slave"
    on_slave = await wait_committed(slave, BEFORE + OUTAGE, "offsets committed on the slave")
    # 4. The master returns; its very first answers already carry the slave's offsets.
    await cluster.restart_async("broker-a")
    assert await committed_offsets(master, GROUP, TOPIC, QUEUES) == on_slave
    info = await runtime_info(master)
    assert int(info["slaveOffsetCatchUpRaised"]) >= 1, info

    async def slave_connected() -> bool:
        return (await runtime_info(master)).get("haSlaveNum") == "1"

    # SYNC_MASTER sends need the slave's HA connection back (SLAVE_NOT_AVAILABLE).
    await wait_until(slave_connected, timeout=30, interval=0.1, what="the slave reconnected")
    new = set(await send(namesrv, "after", AFTER))
    # 5. The group starts again: every new message, and no outage message again.
    deliveries = Deliveries(namesrv, TOPIC, GROUP)
    await deliveries.consumer.start()
    try:
        await wait_until(
            lambda: not deliveries.missing(new),
            timeout=60,
            interval=0.05,
            what=f"{AFTER} new keys consumed",
            describe=lambda: len(deliveries.missing(new)),
        )
    finally:
        await deliveries.consumer.shutdown()
    # Everything delivered was committed: a re-delivery from older offsets, which
    # comes before the new messages of its queue, would have been seen by now.
    await wait_committed(master, BEFORE + OUTAGE + AFTER, "final offsets on the master")
    again = set(deliveries.seen) & outage
    assert len(again) <= OUTAGE // 100, f"{len(again)} outage messages delivered again"
    assert not set(deliveries.seen) & first
    assert set(deliveries.seen) >= new
