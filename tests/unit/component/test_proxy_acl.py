"""The broker's plain ACL on gRPC v2 calls (a real in-process broker, ``aclEnable``,
a ``plain_acl.yml``), signed the way the SDKs sign: who may call (accessKey, white
addresses, the HMAC-SHA1 of ``x-mq-date-time``) and what (PUB/SUB per RPC), each
refusal UNAUTHORIZED with the remoting gate's words; with ACL off the header is
ignored."""

from __future__ import annotations

from pathlib import Path

from google.protobuf.duration_pb2 import Duration

from aiorocketmq.common.topic_config import TopicConfig
from aiorocketmq.proxy.auth import needed_resources, parse_authorization, sign
from aiorocketmq.proxy.v2 import definition_pb2 as pb
from aiorocketmq.proxy.v2 import service_pb2 as rpc
from tests.support.grpc_v2 import V2Client, in_process_grpc_broker, v2_message

TOPIC, DENIED, GROUP = "AclTopic", "AclDenied", "GID_acl"
AK, SK = "app_user1", "app_secret1"


def _acl_file(directory: Path, white: str = "127.0.0.2") -> Path:
    path = directory / "plain_acl.yml"
    path.write_text(
        f"""\
globalWhiteRemoteAddresses:
  - {white}
accounts:
  - accessKey: {AK}
    secretKey: {SK}
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - {TOPIC}=PUB|SUB
      - {DENIED}=DENY
""",
        "utf-8",
    )
    return path


def _receive(topic: str = TOPIC) -> rpc.ReceiveMessageRequest:
    return rpc.ReceiveMessageRequest(
        group=pb.Resource(name=GROUP),
        message_queue=pb.MessageQueue(topic=pb.Resource(name=topic), id=0),
        filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"),
        batch_size=1,
        invisible_duration=Duration(seconds=30),
        # Long polling: a message just sent reaches its queue when the dispatcher
        # gets to it; a refusal comes before any wait.
        long_polling_timeout=Duration(seconds=5),
    )


async def _send_status(client: V2Client, topic: str = TOPIC) -> pb.Status:
    request = rpc.SendMessageRequest(messages=[v2_message(topic, b"x")])
    return (await client.call("SendMessage", request)).status


async def test_signed_calls_pass_and_bad_ones_are_unauthorized(tmp_path: Path) -> None:
    settings = {"aclEnable": True, "aclPlainFile": str(_acl_file(tmp_path))}
    async with in_process_grpc_broker(tmp_path, **settings) as (broker, proxy):
        for name in (TOPIC, DENIED):
            broker.ctx.topics.update_topic_config(TopicConfig(name, 1, 1))
        target = f"127.0.0.1:{proxy.port}"
        good = V2Client(target, access_key=AK, secret_key=SK)
        callers = {
            "none": V2Client(target),  # the Python SDK's empty credential
            "unknown": V2Client(target, access_key="nobody_here", secret_key=SK),
            "wrong": V2Client(target, access_key=AK, secret_key="not_the_secret"),
            "other scheme": V2Client(target, authorization=f"Basic {AK}:{SK}"),
        }
        try:
            assert (await _send_status(good)).code == pb.Code.OK
            refusals = {name: await _send_status(c) for name, c in callers.items()}
            assert {s.code for s in refusals.values()} == {pb.Code.UNAUTHORIZED}
            assert refusals["none"].message == "No accessKey is configured"
            assert refusals["unknown"].message == "No acl config for nobody_here"
            assert refusals["wrong"].message == f"Check signature failed for accessKey={AK}"
            assert refusals["other scheme"].message == "No accessKey is configured"

            # What the account may do: PUB|SUB on TOPIC, nothing on DENIED.
            denied = await _send_status(good, DENIED)
            assert denied.code == pb.Code.UNAUTHORIZED and DENIED in denied.message
            entries = await good.receive(_receive())
            statuses = [e.status.code for e in entries if e.HasField("status")]
            assert statuses == [pb.Code.OK]  # let in: the message sent above
            entries = await good.receive(_receive(DENIED))
            assert [e.status.code for e in entries if e.HasField("status")] == [
                pb.Code.UNAUTHORIZED
            ]
            route = await good.call(
                "QueryRoute", rpc.QueryRouteRequest(topic=pb.Resource(name=DENIED))
            )
            assert route.status.code == pb.Code.UNAUTHORIZED

            # Telemetry: an unsigned stream is refused in band; a signed one gets its
            # settings, except for a topic it may not publish to.
            stream = callers["none"].telemetry()
            assert (await stream.read()).status.code == pb.Code.UNAUTHORIZED
            stream = good.telemetry()
            for topic, code in ((TOPIC, pb.Code.OK), (DENIED, pb.Code.UNAUTHORIZED)):
                settings = pb.Settings(
                    client_type=pb.ClientType.PRODUCER,
                    publishing=pb.Publishing(topics=[pb.Resource(name=topic)]),
                )
                await stream.write(rpc.TelemetryCommand(settings=settings))
                assert (await stream.read()).status.code == code
            await stream.done_writing()
        finally:
            for client in (good, *callers.values()):
                await client.close()


