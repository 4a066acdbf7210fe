"""The name server's processors over a real RemotingServer on 127.0.0.1, every request code.

A ``NamesrvController`` with a manual clock runs in the test's loop; brokers are
``BrokerDouble``s registering through their own connections; queries go through our
client or, for GET_ROUTEINFO_BY_TOPIC, as the exact frames the stock C++ client and
ali-ons sent (from the vectors), over a raw socket.
"""

from __future__ import annotations

import asyncio
import json
import zlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from aiorocketmq.common.clock import ManualClock
from aiorocketmq.common.route import (
    ClusterInfo,
    DataVersion,
    KVTable,
    QueueData,
    TopicList,
    TopicRouteData,
)
from aiorocketmq.namesrv.config import NamesrvConfig
from aiorocketmq.namesrv.kv_config import NAMESPACE_ORDER_TOPIC_CONFIG
from aiorocketmq.namesrv.processors import REGISTER_TOPIC_IN_NAMESRV
from aiorocketmq.namesrv.server import NamesrvController
from aiorocketmq.remoting.client import RemotingClient
from aiorocketmq.remoting.codes import MQVersion, RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.config import RemotingClientConfig
from aiorocketmq.remoting.frame import FrameDecoder
from aiorocketmq.remoting.namesrv_headers import RegisterBrokerResponseHeader
from tests.support.broker_double import BrokerDouble
from tests.support.vectors import load_jsonl
from tests.support.wait import wait_until

pytestmark = pytest.mark.timeout(30)

OLD_CLIENT = int(MQVersion.V3_1_8)  # the C++ 1.2.x client's version: fastjson routes


class Env:
    """A running name server, a query client, and the brokers a test made."""

    def __init__(self, controller: NamesrvController, clock: ManualClock) -> None:
        self.controller = controller
        self.clock = clock
        self.addr = controller.address
        self.client = RemotingClient(RemotingClientConfig(serialize_type="JSON"))
        self.brokers: list[BrokerDouble] = []

    def broker(self, **kwargs: object) -> BrokerDouble:
        double = BrokerDouble(**kwargs)  # type: ignore[arg-type]
        self.brokers.append(double)
        return double

    async def ask(
        self,
        code: int,
        body: bytes = b"",
        version: int | None = None,
        **fields: str,
    ) -> RemotingCommand:
        request = RemotingCommand.request(code, dict(fields), body)
        if version is not None:
            request.version = version
        return await self.client.invoke(self.addr, request, 5_000)

    async def route(self, topic: str = "TopicTest") -> TopicRouteData | None:
        reply = await self.ask(RequestCode.GET_ROUTEINFO_BY_TOPIC, topic=topic)
        if reply.code == ResponseCode.TOPIC_NOT_EXIST:
            return None
        assert reply.code == ResponseCode.SUCCESS, reply
        json.loads(bytes(reply.body))  # version 409: strict JSON
        return TopicRouteData.decode(reply.body)

    async def addrs(self, topic: str = "TopicTest") -> dict[str, dict[int, str]] | None:
        route = await self.route(topic)
        return (
            None if route is None else {b.broker_name: b.broker_addrs for b in route.broker_datas}
        )

    async def close(self) -> None:
        for double in self.brokers:
            await double.close()
        await self.client.close()


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    config = NamesrvConfig(
        listen_host="127.0.0.1",
        listen_port=0,
        kv_config_path=str(tmp_path / "kvConfig.json"),
        order_message_enable=True,
        broker_scan_interval_millis=3_600_000,  # the tests scan by hand
        broker_scan_initial_delay_millis=3_600_000,
    )
    clock = ManualClock()
    controller = NamesrvController(config, clock=clock)
    await controller.start()
    e = Env(controller, clock)
    yield e
    await e.close()
    await controller.shutdown()


async def test_register_then_route_in_standard_json(env: Env) -> None:
    double = env.broker(topics={"TopicTest": 4, "%RETRY%G": 1})
    assert await double.register(env.addr) == RegisterBrokerResponseHeader()  # a master
    route = await env.route()
    assert route is not None
    assert route.queue_datas == [QueueData("broker-a", 4, 4, 6)]
    assert route.broker_datas[0].broker_addrs == {0: double.broker_addr}
    assert route.broker_datas[0].cluster == "DefaultCluster"
    assert await env.addrs("%RETRY%G") == {"broker-a": {0: double.broker_addr}}


