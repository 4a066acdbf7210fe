"""kill -9 the broker-a master of 2m-2s-sync under load (issue 9).

- One kill: every message broker-a acknowledged is consumed from its slave while
  the master is down; sends never stop for more than 2 s (producers shift to
  broker-b); after the restart broker-a catches up, consumption finishes with
  nothing lost, and no committed offset is below what the slave had.
- Twenty kills with seeded random timing (a ``slow`` test): zero acknowledged
  messages lost across all rounds.

SYNC_MASTER acknowledges a message only once the slave has it, so "lost" here
means a product bug, not a tolerated window.
"""

from __future__ import annotations

import os
import random
import time

import pytest

from aiorocketmq.testing import ClusterFactory, ClusterHandle
from tests.chaos.report import report
from tests.chaos.workload import Deliveries, Traffic, committed_offsets
from tests.support.wait import wait_until

pytestmark = [pytest.mark.chaos]

TOPIC = "ChaosKill"
GROUP = "CG_chaos_kill"


async def _cluster(rocketmq_cluster: ClusterFactory) -> ClusterHandle:
    cluster = rocketmq_cluster("2m-2s-sync")
    await cluster.create_topic_async(TOPIC)
    return cluster


async def _acks_since(traffic: Traffic, moment: float, count: int, broker: str | None) -> None:
    await wait_until(
        lambda: traffic.oks_since(moment, broker) >= count,
        timeout=30,
        interval=0.02,
        what=f"{count} SEND_OK on {broker or 'any broker'}",
        describe=lambda: dict(traffic.statuses),
    )


async def _all_consumed(deliveries: Deliveries, keys: set[str], within_s: float = 60) -> None:
    await wait_until(
        lambda: not deliveries.missing(keys),
        timeout=within_s,
        interval=0.05,
        what=f"{len(keys)} acknowledged keys consumed",
        describe=lambda: len(deliveries.missing(keys)),
    )


async def _all_committed(addr: str) -> list[int] | None:
    offsets = await committed_offsets(addr, GROUP, TOPIC)
    return offsets if min(offsets) > 0 else None


@pytest.mark.timeout(150)
async def test_master_kill_loses_nothing_and_producers_shift(
    rocketmq_cluster: ClusterFactory,
) -> None:
    cluster = await _cluster(rocketmq_cluster)
    slave = cluster.address("broker-a-s")
    deliveries = Deliveries(cluster.namesrv_addr, TOPIC, GROUP)
    await deliveries.consumer.start()
    traffic = await Traffic(cluster.namesrv_addr, TOPIC, prefix="kill").start()
    try:
        await _acks_since(traffic, 0.0, 1_000, "broker-a")
        killed_at = time.monotonic()
        await cluster.kill_async("broker-a")
        await _acks_since(traffic, time.monotonic(), 500, "broker-b")
        # Everything broker-a acknowledged is consumed from its slave, master down.
        await _all_consumed(deliveries, traffic.acked_on("broker-a"), within_s=30)
        gap = traffic.max_gap(killed_at, time.monotonic())
        await deliveries.consumer.persist_consumer_offset()  # oneway: wait for it to land
        on_slave = await wait_until(
            lambda: _all_committed(slave), timeout=10, what="offsets committed on the slave"
        )
        await cluster.restart_async("broker-a")
        await cluster.wait_caught_up_async(30)
        await _acks_since(traffic, time.monotonic(), 300, "broker-a")
    finally:
        await traffic.stop()
    try:
        await _all_consumed(deliveries, set(traffic.acked))
    finally:
        await deliveries.consumer.shutdown()  # persists the final offsets
    on_master = await committed_offsets(cluster.address("broker-a"), GROUP, TOPIC)
    result = report("master-kill", traffic.acked, deliveries.seen, gap)
    assert result.lost == 0, sorted(deliveries.missing(set(traffic.acked)))[:10]
    assert gap <= 2.0, f"sends stopped for {gap:.3f} s after the kill"
    rolled_back = [(q, m, s) for q, (m, s) in enumerate(zip(on_master, on_slave, strict=True))
                   if m < s]  # fmt: skip
    assert not rolled_back, f"(queue, master, slave-before-restart): {rolled_back}"


def _seed() -> int:
    return int(os.environ.get("CHAOS_SEED", str(random.SystemRandom().randrange(1 << 32))))


@pytest.mark.slow
@pytest.mark.timeout(240)
async def test_twenty_master_kills_lose_nothing(rocketmq_cluster: ClusterFactory) -> None:
    seed = _seed()
    print(f"\nchaos master-kill-loop: seed={seed} (rerun with CHAOS_SEED={seed})")
    rng = random.Random(seed)
    cluster = await _cluster(rocketmq_cluster)
    deliveries = Deliveries(cluster.namesrv_addr, TOPIC, GROUP)
    await deliveries.consumer.start()
    traffic = await Traffic(cluster.namesrv_addr, TOPIC, prefix="loop").start()
    worst_gap = 0.0
    try:
        for _ in range(20):
            # Random timing, measured in acknowledgements rather than sleeps.
            await _acks_since(traffic, time.monotonic(), rng.randint(20, 300), "broker-a")
            killed_at = time.monotonic()
            await cluster.kill_async("broker-a")
            await _acks_since(traffic, time.monotonic(), rng.randint(10, 150), "broker-b")
            worst_gap = max(worst_gap, traffic.max_gap(killed_at, time.monotonic()))
            await cluster.restart_async("broker-a")
            await cluster.wait_caught_up_async(30)
    finally:
        await traffic.stop()
    try:
        await _all_consumed(deliveries, set(traffic.acked))
    finally:
        await deliveries.consumer.shutdown()
    result = report("master-kill-loop", traffic.acked, deliveries.seen, worst_gap)
    assert result.lost == 0, sorted(deliveries.missing(set(traffic.acked)))[:10]
    assert result.acknowledged > 20 * 30


@pytest.mark.timeout(150)
async def test_async_master_kill_loses_nothing_once_restarted(
    rocketmq_cluster: ClusterFactory,
) -> None:
    # ASYNC_MASTER acknowledges before the slave has the message: what the slave
    # lacks at the kill is unavailable until the master is back, not lost (SIGKILL
    # leaves the master's written pages to the kernel; its restart recovers them).
    cluster = rocketmq_cluster("2m-2s-async")
    await cluster.create_topic_async(TOPIC)
    deliveries = Deliveries(cluster.namesrv_addr, TOPIC, GROUP)
    await deliveries.consumer.start()
    traffic = await Traffic(cluster.namesrv_addr, TOPIC, prefix="async").start()
    try:
        await _acks_since(traffic, 0.0, 1_000, "broker-a")
        killed_at = time.monotonic()
        await cluster.kill_async("broker-a")
        await _acks_since(traffic, time.monotonic(), 500, "broker-b")
        gap = traffic.max_gap(killed_at, time.monotonic())
        await cluster.restart_async("broker-a")
        await _acks_since(traffic, time.monotonic(), 300, "broker-a")
    finally:
        await traffic.stop()
    try:
        await _all_consumed(deliveries, set(traffic.acked))
    finally:
        await deliveries.consumer.shutdown()
    result = report("async-master-kill", traffic.acked, deliveries.seen, gap)
    assert result.lost == 0, sorted(deliveries.missing(set(traffic.acked)))[:10]
    assert gap <= 2.0, f"sends stopped for {gap:.3f} s after the kill"
