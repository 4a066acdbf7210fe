"""Route and topic-config bodies: Java's JSON shapes, both forms, and the vectors' routes.

The route bodies in the vectors are the test double's replies to GET_ROUTEINFO_BY_TOPIC
(fastjson form, accepted by both stock clients): they must parse, and our encoding of
the parsed value must give the same data back in either form.
"""

from __future__ import annotations

import json
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiorocketmq.common import fastjson
from aiorocketmq.common.errors import RemoteProtocolError
from aiorocketmq.common.route import (
    BrokerData,
    ClusterInfo,
    DataVersion,
    KVTable,
    QueueData,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicList,
    TopicRouteData,
)
from aiorocketmq.common.topic_config import MAX_INFLATED_REGISTER_BODY
from aiorocketmq.remoting.frame import FrameDecoder
from tests.support.vectors import load_jsonl

pytestmark = pytest.mark.timeout(30)


def _route_replies() -> list[tuple[str, bytes]]:
    out = []
    for name in ("cpp_client.jsonl", "alions_client.jsonl"):
        for line in load_jsonl(name):
            if line["reply_to_code"] == 105 and line["code"] == 0:
                (cmd,) = FrameDecoder().feed(bytes.fromhex(line["frame_hex"]))
                out.append((f"{line['scenario']}#{line['seq']}", bytes(cmd.body)))
    return out


ROUTE_REPLIES = _route_replies()


def test_the_vectors_hold_route_replies() -> None:
    assert len(ROUTE_REPLIES) >= 10


@pytest.mark.parametrize(("where", "body"), ROUTE_REPLIES, ids=[w for w, _ in ROUTE_REPLIES])
def test_vector_route_bodies_parse(where: str, body: bytes) -> None:
    assert b"{0:" in body  # the fastjson form, not JSON
    route = TopicRouteData.decode(body)
    assert route.broker_datas == [BrokerData("DefaultCluster", "broker-a", {0: "127.0.0.1:20911"})]
    (queue,) = route.queue_datas
    assert queue.broker_name == "broker-a"
    assert queue.perm == 6
    assert queue.read_queue_nums == queue.write_queue_nums in (1, 4)
    assert route.filter_server_table == {}
    assert route.order_topic_conf is None
    for standard in (True, False):
        assert TopicRouteData.decode(route.encode(standard)) == route
        assert fastjson.loads(route.encode(standard)) == fastjson.loads(body)


def _route() -> TopicRouteData:
    return TopicRouteData(
        queue_datas=[QueueData("broker-a", 4, 4, 6), QueueData("broker-b", 8, 8, 4, 1)],
        broker_datas=[
            BrokerData("c1", "broker-a", {1: "10.0.0.2:10911", 0: "10.0.0.1:10911"}),
            BrokerData("c1", "broker-b", {0: "10.0.0.3:10911"}),
        ],
        filter_server_table={"10.0.0.1:10911": ["10.0.0.1:30000"]},
        order_topic_conf="broker-a:4;broker-b:8",
    )


def test_route_encodings_have_java_field_order_and_both_key_forms() -> None:
    route = _route()
    fast = route.encode(standard_json=False).decode()
    assert fast.startswith('{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"}')
    standard = route.encode(standard_json=True).decode()
    doc = json.loads(standard)
    assert list(doc) == ["brokerDatas", "filterServerTable", "orderTopicConf", "queueDatas"]
    assert doc["brokerDatas"][0]["brokerAddrs"] == {"0": "10.0.0.1:10911", "1": "10.0.0.2:10911"}
    assert list(doc["queueDatas"][0]) == [
        "brokerName",
        "perm",
        "readQueueNums",
        "topicSysFlag",
        "writeQueueNums",
    ]
    assert TopicRouteData.decode(standard) == TopicRouteData.decode(fast) == route


def test_route_without_order_conf_leaves_the_field_out() -> None:
    route = TopicRouteData([QueueData("b", 1, 1, 6)], [BrokerData("c", "b", {0: "a:1"})])
    assert "orderTopicConf" not in json.loads(route.encode())


def test_queue_data_reads_the_pre_4_9_field_name_and_string_numbers() -> None:
    qd = QueueData.from_json_dict(
        {"brokerName": "b", "readQueueNums": "2", "writeQueueNums": 3, "perm": 6, "topicSynFlag": 1}
    )
    assert qd == QueueData("b", 2, 3, 6, 1)


@pytest.mark.parametrize(
    "bad",
    [
        b'{"queueDatas":{}}',
        b'{"brokerDatas":[{"brokerName":"b","brokerAddrs":{"x":"a"}}]}',
        b'{"brokerDatas":[{"brokerName":"b","brokerAddrs":{0:1}}]}',
        b'{"queueDatas":[{"readQueueNums":1}]}',
        b'{"filterServerTable":{"a":[1]}}',
        b"[]",
    ],
)
def test_malformed_routes_raise_protocol_errors(bad: bytes) -> None:
    with pytest.raises(RemoteProtocolError):
        TopicRouteData.decode(bad)


def test_topic_config_defaults_and_json_are_rocketmqs() -> None:
    tc = TopicConfig("T")
    assert (tc.read_queue_nums, tc.write_queue_nums, tc.perm) == (16, 16, 6)
    assert (tc.topic_filter_type, tc.topic_sys_flag, tc.order) == ("SINGLE_TAG", 0, False)
    assert tc.to_json_dict() == {
        "order": False,
        "perm": 6,
        "readQueueNums": 16,
        "topicFilterType": "SINGLE_TAG",
        "topicName": "T",
        "topicSysFlag": 0,
        "writeQueueNums": 16,
    }
    assert TopicConfig.from_json_dict({}, "T") == tc
    assert tc.encode_line() == "T 16 16 6 SINGLE_TAG"
    assert TopicConfig.decode_line("T 16 16 6 SINGLE_TAG") == tc


