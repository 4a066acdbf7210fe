"""``mqadmin lag`` against real ``mqnamesrv`` and ``mqbroker`` processes.

Two brokers serve one topic: broker-a keeps an offset history (a snapshot every
200 ms), broker-b has it off (``flushConsumerOffsetHistoryInterval=0``), so it
answers GET_CONSUMER_OFFSET_HISTORY as a RocketMQ broker does (not supported) and
counts with its live lag only. A group consumes everything, stops, and more is sent:
the history must show the lag going from 0 to what was sent since, in both the table
and ``--json``, summed over both brokers.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.client import ConsumeConcurrentlyStatus, PushConsumer, PushConsumerConfig
from aiorocketmq.client.config import ClientConfig
from aiorocketmq.client.producer import Producer
from aiorocketmq.common.message import Message, MessageExt, MessageQueue
from tests.support.cluster import start_broker, start_namesrv, wait_route
from tests.support.mqadmin import Admin
from tests.support.procs import ManagedProcess
from tests.support.wait import wait_until

pytestmark = pytest.mark.timeout(120)

StartProcess = Callable[..., ManagedProcess]
TOPIC, GROUP = "LagTopic", "CID_lag"


def client_config(namesrv: str, instance: str) -> ClientConfig:
    return ClientConfig(namesrv_addr=namesrv, client_ip="127.0.0.1", instance_name=instance)


async def send(producer: Producer, broker: str, n: int) -> None:
    for i in range(n):
        msg = Message(TOPIC, f"{broker}-{i}".encode())
        await producer.send(msg, mq=MessageQueue(TOPIC, broker, i % 2))


async def test_lag_history_over_two_brokers(
    start_process: StartProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _ns, namesrv = await start_namesrv(start_process, tmp_path)
    a = await start_broker(
        start_process, tmp_path, namesrv, "broker-a", flushConsumerOffsetHistoryInterval=200
    )
    b = await start_broker(
        start_process, tmp_path, namesrv, "broker-b", flushConsumerOffsetHistoryInterval=0
    )

    admin = Admin(capsys, namesrv)

    async def lag_doc(*extra: str) -> Any:
        return await admin.json("lag", "-g", GROUP, *extra)

    await admin.table("updateTopic", "-c", "DefaultCluster", "-t", TOPIC, "-r", "2", "-w", "2")
    await wait_route(namesrv, TOPIC, lambda r: len(r.broker_datas) == 2, timeout=15)

    seen: set[bytes] = set()

    def listener(msgs: list[MessageExt], _context: object) -> ConsumeConcurrentlyStatus:
        seen.update(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        GROUP,
        config=PushConsumerConfig(consume_from_where="CONSUME_FROM_FIRST_OFFSET"),
        client_config=client_config(namesrv, "lag-c"),
    )
    consumer.subscribe(TOPIC, "*")
    consumer.register_message_listener(listener)
    async with Producer("PID_lag", client_config=client_config(namesrv, "lag-p")) as producer:
        async with consumer:
            await send(producer, "broker-a", 8)
            await send(producer, "broker-b", 4)
            await wait_until(lambda: len(seen) == 12, timeout=30, what="12 messages consumed")
            await consumer.persist_consumer_offset()
        # The group's retry topic names both brokers; its route reaches the name server
        # with the brokers' registrations.
        await wait_route(namesrv, f"%RETRY%{GROUP}", lambda r: len(r.broker_datas) == 2)

        async def caught_up_and_recorded() -> bool:
            doc = await lag_doc("-t", TOPIC, "-p", "1000")
            # A recorded point (broker-a's history) with no lag, before the live one.
            return any(p["diff"] == 0 for p in doc["series"][:-1])

        await wait_until(caught_up_and_recorded, timeout=20, what="a recorded point at lag 0")
        await send(producer, "broker-a", 6)
        await send(producer, "broker-b", 3)

    async def lag_is_nine() -> bool:
        return (await lag_doc("-t", TOPIC))["topics"][0]["diff"] == 9

    await wait_until(lag_is_nine, timeout=15, what="lag 9 once the sends are dispatched")
    # -p 1000: every 200 ms snapshot of this test, none thinned out.
    doc = await lag_doc("-t", TOPIC, "-s", "10m", "-p", "1000")
    assert doc["group"] == GROUP
    brokers = {x["brokerName"]: x for x in doc["brokers"]}
    assert (brokers["broker-a"]["brokerAddr"], brokers["broker-a"]["history"]) == (a.addr, True)
    assert brokers["broker-a"]["interval"] == 200 and brokers["broker-a"]["badLines"] == 0
    assert brokers["broker-a"]["points"] >= 2 and brokers["broker-b"]["points"] == 1
    assert (brokers["broker-b"]["brokerAddr"], brokers["broker-b"]["history"]) == (b.addr, False)
    assert "live lag only" in brokers["broker-b"]["note"]
    assert doc["topics"] == [{"topic": TOPIC, "diff": 9, "min": 0, "max": 9}]
    assert doc["series"][-1]["brokerOffset"] == 14 + 7
    assert doc["series"][-1]["consumerOffset"] == 8 + 4
    stamps = [p["timestamp"] for p in doc["series"]]
    assert stamps == sorted(stamps) and stamps[0] >= doc["since"]

    # At most -p snapshots from broker-a; the series still ends at the live lag.
    thin = await lag_doc("-t", TOPIC, "-p", "2")
    assert [x["points"] for x in thin["brokers"]] == [2, 1]  # a recorded one and now; now
    assert thin["series"][-1]["diff"] == 9

    # The table: the brokers, the topic's row with its trend, then the series.
    text = await admin.table("lag", "-g", GROUP, "-t", TOPIC, "-p", "1000")
    assert text.startswith(f"Group: {GROUP}  since ")
    assert f"Broker: broker-a {a.addr} (history every 0.2 s)" in text
    assert f"Broker: broker-b {b.addr} (no offset history on this broker" in text
    [row] = [line.split() for line in text.splitlines() if line.startswith(f"{TOPIC} ")]
    assert row[:4] == [TOPIC, "9", "0", "9"]
    # (the first recorded points may catch the consumer half-way: lag 0 is somewhere)
    assert "▁" in row[4] and row[4][-1] == "█"
    # (a later run than the JSON one: broker-a has recorded more since)
    series_rows = [line.split() for line in text.splitlines() if f"  {TOPIC}  " in line]
    assert len(series_rows) >= len(doc["series"]) - 1 and series_rows[-1][-3:] == ["21", "12", "9"]
    assert "0" in [r[-1] for r in series_rows]

    # Errors: a group that never consumed, a malformed -s.
    code, _out, err = await admin.run("lag", "-g", "CID_never")
    assert code == 1 and "command failed" in err
    code, _out, err = await admin.run("lag", "-g", GROUP, "-s", "soon")
    assert code == 2 and "-s" in err
