"""``mqadmin``'s message queries and offset resets as processes against real
``mqnamesrv`` and two ``mqbroker`` processes (broker-a, broker-b).

Messages go through the real producer; each mqadmin command runs as
``python -m aiorocketmq.cli.admin`` (an asyncio subprocess, so this test's own
connections, such as a consumer's heartbeat channel, stay served meanwhile).
"""

# ruff: noqa: UP031

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from aiorocketmq.admin.message_admin import MessageAdmin
from aiorocketmq.admin.mq_admin import MQAdmin, MQAdminError
from aiorocketmq.client.config import ClientConfig
from aiorocketmq.client.mq_client_api import MQClientAPI
from aiorocketmq.client.producer import Producer
from aiorocketmq.client.results import SendResult
from aiorocketmq.common.admin_bodies import ResetOffsetBody
from aiorocketmq.common.message import Message
from aiorocketmq.common.protocol_bodies import ConsumerData, HeartbeatData, build_subscription_data
from aiorocketmq.remoting.broker_headers import UpdateConsumerOffsetRequestHeader
from aiorocketmq.remoting.client import RemotingClient
from aiorocketmq.remoting.codes import LanguageCode, RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.connection import ProcessorTable, RemotingConnection
from tests.integration.test_mqadmin import mqadmin, ok
from tests.support.cluster import BrokerProcess, start_broker, start_namesrv, wait_route
from tests.support.procs import ManagedProcess
from tests.support.wait import wait_until

pytestmark = pytest.mark.timeout(120)

StartProcess = Callable[..., ManagedProcess]
CLUSTER = "DefaultCluster"
TOPIC = "QueryIT"
GROUP = "CID_query_it"
MESSAGES = 24


@dataclass
class Cluster:
    namesrv: str
    brokers: dict[str, BrokerProcess]
    sent: list[SendResult] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)


def read(path: Path) -> bytes:
    """A body file's bytes."""
    return path.read_bytes()


async def cluster_with_messages(start_process: StartProcess, tmp_path: Path) -> Cluster:
    """Name server, broker-a and broker-b, the topic on both, MESSAGES messages sent."""
    _ns, namesrv = await start_namesrv(start_process, tmp_path)
    brokers = {
        name: await start_broker(start_process, tmp_path, namesrv, name)
        for name in ("broker-a", "broker-b")
    }
    await ok("updateTopic", "-n", namesrv, "-c", CLUSTER, "-t", TOPIC, "-r", "2", "-w", "2")
    await wait_route(namesrv, TOPIC, lambda r: len(r.queue_datas) == 2, timeout=20)
    c = Cluster(namesrv, brokers)
    config = ClientConfig(namesrv_addr=namesrv, client_ip="127.0.0.1", instance_name="query-it")
    async with Producer("PG_query_it", client_config=config) as producer:
        for i in range(MESSAGES):
            body = f"order {i} body".encode()
            msg = Message(TOPIC, body)
            msg.keys, msg.tags = [f"order-{i}", "batch-1"], "TagA" if i % 3 else "TagB"
            c.sent.append(await producer.send(msg))
            c.bodies.append(body)
    assert {r.message_queue.broker_name for r in c.sent} == {"broker-a", "broker-b"}

    async def indexed() -> bool:
        # The IndexFile is built behind the CommitLog: wait until it has every message.
        async with MQAdmin(namesrv) as admin:
            with contextlib.suppress(MQAdminError):
                found = await MessageAdmin(admin).query_message(TOPIC, "batch-1")
                return len(found) == MESSAGES
        return False

    await wait_until(indexed, timeout=20, what="every message in both brokers' indexes")
    return c


