"""Admin reply bodies: round trips, and Java-shaped (fastjson) text decoded field by field."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiorocketmq.common.admin_bodies import (
    ConsumerOffsetSerializeWrapper,
    ConsumeStats,
    DelayOffsetSerializeWrapper,
    OffsetWrapper,
    SubscriptionGroupWrapper,
    TopicOffset,
    TopicStatsTable,
    _ObjectKeyParser,
    dumps_mq_map,
    loads_object_keys,
)
from aiorocketmq.common.errors import RemoteProtocolError
from aiorocketmq.common.message import MessageQueue
from aiorocketmq.common.subscription_group import SubscriptionGroupConfig
from aiorocketmq.common.topic_config import DataVersion

NAMES = st.text("abcXYZ09_-%|", min_size=1, max_size=12)
LONGS = st.integers(0, 2**63 - 1)
QUEUES = st.builds(MessageQueue, NAMES, NAMES, st.integers(0, 1023))


@given(st.dictionaries(QUEUES, st.builds(TopicOffset, LONGS, LONGS, LONGS), max_size=8))
def test_topic_stats_table_round_trip(table: dict[MessageQueue, TopicOffset]) -> None:
    body = TopicStatsTable(table).encode()
    assert TopicStatsTable.decode(body).offset_table == table


@given(
    st.dictionaries(QUEUES, st.builds(OffsetWrapper, LONGS, LONGS, LONGS), max_size=8),
    st.floats(0, 1e9, allow_nan=False, allow_infinity=False),
)
def test_consume_stats_round_trip(table: dict[MessageQueue, OffsetWrapper], tps: float) -> None:
    decoded = ConsumeStats.decode(ConsumeStats(table, tps).encode())
    assert decoded.offset_table == table
    assert decoded.consume_tps == tps


def test_topic_stats_table_reads_java_text() -> None:
    # What a 4.9.8 broker's fastjson writes: the MessageQueue bean is the map key.
    java = (
        '{"offsetTable":{{"brokerName":"broker-a","queueId":1,"topic":"TopicTest"}:'
        '{"lastUpdateTimestamp":1700000000123,"maxOffset":7,"minOffset":2},'
        '{"brokerName":"broker-a","queueId":0,"topic":"TopicTest"}:'
        '{"lastUpdateTimestamp":0,"maxOffset":0,"minOffset":0}}}'
    )
    table = TopicStatsTable.decode(java.encode()).offset_table
    assert table == {
        MessageQueue("TopicTest", "broker-a", 1): TopicOffset(2, 7, 1700000000123),
        MessageQueue("TopicTest", "broker-a", 0): TopicOffset(0, 0, 0),
    }
    # and we write the same text for the same table (same entry order)
    assert TopicStatsTable(table).encode().decode() == java


def test_consume_stats_reads_java_text_and_totals_the_lag() -> None:
    java = (
        '{"consumeTps":1.5,"offsetTable":{'
        '{"brokerName":"b","queueId":0,"topic":"T"}:'
        '{"brokerOffset":10,"consumerOffset":4,"lastTimestamp":1700000000000},'
        '{"brokerName":"b","queueId":1,"topic":"T"}:'
        '{"brokerOffset":3,"consumerOffset":3,"lastTimestamp":0}}}'
    )
    stats = ConsumeStats.decode(java)
    assert stats.consume_tps == 1.5
    assert stats.offset_table[MessageQueue("T", "b", 0)] == OffsetWrapper(10, 4, 1700000000000)
    assert stats.offset_table[MessageQueue("T", "b", 1)] == OffsetWrapper(3, 3, 0)
    assert stats.compute_total_diff() == 6
    assert ConsumeStats(stats.offset_table, 1.5).encode().decode() == java


def test_empty_stats_bodies_are_javas() -> None:
    assert TopicStatsTable().encode() == b'{"offsetTable":{}}'
    assert ConsumeStats().encode() == b'{"consumeTps":0.0,"offsetTable":{}}'
    assert ConsumeStats.decode(b'{"consumeTps":0,"offsetTable":{}}') == ConsumeStats()


def test_quoted_object_key_is_accepted() -> None:
    # A standard-JSON writer would have to quote the key object; take that too.
    key = json.dumps('{"brokerName":"b","queueId":2,"topic":"T"}')
    text = '{"offsetTable":{' + key + ':{"maxOffset":5}}}'
    table = TopicStatsTable.decode(text).offset_table
    assert table == {MessageQueue("T", "b", 2): TopicOffset(0, 5, 0)}


@pytest.mark.parametrize(
    "text",
    [
        b"\xff\xfe",
        b'{"offsetTable":{{"brokerName":"b","queueId":0}:{}}}',  # key lacks topic
        b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{}',  # truncated
        b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{}}} x',
        b'{"offsetTable":{{"a":[1]}:{}}}',  # unhashable key
        b'{"offsetTable":{1.5:{}}}',
        b'{"offsetTable":[]}',
        b"[" * 200 + b"{{}:1}" + b"]" * 200,
    ],
)
def test_bad_stats_bodies_raise_protocol_error(text: bytes) -> None:
    with pytest.raises(RemoteProtocolError):
        TopicStatsTable.decode(text)


def test_object_key_reader_values() -> None:
    value = loads_object_keys('{ {"b":1,"a":"x"} : [true, false, null, -2, 1e3, "s"], 7:{} }')
    assert value == {(("a", "x"), ("b", 1)): [True, False, None, -2, 1000.0, "s"], "7": {}}


def test_dumps_mq_map_uses_bean_order() -> None:
    text = dumps_mq_map({MessageQueue("T", "b", 3): {"x": 1}})
    assert text == '{{"brokerName":"b","queueId":3,"topic":"T"}:{"x":1}}'


@given(
    st.dictionaries(
        st.tuples(NAMES, NAMES).map("@".join),
        st.dictionaries(st.integers(0, 1023), LONGS, max_size=4),
        max_size=6,
    )
)
def test_consumer_offset_wrapper_round_trip(table: dict[str, dict[int, int]]) -> None:
    body = ConsumerOffsetSerializeWrapper(table).encode()
    assert ConsumerOffsetSerializeWrapper.decode(body).offset_table == table


def test_consumer_offset_wrapper_java_text() -> None:
    java = b'{"offsetTable":{"TopicTest@group_a":{0:250,1:251},"%RETRY%group_a@group_a":{0:0}}}'
    wrapper = ConsumerOffsetSerializeWrapper.decode(java)
    assert wrapper.offset_table == {
        "TopicTest@group_a": {0: 250, 1: 251},
        "%RETRY%group_a@group_a": {0: 0},
    }
    assert wrapper.encode() == java
    quoted = b'{"offsetTable":{"T@g":{"3":"9"}}}'
    assert ConsumerOffsetSerializeWrapper.decode(quoted).offset_table == {"T@g": {3: 9}}
    with pytest.raises(RemoteProtocolError):
        ConsumerOffsetSerializeWrapper.decode(b'{"offsetTable":{"T@g":{"x":1}}}')


def test_delay_offset_wrapper() -> None:
    assert DelayOffsetSerializeWrapper().encode() == b'{"offsetTable":{}}'
    java = b'{"offsetTable":{1:0,3:17}}'
    wrapper = DelayOffsetSerializeWrapper.decode(java)
    assert wrapper.offset_table == {1: 0, 3: 17}
    assert wrapper.encode() == java
    assert DelayOffsetSerializeWrapper.decode(b'{"offsetTable":{"2":"4"}}').offset_table == {2: 4}


def test_subscription_group_wrapper_java_text_and_round_trip() -> None:
    java = (
        b'{"dataVersion":{"counter":3,"timestamp":1700000000000},"subscriptionGroupTable":'
        b'{"CID_a":{"brokerId":0,"consumeBroadcastEnable":true,"consumeEnable":false,'
        b'"consumeFromMinEnable":true,"groupName":"CID_a","notifyConsumerIdsChangedEnable":true,'
        b'"retryMaxTimes":5,"retryQueueNums":1,"whichBrokerWhenConsumeSlowly":1}}}'
    )
    wrapper = SubscriptionGroupWrapper.decode(java)
    assert wrapper.data_version == DataVersion(1700000000000, 3)
    assert wrapper.subscription_group_table == {
        "CID_a": SubscriptionGroupConfig("CID_a", consume_enable=False, retry_max_times=5)
    }
    assert wrapper.encode() == java
    assert SubscriptionGroupWrapper.decode(b"{}") == SubscriptionGroupWrapper()


@given(st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_random_bytes_decode_or_raise_protocol_error(data: bytes) -> None:
    for decoder in (
        TopicStatsTable.decode,
        ConsumeStats.decode,
        ConsumerOffsetSerializeWrapper.decode,
        DelayOffsetSerializeWrapper.decode,
        SubscriptionGroupWrapper.decode,
    ):
        try:
            decoder(data)
        except RemoteProtocolError:
            pass


@given(st.dictionaries(QUEUES, st.builds(TopicOffset, LONGS, LONGS, LONGS), max_size=4))
def test_object_key_text_with_whitespace_reads_the_same(
    table: dict[MessageQueue, TopicOffset],
) -> None:
    # fastjson's PrettyFormat puts tabs and newlines between tokens
    text = TopicStatsTable(table).encode().decode()
    spaced = text.replace(",", ",\n\t").replace(":", " : ").replace("{", "{ ")
    assert TopicStatsTable.decode(spaced).offset_table == table


@given(
    st.dictionaries(QUEUES, st.builds(OffsetWrapper, LONGS, LONGS, LONGS), max_size=6),
    st.sampled_from(["", " ", "\n\t"]),
)
def test_fast_and_slow_object_key_readers_agree(
    table: dict[MessageQueue, OffsetWrapper], ws: str
) -> None:
    # Flat key objects go through the C parser (keys quoted first); the
    # recursive reader is the reference for the same text.
    text = ConsumeStats(table, 0.5).encode().decode().replace(":", ws + ":" + ws)
    slow = _ObjectKeyParser(text)
    assert loads_object_keys(text) == slow.value(0)
