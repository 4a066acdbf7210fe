"""ConsumerRunningInfo (GET_CONSUMER_RUNNING_INFO's body) and the client's consumer figures."""

from __future__ import annotations

import json

from aiorocketmq.client.stats import ConsumerStatsManager
from aiorocketmq.common.message import MessageQueue
from aiorocketmq.common.protocol_bodies import SubscriptionData
from aiorocketmq.common.running_info import (
    PROP_CONSUME_ORDERLY,
    PROP_CONSUME_TYPE,
    PROP_CONSUMER_START_TIMESTAMP,
    ConsumerRunningInfo,
    ConsumeStatus,
    ProcessQueueInfo,
    human_millis,
    same_subscriptions,
)

MQ0 = MessageQueue("T", "broker-a", 0)
MQ1 = MessageQueue("T", "broker-a", 1)
NOW = 1_800_000_000_000


def _info(**props: str) -> ConsumerRunningInfo:
    return ConsumerRunningInfo(
        properties={PROP_CONSUME_TYPE: "CONSUME_PASSIVELY", **props},
        subscription_set=[SubscriptionData("T"), SubscriptionData("%RETRY%G")],
        mq_table={
            MQ1: ProcessQueueInfo(commit_offset=7, cached_msg_count=2, last_consume_timestamp=NOW),
            MQ0: ProcessQueueInfo(commit_offset=5, locked=True, droped=True, try_unlock_times=3),
        },
        status_table={"T": ConsumeStatus(1.5, 10.0, 2.25, 9.0, 1.0, 4)},
        jstack="thread dump",
    )


def test_encode_is_fastjsons_shape_and_decodes_back() -> None:
    info = _info()
    text = info.encode().decode()
    # Sorted fields, queue objects as keys (not JSON), Java's cachedMsgSizeInMiB.
    assert text.startswith('{"jstack":"thread dump","mqTable":{{"brokerName":"broker-a"')
    assert '"cachedMsgSizeInMiB":0' in text and '"droped":true' in text
    assert '"consumeFailedMsgs":4,"consumeFailedTPS":1.0,"consumeOKTPS":9.0' in text
    back = ConsumerRunningInfo.decode(text)
    assert back.mq_table == info.mq_table
    assert back.status_table == info.status_table
    assert back.properties == info.properties
    assert [s.topic for s in back.subscription_set] == ["%RETRY%G", "T"]  # a TreeSet
    assert back.jstack == "thread dump"


def test_decode_takes_standard_json_keys_and_missing_fields() -> None:
    body = json.dumps(
        {
            "properties": {"a": "b", "n": 3},
            "mqTable": {json.dumps(MQ0.to_json_dict()): {"commitOffset": 9}},
            "subscriptionSet": [],
        }
    )
    info = ConsumerRunningInfo.decode(body)
    assert info.properties == {"a": "b", "n": "3"}
    assert info.mq_table == {MQ0: ProcessQueueInfo(commit_offset=9)}
    assert info.status_table == {} and info.jstack is None


def test_decode_takes_the_cpp_clients_body_before_it_holds_a_queue() -> None:
    # As the C++ client builds it: compact JSON, then its hand-written mqTable put in
    # front; with no queue the table's "{" is erased in place of a trailing comma.
    rest = json.dumps(
        {"jstack": "", "properties": {PROP_CONSUME_TYPE: "CONSUME_PASSIVELY"}},
        separators=(",", ":"),
    )
    empty = b'{"mqTable":},' + rest[1:].encode() + b"\n"
    info = ConsumerRunningInfo.decode(empty)
    assert info.mq_table == {} and info.properties == {PROP_CONSUME_TYPE: "CONSUME_PASSIVELY"}
    queue = json.dumps(MQ0.to_json_dict()) + ':{"commitOffset":4}'
    held = b'{"mqTable":{' + queue.encode() + b"}," + rest[1:].encode()
    assert ConsumerRunningInfo.decode(held).mq_table == {MQ0: ProcessQueueInfo(commit_offset=4)}