async def test_unknown_topic_is_topic_not_exist_with_the_spec_remark(env: Env) -> None:
    reply = await env.ask(RequestCode.GET_ROUTEINFO_BY_TOPIC, topic="TBW102")
    assert reply.code == ResponseCode.TOPIC_NOT_EXIST
    assert reply.remark == "No topic route info in name server for the topic: TBW102"
    missing = await env.ask(RequestCode.GET_ROUTEINFO_BY_TOPIC)
    assert missing.code == ResponseCode.SYSTEM_ERROR
    assert missing.remark == "the custom field <topic> is null"


def _captured_route_requests() -> list[tuple[str, bytes, int, str]]:
    """(client, frame bytes, opaque, topic) of every captured GET_ROUTEINFO_BY_TOPIC."""
    out = []
    for name in ("cpp_client.jsonl", "alions_client.jsonl"):
        for line in load_jsonl(name):
            if line["origin"] == "client" and line["code"] == 105 and not line["is_response"]:
                topic = line["header"]["extFields"]["topic"]
                out.append(
                    (line["client"], bytes.fromhex(line["frame_hex"]), line["opaque"], topic)
                )
    return out


async def test_stock_client_route_frames_get_fastjson_routes(env: Env) -> None:
    """The exact bytes C++ 1.2 and ali-ons sent: old versions, so bare integer keys."""
    double = env.broker(topics={"TopicTest": 4, "%RETRY%CID_capture": 1, "%RETRY%CID_alions": 1})
    await double.register(env.addr)
    captured = _captured_route_requests()
    assert {c for c, *_ in captured} == {"cpp-1.2", "ali-ons-3.12"}
    reader, writer = await asyncio.open_connection(*env.addr.rsplit(":", 1))
    try:
        writer.write(b"".join(frame for _, frame, _, _ in captured))
        replies: list[RemotingCommand] = []
        decoder = FrameDecoder()
        async with asyncio.timeout(5):
            while len(replies) < len(captured):
                replies += decoder.feed(await reader.read(65536))
    finally:
        writer.close()
    by_opaque: dict[int, list[RemotingCommand]] = {}
    for reply in replies:
        by_opaque.setdefault(reply.opaque, []).append(reply)
    for client, _, opaque, topic in captured:
        reply = by_opaque[opaque].pop(0)  # same opaque from both clients: in order
        assert reply.is_response and reply.serialize_type == 0, client
        if topic == "TBW102":
            assert reply.code == ResponseCode.TOPIC_NOT_EXIST
            assert reply.remark == f"No topic route info in name server for the topic: {topic}"
            continue
        assert reply.code == ResponseCode.SUCCESS, (client, topic, reply.remark)
        body = bytes(reply.body)
        assert f'"brokerAddrs":{{0:"{double.broker_addr}"}}'.encode() in body
        route = TopicRouteData.decode(body)
        assert route.queue_datas[0].write_queue_nums == (1 if topic.startswith("%") else 4)


async def test_accept_standard_json_only_wins_over_an_old_version(env: Env) -> None:
    await env.broker().register(env.addr)
    old = await env.ask(RequestCode.GET_ROUTEINFO_BY_TOPIC, version=OLD_CLIENT, topic="TopicTest")
    assert b"{0:" in bytes(old.body)
    asked = await env.ask(
        RequestCode.GET_ROUTEINFO_BY_TOPIC,
        version=OLD_CLIENT,
        topic="TopicTest",
        acceptStandardJsonOnly="true",
    )
    assert json.loads(bytes(asked.body))["brokerDatas"][0]["brokerAddrs"] == {
        "0": "127.0.0.1:10911"
    }


