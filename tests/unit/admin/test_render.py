"""mqadmin's text, checked against what RocketMQ 4.9.8's tools print.

The expected strings are written out from the Java sources' printf formats
(``tools/command/**``), fastjson's PrettyFormat rules and ``toString`` methods, so a
change of width or order in ``admin/render.py`` shows here.
"""

# The expected lines use Java's printf formats verbatim, as render.py does.
# ruff: noqa: UP031

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from aiorocketmq.admin import render
from aiorocketmq.common.admin_bodies import (
    ConsumeStats,
    OffsetWrapper,
    TopicOffset,
    TopicStatsTable,
)
from aiorocketmq.common.message import MessageQueue
from aiorocketmq.common.protocol_bodies import (
    Connection,
    ConsumerConnection,
    ConsumeType,
    MessageModel,
    ProducerConnection,
    build_subscription_data,
)
from aiorocketmq.common.route import BrokerData, QueueData, TopicRouteData
from aiorocketmq.common.subscription_group import SubscriptionGroupConfig
from aiorocketmq.common.topic_config import TopicConfig
from aiorocketmq.remoting.codes import MQVersion


@pytest.fixture
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Java prints local time; pin the zone so the expected text is fixed."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


# 2026-11-22 06:30:00.123 UTC
STAMP_MS = 1_795_329_000_123


def test_version_names_match_the_ordinals_the_protocol_knows() -> None:
    assert len(render.VERSION_NAMES) == 612  # MQVersion.Version in 4.9.8
    for version in MQVersion:
        assert render.version_desc(version.value) == version.name
    assert render.version_desc(0) == "V3_0_0_SNAPSHOT"
    assert render.version_desc(15) == "V3_0_0_FINAL"
    assert render.version_desc(611) == "V5_9_9"
    assert render.version_desc(10_000) == "V5_9_9"  # Java clamps to the last one
    # 3.3 to 3.9 start at patch 1 in Java's enum: V3_2_9 is followed by V3_3_1.
    index = render.VERSION_NAMES.index("V3_2_9")
    assert render.VERSION_NAMES[index + 1 : index + 3] == ("V3_3_1_SNAPSHOT", "V3_3_1")


def test_topic_route_prints_as_fastjson_pretty_format() -> None:
    route = TopicRouteData(
        queue_datas=[QueueData("broker-a", 8, 8, 6, 0)],
        broker_datas=[BrokerData("DefaultCluster", "broker-a", {0: "127.0.0.1:10911"})],
    )
    expected = (
        "{\n"
        '\t"brokerDatas":[\n'
        "\t\t{\n"
        '\t\t\t"brokerAddrs":{0:"127.0.0.1:10911"\n'
        "\t\t\t},\n"
        '\t\t\t"brokerName":"broker-a",\n'
        '\t\t\t"cluster":"DefaultCluster"\n'
        "\t\t}\n"
        "\t],\n"
        '\t"filterServerTable":{},\n'
        '\t"queueDatas":[\n'
        "\t\t{\n"
        '\t\t\t"brokerName":"broker-a",\n'
        '\t\t\t"perm":6,\n'
        '\t\t\t"readQueueNums":8,\n'
        '\t\t\t"topicSysFlag":0,\n'
        '\t\t\t"writeQueueNums":8\n'
        "\t\t}\n"
        "\t]\n"
        "}\n"
    )
    assert render.topic_route_json(route) == expected


def test_pretty_json_empty_list_and_several_int_keys() -> None:
    assert render.java_pretty_json({"a": [], "b": {0: "x", 1: "y"}}) == (
        '{\n\t"a":[],\n\t"b":{0:"x",1:"y"\n\t}\n}'
    )


def test_topic_route_list_form() -> None:
    route = TopicRouteData(
        queue_datas=[QueueData("b2", 4, 4, 6), QueueData("b1", 8, 2, 4)],
        broker_datas=[
            BrokerData("C", "b2", {0: "h:2", 1: "h:3"}),
            BrokerData("C", "b1", {0: "h:1"}),
        ],
    )
    fmt = "%-45s %-32s %-50s %-10s %-11s %-5s\n"
    assert render.topic_route_list(route) == (
        fmt % ("#ClusterName", "#BrokerName", "#BrokerAddrs", "#ReadQueue", "#WriteQueue", "#Perm")
        + fmt % ("C", "b1", "{0=h:1}", 8, 2, 4)
        + fmt % ("C", "b2", "{0=h:2, 1=h:3}", 4, 4, 6)
        + "-" * 158
        + "\n"
        + fmt % ("Total:", 2, "", 12, 6, "")
    )