@pytest.mark.parametrize("line", ["T 1 2 3", "T a 1 6 SINGLE_TAG", "T 1 1 6 NOPE", ""])
def test_bad_topic_config_lines(line: str) -> None:
    with pytest.raises(RemoteProtocolError):
        TopicConfig.decode_line(line)


def test_data_version_equality_and_next() -> None:
    assert DataVersion(5, 1) == DataVersion.decode(b'{"counter":1,"timestamp":5}')
    assert DataVersion(5, 1).next_version(9) == DataVersion(9, 2)
    assert DataVersion(5, 1) != DataVersion(5, 2)
    assert DataVersion.decode(DataVersion(7, 3).encode()) == DataVersion(7, 3)


def _body(topics: int = 3) -> RegisterBrokerBody:
    table = {
        f"T{i}": TopicConfig(
            f"T{i}", i + 1, i + 2, 6 if i % 2 else 4, "MULTI_TAG" if i else "SINGLE_TAG"
        )
        for i in range(topics)
    }
    wrapper = TopicConfigSerializeWrapper(table, DataVersion(1_700_000_000_000, 7))
    return RegisterBrokerBody(wrapper, ["10.0.0.9:30000"])


def test_register_body_json_shape() -> None:
    doc = json.loads(_body().encode())
    assert list(doc) == ["filterServerList", "topicConfigSerializeWrapper"]
    wrapper = doc["topicConfigSerializeWrapper"]
    assert wrapper["dataVersion"] == {"counter": 7, "timestamp": 1_700_000_000_000}
    assert wrapper["topicConfigTable"]["T1"]["perm"] == 6
    assert RegisterBrokerBody.decode(_body().encode()) == _body()


def test_register_body_compressed_form_round_trips() -> None:
    body = _body(50)
    data = body.encode(compressed=True)
    assert data[:2] == b"\x78\xda"  # zlib, BEST_COMPRESSION, as Java's Deflater
    assert RegisterBrokerBody.decode(data, compressed=True) == body


def test_compressed_form_drops_sys_flag_and_order_as_java_does() -> None:
    table = {"T": TopicConfig("T", 1, 1, 6, topic_sys_flag=3, order=True)}
    body = RegisterBrokerBody(TopicConfigSerializeWrapper(table, DataVersion(1, 1)))
    back = RegisterBrokerBody.decode(body.encode(compressed=True), compressed=True)
    assert back.topic_config_serialize_wrapper.topic_config_table["T"] == TopicConfig("T", 1, 1, 6)


@pytest.mark.parametrize(
    "payload",
    [
        b"",  # not even zlib
        zlib.compress(b"\x00\x00\x00"),  # ends inside a length
        zlib.compress(b"\x00\x00\x00\x10{}"),  # ends inside an item
        zlib.compress(b"\xff\xff\xff\xff"),  # negative length
        zlib.compress(b"\x00\x00\x00\x02{}\x00\x00\x00\x01\x00\x00\x00\x03a b"),  # bad line
    ],
)
def test_broken_compressed_bodies_raise_protocol_errors(payload: bytes) -> None:
    with pytest.raises(RemoteProtocolError):
        RegisterBrokerBody.decode(payload, compressed=True)


def test_compressed_body_inflation_is_bounded() -> None:
    bomb = zlib.compress(b"\x00" * (MAX_INFLATED_REGISTER_BODY + 1024))
    with pytest.raises(RemoteProtocolError, match="inflates past"):
        RegisterBrokerBody.decode(bomb, compressed=True)


@given(
    st.dictionaries(
        st.text("abcXYZ%_-", min_size=1, max_size=10),
        st.tuples(st.integers(0, 64), st.integers(0, 64), st.sampled_from([0, 2, 4, 6])),
        max_size=10,
    ),
    st.integers(0, 2**62),
    st.integers(0, 2**40),
)
def test_register_body_round_trips_in_both_forms(
    topics: dict[str, tuple[int, int, int]], ts: int, counter: int
) -> None:
    table = {n: TopicConfig(n, r, w, p) for n, (r, w, p) in topics.items()}
    body = RegisterBrokerBody(TopicConfigSerializeWrapper(table, DataVersion(ts, counter)))
    assert RegisterBrokerBody.decode(body.encode()) == body
    assert RegisterBrokerBody.decode(body.encode(True), compressed=True) == body


def test_cluster_info_topic_list_and_kv_table() -> None:
    info = ClusterInfo(
        {"broker-a": BrokerData("c1", "broker-a", {0: "h:1", 1: "h:2"})}, {"c1": {"broker-a"}}
    )
    fast = info.encode(standard_json=False)
    assert b'"brokerAddrs":{0:"h:1",1:"h:2"}' in fast
    assert json.loads(info.encode())["clusterAddrTable"] == {"c1": ["broker-a"]}
    assert ClusterInfo.decode(fast) == ClusterInfo.decode(info.encode()) == info
    assert json.loads(TopicList(["A", "B"]).encode()) == {"topicList": ["A", "B"]}
    assert json.loads(TopicList(["A"], "h:1").encode()) == {"brokerAddr": "h:1", "topicList": ["A"]}
    assert TopicList.decode(TopicList(["A"], "h:1").encode()) == TopicList(["A"], "h:1")
    assert KVTable.decode(KVTable({"T": "broker-a:4"}).encode()) == KVTable({"T": "broker-a:4"})
    with pytest.raises(RemoteProtocolError):
        KVTable.decode(b'{"table":{"a":1}}')
