"""mqadmin's message and offset commands against a real in-process name server and
broker, with messages sent by the real producer."""

# Java's printf formats kept verbatim, as in the code under test.
# ruff: noqa: UP031

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.admin.message_admin import MessageAdmin
from aiorocketmq.admin.message_commands import MESSAGE_COMMANDS
from aiorocketmq.admin.mq_admin import MQAdmin, MQAdminError
from aiorocketmq.broker.controller import BrokerController
from aiorocketmq.client.config import ClientConfig
from aiorocketmq.client.errors import MQBrokerError
from aiorocketmq.client.mq_client_api import MQClientAPI
from aiorocketmq.client.producer import Producer
from aiorocketmq.client.results import SendResult
from aiorocketmq.common.admin_bodies import ResetOffsetBody
from aiorocketmq.common.message import Message, MessageQueue
from aiorocketmq.common.protocol_bodies import (
    ConsumerData,
    HeartbeatData,
    build_subscription_data,
)
from aiorocketmq.common.topic_config import TopicConfig
from aiorocketmq.namesrv.server import NamesrvController
from aiorocketmq.remoting.broker_headers import UpdateConsumerOffsetRequestHeader
from aiorocketmq.remoting.client import RemotingClient
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.connection import ProcessorTable, RemotingConnection
from tests.support.cluster import wait_route
from tests.support.wait import wait_until
from tests.unit.admin.test_mq_admin import Options

pytestmark = pytest.mark.timeout(60)

TOPIC = "MsgAdminT"
GROUP = "CID_msg_admin"


async def run(admin: MQAdmin, name: str, **options: Any) -> str:
    out: list[str] = []
    await MESSAGE_COMMANDS[name](admin, Options(**options), out.append)
    return "".join(out)


def read(path: Path) -> bytes:
    """A body file's bytes (small files; read outside the loop's coroutines)."""
    return path.read_bytes()


@dataclass
class Sent:
    results: list[SendResult]
    bodies: list[bytes]
    keys: list[str]


async def produce(namesrv: NamesrvController, admin: MQAdmin, broker: BrokerController) -> Sent:
    await admin.create_topic(broker.address, TopicConfig(TOPIC, 4, 4, 6))
    await wait_route(namesrv.address, TOPIC, timeout=10)
    config = ClientConfig(
        namesrv_addr=namesrv.address, client_ip="127.0.0.1", instance_name="msg-admin"
    )
    sent = Sent([], [], [])
    async with Producer("PG_msg_admin", client_config=config) as producer:
        for i in range(8):
            body = f"body-{i}-\u00e9".encode()
            msg = Message(TOPIC, body)
            msg.keys = [f"k{i}", "shared"]
            msg.tags = "TagA" if i % 2 == 0 else "TagB"
            sent.results.append(await producer.send(msg))
            sent.bodies.append(body)
            sent.keys.append(f"k{i}")

    async def indexed() -> bool:
        # The IndexFile is built behind the CommitLog: queries see a message later.
        with contextlib.suppress(MQAdminError):
            return len(await MessageAdmin(admin).query_message(TOPIC, "shared")) == 8
        return False

    await wait_until(indexed, timeout=10, what="8 messages in the index")
    return sent


async def test_query_by_key_finds_every_message_with_the_key(
    admin: MQAdmin, broker: BrokerController, namesrv: NamesrvController
) -> None:
    sent = await produce(namesrv, admin, broker)
    text = await run(admin, "queryMsgByKey", topic=TOPIC, msgKey="shared")
    lines = text.splitlines()
    assert lines[0] == "%-50s %4s %40s" % ("#Message ID", "#QID", "#Offset")
    expected = {
        "%-50s %4d %40d" % (r.msg_id, r.message_queue.queue_id, r.queue_offset)
        for r in sent.results
    }
    assert set(lines[1:]) == expected and len(lines) == 9
    text = await run(admin, "queryMsgByKey", topic=TOPIC, msgKey=" k3 ")
    assert text.splitlines()[1].split()[0] == sent.results[3].msg_id
    with pytest.raises(MQAdminError) as info:
        await run(admin, "queryMsgByKey", topic=TOPIC, msgKey="absent")
    assert info.value.code == ResponseCode.NO_MESSAGE