def test_configs_print_as_their_java_to_string() -> None:
    config = TopicConfig("T1", 8, 4, 6, topic_sys_flag=3, order=True)
    assert render.topic_config_text(config) == (
        "TopicConfig [topicName=T1, readQueueNums=8, writeQueueNums=4, perm=RW-, "
        "topicFilterType=SINGLE_TAG, topicSysFlag=3, order=true]"
    )
    group = SubscriptionGroupConfig("G1", consume_broadcast_enable=False, broker_id=1)
    assert render.subscription_group_text(group) == (
        "SubscriptionGroupConfig [groupName=G1, consumeEnable=true, consumeFromMinEnable=true, "
        "consumeBroadcastEnable=false, retryQueueNums=1, retryMaxTimes=16, brokerId=1, "
        "whichBrokerWhenConsumeSlowly=1, notifyConsumerIdsChangedEnable=true]"
    )


@pytest.mark.usefixtures("utc")
def test_topic_status_sorted_with_human_times() -> None:
    stats = TopicStatsTable(
        {
            MessageQueue("T", "broker-b", 0): TopicOffset(0, 5, STAMP_MS),
            MessageQueue("T", "broker-a", 1): TopicOffset(0, 0, 0),
            MessageQueue("T", "broker-a", 0): TopicOffset(2, 7, STAMP_MS),
        }
    )
    lines = render.topic_status_text(stats).splitlines()
    # "%-32s  %-4s  %-20s  %-20s    %s", spelled out with ljust.
    assert lines[0] == (
        "#Broker Name".ljust(32) + "  #QID  " + "#Min Offset".ljust(20) + "  "
        + "#Max Offset".ljust(20) + "    #Last Updated"
    )  # fmt: skip
    assert lines[1] == (
        "broker-a".ljust(32) + "  0     " + "2".ljust(20) + "  " + "7".ljust(20)
        + "    2026-11-22 06:30:00,123"
    )  # fmt: skip
    assert (
        lines[2]
        == "broker-a".ljust(32) + "  1     " + "0".ljust(20) + "  " + "0".ljust(20) + "    "
    )
    assert lines[3].startswith("broker-b".ljust(32) + "  0     0")
    assert len(lines) == 4


def test_cluster_row_from_runtime_info() -> None:
    runtime = {
        "putTps": "12.5 11.0 10.2",
        "getTransferedTps": "3.25 1.0 1.0",
        "sendThreadPoolQueueSize": "0",
        "sendThreadPoolQueueHeadWaitTimeMills": "0",
        "pullThreadPoolQueueSize": "1",
        "pullThreadPoolQueueHeadWaitTimeMills": "2",
        "pageCacheLockTimeMills": "0",
        "earliestMessageTimeStamp": str(STAMP_MS - 90 * 60_000),
        "commitLogDiskRatio": "0.41234",
        "brokerVersionDesc": "V4_9_8",
    }
    row = render.cluster_base_row(
        "DefaultCluster",
        broker_name="broker-a",
        broker_id=0,
        address="127.0.0.1:10911",
        runtime=runtime,
        now_ms=STAMP_MS,
    )
    fmt = "%-16s  %-22s  %-4s  %-22s %-16s %19s %19s %10s %5s %6s\n"
    assert row == fmt % (
        "DefaultCluster", "broker-a", 0, "127.0.0.1:10911", "V4_9_8",
        "    12.50(0,0ms)", "     3.25(1,2ms)", "0", "1.50", "0.4123",
    )  # fmt: skip
    header = render.cluster_base_header()
    assert header.split() == [
        "#Cluster", "Name", "#Broker", "Name", "#BID", "#Addr", "#Version",
        "#InTPS(LOAD)", "#OutTPS(LOAD)", "#PCWait(ms)", "#Hour", "#SPACE",
    ]  # fmt: skip


def test_cluster_row_of_unreachable_and_incomplete_brokers() -> None:
    fmt = "%-16s  %-22s  %-4s  %-22s %-16s %19s %19s %10s %5s %6s\n"
    unreachable = render.cluster_base_row(
        "C", broker_name="b", broker_id=1, address="h:1", runtime=None, now_ms=STAMP_MS
    )
    assert unreachable == fmt % ("C", "b", 1, "h:1", "", "     0.00(,ms)", "     0.00(,ms)", "",
                                 "0.00", "0.0000")  # fmt: skip
    # A reachable broker that lacks keys: Java's %s of null.
    incomplete = render.cluster_base_row(
        "C", broker_name="b", broker_id=0, address="h:1", runtime={}, now_ms=STAMP_MS
    )
    assert incomplete == fmt % ("C", "b", 0, "h:1", "null", "     0.00(null,nullms)",
                                "     0.00(null,nullms)", "null", "0.00", "0.0000")  # fmt: skip


