"""NotifyClientTermination on a real in-process broker: what a push consumer received
(``auto_renew``) and neither acked nor nacked comes back in about a second, with its
delivery attempt increased, instead of after its whole invisible time (RocketMQ 5's
receipt handle manager on CLIENT_UNREGISTER); what it acked does not; a simple
consumer's messages keep the invisible time it chose."""

from __future__ import annotations

import time
from pathlib import Path

from google.protobuf.duration_pb2 import Duration

from aiorocketmq.common.topic_config import TopicConfig
from aiorocketmq.proxy.v2 import definition_pb2 as pb
from aiorocketmq.proxy.v2 import service_pb2 as rpc
from tests.support.grpc_v2 import V2Client, in_process_grpc_broker, v2_message

TOPIC, GROUP = "TermTopic", "GID_term"
INVISIBLE_MS = 30_000  # the auto-renew invisible time here: a release is far sooner


def _receive(auto_renew: bool, poll_s: int = 0) -> rpc.ReceiveMessageRequest:
    return rpc.ReceiveMessageRequest(
        group=pb.Resource(name=GROUP),
        message_queue=pb.MessageQueue(topic=pb.Resource(name=TOPIC), id=0),
        filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"),
        batch_size=32,
        invisible_duration=Duration(seconds=INVISIBLE_MS // 1000),
        auto_renew=auto_renew,
        long_polling_timeout=Duration(seconds=poll_s),
    )


async def _messages(client: V2Client, auto_renew: bool, want: int) -> list[pb.Message]:
    got: list[pb.Message] = []
    deadline = time.monotonic() + 15
    while len(got) < want:
        assert time.monotonic() < deadline, f"{len(got)} of {want}"
        entries = await client.receive(_receive(auto_renew, poll_s=5))
        got += [e.message for e in entries if e.HasField("message")]
    return got


async def _terminate(client: V2Client) -> None:
    request = rpc.NotifyClientTerminationRequest(group=pb.Resource(name=GROUP))
    reply = await client.call("NotifyClientTermination", request)
    assert reply.status.code == pb.Code.OK


async def test_a_terminated_push_consumers_messages_come_back_soon(tmp_path: Path) -> None:
    settings = {"popAutoRenewInvisibleTimeMillis": INVISIBLE_MS}
    async with in_process_grpc_broker(tmp_path, **settings) as (broker, proxy):
        broker.ctx.topics.update_topic_config(TopicConfig(TOPIC, 2, 2))
        target = f"127.0.0.1:{proxy.port}"
        producer, push, simple, other = (V2Client(target) for _ in range(4))
        try:
            for body in (b"acked", b"held", b"nacked"):
                request = rpc.SendMessageRequest(messages=[v2_message(TOPIC, body)])
                assert (await producer.call("SendMessage", request)).status.code == pb.Code.OK
            received = {m.body: m for m in await _messages(push, True, 3)}
            acked, nacked = received[b"acked"], received[b"nacked"]
            ack = rpc.AckMessageRequest(
                group=pb.Resource(name=GROUP),
                topic=acked.topic,
                entries=[
                    rpc.AckMessageEntry(
                        message_id=acked.system_properties.message_id,
                        receipt_handle=acked.system_properties.receipt_handle,
                    )
                ],
            )
            assert (await push.call("AckMessage", ack)).status.code == pb.Code.OK
            nack = rpc.ChangeInvisibleDurationRequest(
                group=pb.Resource(name=GROUP),
                topic=nacked.topic,
                receipt_handle=nacked.system_properties.receipt_handle,
                invisible_duration=Duration(seconds=INVISIBLE_MS // 1000),
                message_id=nacked.system_properties.message_id,
            )
            assert (await push.call("ChangeInvisibleDuration", nack)).status.code == pb.Code.OK
            terminated_at = time.monotonic()
            await _terminate(push)
            # "held" only: "acked" is done, "nacked" waits for the time its nack chose.
            [back] = await _messages(other, False, 1)
            assert back.body == b"held" and back.system_properties.delivery_attempt == 2
            assert time.monotonic() - terminated_at < INVISIBLE_MS / 1000 / 2

            # A simple consumer's message is not released by its termination.
            request = rpc.SendMessageRequest(messages=[v2_message(TOPIC, b"simple")])
            assert (await producer.call("SendMessage", request)).status.code == pb.Code.OK
            [kept] = await _messages(simple, False, 1)
            assert kept.body == b"simple"
            await _terminate(simple)
            entries = await other.receive(_receive(False, poll_s=3))
            assert [e.message.body for e in entries if e.HasField("message")] == []
        finally:
            for client in (producer, push, simple, other):
                await client.close()
