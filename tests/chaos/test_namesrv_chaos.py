"""kill -9 the name servers under load (issue 9).

Two name servers, brokers a and b: kill one and the clients carry on through the
other; kill both and they keep producing and consuming on their cached routes;
restart both on the same ports and every broker re-registers within one
registration interval (``registerNameServerPeriod`` = 10 s, the lowest RocketMQ
allows), after which clients use the new name servers again.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from aiorocketmq.client.producer import Producer
from aiorocketmq.client.results import SendStatus
from aiorocketmq.common.message import Message
from aiorocketmq.deploy import standard_layout
from aiorocketmq.testing import ClusterFactory
from tests.chaos.report import report
from tests.chaos.workload import Deliveries, Traffic, client_config
from tests.support.wait import wait_until

pytestmark = [pytest.mark.chaos]

TOPIC = "ChaosNamesrv"
GROUP = "CG_chaos_namesrv"
REGISTER_PERIOD_S = 10


async def _progress(traffic: Traffic, deliveries: Deliveries, count: int) -> None:
    """``count`` more SEND_OKs, then every key acknowledged so far consumed."""
    since = time.monotonic()
    await wait_until(
        lambda: traffic.oks_since(since) >= count,
        timeout=30,
        interval=0.02,
        what=f"{count} more SEND_OK",
        describe=lambda: dict(traffic.statuses),
    )
    acked = set(traffic.acked)
    await wait_until(
        lambda: not deliveries.missing(acked),
        timeout=30,
        interval=0.05,
        what="acknowledged keys consumed",
        describe=lambda: len(deliveries.missing(acked)),
    )


@pytest.mark.timeout(120)
async def test_namesrv_kills_clients_carry_on_and_brokers_reregister(
    rocketmq_cluster: ClusterFactory,
) -> None:
    layout = standard_layout(("broker-a", "broker-b"), namesrvs=2)
    cluster = rocketmq_cluster(
        layout, settings={"registerNameServerPeriod": REGISTER_PERIOD_S * 1000}
    )
    await cluster.create_topic_async(TOPIC)
    deliveries = Deliveries(cluster.namesrv_addr, TOPIC, GROUP)
    await deliveries.consumer.start()
    traffic = await Traffic(cluster.namesrv_addr, TOPIC, prefix="ns").start()
    try:
        await _progress(traffic, deliveries, 300)
        first_kill = time.monotonic()
        await cluster.kill_async("namesrv-1")
        await _progress(traffic, deliveries, 300)  # through namesrv-2
        await cluster.kill_async("namesrv-2")
        await _progress(traffic, deliveries, 300)  # on cached routes only
        gap = traffic.max_gap(first_kill, time.monotonic())
        restarted = time.monotonic()
        for name in ("namesrv-1", "namesrv-2"):
            await asyncio.to_thread(cluster.start_node, name)
        await cluster.wait_registered_async(REGISTER_PERIOD_S + 3)
        reregistered = time.monotonic() - restarted
        await _progress(traffic, deliveries, 300)
        # A new client finds the route on the restarted name servers.
        async with Producer("PG_ns_new", client_config=client_config(
                cluster.namesrv_addr, "ns-new")) as fresh:  # fmt: skip
            sent = await fresh.send(Message(TOPIC, b"new"))
            assert sent.status is SendStatus.SEND_OK, sent
    finally:
        await traffic.stop()
    try:
        await _progress(traffic, deliveries, 0)
    finally:
        await deliveries.consumer.shutdown()
    result = report("namesrv-kill", traffic.acked, deliveries.seen, reregistered)
    print(f"longest send gap while name servers were down: {gap:.3f}s")
    assert result.lost == 0
    assert reregistered <= REGISTER_PERIOD_S + 3
