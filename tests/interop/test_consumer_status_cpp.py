"""GET_CONSUMER_RUNNING_INFO answered by the stock C++ push consumer, relayed by our
broker, read by our admin: its body (jsoncpp's, with the C++ client's own quirks such
as ``PROP_CONSUMEORDERLY: "flase"``) decodes into the subscriptions and queues it holds."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from aiorocketmq.admin.mq_admin import MQAdmin
from aiorocketmq.client.errors import MQClientError
from aiorocketmq.common.message import MessageQueue
from aiorocketmq.common.protocol_bodies import ConsumerConnection
from aiorocketmq.common.running_info import PROP_CONSUME_TYPE
from tests.interop.stock_support import CONSUMED, StartProcess, finish, start_cpp
from tests.support.cluster import create_topic, start_broker, start_namesrv
from tests.support.wait import wait_until

pytestmark = [
    pytest.mark.interop,
    pytest.mark.timeout(90),
    pytest.mark.skipif(
        importlib.util.find_spec("rocketmq") is None, reason="PyPI rocketmq (x86_64 Linux only)"
    ),
]

TOPIC = "CsCppTopic"
GROUP = "GID_cs_cpp"


async def test_cpp_push_consumer_answers_running_info(
    start_process: StartProcess, tmp_path: Path
) -> None:
    _ns, namesrv = await start_namesrv(start_process, tmp_path)
    broker = await start_broker(start_process, tmp_path, namesrv)
    await create_topic(broker.addr, TOPIC)
    stop = tmp_path / "stop"
    consumer = start_cpp(
        start_process, tmp_path / "cpp", "cpp-push",
        ["push", namesrv, TOPIC, GROUP, "*", "1000000", "60", str(tmp_path / "out.txt"),
         "--stop-file", str(stop)],
        CONSUMED,
    )  # fmt: skip
    try:
        async with MQAdmin(namesrv) as admin:

            async def connection() -> ConsumerConnection | None:
                try:
                    return await admin.examine_consumer_connection_info(GROUP)
                except MQClientError:  # no route for the retry topic yet, or no client
                    return None

            conn = await wait_until(connection, timeout=20, what="the C++ consumer connected")
            (client,) = conn.connections
            queues = {MessageQueue(TOPIC, "broker-a", q) for q in range(4)}

            async def holds_its_queues() -> bool:
                info = await admin.get_consumer_running_info(GROUP, client.client_id)
                return set(info.mq_table) == queues

            await wait_until(holds_its_queues, timeout=20, what="the C++ consumer's 4 queues")
            info = await admin.get_consumer_running_info(GROUP, client.client_id)
        assert info.properties[PROP_CONSUME_TYPE] == "CONSUME_PASSIVELY"
        assert {s.topic for s in info.subscription_set} == {TOPIC, f"%RETRY%{GROUP}"}
        assert all(pq.commit_offset == 0 for pq in info.mq_table.values())
        assert f"{TOPIC:<32}  {'broker-a':<32}  {0:<4}  {0:<20}" in info.format_string()
    finally:  # the consumer stops on the file, so its exit is checked even after a failure
        stop.write_text("")
        await finish(consumer, 30)