async def test_every_message_is_found_by_key_id_unique_key_and_offset(
    start_process: StartProcess, tmp_path: Path
) -> None:
    c = await cluster_with_messages(start_process, tmp_path)
    n = c.namesrv
    lines = (await ok("queryMsgByKey", "-n", n, "-t", TOPIC, "-k", "batch-1")).splitlines()
    assert lines[0] == "%-50s %4s %40s" % ("#Message ID", "#QID", "#Offset")
    assert sorted(lines[1:]) == sorted(
        "%-50s %4d %40d" % (r.msg_id, r.message_queue.queue_id, r.queue_offset) for r in c.sent
    )
    one = (await ok("queryMsgByKey", "-n", n, "-t", TOPIC, "-k", "order-7")).splitlines()
    assert [line.split()[0] for line in one[1:]] == [c.sent[7].msg_id]
    missing = await mqadmin("queryMsgByKey", "-n", n, "-t", TOPIC, "-k", "order-999")
    assert missing.returncode == 1 and "CODE: 208" in missing.err

    bodies = tmp_path / "bodies"
    ids = ",".join(str(r.offset_msg_id) for r in c.sent)
    text = await ok("queryMsgById", "-n", n, "-i", ids, "--bodyDir", str(bodies))
    blocks = text.split("OffsetID:")[1:]
    assert len(blocks) == MESSAGES
    assert text.count("\n\n\nWARN: No Consumer\n") == MESSAGES  # no group consumes yet
    for block, result, body in zip(blocks, c.sent, c.bodies, strict=True):
        fields = {line[:20].strip(): line[21:] for line in block.splitlines()[1:]}
        assert block.split("\n", 1)[0].strip() == result.offset_msg_id
        assert fields["Queue Offset:"] == str(result.queue_offset)
        assert fields["Store Host:"] == c.brokers[result.message_queue.broker_name].addr
        assert read(Path(fields["Message Body Path:"])) == body

    for i in (0, MESSAGES - 1):
        result = c.sent[i]
        text = await ok(
            "queryMsgByUniqueKey", "-n", n, "-t", TOPIC, "-i", str(result.msg_id),
            "--bodyDir", str(bodies),
        )  # fmt: skip
        assert "%-20s %s" % ("Queue Offset:", result.queue_offset) in text.splitlines()
        assert "%-20s %s" % ("Keys:", f"[order-{i} batch-1]") in text.splitlines()
        mq = result.message_queue
        text = await ok(
            "queryMsgByOffset", "-n", n, "-t", TOPIC, "-b", mq.broker_name,
            "-i", str(mq.queue_id), "-o", str(result.queue_offset), "--bodyDir", str(bodies),
        )  # fmt: skip
        assert text.splitlines()[0] == "%-20s %s" % ("OffsetID:", result.offset_msg_id)

    text = await ok("printMsg", "-n", n, "-t", TOPIC)
    printed = [line.split()[1] for line in text.splitlines() if line.startswith("MSGID: ")]
    assert sorted(printed) == sorted(str(r.msg_id) for r in c.sent)
    assert text.count("minOffset=0, ") == 4
    tag_b = await ok("printMsg", "-n", n, "-t", TOPIC, "-s", "TagB", "-d", "false")
    assert tag_b.count("MSGID: ") == len(range(0, MESSAGES, 3))


async def committed(namesrv: str, broker: BrokerProcess) -> dict[int, int]:
    async with MQAdmin(namesrv) as admin:
        stats = await admin.broker.get_consume_stats(broker.addr, GROUP, TOPIC)
    return {mq.queue_id: w.consumer_offset for mq, w in stats.offset_table.items()}


async def commit(client: RemotingClient, broker: BrokerProcess, offsets: dict[int, int]) -> None:
    api = MQClientAPI(client)
    for queue_id, offset in offsets.items():
        header = UpdateConsumerOffsetRequestHeader(GROUP, TOPIC, queue_id, offset)
        await api.update_consumer_offset(broker.addr, header, 5000)


def max_offsets(c: Cluster, broker_name: str) -> dict[int, int]:
    out = {0: 0, 1: 0}
    for r in c.sent:
        if r.message_queue.broker_name == broker_name:
            q = r.message_queue.queue_id
            out[q] = max(out[q], r.queue_offset + 1)
    return out