async def test_query_by_id_prints_java_lines_and_writes_bodies(
    admin: MQAdmin, broker: BrokerController, namesrv: NamesrvController, tmp_path: Path
) -> None:
    sent = await produce(namesrv, admin, broker)
    ids = [sent.results[i].offset_msg_id for i in (1, 6)]
    assert all(ids)
    body_dir = tmp_path / "bodies"
    text = await run(admin, "queryMsgById", msgId=",".join(str(i) for i in ids), bodyDir=body_dir)
    blocks = text.split("OffsetID:")[1:]
    assert len(blocks) == 2
    for block, index in zip(blocks, (1, 6), strict=True):
        result = sent.results[index]
        # "%-20s %s": the name padded to 20 characters, a space, the value.
        fields = {line[:20].strip(): line[21:] for line in block.splitlines()[1:]}
        assert block.split("\n", 1)[0].strip() == result.offset_msg_id
        assert fields["Topic:"] == TOPIC
        assert fields["Tags:"] == ("[TagA]" if index % 2 == 0 else "[TagB]")
        assert fields["Keys:"] == f"[k{index} shared]"
        assert fields["Queue ID:"] == str(result.message_queue.queue_id)
        assert fields["Queue Offset:"] == str(result.queue_offset)
        assert fields["Store Host:"] == broker.address
        assert fields["Reconsume Times:"] == "0"
        assert f"UNIQ_KEY={result.msg_id}" in fields["Properties:"]
        path = Path(fields["Message Body Path:"])
        assert path == body_dir / str(result.msg_id)
        assert read(path) == sent.bodies[index]
    with pytest.raises(MQAdminError):
        await run(admin, "queryMsgById", msgId="not-an-id", bodyDir=body_dir)
    bad_offset = str(ids[0])[:-16] + "00000000FFFFFFFF"
    with pytest.raises(MQBrokerError) as info:
        await run(admin, "queryMsgById", msgId=bad_offset, bodyDir=body_dir)
    assert info.value.code == ResponseCode.SYSTEM_ERROR


async def test_query_by_unique_key_and_by_offset(
    admin: MQAdmin, broker: BrokerController, namesrv: NamesrvController, tmp_path: Path
) -> None:
    sent = await produce(namesrv, admin, broker)
    target = sent.results[5]
    text = await run(admin, "queryMsgByUniqueKey", topic=TOPIC, msgId=target.msg_id,
                     bodyDir=tmp_path)  # fmt: skip
    lines = text.splitlines()
    assert lines[0] == "%-20s %s" % ("Topic:", TOPIC)
    assert "OffsetID:" not in text
    assert "%-20s %s" % ("Queue Offset:", target.queue_offset) in lines
    assert read(tmp_path / str(target.msg_id)) == sent.bodies[5]

    mq = target.message_queue
    text = await run(admin, "queryMsgByOffset", topic=TOPIC, brokerName=mq.broker_name,
                     queueId=mq.queue_id, offset=target.queue_offset, bodyDir=tmp_path)  # fmt: skip
    assert text.splitlines()[0] == "%-20s %s" % ("OffsetID:", target.offset_msg_id)
    assert "%-20s %s" % ("Keys:", "[k5 shared]") in text.splitlines()
    # Past the end: Java prints nothing.
    assert await run(admin, "queryMsgByOffset", topic=TOPIC, brokerName=mq.broker_name,
                     queueId=mq.queue_id, offset=1000, bodyDir=tmp_path) == ""  # fmt: skip
    with pytest.raises(MQAdminError):
        await run(admin, "queryMsgByOffset", topic=TOPIC, brokerName="nope", queueId=0, offset=0)


async def test_print_msg_walks_every_queue(
    admin: MQAdmin, broker: BrokerController, namesrv: NamesrvController
) -> None:
    sent = await produce(namesrv, admin, broker)
    text = await run(admin, "printMsg", topic=TOPIC)
    lines = text.splitlines()
    headers = [line for line in lines if line.startswith("minOffset=")]
    per_queue = {q: 0 for q in range(4)}
    for r in sent.results:
        per_queue[r.message_queue.queue_id] += 1
    assert headers == [
        f"minOffset=0, maxOffset={per_queue[q]}, MessageQueue [topic={TOPIC}, "
        f"brokerName=broker-a, queueId={q}]"
        for q in range(4)
    ]
    msg_lines = [line for line in lines if line.startswith("MSGID: ")]
    assert sorted(line.split()[1] for line in msg_lines) == sorted(
        str(r.msg_id) for r in sent.results
    )
    assert all(" BODY: body-" in line and line.endswith("-\u00e9") for line in msg_lines)
    assert lines.count("-" * 56) == 4
    first = next(line for line in msg_lines if sent.results[0].msg_id in line)
    assert f"msgId={sent.results[0].offset_msg_id}" in first
    assert "toString()=Message{topic='MsgAdminT', flag=0, properties={" in first
    assert "body=[98, 111, 100, 121, 45, 48, 45, -61, -87]" in first

    text = await run(admin, "printMsg", topic=TOPIC, subExpression="TagB", printBody="false")
    msg_lines = [line for line in text.splitlines() if line.startswith("MSGID: ")]
    assert len(msg_lines) == 4 and all(line.endswith("BODY: NOT PRINT BODY") for line in msg_lines)
    # A begin time after every message: the store answers each queue's last message
    # (as Java's ConsumeQueue search), so only that one is printed.
    text = await run(admin, "printMsg", topic=TOPIC, beginTimestamp="2100-01-01#00:00:00:000")
    headers = [line for line in text.splitlines() if line.startswith("minOffset=")]
    assert [h.split(",")[0] for h in headers] == [
        f"minOffset={max(per_queue[q] - 1, 0)}" for q in range(4)
    ]
    assert text.count("MSGID: ") == sum(1 for q in range(4) if per_queue[q])


