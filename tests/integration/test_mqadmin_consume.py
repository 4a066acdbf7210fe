"""``mqadmin consumeMessage`` and ``consumerStatus`` against real processes, in table
and ``--json`` form.

One ``mqnamesrv`` and one ``mqbroker`` process; 40 keyed messages, ten per queue,
sent by our producer (the ground truth is each key's queue and offset from its
SendResult); a push consumer of our client in this process for consumerStatus
(the broker relays GET_CONSUMER_RUNNING_INFO to it). The CLI runs in-process
(``main([...])`` in a thread, output through capsys).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.admin.mq_admin import MQAdmin
from aiorocketmq.cli.admin import main
from aiorocketmq.client import ConsumeConcurrentlyStatus, PushConsumer, PushConsumerConfig
from aiorocketmq.client.config import ClientConfig
from aiorocketmq.client.producer import Producer
from aiorocketmq.common.message import Message, MessageExt, MessageQueue
from aiorocketmq.dashboard.data import NotFound, group_detail
from tests.support.cluster import create_topic, start_broker, start_namesrv
from tests.support.procs import ManagedProcess
from tests.support.wait import wait_until

pytestmark = pytest.mark.timeout(120)

StartProcess = Callable[..., ManagedProcess]
TOPIC = "ConsumeCmdTopic"
GROUP = "CG_status"
BROKER = "broker-a"


@dataclass
class Cluster:
    namesrv: str
    #: key -> (queueId, queueOffset), from each SendResult.
    sent: dict[str, tuple[int, int]]


async def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``mqadmin args`` in a thread (main runs its own loop); (code, stdout, stderr)."""
    capsys.readouterr()
    code = await asyncio.to_thread(main, list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
async def cluster(start_process: StartProcess, tmp_path: Path) -> AsyncIterator[Cluster]:
    _ns, namesrv = await start_namesrv(start_process, tmp_path)
    broker = await start_broker(start_process, tmp_path, namesrv, BROKER)
    await create_topic(broker.addr, TOPIC)
    sent: dict[str, tuple[int, int]] = {}
    config = ClientConfig(namesrv_addr=namesrv, client_ip="127.0.0.1", instance_name="p")
    async with Producer("PG_consume_cmd", client_config=config) as producer:
        for i in range(40):
            key = f"k{i:02d}"
            mq = MessageQueue(TOPIC, BROKER, i % 4)
            result = await producer.send(
                Message(TOPIC, f"body-{key}".encode(), properties={"KEYS": key}), mq=mq
            )
            sent[key] = (result.message_queue.queue_id, result.queue_offset)
    async with MQAdmin(namesrv) as admin:
        # Sends are acknowledged once in the CommitLog; queues catch up a moment later.
        async def dispatched() -> bool:
            stats = await admin.examine_topic_stats(TOPIC)
            return sorted(o.max_offset for o in stats.offset_table.values()) == [10] * 4

        await wait_until(dispatched, timeout=10, what="40 messages in the consume queues")
    yield Cluster(namesrv, sent)


def keys_in(out: str) -> list[str]:
    """Keys of the ``MSGID: ... BODY: body-<key>`` lines, in order."""
    return re.findall(r"^MSGID: .* BODY: body-(k\d\d)$", out, re.M)


def keys_at(sent: dict[str, tuple[int, int]], queue: int, offsets: range) -> list[str]:
    by_place = {place: key for key, place in sent.items()}
    return [by_place[(queue, offset)] for offset in offsets]


async def test_consume_message_modes_table_and_json(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    ns, sent = cluster.namesrv, cluster.sent
    # DEFAULT: queues in order, -c messages in all.
    code, out, err = await run(capsys, "consumeMessage", "-n", ns, "-t", TOPIC, "-c", "10")
    assert code == 0, err
    assert keys_in(out) == keys_at(sent, 0, range(10))
    assert "Consume ok" in out
    code, out, err = await run(capsys, "consumeMessage", "-n", ns, "-t", TOPIC, "-c", "25")
    assert code == 0, err
    assert "The older 5 message of the 2 queue will be provided" in out
    assert keys_in(out) == keys_at(sent, 0, range(10)) + keys_at(sent, 1, range(10)) + keys_at(
        sent, 2, range(5)
    )
    code, out, err = await run(
        capsys, "consumeMessage", "-n", ns, "-t", TOPIC, "-c", "25", "--json"
    )
    assert code == 0, err
    docs = json.loads(out)
    assert [d["keys"] for d in docs] == keys_in_order(sent, [(0, 10), (1, 10), (2, 5)])
    assert all(d["body"] == f"body-{d['keys']}" and d["brokerName"] == BROKER for d in docs)
    assert all(sent[d["keys"]] == (d["queueId"], d["queueOffset"]) for d in docs)

    # BYQUEUE and BYOFFSET.
    code, out, err = await run(
        capsys, "consumeMessage", "-n", ns, "-t", TOPIC, "-b", BROKER, "-i", "1"
    )
    assert code == 0, err
    assert keys_in(out) == keys_at(sent, 1, range(10))
    assert "queueId=1] print msg finished. status=NO_NEW_MSG" not in out  # stops at the max
    code, out, err = await run(
        capsys, "consumeMessage", "-n", ns, "-t", TOPIC, "-b", BROKER, "-i", "2", "-o", "7",
        "--json",
    )  # fmt: skip
    assert code == 0, err
    assert [(d["queueId"], d["queueOffset"]) for d in json.loads(out)] == [(2, 7), (2, 8), (2, 9)]
    code, out, err = await run(
        capsys, "consumeMessage", "-n", ns, "-t", TOPIC, "-b", BROKER, "-i", "3", "-o", "11"
    )
    assert code == 0, err
    queue3 = f"MessageQueue [topic={TOPIC}, brokerName={BROKER}, queueId=3]"
    assert out == f"{queue3} no matched msg, offset=11\n"

    # Store-time bounds: everything was stored within the last hour, nothing before.
    hour_ago = str(int(time.time() * 1000) - 3_600_000)
    code, out, err = await run(
        capsys, "consumeMessage", "-n", ns, "-t", TOPIC, "-s", hour_ago, "--json"
    )
    assert code == 0, err
    assert len(json.loads(out)) == 40
    code, out, err = await run(
        capsys, "consumeMessage", "-n", ns, "-t", TOPIC, "-s", "0", "-e", hour_ago, "--json"
    )
    assert code == 0, err
    assert json.loads(out) == []

    # Usage mistakes are exit 2 with Java's words.
    for args, words in (
        (["-i", "1"], "Please set the brokerName before queueId!"),
        (["-b", BROKER, "-o", "3"], "Please set queueId before offset!"),
        (["-c", "0"], "Please input a positive messageNumber!"),
        (["-s", str(int(time.time() * 1000) + 3_600_000)], "beginTimestamp before now"),
    ):
        code, _out, err = await run(capsys, "consumeMessage", "-n", ns, "-t", TOPIC, *args)
        assert code == 2 and words in err, (args, err)


def keys_in_order(sent: dict[str, tuple[int, int]], spans: list[tuple[int, int]]) -> list[str]:
    return [key for queue, n in spans for key in keys_at(sent, queue, range(n))]


async def test_consumer_status_table_json_and_files(
    cluster: Cluster, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    ns = cluster.namesrv
    seen: set[str] = set()
    done = asyncio.Event()

    # async: it sets an asyncio.Event (a def listener would run on a pool thread)
    async def listener(msgs: list[MessageExt], _context: object) -> ConsumeConcurrentlyStatus:
        seen.update(m.keys[0] for m in msgs)
        if len(seen) == len(cluster.sent):
            done.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        GROUP,
        config=PushConsumerConfig(consume_from_where="CONSUME_FROM_FIRST_OFFSET"),
        client_config=ClientConfig(namesrv_addr=ns, client_ip="127.0.0.1", instance_name="cs"),
    )
    consumer.subscribe(TOPIC, "*")
    consumer.register_message_listener(listener)
    async with consumer:
        await wait_until(done, timeout=30, what="every message pushed")
        client_id = consumer.instance.client_id

        # One client: Java's report, its committed offsets and pull/consume figures.
        code, out, err = await run(capsys, "consumerStatus", "-n", ns, "-g", GROUP, "-i", client_id)
        assert code == 0, err
        assert out.startswith("#Consumer Properties#\n")
        for queue in range(4):
            assert f"{TOPIC:<32}  {BROKER:<32}  {queue:<4}  {10:<20}\n" in out
        assert f"001 Topic: {'%RETRY%' + GROUP:<40} ClassFilter: false" in out
        code, out, err = await run(
            capsys, "consumerStatus", "-n", ns, "-g", GROUP, "-i", client_id, "-s", "--json"
        )
        assert code == 0, err
        doc = json.loads(out)
        offsets = {q["queueId"]: q["commitOffset"] for q in doc["mqTable"] if q["topic"] == TOPIC}
        assert offsets == {0: 10, 1: 10, 2: 10, 3: 10}
        assert doc["properties"]["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY"
        assert doc["statusTable"][TOPIC]["consumeOKTPS"] > 0
        assert doc["statusTable"][TOPIC]["pullRT"] >= 0
        assert "Task" in doc["jstack"]  # the asyncio tasks' stacks

        # The whole group: the index, a report file per client, Java's verdicts.
        code, out, err = await run(
            capsys, "consumerStatus", "-n", ns, "-g", GROUP, "--outDir", str(tmp_path / "cs")
        )
        assert code == 0, err
        lines = out.splitlines()
        assert lines[0].split() == ["#Index", "#ClientId", "#Version", "#ConsumerRunningInfoFile"]
        index, row_client, version, file = lines[1].split()
        assert (index, row_client, version) == ("1", client_id, "V4_9_8")
        report = await asyncio.to_thread(Path(file).read_text, "utf-8")
        assert report.startswith("#Consumer Properties#")
        assert "Same subscription in the same group of consumer" in out
        assert "Rebalance OK" in out
        code, out, err = await run(
            capsys, "consumerStatus", "-n", ns, "-g", GROUP, "--outDir", str(tmp_path / "cs"),
            "--json",
        )  # fmt: skip
        assert code == 0, err
        doc = json.loads(out)
        assert [c["clientId"] for c in doc["clients"]] == [client_id]
        assert doc["sameSubscription"] is True and doc["warnings"] == []

        # The dashboard's group page names the client holding each queue.
        await consumer.persist_consumer_offset()  # oneway: the page needs them committed
        async with MQAdmin(ns) as admin:

            async def committed() -> dict[str, Any] | None:
                try:
                    return await group_detail(admin, GROUP)
                except NotFound:
                    return None

            detail = await wait_until(committed, timeout=10, what="the group's offsets")
        holders = {(q["topic"], q["queueId"]): q["client"] for q in detail["queues"]}
        assert {holders[(TOPIC, q)] for q in range(4)} == {client_id}

        # A client that is not there: exit 1 with the broker's reason.
        code, _out, err = await run(
            capsys, "consumerStatus", "-n", ns, "-g", GROUP, "-i", "127.0.0.1@nobody"
        )
        assert code == 1
        assert f"The Consumer <{GROUP}> <127.0.0.1@nobody> not online" in err