async def test_register_body_checks(env: Env) -> None:
    double = env.broker()
    bad = double.register_request()
    bad.ext_fields["bodyCrc32"] = str((int(bad.ext_fields["bodyCrc32"]) + 1) & 0x7FFFFFFF)
    reply = await env.client.invoke(env.addr, bad, 5_000)
    assert (reply.code, reply.remark) == (ResponseCode.SYSTEM_ERROR, "crc32 not match")
    garbage = double.register_request()
    garbage.body = b"{not json"
    garbage.ext_fields["bodyCrc32"] = "0"  # unchecked
    reply = await env.client.invoke(env.addr, garbage, 5_000)
    assert reply.code == ResponseCode.SYSTEM_ERROR
    assert reply.remark is not None and reply.remark.startswith("Failed to decode")
    no_name = double.register_request()
    del no_name.ext_fields["brokerName"]
    reply = await env.client.invoke(env.addr, no_name, 5_000)
    assert reply.remark == "the custom field <brokerName> is null"
    assert await env.route() is None


async def test_compressed_old_and_empty_register_bodies(env: Env) -> None:
    zipped = env.broker(broker_name="zipped", topics={"Z": 2}, broker_addr="10.0.0.1:1")
    await zipped.register(env.addr, compressed=True)
    assert await env.addrs("Z") == {"zipped": {0: "10.0.0.1:1"}}
    old = env.broker(broker_name="old", topics={"O": 3}, broker_addr="10.0.0.2:1")
    request = old.register_request()
    request.version = 30  # before V3_0_11: a bare TopicConfigSerializeWrapper
    request.body = old.body().topic_config_serialize_wrapper.encode()
    request.ext_fields["bodyCrc32"] = str(zlib.crc32(request.body) & 0x7FFFFFFF)
    assert (await env.client.invoke(env.addr, request, 5_000)).code == ResponseCode.SUCCESS
    assert await env.addrs("O") == {"old": {0: "10.0.0.2:1"}}
    empty = env.broker(broker_name="empty", broker_addr="10.0.0.3:1")
    request = empty.register_request()
    request.body = b""
    request.ext_fields["bodyCrc32"] = "0"
    assert (await env.client.invoke(env.addr, request, 5_000)).code == ResponseCode.SUCCESS
    info = ClusterInfo.decode((await env.ask(RequestCode.GET_BROKER_CLUSTER_INFO)).body)
    assert info.broker_addr_table["empty"].broker_addrs == {0: "10.0.0.3:1"}


async def test_slave_learns_master_and_gets_order_topic_config(env: Env) -> None:
    put = await env.ask(
        RequestCode.PUT_KV_CONFIG,
        namespace=NAMESPACE_ORDER_TOPIC_CONFIG,
        key="TopicTest",
        value="broker-a:4",
    )
    assert put.code == ResponseCode.SUCCESS
    master = env.broker()
    slave = env.broker(broker_id=1, broker_addr="127.0.0.1:10921")
    await master.register(env.addr)
    request = slave.register_request()
    reply = await env.client.invoke(env.addr, request, 5_000)
    assert reply.ext_fields["masterAddr"] == master.broker_addr
    assert reply.ext_fields["haServerAddr"] == "127.0.0.1:10912"
    assert KVTable.decode(reply.body) == KVTable({"TopicTest": "broker-a:4"})
    route = await env.route()
    assert route is not None and route.order_topic_conf == "broker-a:4"
    assert route.broker_datas[0].broker_addrs == {0: master.broker_addr, 1: slave.broker_addr}


async def test_unregister_and_connection_close_evict(env: Env) -> None:
    a = env.broker()
    b = env.broker(broker_name="broker-b", broker_addr="127.0.0.1:20911")
    await a.register(env.addr)
    await b.register(env.addr)
    await a.unregister(env.addr)
    assert await env.addrs() == {"broker-b": {0: "127.0.0.1:20911"}}
    b.drop_connection(env.addr)  # the broker's connection closes: evicted at once
    await wait_until(lambda: not env.controller.route_info.broker_live_table, what="eviction")
    assert await env.route() is None


async def test_expiry_scan_drops_the_broker_and_closes_its_connection(env: Env) -> None:
    double = env.broker()
    await double.register(env.addr)
    assert double.client.addresses == [env.addr]
    env.clock.advance(env.controller.config.broker_channel_expired_millis)
    assert env.controller.scan_not_active_broker() == 0
    env.clock.advance(1)
    assert env.controller.scan_not_active_broker() == 1
    assert await env.route() is None
    await wait_until(lambda: double.client.addresses == [], what="server closing the connection")