async def test_white_addresses_and_acl_off(tmp_path: Path) -> None:
    # The global white list lets an unsigned caller in.
    acl = _acl_file(tmp_path, white="127.0.0.1")
    async with in_process_grpc_broker(
        tmp_path / "white", aclEnable=True, aclPlainFile=str(acl)
    ) as (broker, proxy):
        broker.ctx.topics.update_topic_config(TopicConfig(DENIED, 1, 1))
        client = V2Client(f"127.0.0.1:{proxy.port}")
        try:
            assert (await _send_status(client, DENIED)).code == pb.Code.OK
        finally:
            await client.close()
    # ACL off: whatever the header says is ignored.
    async with in_process_grpc_broker(tmp_path / "off") as (broker, proxy):
        broker.ctx.topics.update_topic_config(TopicConfig(TOPIC, 1, 1))
        client = V2Client(f"127.0.0.1:{proxy.port}", access_key="x", secret_key="y")
        try:
            assert (await _send_status(client)).code == pb.Code.OK
        finally:
            await client.close()


def test_header_parsing_and_signature() -> None:
    header = "MQv2-HMAC-SHA1 Credential=ak/2026/x, SignedHeaders=x-mq-date-time, Signature=AB12"
    assert parse_authorization(header) == ("ak", "AB12")
    assert parse_authorization("MQv2-HMAC-SHA1 Credential=, Signature=") == ("", "")
    for bad in (None, "", "garbage", "Bearer x", "MQv2-HMAC-SHA1"):
        assert parse_authorization(bad) == ("", "")
    # Python's lower-case hex; Node's upper case is accepted too (compared lower-cased).
    assert sign("12345678", "20260101T000000Z") == sign("12345678", "20260101T000000Z").lower()
    assert len(sign("k", "d")) == 40


def test_resources_per_rpc() -> None:
    group, topic = pb.Resource(name="G"), pb.Resource(name="T")
    assert needed_resources("QueryRoute", rpc.QueryRouteRequest(topic=topic)) == {"T": 2}
    ack = rpc.AckMessageRequest(group=group, topic=topic)
    assert needed_resources("AckMessage", ack) == {"%RETRY%G": 8, "T": 8}
    producer = rpc.HeartbeatRequest(client_type=pb.ClientType.PRODUCER)
    assert needed_resources("Heartbeat", producer) == {}
    settings = pb.Settings(
        subscription=pb.Subscription(group=group, subscriptions=[pb.SubscriptionEntry(topic=topic)])
    )
    command = rpc.TelemetryCommand(settings=settings)
    assert needed_resources("Telemetry", command) == {"%RETRY%G": 8, "T": 8}
