"""Every mqadmin command of the operations issue, in table and ``--json`` form,
against real ``mqnamesrv`` and ``mqbroker`` processes.

Each command runs twice: as Java prints it, then with ``--json``; both must
succeed, the JSON must parse as standard JSON, and the two must tell the same
facts (and match the ground truth this test kept: what it sent, where it landed,
which client holds which queue). The CLI runs in-process (``main([...])`` in a
thread, output through capsys), so this test's own clients stay served meanwhile.

Three clusters: topics, cluster and brokers (a master with a slave, for haStatus);
groups, connections and offsets (with a live producer and push consumer);
messages (queries by key, id, unique key and offset, printMsg).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from aiorocketmq.admin.mq_admin import MQAdmin
from aiorocketmq.client import ConsumeConcurrentlyStatus, PushConsumer, PushConsumerConfig
from aiorocketmq.client.config import ClientConfig
from aiorocketmq.client.producer import Producer
from aiorocketmq.client.results import SendResult
from aiorocketmq.common.message import Message, MessageExt, MessageQueue
from tests.support.cluster import (
    BrokerProcess,
    start_broker,
    start_namesrv,
    wait_replicated,
    wait_route,
)
from tests.support.mqadmin import Admin
from tests.support.procs import ManagedProcess
from tests.support.wait import wait_until

pytestmark = pytest.mark.timeout(180)

StartProcess = Callable[..., ManagedProcess]
CLUSTER = "DefaultCluster"
BROKER = "broker-a"


def client_config(namesrv: str, instance: str) -> ClientConfig:
    return ClientConfig(namesrv_addr=namesrv, client_ip="127.0.0.1", instance_name=instance)


async def queues_filled(namesrv: str, topic: str, total: int) -> None:
    """Wait until the topic's consume queues hold ``total`` messages (dispatch lags
    the acknowledged send by a moment)."""
    async with MQAdmin(namesrv) as admin:

        async def dispatched() -> bool:
            stats = await admin.examine_topic_stats(topic)
            return sum(o.max_offset for o in stats.offset_table.values()) == total

        await wait_until(dispatched, timeout=15, what=f"{total} messages in {topic}'s queues")


@pytest.fixture
async def single(
    start_process: StartProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[Admin, BrokerProcess]:
    """A name server and one master, and mqadmin pointed at them."""
    _ns, namesrv = await start_namesrv(start_process, tmp_path)
    broker = await start_broker(start_process, tmp_path, namesrv, BROKER)
    return Admin(capsys, namesrv), broker


# -- topics, cluster, brokers ----------------------------------------------------------


async def test_topic_cluster_and_broker_commands(
    start_process: StartProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _ns, namesrv = await start_namesrv(start_process, tmp_path)
    master = await start_broker(start_process, tmp_path, namesrv, BROKER)
    slave = await start_broker(
        start_process, tmp_path / "s", namesrv, BROKER, brokerId=1, brokerRole="SLAVE"
    )
    admin = Admin(capsys, namesrv)
    topic = "JsonTopic"

    # updateTopic: the same config on the one master, both ways.
    text, doc = await admin.both("updateTopic", "-c", CLUSTER, "-t", topic, "-r", "4", "-w", "4")
    assert text.startswith(f"create topic to {master.addr} success.\n")
    assert "readQueueNums=4, writeQueueNums=4, perm=RW-" in text
    assert doc["updated"] == [master.addr] and doc["orderConf"] is None
    assert doc["topicConfig"] | {"topicName": topic} == {
        "topicName": topic, "readQueueNums": 4, "writeQueueNums": 4, "perm": 6,
        "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False,
    }  # fmt: skip
    await wait_route(namesrv, topic, timeout=10)

    # topicList, plain and -c.
    text, doc = await admin.both("topicList")
    assert topic in doc and sorted(doc) == sorted(text.split())
    text, doc = await admin.both("topicList", "-c")
    row = next(r for r in doc if r["topic"] == topic)
    assert row == {"topic": topic, "clusterName": CLUSTER, "consumerGroups": []}
    assert re.search(rf"^{CLUSTER}\s+{topic}\s*$", text, re.M)

    # topicRoute: fastjson's pretty text vs standard JSON (broker ids quoted).
    text, doc = await admin.both("topicRoute", "-t", topic)
    assert "\t\t\t0:" in text or '0:"' in text  # fastjson's bare integer keys
    [queue_data] = doc["queueDatas"]
    assert (queue_data["brokerName"], queue_data["readQueueNums"]) == (BROKER, 4)
    [broker_data] = doc["brokerDatas"]
    assert broker_data["brokerAddrs"] == {"0": master.addr, "1": slave.addr}

    # sendMessage: two messages to queue 1, both ways.
    text, doc = await admin.both("sendMessage", "-t", topic, "-p", "hi", "-b", BROKER, "-i", "1")
    assert text.split("\n")[1].split()[:3] == [BROKER, "1", "SEND_OK"]
    assert (doc["brokerName"], doc["queueId"], doc["sendStatus"]) == (BROKER, 1, "SEND_OK")
    assert doc["queueOffset"] == 1  # the table's send took offset 0
    await queues_filled(namesrv, topic, 2)

    # topicStatus: queue 1 holds both.
    text, doc = await admin.both("topicStatus", "-t", topic)
    offsets = {q["queueId"]: (q["minOffset"], q["maxOffset"]) for q in doc["queues"]}
    assert offsets == {0: (0, 0), 1: (0, 2), 2: (0, 0), 3: (0, 0)}
    assert doc["queues"][1]["lastUpdateTimestamp"] > 0
    rows = [line.split()[:4] for line in text.splitlines()[1:]]
    assert [BROKER, "1", "0", "2"] in rows

    # topicClusterList.
    text, doc = await admin.both("topicClusterList", "-t", topic)
    assert text.split() == [CLUSTER] and doc == {"topic": topic, "clusters": [CLUSTER]}

    # clusterList, plain and -m: both nodes of broker-a.
    text, doc = await admin.both("clusterList")
    assert {(r["brokerId"], r["brokerAddr"]) for r in doc} == {(0, master.addr), (1, slave.addr)}
    assert all(r["reachable"] and r["version"] == "V4_9_8" for r in doc)
    # The two runs read TPS at different moments, so only their forms are compared:
    # before its first samples a broker reports none, null here and 0.00 in the table.
    table = {row[3]: row for row in map(str.split, text.splitlines()[1:])}
    for r in doc:
        assert table[r["brokerAddr"]][4] == r["version"]
        assert re.match(r"\d+\.\d\d\(", table[r["brokerAddr"]][5])
        assert r["inTps"] is None or r["inTps"] >= 0
    text, doc = await admin.both("clusterList", "-m")
    assert {r["brokerName"] for r in doc} == {BROKER}
    assert all(r["inTotalToday"] >= 0 for r in doc) and "#InTotalToday" in text

    # brokerStatus -b and -c: the runtime table both ways.
    text, doc = await admin.both("brokerStatus", "-b", master.addr)
    [status] = doc
    assert status["brokerAddr"] == master.addr
    line = re.search(r"^commitLogMaxOffset\s*: (\d+)$", text, re.M)
    assert line is not None and int(status["runtime"]["commitLogMaxOffset"]) >= int(line[1]) > 0
    text, doc = await admin.both("brokerStatus", "-c", CLUSTER)
    assert sorted(d["brokerAddr"] for d in doc) == sorted([master.addr, slave.addr])
    assert f"{master.addr:<24} brokerVersionDesc" in text

    # getBrokerConfig / updateBrokerConfig.
    text, doc = await admin.both("updateBrokerConfig", "-b", master.addr, "-k",
                                 "maxMessageSize", "-v", "2097152")  # fmt: skip
    assert doc == {"key": "maxMessageSize", "value": "2097152", "updated": [master.addr]}
    text, doc = await admin.both("getBrokerConfig", "-b", master.addr)
    assert re.search(r"^maxMessageSize\s*=\s*2097152$", text, re.M)
    assert doc[0]["properties"]["maxMessageSize"] == "2097152"

    # haStatus: the slave has everything the master has.
    end = await wait_replicated(master.addr, slave.addr)
    text, doc = await admin.both("haStatus", "-c", CLUSTER)
    by_role = {r["role"]: r for r in doc}
    assert by_role["MASTER"]["slaves"] == 1
    assert by_role["MASTER"]["maxOffset"] == end
    slave_row = by_role["SLAVE"]
    assert (slave_row["brokerAddr"], slave_row["maxOffset"]) == (slave.addr, end)
    assert (slave_row["ackedOffset"], slave_row["lag"], slave_row["connected"]) == (end, 0, True)
    table_slave = next(line.split() for line in text.splitlines() if slave.addr in line)
    assert table_slave[4:7] == [str(end), str(end), "0"]

    # wipeWritePerm / addWritePerm: on the one name server, both ways.
    text, doc = await admin.both("wipeWritePerm", "-b", BROKER)
    assert f"wipe write perm of broker[{BROKER}] in name server[{namesrv}] OK" in text
    assert doc[0]["namesrvAddr"] == namesrv and doc[0]["error"] is None
    text, doc = await admin.both("addWritePerm", "-b", BROKER)
    assert doc[0]["addTopicCount"] is not None and doc[0]["error"] is None

    # clusterSendMsgRT: one round of three sends.
    text, doc = await admin.both("clusterSendMsgRT", "-a", "3", "--rounds", "1")
    assert doc["clusterName"] == CLUSTER and doc["brokerName"] == BROKER
    assert doc["successCount"] == 3 and doc["failCount"] == 0
    assert re.search(rf"^{CLUSTER}\s+{BROKER}\s+[\d.]+\s+3\s+0\s*$", text, re.M)

    # deleteTopic: the table form removes one topic, the JSON form another.
    other = "JsonTopic2"
    doc = await admin.json("updateTopic", "-c", CLUSTER, "-t", other)
    assert doc["topicConfig"]["readQueueNums"] == 8
    text = await admin.table("deleteTopic", "-c", CLUSTER, "-t", topic)
    assert text == (
        f"delete topic [{topic}] from cluster [{CLUSTER}] success.\n"
        f"delete topic [{topic}] from NameServer success.\n"
    )
    doc = await admin.json("deleteTopic", "-c", CLUSTER, "-t", other)
    assert doc == {"topic": other, "clusterName": CLUSTER, "brokers": [master.addr]}
    remaining = await admin.json("topicList")
    assert topic not in remaining and other not in remaining


# -- groups, connections, offsets ---------------------------------------------------------


async def test_group_connection_and_offset_commands(
    single: tuple[Admin, BrokerProcess],
) -> None:
    admin, broker = single
    namesrv = admin.namesrv
    topic, group, spare = "JsonGroupTopic", "CID_json", "CID_json_spare"

    text, doc = await admin.both("updateSubGroup", "-b", broker.addr, "-g", group, "-r", "3")
    assert text.startswith(f"create subscription group to {broker.addr} success.\n")
    assert doc["updated"] == [broker.addr]
    assert (doc["subscriptionGroupConfig"]["groupName"],
            doc["subscriptionGroupConfig"]["retryMaxTimes"]) == (group, 3)  # fmt: skip
    doc = await admin.json("updateTopic", "-c", CLUSTER, "-t", topic, "-r", "4", "-w", "4")
    await wait_route(namesrv, topic, timeout=10)

    seen: set[str] = set()
    all_seen = asyncio.Event()

    # async: it sets an asyncio.Event (a def listener would run on a pool thread)
    async def listener(msgs: list[MessageExt], _context: object) -> ConsumeConcurrentlyStatus:
        seen.update(m.keys[0] for m in msgs)
        if len(seen) == 20:
            all_seen.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        group,
        config=PushConsumerConfig(consume_from_where="CONSUME_FROM_FIRST_OFFSET"),
        client_config=client_config(namesrv, "json-c"),
    )
    consumer.subscribe(topic, "*")
    consumer.register_message_listener(listener)
    started_ms = int(time.time() * 1000)
    async with (
        Producer("PID_json", client_config=client_config(namesrv, "json-p")) as producer,
        consumer,
    ):
        for i in range(20):
            msg = Message(topic, f"b{i}".encode(), properties={"KEYS": f"k{i}"})
            await producer.send(msg, mq=MessageQueue(topic, BROKER, i % 4))
        await wait_until(all_seen, timeout=30, what="every message consumed")
        await consumer.persist_consumer_offset()
        client_id = consumer.instance.client_id

        async def committed() -> bool:
            code, out, _err = await admin.run("consumerProgress", "-g", group, "--json")
            return code == 0 and json.loads(out)["diffTotal"] == 0

        await wait_until(committed, timeout=15, what="the group's offsets committed")

        # consumerProgress -g, with and without the client per queue.
        text, doc = await admin.both("consumerProgress", "-g", group)
        assert doc["group"] == group and doc["diffTotal"] == 0
        # The group's queues: the topic's four and its retry topic's one (empty).
        assert [(q["topic"], q["queueId"], q["brokerOffset"], q["consumerOffset"])
                for q in doc["queues"]] == [
            (f"%RETRY%{group}", 0, 0, 0), *((topic, q, 5, 5) for q in range(4))
        ]  # fmt: skip
        assert all("clientIP" not in q for q in doc["queues"])
        assert text.endswith("Diff Total: 0\n")
        text, doc = await admin.both("consumerProgress", "-g", group, "-s", "true")
        assert [q["clientIP"] for q in doc["queues"]] == ["127.0.0.1"] * 5
        rows = [line.split() for line in text.splitlines()[1:6]]
        assert [row[5] for row in rows] == ["127.0.0.1"] * 5

        # consumerProgress: every group's summary line.
        text, doc = await admin.both("consumerProgress")
        summary = next(g for g in doc if g["group"] == group)
        assert summary == {"group": group, "count": 1, "version": "V4_9_8",
                           "consumeType": "CONSUME_PASSIVELY",
                           "messageModel": "CLUSTERING", "consumeTps": summary["consumeTps"],
                           "diffTotal": 0}  # fmt: skip
        assert [group, "1", "V4_9_8", "PUSH", "CLUSTERING"] in [
            line.split()[:5] for line in text.splitlines()
        ]

        # consumerConnection / producerConnection: the live clients.
        text, doc = await admin.both("consumerConnection", "-g", group)
        assert [c["clientId"] for c in doc["connections"]] == [client_id]
        assert doc["connections"][0]["versionDesc"] == "V4_9_8"
        assert {s["topic"]: s["subString"] for s in doc["subscriptions"]}[topic] == "*"
        assert (doc["consumeType"], doc["messageModel"]) == ("CONSUME_PASSIVELY", "CLUSTERING")
        assert doc["consumeFromWhere"] == "CONSUME_FROM_FIRST_OFFSET"
        assert text.splitlines()[1].split()[0] == client_id
        text, doc = await admin.both("producerConnection", "-g", "PID_json", "-t", topic)
        producer_id = producer.instance.client_id
        assert [c["clientId"] for c in doc["connections"]] == [producer_id]
        assert text.split()[:2] == ["0001", producer_id]

        # consumerStatus: the client's own report, relayed by the broker.
        text, doc = await admin.both("consumerStatus", "-g", group, "-i", client_id)
        assert text.startswith("#Consumer Properties#\n")
        assert {q["queueId"]: q["commitOffset"] for q in doc["mqTable"] if q["topic"] == topic} \
            == {q: 5 for q in range(4)}  # fmt: skip

        # consumeMessage: queue 2 from offset 0, two messages.
        args = ("consumeMessage", "-t", topic, "-b", BROKER, "-i", "2", "-o", "0", "-c", "2")
        text, doc = await admin.both(*args)
        assert [m["keys"] for m in doc] == ["k2", "k6"]
        assert [m["queueOffset"] for m in doc] == [0, 1]
        assert len(re.findall(r"^MSGID: ", text, re.M)) == 2

        # resetOffsetByTime through the brokers to the online client: back to 0.
        text, doc = await admin.both("resetOffsetByTime", "-g", group, "-t", topic,
                                     "-s", str(started_ms - 60_000))  # fmt: skip
        assert (doc["group"], doc["topic"], doc["force"]) == (group, topic, True)
        assert doc["timestamp"] == started_ms - 60_000
        assert [(o["queueId"], o["offset"]) for o in doc["offsets"]] == [(q, 0) for q in range(4)]
        assert "#brokerName" in text and f"group[{group}]" in text

        # skipAccumulatedMessage: every queue to its end.
        text, doc = await admin.both("skipAccumulatedMessage", "-g", group, "-t", topic)
        assert [(o["queueId"], o["offset"]) for o in doc["offsets"]] == [(q, 5) for q in range(4)]
        assert [line.split() for line in text.splitlines()[1:]] == [
            [BROKER, str(q), "5"] for q in range(4)
        ]

    # deleteSubGroup: -b in table form, -c in JSON form (with its retry/DLQ topics).
    doc = await admin.json("updateSubGroup", "-c", CLUSTER, "-g", spare)
    assert doc["updated"] == [broker.addr]
    text = await admin.table("deleteSubGroup", "-b", broker.addr, "-g", group)
    assert text == f"delete subscription group [{group}] from broker [{broker.addr}] success.\n"
    doc = await admin.json("deleteSubGroup", "-c", CLUSTER, "-g", spare)
    assert doc == {"groupName": spare, "removeOffset": False, "deleted": [broker.addr],
                   "deletedTopics": [f"%RETRY%{spare}", f"%DLQ%{spare}"]}  # fmt: skip


# -- messages ---------------------------------------------------------------------------


async def test_message_commands(single: tuple[Admin, BrokerProcess], tmp_path: Path) -> None:
    admin, broker = single
    namesrv = admin.namesrv
    topic = "JsonMsgTopic"
    await admin.json("updateTopic", "-b", broker.addr, "-t", topic, "-r", "2", "-w", "2")
    await wait_route(namesrv, topic, timeout=10)
    sent: list[tuple[str, bytes, SendResult]] = []
    async with Producer("PID_json_msg", client_config=client_config(namesrv, "json-m")) as p:
        for i in range(8):
            key, body = f"key{i}", f"body-{i}".encode()
            msg = Message(topic, body, properties={"KEYS": key, "TAGS": f"t{i % 2}"})
            sent.append((key, body, await p.send(msg, mq=MessageQueue(topic, BROKER, i % 2))))
    await queues_filled(namesrv, topic, 8)
    bodies = tmp_path / "bodies"
    key, body, result = sent[5]

    # queryMsgByKey: the one message with the key.
    text, doc = await admin.both("queryMsgByKey", "-t", topic, "-k", key)
    [found] = doc
    assert (found["msgId"], found["offsetMsgId"]) == (result.msg_id, result.offset_msg_id)
    assert (found["queueId"], found["queueOffset"]) == (1, result.queue_offset)
    assert (found["body"], found["keys"], found["tags"]) == (body.decode(), key, "t1")
    assert found["storeHost"] == broker.addr
    assert text.splitlines()[1].split() == [result.msg_id, "1", str(result.queue_offset)]

    # queryMsgById: the body file and (no consumer yet) no tracks.
    text, doc = await admin.both("queryMsgById", "-i", result.offset_msg_id,
                                 "--bodyDir", str(bodies))  # fmt: skip
    [found] = doc
    assert found["offsetMsgId"] == result.offset_msg_id and found["tracks"] == []
    assert await asyncio.to_thread(Path(found["bodyPath"]).read_bytes) == body
    assert f"OffsetID:            {result.offset_msg_id}\n" in text
    assert "WARN: No Consumer" in text

    # queryMsgByUniqueKey.
    assert result.msg_id is not None
    text, doc = await admin.both("queryMsgByUniqueKey", "-t", topic, "-i", result.msg_id,
                                 "--bodyDir", str(bodies))  # fmt: skip
    assert [m["msgId"] for m in doc] == [result.msg_id]
    assert f"Keys:                [{key}]\n" in text

    # queryMsgByOffset: a stored offset, and one past the end ([] in JSON).
    args = ("queryMsgByOffset", "-t", topic, "-b", BROKER, "-i", "1", "-o",
            str(result.queue_offset), "--bodyDir", str(bodies))  # fmt: skip
    text, doc = await admin.both(*args)
    assert [(m["brokerName"], m["body"]) for m in doc] == [(BROKER, body.decode())]
    assert f"Queue Offset:        {result.queue_offset}\n" in text
    doc = await admin.json("queryMsgByOffset", "-t", topic, "-b", BROKER, "-i", "1", "-o", "99",
                           "--bodyDir", str(bodies))  # fmt: skip
    assert doc == []

    # printMsg: every message once, as JSON Lines; -d false drops the bodies.
    text = await admin.table("printMsg", "-t", topic)
    assert sorted(re.findall(r"BODY: (body-\d)$", text, re.M)) == [b.decode() for _, b, _ in sent]
    code, out, err = await admin.run("printMsg", "-t", topic, "--json")
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    kinds = [line["kind"] for line in lines]
    assert kinds.count("queue") == kinds.count("queueEnd") == 2
    messages = [line for line in lines if line["kind"] == "message"]
    assert sorted((m["keys"], m["body"]) for m in messages) == sorted(
        (k, b.decode()) for k, b, _ in sent
    )
    ranges = {(q["queueId"], q["minOffset"], q["maxOffset"]) for q in lines if q["kind"] == "queue"}
    assert ranges == {(0, 0, 4), (1, 0, 4)}
    assert {q["offset"] for q in lines if q["kind"] == "queueEnd"} == {4}
    code, out, err = await admin.run("printMsg", "-t", topic, "-d", "false", "--json")
    assert code == 0, err
    bare = [json.loads(line) for line in out.splitlines()]
    assert all("body" not in m for m in bare if m["kind"] == "message")
    assert sum(m["kind"] == "message" for m in bare) == 8
