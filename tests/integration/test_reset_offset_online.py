"""``mqadmin resetOffsetByTime`` with our push consumer online.

The broker computes the offsets and sends RESET_CONSUMER_CLIENT_OFFSET to the
group's clients (RocketMQ 4.9: it does not commit them itself); our consumer drops
the topic's queues, commits the new offsets and consumes again from there.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from aiorocketmq.client import PushConsumer, PushConsumerConfig
from tests.integration.test_mqadmin import mqadmin
from tests.integration.test_push_consumer import Recorder, client, produce
from tests.support.cluster import start_broker, start_namesrv
from tests.support.procs import ManagedProcess
from tests.support.wait import wait_until

pytestmark = pytest.mark.timeout(120)

StartProcess = Callable[..., ManagedProcess]


async def test_reset_to_the_start_makes_an_online_consumer_read_everything_again(
    start_process: StartProcess, tmp_path: Path
) -> None:
    _, namesrv = await start_namesrv(start_process, tmp_path)
    await start_broker(start_process, tmp_path, namesrv, "broker-a")
    keys = [f"r{i}" for i in range(400)]
    await produce(namesrv, "ResetTopic", keys)
    seen: Counter[str] = Counter()
    config = PushConsumerConfig(consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer = PushConsumer("CG-reset", config=config, client_config=client(namesrv, "c"))
    consumer.subscribe("ResetTopic", "*")
    consumer.register_message_listener(Recorder("c", seen))
    async with consumer:
        await wait_until(lambda: set(seen) == set(keys), timeout=30, what="first pass")
        await consumer.persist_consumer_offset()
        result = await mqadmin(
            "resetOffsetByTime", "-n", namesrv, "-g", "CG-reset", "-t", "ResetTopic", "-s", "0"
        )
        assert result.returncode == 0, result.err
        # Every message comes a second time: the online consumer followed the reset.
        await wait_until(
            lambda: all(seen[k] >= 2 for k in keys), timeout=30, what="second pass after reset"
        )
    assert set(seen) == set(keys)
