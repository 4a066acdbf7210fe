"""mqadmin's maintenance and assignment commands against real ``mqnamesrv`` + ``mqbroker``.

- queryCq reads ConsumeQueue units (offsets, sizes, tag codes) and, with a group,
  whether each matches its subscription.
- cloneGroupOffset gives a new group the committed offsets of another;
  brokerConsumeStats then lists both groups' queues; statsAll counts what was stored
  and pulled per topic and group; printMsgByQueue prints one queue's messages and
  counts them by tag.
- exportMetadata writes the cluster's user topics and groups; sendMsgStatus and
  checkMsgSendRT send and time messages.
- updateOrderConf puts, gets and deletes an ordered topic's conf on the name server.
- allocateMQ splits a topic's queues among client ids as a consumer would.
- getConsumerConfig shows a group's subscription group config per broker.
- deleteExpiredCommitLog deletes expired CommitLog files now (not at ``deleteWhen``):
  the broker's first offset moves, and so does a queue's first index; cleanExpiredCQ
  and cleanUnusedTopic answer success.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.client import (
    ClientConfig,
    Message,
    Producer,
    ProducerConfig,
    PullConsumer,
    PushConsumer,
)
from aiorocketmq.common.tag_hash import tags_code
from tests.support.cluster import runtime_info, start_broker, start_namesrv
from tests.support.consume import push_keys
from tests.support.mqadmin import Admin
from tests.support.procs import ManagedProcess
from tests.support.wait import wait_until

pytestmark = pytest.mark.timeout(120)

StartProcess = Callable[..., ManagedProcess]
TOPIC = "MaintTopic"


def client(namesrv: str, name: str) -> ClientConfig:
    return ClientConfig(namesrv_addr=namesrv, client_ip="127.0.0.1", instance_name=name)


async def test_query_clone_order_allocate_and_consumer_config(
    start_process: StartProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, namesrv = await start_namesrv(start_process, tmp_path)
    broker = await start_broker(start_process, tmp_path, namesrv, "broker-a")
    admin = Admin(capsys, namesrv)
    config = ProducerConfig(default_topic_queue_nums=4)
    async with Producer("PG", config=config, client_config=client(namesrv, "p")) as producer:
        sent = [
            await producer.send(Message(TOPIC, b"x" * 10, tags=tag, keys=f"k{i}"))
            for i, tag in enumerate(["TagA", "TagB"] * 4)
        ]
    queue_id = sent[0].message_queue.queue_id
    in_queue = [s for s in sent if s.message_queue.queue_id == queue_id]

    # queryCq, with a live consumer of TagA in CG-cq (its subscription comes along).
    watcher = PushConsumer("CG-cq", client_config=client(namesrv, "cq"))
    watcher.subscribe(TOPIC, "TagA")
    async with watcher:

        async def dispatched() -> dict[str, Any] | None:  # the reput runs after the reply
            doc: dict[str, Any] = await admin.json(
                "queryCq", "-t", TOPIC, "-q", str(queue_id), "-i", "0", "-g", "CG-cq"
            )
            return doc if doc["maxQueueIndex"] == len(in_queue) else None

        doc = await wait_until(dispatched, timeout=10, what="the queue's units dispatched")
    assert doc["brokerAddr"] == broker.addr
    assert (doc["minQueueIndex"], doc["maxQueueIndex"]) == (0, len(in_queue))
    units = doc["queueData"]
    assert len(units) == len(in_queue)
    assert [u["physicOffset"] for u in units] == sorted(u["physicOffset"] for u in units)
    assert doc["subscriptionData"]["subString"] == "TagA"
    tag_a = tags_code("TagA")
    assert [u["eval"] for u in units] == [u["tagsCode"] == tag_a for u in units]
    text = await admin.table("queryCq", "-t", TOPIC, "-q", str(queue_id), "-i", "0", "-c", "1")
    assert f"max: {len(in_queue)}, min: 0" in text and "idx: 0\nConsumeQueueData{" in text

    # cloneGroupOffset: CG-src consumed (and committed) everything; CG-dst gets it.
    keys = await push_keys(client(namesrv, "src"), "CG-src", TOPIC, len(sent))
    assert len(keys) == len(sent)
    assert await admin.table("cloneGroupOffset", "-s", "CG-src", "-d", "CG-dst", "-t", TOPIC) == (
        f"clone group offset success. srcGroup[CG-src], destGroup=[CG-dst], topic[{TOPIC}]\n"
    )
    async with PullConsumer("CG-dst", client_config=client(namesrv, "dst")) as checker:
        mqs = await checker.fetch_subscribe_message_queues(TOPIC)
        offsets = {mq.queue_id: await checker.fetch_consume_offset(mq, from_store=True)
                   for mq in mqs}  # fmt: skip
        ends = {mq.queue_id: await checker.max_offset(mq) for mq in mqs}
    assert offsets == ends

    # brokerConsumeStats: every group's queues. CG-src and CG-dst consumed all (a diff
    # of 0); CG-cq (an async-for consumer that never read) holds the rest.
    doc = await admin.json("brokerConsumeStats", "-b", broker.addr)
    # (A group's %RETRY% topic shows up too once the group committed an offset there.)
    done = [r for r in doc["rows"] if r["group"] in ("CG-src", "CG-dst") and r["topic"] == TOPIC]
    assert {(r["group"], r["queueId"]) for r in done} == {
        (g, q) for g in ("CG-src", "CG-dst") for q in range(4)
    }
    assert all(r["diff"] == 0 for r in done)
    assert doc["totalDiff"] == sum(r["diff"] for r in doc["rows"])
    text = await admin.table("brokerConsumeStats", "-b", broker.addr, "-l", "1")
    assert text.startswith("#Topic") and text.endswith(f"\nDiff Total: {doc['totalDiff']}\n")
    assert "CG-src" not in text  # -l 1: rows with a diff of at least 1 only

    # statsAll: stored and pulled in the last 24 hours (VIEW_BROKER_STATS_DATA), and
    # what each group has left.
    rows = {r["group"]: r for r in await admin.json("statsAll", "-t", TOPIC)}
    src = rows["CG-src"]
    assert (src["inMsg24Hour"], src["outMsg24Hour"], src["accumulation"]) == (len(sent),) * 2 + (0,)
    assert src["inTps"] > 0 and src["outTps"] > 0
    assert rows["CG-dst"]["outMsg24Hour"] == 0  # cloned offsets, nothing pulled
    text = await admin.table("statsAll", "-t", TOPIC, "-a")
    assert text.startswith("#Topic") and "CG-src" in text

    # printMsgByQueue: one queue's messages (-p), counted by tag (-f).
    doc = await admin.json("printMsgByQueue", "-t", TOPIC, "-a", "broker-a", "-i",
                           str(queue_id), "-p", "true", "-f", "true")  # fmt: skip
    assert [m["queueOffset"] for m in doc["messages"]] == list(range(len(in_queue)))
    assert sum(doc["tagCounts"].values()) == len(in_queue)
    text = await admin.table("printMsgByQueue", "-t", TOPIC, "-a", "broker-a", "-i",
                             str(queue_id), "-f", "true")  # fmt: skip
    assert text.startswith("Tag: ") and "MSGID" not in text  # -p is false by default

    # exportMetadata: the cluster's user topics and groups, merged, to one file.
    out = tmp_path / "export"
    text = await admin.table("exportMetadata", "-c", "DefaultCluster", "-f", str(out))
    assert text == f"export {out / 'metadata.json'} success\n"
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["topicConfigTable"][TOPIC]["readQueueNums"] == 4
    assert "TBW102" not in meta["topicConfigTable"]  # system topics stay out
    assert not any(t.startswith("%RETRY%") for t in meta["topicConfigTable"])  # without -s
    assert {"CG-src", "CG-dst"} <= set(meta["subscriptionGroupTable"])
    doc = await admin.json("exportMetadata", "-b", broker.addr, "-t", "-s", "-f", str(out))
    assert doc["path"] == str(out / "topic.json")
    topics = json.loads((out / "topic.json").read_text())["topicConfigTable"]
    assert "%RETRY%CG-src" in topics  # -s keeps the retry topics

    # sendMsgStatus (to the broker's own topic) and checkMsgSendRT (queue by queue).
    lines = await admin.table("sendMsgStatus", "-b", "broker-a", "-c", "3", "-s", "32")
    assert [line.startswith("rt=") and "sendStatus=SEND_OK" in line
            for line in lines.splitlines()] == [True] * 3  # fmt: skip
    doc = await admin.json("checkMsgSendRT", "-t", TOPIC, "-a", "4")
    assert [(s["queueId"], s["success"]) for s in doc["sends"]] == [(q, True) for q in range(4)]
    assert doc["avgRtMs"] >= 0

    # updateOrderConf: put, get, delete.
    put = await admin.table("updateOrderConf", "-t", TOPIC, "-m", "put", "-v", "broker-a:4")
    assert put == f"update orderConf success. topic=[{TOPIC}], orderConf=[broker-a:4]\n"
    got = await admin.json("updateOrderConf", "-t", TOPIC, "-m", "get")
    assert got == {"topic": TOPIC, "method": "get", "orderConf": "broker-a:4"}
    await admin.table("updateOrderConf", "-t", TOPIC, "-m", "delete")
    got = await admin.json("updateOrderConf", "-t", TOPIC, "-m", "get")
    assert got["orderConf"] is None
    code, _out, err = await admin.run("updateOrderConf", "-t", TOPIC, "-m", "put")
    assert code == 2 and "-v" in err

    # allocateMQ: Java's RebalanceResult JSON, two ids, four queues.
    result = (await admin.json("allocateMQ", "-t", TOPIC, "-i", "c1,c2"))["result"]
    assert [q["queueId"] for q in result["c1"]] == [0, 1]
    assert [q["queueId"] for q in result["c2"]] == [2, 3]

    # getConsumerConfig: the auto-created group on broker-a.
    configs = await admin.json("getConsumerConfig", "-g", "CG-src")
    assert [(c["clusterName"], c["brokerName"]) for c in configs] == [
        ("DefaultCluster", "broker-a")
    ]
    assert configs[0]["config"]["groupName"] == "CG-src"
    text = await admin.table("getConsumerConfig", "-g", "CG-src")
    assert "DefaultCluster:broker-a" in text and "groupName" in text


async def test_delete_expired_commit_log_now_and_the_clean_commands(
    start_process: StartProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, namesrv = await start_namesrv(start_process, tmp_path)
    not_now = (time.localtime().tm_hour + 12) % 24  # expiry would not run by itself
    broker = await start_broker(
        start_process, tmp_path, namesrv, "broker-a",
        mappedFileSizeCommitLog=64 * 1024, fileReservedTime=0,
        deleteWhen=f"{not_now:02d}", cleanResourceInterval=100,
    )  # fmt: skip
    async with Producer("PG", client_config=client(namesrv, "p")) as producer:
        for i in range(40):  # 40 x 4 KB, under the 4 KiB compression bar: three files
            await producer.send(Message("BigTopic", os.urandom(4000), keys=f"b{i}"))
    assert (await runtime_info(broker.addr))["commitLogMinOffset"] == "0"
    admin = Admin(capsys, namesrv)
    assert await admin.table("deleteExpiredCommitLog", "-b", broker.addr) == "success\n"

    async def first_offset() -> int | None:
        offset = int((await runtime_info(broker.addr))["commitLogMinOffset"])
        return offset if offset > 0 else None

    moved = await wait_until(first_offset, timeout=30, what="expired CommitLog files deleted")
    assert moved % (64 * 1024) == 0
    for command in ("cleanExpiredCQ", "cleanUnusedTopic"):
        assert await admin.table(command, "-c", "DefaultCluster") == "success\n"
        doc = await admin.json(command)
        assert doc == {"success": True,
                       "brokers": [{"brokerAddr": broker.addr, "success": True,
                                    "error": None}]}  # fmt: skip

    # The queue's first units pointed into the deleted file: its min index moved on.
    async def min_index() -> int | None:
        doc = await admin.json("queryCq", "-t", "BigTopic", "-q", "0", "-i", "0", "-c", "1")
        return doc["minQueueIndex"] if doc["minQueueIndex"] > 0 else None

    await wait_until(min_index, timeout=30, what="BigTopic-0's min index past the deleted file")
    code, _out, err = await admin.run("queryCq", "-t", "BigTopic", "-q", "9", "-i", "0")
    assert code == 1 and "BigTopic-9 not exist!" in err  # Java's remark, from the broker