def test_broker_status_sorted_key_value() -> None:
    runtime = {"putTps": "1.0", "bootTimestamp": "5"}
    assert render.broker_status_lines(runtime) == (
        "bootTimestamp                   : 5\nputTps                          : 1.0\n"
    )
    assert render.broker_status_lines(runtime, "h:1").splitlines()[0] == (
        "h:1                      bootTimestamp                   : 5"
    )


@pytest.mark.usefixtures("utc")
def test_consumer_progress_table_and_totals() -> None:
    stats = ConsumeStats(
        {
            MessageQueue("T", "b", 1): OffsetWrapper(10, 4, STAMP_MS),
            MessageQueue("T", "b", 0): OffsetWrapper(3, 3, 0),
        },
        consume_tps=2.5,
    )
    lines = render.consumer_progress_text(stats).splitlines()
    fmt = "%-64s  %-32s  %-4d  %-20d  %-20d  %-20d  %s"
    assert lines[0].split() == [
        "#Topic", "#Broker", "Name", "#QID", "#Broker", "Offset", "#Consumer", "Offset",
        "#Diff", "#LastTime",
    ]  # fmt: skip
    assert lines[1] == fmt % ("T", "b", 0, 3, 3, 0, "N/A")
    assert lines[2] == fmt % ("T", "b", 1, 10, 4, 6, "2026-11-22 06:30:00")
    assert lines[3:] == ["", "Consume TPS: 2.50", "Diff Total: 6"]
    with_ip = render.consumer_progress_text(stats, {}).splitlines()
    assert "#Client IP" in with_ip[0]
    assert with_ip[1] == "%-64s  %-32s  %-4d  %-20d  %-20d  %-20s %-20d  %s" % (
        "T", "b", 0, 3, 3, "N/A", 0, "N/A",
    )  # fmt: skip


def test_group_summary_rows() -> None:
    fmt = "%-64s  %-6d  %-24s %-5s  %-14s  %-7d  %d\n"
    stats = ConsumeStats({MessageQueue("T", "b", 0): OffsetWrapper(9, 2, 0)}, consume_tps=3.9)
    assert render.group_summary_row("G", stats, None) == fmt % ("G", 0, "OFFLINE", "", "", 3, 7)
    push = ConsumerConnection(
        [Connection("c1", "h:1", "JAVA", 409), Connection("c2", "h:2", "CPP", 401)],
        consume_type=ConsumeType.CONSUME_PASSIVELY,
        message_model=MessageModel.BROADCASTING,
    )
    assert render.group_summary_row("G", None, push) == fmt % (
        "G", 2, "V4_9_4", "PUSH", "BROADCASTING", 0, 0,
    )  # fmt: skip
    pull = ConsumerConnection(
        [Connection("c1", "h:1", "JAVA", 409)], consume_type=ConsumeType.CONSUME_ACTIVELY
    )
    assert render.group_summary_row("G", stats, pull) == fmt % ("G", 1, "V4_9_8", "PULL", "", 3, 7)


def test_connection_listings() -> None:
    consumer = ConsumerConnection(
        [Connection("127.0.0.1@1", "127.0.0.1:5000", "CPP", 409)],
        {"T": build_subscription_data("T", "a || b")},
    )
    assert render.consumer_connection_text(consumer) == (
        "%-36s %-22s %-10s %s\n" % ("#ClientId", "#ClientAddr", "#Language", "#Version")
        + "%-36s %-22s %-10s %s\n" % ("127.0.0.1@1", "127.0.0.1:5000", "CPP", "V4_9_8")
        + "\nBelow is subscription:\n"
        + "%-20s %s\n" % ("#Topic", "#SubExpression")
        + "%-20s %s\n" % ("T", "a || b")
        + "\n"
        + "ConsumeType: CONSUME_PASSIVELY\n"
        + "MessageModel: CLUSTERING\n"
        + "ConsumeFromWhere: CONSUME_FROM_LAST_OFFSET\n"
    )
    producer = ProducerConnection(
        [Connection("p1", "h:1", "JAVA", 409), Connection("p2", "h:2", "GO", 333)]
    )
    assert render.producer_connection_text(producer) == (
        "%04d  %-32s %-22s %-8s %s\n" % (1, "p1", "h:1", "JAVA", "V4_9_8")
        + "%04d  %-32s %-22s %-8s %s\n" % (2, "p2", "h:2", "GO", "V4_6_0")
    )


def test_topic_list_cluster_rows_cut_and_null() -> None:
    assert render.topic_list_cluster_header() == "%-20s  %-48s  %-48s\n" % (
        "#Cluster Name", "#Topic", "#Consumer Group",
    )  # fmt: skip
    row = render.topic_list_cluster_row(None, "T" * 70, "G")
    assert row == "%-20s  %-64s  %-64s\n" % ("null", "T" * 64, "G")