@dataclass
class Consumer:
    """An online client of the group recording RESET_CONSUMER_CLIENT_OFFSET."""

    received: list[RemotingCommand] = field(default_factory=list)
    client: RemotingClient = field(init=False)

    def __post_init__(self) -> None:
        table = ProcessorTable()
        table.register(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, self.on_reset)
        self.client = RemotingClient(processors=table)

    def on_reset(self, conn: RemotingConnection, request: RemotingCommand) -> None:
        self.received.append(request)

    async def join(self, address: str) -> None:
        data = HeartbeatData(
            "127.0.0.1@reset",
            consumers=[ConsumerData(GROUP, subscriptions=[build_subscription_data(TOPIC, "*")])],
        )
        request = RemotingCommand(code=RequestCode.HEART_BEAT, body=data.encode(), version=373)
        assert (await self.client.invoke(address, request, 3000)).code == ResponseCode.SUCCESS


async def commit_all(
    admin: MQAdmin, address: str, offsets: dict[int, int], group: str = GROUP
) -> None:
    api = MQClientAPI(admin.remoting)
    for queue_id, offset in offsets.items():
        header = UpdateConsumerOffsetRequestHeader(group, TOPIC, queue_id, offset)
        await api.update_consumer_offset(address, header, 3000)


async def committed(admin: MQAdmin, address: str) -> dict[int, int]:
    stats = await admin.broker.get_consume_stats(address, GROUP, TOPIC)
    return {mq.queue_id: w.consumer_offset for mq, w in stats.offset_table.items()}


def max_offsets(sent: Sent) -> dict[int, int]:
    out = dict.fromkeys(range(4), 0)
    for r in sent.results:
        out[r.message_queue.queue_id] = max(out[r.message_queue.queue_id], r.queue_offset + 1)
    return out


async def test_reset_through_the_broker_tells_the_online_clients(
    admin: MQAdmin, broker: BrokerController, namesrv: NamesrvController
) -> None:
    sent = await produce(namesrv, admin, broker)
    await commit_all(admin, broker.address, dict.fromkeys(range(4), 1))
    consumer = Consumer()
    try:
        await consumer.join(broker.address)
        text = await run(admin, "resetOffsetByTime", group=GROUP, topic=TOPIC, timestamp="now")
        maxes = max_offsets(sent)
        assert text == (
            f"rollback consumer offset by specified group[{GROUP}], topic[{TOPIC}], "
            "force[true], timestamp(string)[now], timestamp(long)[-1]\n"
            + "%-40s  %-40s  %-40s\n" % ("#brokerName", "#queueId", "#offset")
            + "".join("%-40s  %-40d  %-40d\n" % ("broker-a", q, maxes[q]) for q in range(4))
        )
        await wait_until(lambda: len(consumer.received) == 1, what="client told to reset")
        table = ResetOffsetBody.decode(consumer.received[0].body_bytes()).offset_table
        assert table == {MessageQueue(TOPIC, "broker-a", q): maxes[q] for q in range(4)}
        text = await run(admin, "skipAccumulatedMessage", group=GROUP, topic=TOPIC, force="false")
        assert text.splitlines()[1].split() == ["broker-a", "0", str(min(1, maxes[0]))]
        await wait_until(lambda: len(consumer.received) == 2, what="second reset")
    finally:
        await consumer.client.close()