async def test_reset_offsets_without_a_client_online(
    start_process: StartProcess, tmp_path: Path
) -> None:
    c = await cluster_with_messages(start_process, tmp_path)
    client = RemotingClient()
    try:
        for broker in c.brokers.values():
            await commit(client, broker, {0: 1, 1: 1})
    finally:
        await client.close()
    text = await ok("skipAccumulatedMessage", "-n", c.namesrv, "-g", GROUP, "-t", TOPIC)
    assert text.splitlines()[0].split()[0] == "#brokerName"
    assert len(text.splitlines()) == 5
    for name, broker in c.brokers.items():
        assert await committed(c.namesrv, broker) == max_offsets(c, name)
    text = await ok("resetOffsetByTime", "-n", c.namesrv, "-g", GROUP, "-t", TOPIC, "-s", "1000")
    assert text.splitlines()[0] == (
        f"rollback consumer offset by specified consumerGroup[{GROUP}], topic[{TOPIC}], "
        "force[true], timestamp(string)[1000], timestamp(long)[1000]"
    )
    for broker in c.brokers.values():
        assert await committed(c.namesrv, broker) == {0: 0, 1: 0}


@dataclass
class Consumer:
    """A client of the group that stays online and records reset requests."""

    received: list[RemotingCommand] = field(default_factory=list)
    client: RemotingClient = field(init=False)

    def __post_init__(self) -> None:
        table = ProcessorTable()
        table.register(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, self.on_reset)
        self.client = RemotingClient(processors=table)

    def on_reset(self, conn: RemotingConnection, request: RemotingCommand) -> None:
        self.received.append(request)

    async def join(self, broker: BrokerProcess) -> None:
        data = HeartbeatData(
            "127.0.0.1@query-it",
            consumers=[ConsumerData(GROUP, subscriptions=[build_subscription_data(TOPIC, "*")])],
        )
        request = RemotingCommand(
            code=RequestCode.HEART_BEAT, language=LanguageCode.JAVA, body=data.encode(), version=373
        )
        reply = await self.client.invoke(broker.addr, request, 5000)
        assert reply.code == ResponseCode.SUCCESS


async def test_reset_through_the_brokers_reaches_the_online_client(
    start_process: StartProcess, tmp_path: Path
) -> None:
    c = await cluster_with_messages(start_process, tmp_path)
    consumer = Consumer()
    try:
        for broker in c.brokers.values():
            await commit(consumer.client, broker, {0: 1, 1: 1})
            await consumer.join(broker)
        text = await ok("resetOffsetByTime", "-n", c.namesrv, "-g", GROUP, "-t", TOPIC, "-s", "now")
        lines = text.splitlines()
        assert lines[0] == (
            f"rollback consumer offset by specified group[{GROUP}], topic[{TOPIC}], "
            "force[true], timestamp(string)[now], timestamp(long)[-1]"
        )
        expected = {
            (name, q, offset) for name in c.brokers for q, offset in max_offsets(c, name).items()
        }
        rows = {(b, int(q), int(o)) for b, q, o in (line.split() for line in lines[2:])}
        assert rows == expected and len(lines) == 6
        await wait_until(lambda: len(consumer.received) == 2, what="both brokers told the client")
        told = {
            (mq.broker_name, mq.queue_id, offset)
            for request in consumer.received
            for mq, offset in ResetOffsetBody.decode(request.body_bytes()).offset_table.items()
        }
        assert told == expected
        # Committed offsets are still 1 (clients commit a reset): the track shows
        # the group past each queue's first message and not yet at the second.
        first = next(r for r in c.sent if r.queue_offset == 0)
        second = next(r for r in c.sent if r.queue_offset == 1)
        ids = f"{first.offset_msg_id},{second.offset_msg_id}"
        text = await ok("queryMsgById", "-n", c.namesrv, "-i", ids, "--bodyDir", str(tmp_path))
        assert [line for line in text.splitlines() if line.startswith("MessageTrack")] == [
            f"MessageTrack [consumerGroup={GROUP}, trackType={kind}, exceptionDesc=null]"
            for kind in ("CONSUMED", "NOT_CONSUME_YET")
        ]
        listed = await ok("topicList", "-n", c.namesrv, "-c")
        assert any(line.split()[1:] == [TOPIC, GROUP] for line in listed.splitlines())
    finally:
        await consumer.client.close()