def test_format_string_is_javas_layout() -> None:
    text = _info().format_string()
    lines = text.splitlines()
    assert lines[0] == "#Consumer Properties#"
    assert f"{PROP_CONSUME_TYPE:<40}: CONSUME_PASSIVELY" in lines
    assert f"001 Topic: {'%RETRY%G':<40} ClassFilter: false    SubExpression: *" in lines
    assert f"{'T':<32}  {'broker-a':<32}  {0:<4}  {5:<20}" in lines  # sorted by queue
    detail = next(
        line for line in lines if line.startswith(f"{'T':<64}  broker-a") and "QID" not in line
    )
    assert "ProcessQueueInfo [commitOffset=5," in detail and "droped=true" in detail
    assert (
        f"{'T':<32}  {1.5:14.2f} {10.0:14.2f} {2.25:14.2f} {9.0:14.2f} {1.0:18.2f} {4:25d}" in lines
    )
    assert text.endswith("#Consumer jstack#\nthread dump")
    assert len(human_millis(NOW)) == 17
    # The C++ client sends uninitialized timestamps: shown as numbers, never an error.
    assert human_millis(7_311_234_567_890_123_456) == "7311234567890123456"
    assert human_millis(-(2**63)) == str(-(2**63))


def test_process_queue_warnings_as_javas_analysis() -> None:
    concurrent = _info()
    warnings = concurrent.process_queue_warnings("c1", now_ms=NOW + 61_000)
    assert warnings == [
        "c1 MessageQueue [topic=T, brokerName=broker-a, queueId=1] can't consume for a while, "
        "maybe blocked, 61000ms"
    ]
    orderly = _info(**{PROP_CONSUME_ORDERLY: "true"})
    assert orderly.process_queue_warnings("c1", now_ms=NOW) == [
        "c1 MessageQueue [topic=T, brokerName=broker-a, queueId=0] unlock 3 times, still failed",
        f"c1 MessageQueue [topic=T, brokerName=broker-a, queueId=1] can't lock for a while, "
        f"{NOW}ms",
    ]


def test_same_subscriptions_after_two_minutes_only() -> None:
    a = _info(**{PROP_CONSUMER_START_TIMESTAMP: str(NOW)})
    b = _info(**{PROP_CONSUMER_START_TIMESTAMP: str(NOW)})
    b.subscription_set = [SubscriptionData("T", "TagA")]
    assert same_subscriptions({"a": a, "b": b}, now_ms=NOW + 60_000)  # too early to judge
    assert not same_subscriptions({"a": a, "b": b}, now_ms=NOW + 180_000)
    assert same_subscriptions({"a": a, "c": _info(**{PROP_CONSUMER_START_TIMESTAMP: "0"})})


def test_stats_manager_rates_over_the_covered_window() -> None:
    now = [1000.0]
    stats = ConsumerStatsManager(clock=lambda: now[0])
    for _ in range(10):
        stats.inc_pull_rt("G", "T", 4.0)
        stats.inc_pull_tps("G", "T", 32)
        stats.inc_consume_rt("G", "T", 2.0)
        stats.inc_consume_ok("G", "T", 30)
        stats.inc_consume_failed("G", "T", 2)
        now[0] += 1.0
    status = stats.consume_status("G", "T")
    assert status.pull_rt == 4.0 and status.consume_rt == 2.0
    assert status.pull_tps == 32.0  # 320 over the 10 s seen so far
    assert status.consume_ok_tps == 30.0 and status.consume_failed_tps == 2.0
    assert status.consume_failed_msgs == 20
    now[0] += 120  # the minute passed; failures stay in the hour
    later = stats.consume_status("G", "T")
    assert (later.pull_tps, later.consume_ok_tps, later.pull_rt) == (0.0, 0.0, 0.0)
    assert later.consume_failed_msgs == 20
    now[0] += 3600
    assert stats.consume_status("G", "T").consume_failed_msgs == 0
    assert stats.consume_status("G", "other") == ConsumeStatus()
