"""Heartbeat, consumer-list and lock bodies from both stock clients' vectors."""

from __future__ import annotations

from typing import Any

import pytest

from aiorocketmq.common.errors import RemoteProtocolError
from aiorocketmq.common.message import MessageQueue
from aiorocketmq.common.protocol_bodies import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumerListBody,
    ConsumeType,
    HeartbeatData,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageModel,
    SubscriptionData,
    UnlockBatchRequestBody,
    build_subscription_data,
    parse_tags,
)
from aiorocketmq.common.tag_hash import java_string_hash
from aiorocketmq.remoting.frame import decode_frame_payload
from tests.support.vectors import load_jsonl

pytestmark = pytest.mark.timeout(30)

TAG_A, TAG_B, TAG_C = 2598919, 2598920, 2598921


def _bodies(code: int, *, reply: bool = False) -> list[tuple[str, dict[str, Any], bytes]]:
    out = []
    for name in ("cpp_client.jsonl", "alions_client.jsonl"):
        for rec in load_jsonl(name):
            hit = rec.get("reply_to_code") == code and rec["code"] == 0 if reply else False
            hit = hit or (not reply and not rec["is_response"] and rec["code"] == code)
            if hit:
                cmd = decode_frame_payload(bytes.fromhex(rec["frame_hex"])[4:])
                out.append((f"{name}:{rec['seq']}", rec, bytes(cmd.body)))
    return out


HEARTBEATS = _bodies(34)
LOCKS = _bodies(41) + _bodies(42)


@pytest.mark.parametrize(("label", "rec", "body"), HEARTBEATS, ids=[h[0] for h in HEARTBEATS])
def test_every_heartbeat_parses_with_recomputed_codes(
    label: str, rec: dict[str, Any], body: bytes
) -> None:
    hb = HeartbeatData.decode(body)
    assert hb.client_id
    for consumer in hb.consumers:
        assert consumer.consume_type is ConsumeType.CONSUME_PASSIVELY
        assert consumer.message_model is MessageModel.CLUSTERING
        for sub in consumer.subscriptions:
            assert sub.code_set == {java_string_hash(t) for t in sub.tags_set}
    again = HeartbeatData.decode(hb.encode())
    assert again == hb


def test_cpp_heartbeat_wrong_code_set_is_replaced() -> None:
    bodies = [b for _, rec, b in HEARTBEATS if rec["client"].startswith("cpp") and b"TagC" in b]
    assert bodies and bodies[0].endswith(b"\n")
    hb = HeartbeatData.decode(bodies[0])
    consumer = hb.consumers[0]
    assert consumer.consume_from_where is ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    subs = {s.topic: s for s in consumer.subscriptions}
    assert subs["TopicTest"].tags_set == ("TagA", "TagC")
    assert subs["TopicTest"].code_set == {TAG_A, TAG_C}
    assert subs["TopicTest"].sub_version == 1795316295848
    assert subs["%RETRY%CID_capture"].matches_all
    assert subs["TopicTest"].matches_tags_code(TAG_C)
    assert not subs["TopicTest"].matches_tags_code(TAG_B)


def test_cpp_producer_heartbeat_has_no_consumer_set() -> None:
    bodies = [b for _, rec, b in HEARTBEATS if b"producerDataSet" in b and b"consumer" not in b]
    hb = HeartbeatData.decode(bodies[0])
    assert [p.group_name for p in hb.producers] == ["PID_capture"] and hb.consumers == []


def test_alions_heartbeat_enum_names_and_spaced_expression() -> None:
    bodies = [b for _, rec, b in HEARTBEATS if rec["client"].startswith("ali")]
    hb = HeartbeatData.decode(bodies[-1])
    assert hb.client_id == "127.0.0.1@30648"
    consumer = hb.consumers[0]
    assert consumer.consume_from_where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    sub = consumer.subscriptions[0]
    assert sub.sub_string == "TagA || TagB" and sub.code_set == {TAG_A, TAG_B}
    assert consumer.subscriptions[1].matches_all


