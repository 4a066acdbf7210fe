"""Topic message types (RocketMQ 5's ``message.type`` attribute) on a real in-process
broker: set through UPDATE_AND_CREATE_TOPIC's ``attributes`` as ``mqadmin updateTopic
-a`` sends it, kept in ``topics.json`` across a restart, advertised by QueryRoute,
enforced by SendMessage (MESSAGE_PROPERTY_CONFLICT_WITH_TYPE); a topic without one
(a 4.x topic) stays MIXED; bad attribute texts are refused with RocketMQ's words."""

from __future__ import annotations

import json
from pathlib import Path

from google.protobuf.timestamp_pb2 import Timestamp

from aiorocketmq.broker.controller import BrokerController
from aiorocketmq.common.topic_config import TopicConfig
from aiorocketmq.proxy.messaging import check_topic_message_type
from aiorocketmq.proxy.v2 import definition_pb2 as pb
from aiorocketmq.proxy.v2 import service_pb2 as rpc
from aiorocketmq.remoting.broker_admin_headers import CreateTopicRequestHeader
from aiorocketmq.remoting.client import RemotingClient
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from tests.support.grpc_v2 import V2Client, in_process_grpc_broker, v2_message

_T = pb.MessageType
ALL = [_T.NORMAL, _T.FIFO, _T.DELAY, _T.TRANSACTION]


async def _update_topic(
    broker: BrokerController, topic: str, attributes: str | None
) -> RemotingCommand:
    header = CreateTopicRequestHeader(topic, "TBW102", 4, 4, 6, "SINGLE_TAG", attributes=attributes)
    client = RemotingClient()
    try:
        request = RemotingCommand.request(
            RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext_fields()
        )
        return await client.invoke(broker.address, request, 5000)
    finally:
        await client.close()


async def _accepted(client: V2Client, topic: str) -> list[int]:
    route = await client.call("QueryRoute", rpc.QueryRouteRequest(topic=pb.Resource(name=topic)))
    assert route.status.code == pb.Code.OK, route.status
    kinds = {tuple(q.accept_message_types) for q in route.message_queues}
    assert len(kinds) == 1  # every queue of a topic says the same
    return list(kinds.pop())


def _of_each_type(topic: str) -> dict[int, pb.Message]:
    later = Timestamp()
    later.GetCurrentTime()
    later.seconds += 5
    return {
        _T.NORMAL: v2_message(topic, b"n"),
        _T.FIFO: v2_message(topic, b"f", message_type=_T.FIFO, message_group="g1"),
        _T.DELAY: v2_message(topic, b"d", message_type=_T.DELAY, delivery_timestamp=later),
        _T.TRANSACTION: v2_message(topic, b"t", message_type=_T.TRANSACTION),
    }


async def _send_codes(client: V2Client, topic: str) -> dict[int, int]:
    codes = {}
    for kind, message in _of_each_type(topic).items():
        reply = await client.call("SendMessage", rpc.SendMessageRequest(messages=[message]))
        codes[kind] = reply.status.code
        if reply.status.code != pb.Code.OK:
            assert reply.status.message == (
                "TopicMessageType validate failed, the expected type is "
                f"{_topic_type(reply)}, but actual type is {pb.MessageType.Name(kind)}"
            )
    return codes


def _topic_type(reply: rpc.SendMessageResponse) -> str:
    return reply.status.message.split("expected type is ")[1].split(",")[0]


async def test_topic_types_are_set_advertised_enforced_and_kept(tmp_path: Path) -> None:
    async with in_process_grpc_broker(tmp_path) as (broker, proxy):
        client = V2Client(f"127.0.0.1:{proxy.port}")
        try:
            broker.ctx.topics.update_topic_config(TopicConfig("Legacy", 4, 4))
            assert await _accepted(client, "Legacy") == ALL  # a 4.x topic: MIXED
            assert set((await _send_codes(client, "Legacy")).values()) == {pb.Code.OK}

            reply = await _update_topic(broker, "Orders", "+message.type=FIFO")
            assert reply.code == ResponseCode.SUCCESS, reply.remark
            assert await _accepted(client, "Orders") == [_T.FIFO]
            codes = await _send_codes(client, "Orders")
            conflict = pb.Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
            assert codes == {
                _T.NORMAL: conflict, _T.FIFO: pb.Code.OK, _T.DELAY: conflict,
                _T.TRANSACTION: conflict,
            }  # fmt: skip

            # An update without attributes keeps the type; "-" removes it (MIXED again).
            assert (await _update_topic(broker, "Orders", None)).code == ResponseCode.SUCCESS
            assert await _accepted(client, "Orders") == [_T.FIFO]
            for kind in ("DELAY", "TRANSACTION", "NORMAL"):
                reply = await _update_topic(broker, f"{kind.title()}Topic", f"+message.type={kind}")
                assert reply.code == ResponseCode.SUCCESS, reply.remark
                assert await _accepted(client, f"{kind.title()}Topic") == [_T.Value(kind)]
            reply = await _update_topic(broker, "Unspecified", "+message.type=UNSPECIFIED")
            assert await _accepted(client, "Unspecified") == [_T.MESSAGE_TYPE_UNSPECIFIED]
            assert set((await _send_codes(client, "Unspecified")).values()) == {conflict}
            # Retry and DLQ topics are not checked (SendMessage refuses them as system
            # topics before that; the rule is RocketMQ's, kept for its callers).
            for name in ("%RETRY%GID_x", "%DLQ%GID_x"):
                typed = TopicConfig(name, 1, 1, attributes=(("message.type", "NORMAL"),))
                check_topic_message_type(typed, _T.FIFO)
        finally:
            await client.close()
    saved = json.loads((tmp_path / "broker-a-store" / "config" / "topics.json").read_text())
    table = saved["topicConfigTable"]
    assert table["Orders"]["attributes"] == {"message.type": "FIFO"}
    assert "attributes" not in table["Legacy"]  # a 4.9 topic is written as 4.9 writes it
    async with in_process_grpc_broker(tmp_path) as (broker, proxy):  # the same store
        client = V2Client(f"127.0.0.1:{proxy.port}")
        try:
            assert await _accepted(client, "Orders") == [_T.FIFO]
            reply = await _update_topic(broker, "Orders", "-message.type")
            assert reply.code == ResponseCode.SUCCESS, reply.remark
            assert await _accepted(client, "Orders") == ALL
        finally:
            await client.close()


async def test_bad_attributes_are_refused_with_rocketmqs_words(tmp_path: Path) -> None:
    async with in_process_grpc_broker(tmp_path) as (broker, _proxy):
        cases = [
            ("+message.type=QUEUE", "value is not in set"),
            ("+color=red", "unsupported key: color"),
            ("message.type=FIFO", "Invalid attribute format: message.type=FIFO"),
            ("+message.type=", "Add/alter attribute requires a value: message.type"),
            ("+message.type=FIFO,+message.type=NORMAL", "Duplicate key: message.type"),
            ("-message.type", "only add attribute is supported while creating topic"),
        ]
        for text, remark in cases:
            reply = await _update_topic(broker, "NewTopic", text)
            assert reply.code == ResponseCode.SYSTEM_ERROR, text
            assert remark in (reply.remark or ""), (text, reply.remark)
        assert broker.ctx.topics.select_topic_config("NewTopic") is None  # nothing made
        assert (await _update_topic(broker, "NewTopic", None)).code == ResponseCode.SUCCESS
        reply = await _update_topic(broker, "NewTopic", "-message.type")
        assert reply.code == ResponseCode.SYSTEM_ERROR
        assert "attempt to delete a nonexistent key: message.type" in (reply.remark or "")