async def test_cluster_info_in_both_forms(env: Env) -> None:
    await env.broker().register(env.addr)
    await env.broker(broker_id=1, broker_addr="127.0.0.1:10921").register(env.addr)
    new = await env.ask(RequestCode.GET_BROKER_CLUSTER_INFO)
    doc = json.loads(bytes(new.body))
    assert doc["clusterAddrTable"] == {"DefaultCluster": ["broker-a"]}
    assert doc["brokerAddrTable"]["broker-a"]["brokerAddrs"] == {
        "0": "127.0.0.1:10911",
        "1": "127.0.0.1:10921",
    }
    old = await env.ask(RequestCode.GET_BROKER_CLUSTER_INFO, version=OLD_CLIENT)
    assert b'{0:"127.0.0.1:10911",1:"127.0.0.1:10921"}' in bytes(old.body)
    assert ClusterInfo.decode(old.body) == ClusterInfo.decode(new.body)


async def test_write_perm_wipe_and_add(env: Env) -> None:
    await env.broker(topics={"TopicTest": 4, "Other": 1}).register(env.addr)
    wiped = await env.ask(RequestCode.WIPE_WRITE_PERM_OF_BROKER, brokerName="broker-a")
    assert wiped.ext_fields["wipeTopicCount"] == "2"
    route = await env.route()
    assert route is not None and route.queue_datas[0].perm == 4  # the cache was dropped
    added = await env.ask(RequestCode.ADD_WRITE_PERM_OF_BROKER, brokerName="broker-a")
    assert added.ext_fields["addTopicCount"] == "2"
    route = await env.route()
    assert route is not None and route.queue_datas[0].perm == 6