async def test_reset_without_clients_updates_offsets_from_the_admin(
    admin: MQAdmin, broker: BrokerController, namesrv: NamesrvController
) -> None:
    sent = await produce(namesrv, admin, broker)
    maxes = max_offsets(sent)
    # The group consumed (the broker insists on that) but no client is online now.
    await commit_all(admin, broker.address, dict.fromkeys(range(4), 1))
    text = await run(admin, "resetOffsetByTime", group=GROUP, topic=TOPIC, timestamp="1")
    lines = text.splitlines()
    assert lines[0] == (
        f"rollback consumer offset by specified consumerGroup[{GROUP}], topic[{TOPIC}], "
        "force[true], timestamp(string)[1], timestamp(long)[1]"
    )
    assert lines[1].split() == [
        "#brokerName", "#queueId", "#brokerOffset", "#consumerOffset", "#timestampOffset",
        "#rollbackOffset",
    ]  # fmt: skip
    assert [line.split() for line in lines[2:]] == [
        ["broker-a", str(q), str(maxes[q]), "1", "0", "0"] for q in range(4)
    ]
    assert await committed(admin, broker.address) == dict.fromkeys(range(4), 0)
    text = await run(admin, "skipAccumulatedMessage", group=GROUP, topic=TOPIC)
    assert await committed(admin, broker.address) == maxes
    assert [line.split()[5] for line in text.splitlines()[1:]] == [str(maxes[q]) for q in range(4)]
    # Not forced: nothing moves forward.
    await commit_all(admin, broker.address, dict.fromkeys(range(4), 0))
    await run(admin, "skipAccumulatedMessage", group=GROUP, topic=TOPIC, force="false")
    assert await committed(admin, broker.address) == dict.fromkeys(range(4), 0)


async def test_topic_list_shows_consuming_groups(
    admin: MQAdmin, broker: BrokerController, namesrv: NamesrvController
) -> None:
    await produce(namesrv, admin, broker)
    await commit_all(admin, broker.address, {0: 0})
    assert await admin.query_topic_consume_by_who(TOPIC) == [GROUP]


async def test_old_style_reset_of_a_group_that_never_consumed(
    admin: MQAdmin, broker: BrokerController, namesrv: NamesrvController
) -> None:
    sent = await produce(namesrv, admin, broker)
    maxes = max_offsets(sent)
    rows = await MessageAdmin(admin).reset_offset_by_timestamp_old("CID_fresh", TOPIC, -1, True)
    # Every read queue from the topic stats, its min offset taken as consumed.
    assert [(r.queue_id, r.broker_offset, r.consumer_offset, r.rollback_offset) for r in rows] == [
        (q, maxes[q], 0, maxes[q]) for q in range(4)
    ]
    stats = await admin.broker.get_consume_stats(broker.address, "CID_fresh", TOPIC)
    assert {mq.queue_id: w.consumer_offset for mq, w in stats.offset_table.items()} == maxes


async def test_query_by_id_tracks_each_consuming_group(
    admin: MQAdmin, broker: BrokerController, namesrv: NamesrvController, tmp_path: Path
) -> None:
    sent = await produce(namesrv, admin, broker)
    text = await run(admin, "queryMsgById", msgId=sent.results[0].offset_msg_id, bodyDir=tmp_path)
    assert text.endswith("Message Body Path:   " + str(tmp_path / str(sent.results[0].msg_id))
                         + "\n\n\nWARN: No Consumer\n")  # fmt: skip
    first = sent.results[0]
    later = next(
        r for r in sent.results[1:] if r.message_queue == first.message_queue
    )  # round robin: every queue has two of the eight
    await commit_all(admin, broker.address, {first.message_queue.queue_id: later.queue_offset})
    await commit_all(admin, broker.address, {0: 0}, group="CID_offline")
    consumer = Consumer()
    try:
        await consumer.join(broker.address)
        await wait_route(namesrv.address, f"%RETRY%{GROUP}", timeout=10)
        ids = f"{first.offset_msg_id},{later.offset_msg_id}"
        text = await run(admin, "queryMsgById", msgId=ids, bodyDir=tmp_path)
    finally:
        await consumer.client.close()
    tracks = [line for line in text.splitlines() if line.startswith("MessageTrack [")]
    assert tracks[0] == (
        f"MessageTrack [consumerGroup={GROUP}, trackType=CONSUMED, exceptionDesc=null]"
    )
    assert tracks[1].startswith(
        "MessageTrack [consumerGroup=CID_offline, trackType=UNKNOWN, exceptionDesc="
    )
    assert "%RETRY%CID_offline" in tracks[1]
    assert tracks[2] == (
        f"MessageTrack [consumerGroup={GROUP}, trackType=NOT_CONSUME_YET, exceptionDesc=null]"
    )
    assert len(tracks) == 4 and tracks[3].startswith("MessageTrack [consumerGroup=CID_offline")