def test_code_set_from_expression_when_tags_absent() -> None:
    sub = SubscriptionData.from_json_dict(
        {"topic": "T", "subString": " TagA ||TagC||", "codeSet": [1]}
    )
    assert sub.tags_set == ("TagA", "TagC") and sub.code_set == {TAG_A, TAG_C}


@pytest.mark.parametrize("expr", [None, "", "*"])
def test_build_subscription_all(expr: str | None) -> None:
    sub = build_subscription_data("T", expr, 7)
    assert sub.sub_string == "*" and sub.tags_set == () and sub.matches_all
    assert sub.matches_tags_code(12345) and sub.sub_version == 7


def test_build_subscription_tags() -> None:
    sub = build_subscription_data("T", "TagA || TagB||TagA")
    assert sub.tags_set == ("TagA", "TagB") and sub.code_set == {TAG_A, TAG_B}
    assert parse_tags("||  ||") == ()
    assert sub.same_filter(build_subscription_data("T", "TagB||TagA", 99))
    assert not sub.same_filter(build_subscription_data("T", "TagA"))


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1, ConsumeType.CONSUME_PASSIVELY),
        ("0", ConsumeType.CONSUME_ACTIVELY),
        ("CONSUME_ACTIVELY", ConsumeType.CONSUME_ACTIVELY),
    ],
)
def test_enum_names_and_ordinals(value: object, expected: ConsumeType) -> None:
    assert (
        ConsumerData.from_json_dict({"groupName": "G", "consumeType": value}).consume_type
        is expected
    )


@pytest.mark.parametrize("value", [7, "NOPE", True, 1.5])
def test_bad_enum_is_a_protocol_error(value: object) -> None:
    with pytest.raises(RemoteProtocolError):
        ConsumerData.from_json_dict({"groupName": "G", "messageModel": value})


@pytest.mark.parametrize("body", [b"", b"[]", b"{}", b'{"clientID":"c","consumerDataSet":{}}'])
def test_bad_heartbeat_is_a_protocol_error(body: bytes) -> None:
    with pytest.raises(RemoteProtocolError):
        HeartbeatData.decode(body)


def test_encoded_consumer_uses_enum_names() -> None:
    d = ConsumerData("G", subscriptions=[build_subscription_data("T", "TagA")]).to_json_dict()
    assert d["consumeType"] == "CONSUME_PASSIVELY" and d["messageModel"] == "CLUSTERING"
    assert d["subscriptionDataSet"][0]["codeSet"] == [TAG_A]


@pytest.mark.parametrize(("label", "rec", "body"), LOCKS, ids=[h[0] for h in LOCKS])
def test_every_lock_body_parses(label: str, rec: dict[str, Any], body: bytes) -> None:
    kind = LockBatchRequestBody if rec["code"] == 41 else UnlockBatchRequestBody
    parsed = kind.decode(body)
    assert parsed.consumer_group == "CID_capture" and parsed.client_id.endswith("@DEFAULT")
    assert parsed.mq_set and all(mq.broker_name == "broker-a" for mq in parsed.mq_set)
    assert kind.decode(parsed.encode()) == parsed


def test_lock_reply_and_consumer_list_from_vectors() -> None:
    for _, _, body in _bodies(41, reply=True):
        reply = LockBatchResponseBody.decode(body)
        assert reply.lock_ok_mq_set
        assert all(mq.broker_name == "broker-a" for mq in reply.lock_ok_mq_set)
        assert LockBatchResponseBody.decode(reply.encode()) == reply
    lists = _bodies(38, reply=True)
    assert lists
    for _, _, body in lists:
        ids = ConsumerListBody.decode(body)
        assert len(ids.consumer_id_list) == 1
        assert ConsumerListBody.decode(ids.encode()) == ids


def test_lock_body_accepts_client_id_spelling() -> None:
    body = (
        b'{"clientID":"c","consumerGroup":"G",'
        b'"mqSet":[{"topic":"T","brokerName":"b","queueId":"1"}]}'
    )
    assert LockBatchRequestBody.decode(body).mq_set == [MessageQueue("T", "b", 1)]
