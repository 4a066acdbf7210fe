"""INVOKE_BROKER_TO_RESET_OFFSET (222) and QUERY_TOPIC_CONSUME_BY_WHO (300) on a real
server and store, with real clients that receive RESET_CONSUMER_CLIENT_OFFSET."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from aiorocketmq.broker.context import BrokerContext
from aiorocketmq.broker.processors.client_manage import ClientManageProcessor
from aiorocketmq.broker.processors.reset_offset import (
    MIN_RESET_CLIENT_VERSION,
    ResetOffsetBody,
    ResetOffsetProcessor,
    ResetOffsetRequestHeader,
)
from aiorocketmq.common import fastjson as fj
from aiorocketmq.common.message import MessageQueue
from aiorocketmq.common.protocol_bodies import (
    ConsumerData,
    HeartbeatData,
    build_subscription_data,
)
from aiorocketmq.remoting.client import RemotingClient
from aiorocketmq.remoting.codes import LanguageCode, RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.connection import ProcessorTable, RemotingConnection
from tests.support.wait import wait_until
from tests.unit.broker.broker_support import GROUP, TOPIC, Harness, harness
from tests.unit.store.store_support import dispatched, inner, put_ok

#: ``MQVersion.Version.V4_9_8.ordinal()``-like: a current client.
CURRENT_CLIENT_VERSION = 373


@dataclass
class Parts:
    h: Harness
    processor: ResetOffsetProcessor


@contextlib.asynccontextmanager
async def broker(tmp_path: Path) -> AsyncIterator[Parts]:
    made: list[ResetOffsetProcessor] = []

    def register(ctx: BrokerContext, table: ProcessorTable) -> None:
        ClientManageProcessor(ctx).register(table)
        made.append(ResetOffsetProcessor(ctx))
        made[0].register(table)

    async with harness(tmp_path, broker={"broker_name": "broker-a"}, extra=register) as h:
        yield Parts(h, made[0])


@dataclass
class Consumer:
    """A client of the group that records every RESET_CONSUMER_CLIENT_OFFSET."""

    client_id: str
    received: list[RemotingCommand] = field(default_factory=list)
    client: RemotingClient = field(init=False)

    def __post_init__(self) -> None:
        table = ProcessorTable()
        table.register(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, self.on_reset)
        self.client = RemotingClient(processors=table)

    def on_reset(self, conn: RemotingConnection, request: RemotingCommand) -> None:
        self.received.append(request)

    async def join(self, h: Harness, version: int = CURRENT_CLIENT_VERSION) -> None:
        data = HeartbeatData(
            self.client_id,
            consumers=[ConsumerData(GROUP, subscriptions=[build_subscription_data(TOPIC, "*")])],
        )
        request = RemotingCommand(code=RequestCode.HEART_BEAT, body=data.encode(), version=version)
        assert (await self.client.invoke(h.address, request, 3000)).code == ResponseCode.SUCCESS


def reset_request(
    timestamp: int, *, force: bool = True, group: str = GROUP, topic: str = TOPIC
) -> RemotingCommand:
    header = ResetOffsetRequestHeader(topic, group, timestamp, force)
    return RemotingCommand(
        code=RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, ext_fields=header.to_ext_fields()
    )


async def fill(h: Harness, per_queue: dict[int, int]) -> None:
    for queue_id, count in per_queue.items():
        for i in range(count):
            await put_ok(h.ctx.store, inner(f"m{queue_id}-{i}".encode(), queue_id=queue_id))
    await dispatched(h.ctx.store)


def commit(h: Harness, offsets: dict[int, int], group: str = GROUP) -> None:
    for queue_id, offset in offsets.items():
        h.ctx.offsets.commit_offset("test", group, TOPIC, queue_id, offset)


def mq(queue_id: int) -> MessageQueue:
    return MessageQueue(TOPIC, "broker-a", queue_id)


async def test_reset_to_max_notifies_every_client_and_answers_the_table(tmp_path: Path) -> None:
    async with broker(tmp_path) as parts:
        h = parts.h
        await fill(h, {0: 3, 1: 1})
        commit(h, {0: 1, 1: 0, 2: 0, 3: 0})
        consumers = [Consumer("10.0.0.1@a"), Consumer("10.0.0.1@b")]
        try:
            for c in consumers:
                await c.join(h)
            reply = await h.invoke(reset_request(-1))
            assert reply.code == ResponseCode.SUCCESS, reply.remark
            expected = {mq(0): 3, mq(1): 1, mq(2): 0, mq(3): 0}
            assert ResetOffsetBody.decode(reply.body_bytes()).offset_table == expected
            await wait_until(
                lambda: all(len(c.received) == 1 for c in consumers), what="both clients reset"
            )
            for c in consumers:
                sent = c.received[0]
                assert sent.is_oneway
                assert sent.ext_fields == {
                    "topic": TOPIC,
                    "group": GROUP,
                    "timestamp": "-1",
                    "isForce": "true",
                }
                assert ResetOffsetBody.decode(sent.body_bytes()).offset_table == expected
            assert parts.processor.notified == 2
            # As Java: the broker leaves committing to the clients.
            assert h.ctx.offsets.query_offset(GROUP, TOPIC, 0) == 1
        finally:
            for c in consumers:
                await c.client.close()


async def test_by_timestamp_and_without_force(tmp_path: Path) -> None:
    async with broker(tmp_path) as parts:
        h = parts.h
        await fill(h, {0: 4, 1: 2})
        commit(h, {0: 3, 1: 0, 2: 0, 3: 0})
        c = Consumer("10.0.0.1@a")
        try:
            await c.join(h)
            # A timestamp before every message: the start of each queue.
            reply = await h.invoke(reset_request(1))
            assert reply.code == ResponseCode.SUCCESS, reply.remark
            table = ResetOffsetBody.decode(reply.body_bytes()).offset_table
            assert table == {mq(0): 0, mq(1): 0, mq(2): 0, mq(3): 0}
            # Not forced: a queue moves only backwards (queue 1's 2 > committed 0).
            reply = await h.invoke(reset_request(-1, force=False))
            table = ResetOffsetBody.decode(reply.body_bytes()).offset_table
            assert table == {mq(0): 3, mq(1): 0, mq(2): 0, mq(3): 0}
            await wait_until(lambda: len(c.received) == 2, what="two resets")
        finally:
            await c.client.close()


async def test_cpp_request_sends_the_list_form(tmp_path: Path) -> None:
    async with broker(tmp_path) as parts:
        h = parts.h
        await fill(h, {0: 2})
        commit(h, {0: 0, 1: 0, 2: 0, 3: 0})
        c = Consumer("10.0.0.1@cpp")
        try:
            await c.join(h)
            request = reset_request(-1)
            request.language = LanguageCode.CPP
            reply = await h.invoke(request)
            assert reply.code == ResponseCode.SUCCESS
            await wait_until(lambda: len(c.received) == 1, what="cpp client reset")
            items = fj.loads_object(c.received[0].body_bytes(), "body")["offsetTable"]
            assert items[0] == {"brokerName": "broker-a", "offset": 2, "queueId": 0, "topic": TOPIC}
            assert [item["queueId"] for item in items] == [0, 1, 2, 3]
        finally:
            await c.client.close()


async def test_errors_are_java_codes(tmp_path: Path) -> None:
    async with broker(tmp_path) as parts:
        h = parts.h
        await fill(h, {0: 1})
        reply = await h.invoke(reset_request(-1, topic="NoSuchTopic"))
        assert reply.code == ResponseCode.SYSTEM_ERROR
        assert reply.remark == (
            "[reset-offset] reset offset failed, no topic in this broker. topic=NoSuchTopic"
        )
        reply = await h.invoke(reset_request(-1))
        assert (reply.code, reply.remark) == (
            ResponseCode.SYSTEM_ERROR,
            f"THe consumer group <{GROUP}> not exist",
        )
        commit(h, {0: 0, 1: 0, 2: 0, 3: 0})
        reply = await h.invoke(reset_request(-1))
        assert (reply.code, reply.remark) == (
            ResponseCode.CONSUMER_NOT_ONLINE,
            f"Consumer not online, so can not reset offset, Group: {GROUP} Topic: {TOPIC} "
            "Timestamp: -1",
        )
        old = Consumer("10.0.0.1@old")
        try:
            await old.join(h, version=MIN_RESET_CLIENT_VERSION - 1)
            reply = await h.invoke(reset_request(-1))
            assert reply.code == ResponseCode.SYSTEM_ERROR
            assert reply.remark is not None
            assert reply.remark.startswith("the client does not support this feature.")
            assert old.received == [] and parts.processor.notified == 0
        finally:
            await old.client.close()
        bad = RemotingCommand(
            code=RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, ext_fields={"topic": TOPIC}
        )
        reply = await h.invoke(bad)
        assert reply.code == ResponseCode.SYSTEM_ERROR
        assert reply.remark is not None and "group" in reply.remark


async def test_query_topic_consume_by_who(tmp_path: Path) -> None:
    async with broker(tmp_path) as parts:
        h = parts.h
        commit(h, {0: 0}, group="CID_offsets_only")
        h.ctx.offsets.commit_offset("test", "CID_other_topic", "OtherTopic", 0, 0)
        c = Consumer("10.0.0.1@a")
        try:
            await c.join(h)
            request = RemotingCommand(
                code=RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, ext_fields={"topic": TOPIC}
            )
            reply = await h.invoke(request)
            assert reply.code == ResponseCode.SUCCESS
            body = fj.loads_object(reply.body_bytes(), "GroupList")
            assert body == {"groupList": ["CID_offsets_only", GROUP]}
            request.ext_fields = {"topic": "Nobody"}
            reply = await h.invoke(request)
            assert fj.loads_object(reply.body_bytes(), "GroupList") == {"groupList": []}
        finally:
            await c.client.close()


def test_body_round_trip_and_header_defaults() -> None:
    body = ResetOffsetBody({mq(0): 5, MessageQueue('T"x', "b", 7): 2**40})
    assert body.encode().startswith(
        b'{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"TopicTest"}:5,'
    )
    assert ResetOffsetBody.decode(body.encode()) == body
    header = ResetOffsetRequestHeader.from_ext_fields(
        {"topic": "t", "group": "g", "timestamp": "9"}
    )
    assert header == ResetOffsetRequestHeader("t", "g", 9, False)
