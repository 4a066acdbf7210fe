"""pullFromWhichNodeTable on real brokers: a lagging consumer is sent to the slave by
suggestWhichBrokerId and comes back to the master once it has caught up (issue 6).

Master and slave run with slaveReadEnable and accessMessageInMemoryMaxRatio=0, so
every pull that finds messages counts as lagging (the in-memory threshold is 0
bytes) and suggests whichBrokerWhenConsumeSlowly (1, the slave); a pull at the end
of the queue does not lag and suggests the group's brokerId (0, the master).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from aiorocketmq.client.config import ClientConfig
from aiorocketmq.client.pull_consumer import PullConsumer
from aiorocketmq.client.results import PullStatus
from aiorocketmq.common.message import MessageQueue
from tests.support.cluster import (
    broker_request,
    create_topic,
    has_topic,
    start_broker,
    start_namesrv,
    wait_replicated,
)
from tests.support.procs import ManagedProcess
from tests.support.wait import wait_until
from tests.unit.broker.processor_support import send_request

pytestmark = pytest.mark.timeout(120)

StartProcess = Callable[..., ManagedProcess]
LAGGING = {"slaveReadEnable": True, "accessMessageInMemoryMaxRatio": 0}


async def test_lagging_consumer_moves_to_the_slave_and_back(
    start_process: StartProcess, tmp_path: Path
) -> None:
    _, namesrv = await start_namesrv(start_process, tmp_path)
    master = await start_broker(start_process, tmp_path, namesrv, "broker-a", **LAGGING)
    slave = await start_broker(
        start_process, tmp_path / "s", namesrv, "broker-a",
        brokerId=1, brokerRole="SLAVE", **LAGGING,
    )  # fmt: skip
    await create_topic(master.addr, "LagTopic")
    await wait_until(lambda: has_topic(slave.addr, "LagTopic"), timeout=15, what="topic on slave")
    for i in range(100):
        await broker_request(master.addr, send_request(b"%d" % i, topic="LagTopic", queue_id=0))
    await wait_replicated(master.addr, slave.addr)
    config = ClientConfig(namesrv_addr=namesrv, client_ip="127.0.0.1", instance_name="lag")
    async with PullConsumer("CG_lag", client_config=config) as consumer:
        mq = MessageQueue("LagTopic", "broker-a", 0)
        wrapper = consumer.pull_api
        assert (await wrapper.find_broker(mq)).address == master.addr
        served_by: list[str] = []
        offset = 0
        while True:
            served_by.append((await wrapper.find_broker(mq)).address)
            result = await consumer.pull(mq, "*", offset, 10)
            if result.status is not PullStatus.FOUND:
                break
            # Lagging: the broker sends the next pull to the slave.
            assert result.suggest_which_broker_id == 1
            offset = result.next_begin_offset
        assert offset == 100
        # The first pull went to the master, every later one to the slave.
        assert served_by[0] == master.addr
        assert set(served_by[1:]) == {slave.addr}
        # Caught up: the slave's NOT_FOUND suggests the group's brokerId, the master.
        assert result.suggest_which_broker_id == 0
        assert (await wrapper.find_broker(mq)).address == master.addr