async def test_topic_lists_and_deletion(env: Env) -> None:
    await env.broker(topics={"TopicTest": 4, "A": 1}, cluster="c1").register(env.addr)
    await env.broker(
        broker_name="broker-b", broker_addr="127.0.0.1:20911", topics={"B": 1}, cluster="c2"
    ).register(env.addr)

    async def topics(code: int, **fields: str) -> TopicList:
        reply = await env.ask(code, **fields)
        assert reply.code == ResponseCode.SUCCESS, reply
        return TopicList.decode(reply.body)

    all_topics = await topics(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    assert all_topics.topic_list == ["A", "B", "TopicTest"]
    assert (await topics(RequestCode.GET_TOPICS_BY_CLUSTER, cluster="c2")).topic_list == ["B"]
    system = await topics(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS)
    assert system.topic_list == ["broker-a", "broker-b", "c1", "c2"]
    assert system.broker_addr in ("127.0.0.1:10911", "127.0.0.1:20911")
    for code in (
        RequestCode.GET_UNIT_TOPIC_LIST,
        RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST,
        RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST,
    ):
        assert (await topics(code)).topic_list == []
    reply = await env.ask(RequestCode.DELETE_TOPIC_IN_NAMESRV, topic="B", clusterName="c1")
    assert reply.code == ResponseCode.SUCCESS
    assert await env.route("B") is not None  # B lives on c2 only
    await env.ask(RequestCode.DELETE_TOPIC_IN_NAMESRV, topic="B", clusterName="c2")
    assert await env.route("B") is None
    await env.ask(RequestCode.DELETE_TOPIC_IN_NAMESRV, topic="TopicTest")
    assert await env.route() is None


async def test_kv_config_requests_persist_to_disk(env: Env) -> None:
    await env.ask(RequestCode.PUT_KV_CONFIG, namespace="ns", key="k", value="v")
    got = await env.ask(RequestCode.GET_KV_CONFIG, namespace="ns", key="k")
    assert (got.code, got.ext_fields["value"]) == (ResponseCode.SUCCESS, "v")
    listed = await env.ask(RequestCode.GET_KVLIST_BY_NAMESPACE, namespace="ns")
    assert KVTable.decode(listed.body) == KVTable({"k": "v"})
    on_disk = json.loads(env.controller.kv_config.path.read_text())
    assert on_disk == {"configTable": {"ns": {"k": "v"}}}
    deleted = await env.ask(RequestCode.DELETE_KV_CONFIG, namespace="ns", key="k")
    assert deleted.code == ResponseCode.SUCCESS
    missing = await env.ask(RequestCode.GET_KV_CONFIG, namespace="ns", key="k")
    assert missing.code == ResponseCode.QUERY_NOT_FOUND
    assert missing.remark == "No config item, Namespace: ns Key: k"
    none = await env.ask(RequestCode.GET_KVLIST_BY_NAMESPACE, namespace="nope")
    assert (none.code, none.remark) == (
        ResponseCode.QUERY_NOT_FOUND,
        "No config item, Namespace: nope",
    )
    no_value = await env.ask(RequestCode.PUT_KV_CONFIG, namespace="ns", key="k")
    assert no_value.remark == "the custom field <value> is null"
    assert json.loads(env.controller.kv_config.path.read_text()) == {"configTable": {"ns": {}}}


async def test_query_data_version(env: Env) -> None:
    double = env.broker()
    await double.register(env.addr)
    fields = {
        "brokerName": double.broker_name,
        "brokerAddr": double.broker_addr,
        "clusterName": double.cluster,
        "brokerId": "0",
    }
    same = await env.ask(RequestCode.QUERY_DATA_VERSION, double.data_version.encode(), **fields)
    assert (same.code, same.ext_fields["changed"]) == (ResponseCode.SUCCESS, "false")
    assert DataVersion.decode(same.body) == double.data_version
    newer = double.data_version.next_version(1)
    other = await env.ask(RequestCode.QUERY_DATA_VERSION, newer.encode(), **fields)
    assert other.ext_fields["changed"] == "true"
    fields["brokerAddr"] = "10.9.9.9:1"
    unknown = await env.ask(RequestCode.QUERY_DATA_VERSION, newer.encode(), **fields)
    assert (unknown.ext_fields["changed"], bytes(unknown.body)) == ("true", b"")


async def test_register_topic_in_namesrv_and_namesrv_config(env: Env) -> None:
    await env.broker().register(env.addr)
    route = TopicRouteData(queue_datas=[QueueData("broker-a", 2, 2, 6)])
    reply = await env.ask(REGISTER_TOPIC_IN_NAMESRV, route.encode(), topic="Direct")
    assert reply.code == ResponseCode.SUCCESS
    assert await env.addrs("Direct") == {"broker-a": {0: "127.0.0.1:10911"}}
    config = await env.ask(RequestCode.GET_NAMESRV_CONFIG)
    text = bytes(config.body).decode()
    assert "orderMessageEnable=true\n" in text
    assert "listenPort=0\n" in text
    assert "serverChannelMaxIdleTimeSeconds=120\n" in text


async def test_unknown_code_is_not_supported(env: Env) -> None:
    reply = await env.ask(RequestCode.SEND_MESSAGE)  # a broker's request
    assert reply.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED


async def test_update_namesrv_config_refuses_what_it_cannot_take(env: Env) -> None:
    for body, code, remark in (
        (b"", ResponseCode.SYSTEM_ERROR, "string2Properties error"),
        (b"configStorePath=/tmp/x\n", ResponseCode.NO_PERMISSION, "black list"),
        (b"orderMessageEnable=perhaps\n", ResponseCode.SYSTEM_ERROR, "orderMessageEnable"),
    ):
        reply = await env.ask(RequestCode.UPDATE_NAMESRV_CONFIG, body)
        assert reply.code == code and remark in (reply.remark or ""), reply.remark
    config = await env.ask(RequestCode.GET_NAMESRV_CONFIG)
    assert "orderMessageEnable=true\n" in bytes(config.body).decode()  # unchanged


async def test_cached_route_follows_a_new_data_version(env: Env) -> None:
    double = env.broker(topics={"TopicTest": 4})
    await double.register(env.addr)
    first = await env.route()
    assert first is not None and first.queue_datas[0].write_queue_nums == 4
    double.change_topics({"TopicTest": 8})
    await double.register(env.addr)
    second = await env.route()
    assert second is not None and second.queue_datas[0].write_queue_nums == 8
