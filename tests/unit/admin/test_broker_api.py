"""BrokerAdminAPI's requests and MQAdmin's merging, against scripted brokers.

Two ``AdminBrokerScript`` servers on 127.0.0.1 (real sockets) are registered with
a real in-process name server by ``BrokerDouble``; each records the requests it
gets and answers with bodies in fastjson's shapes (object keys included). This
pins what goes on the wire (Java's header fields and body) and how answers from
several brokers merge, which a single real broker cannot show.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from aiorocketmq.admin.broker_api import BrokerAdminAPI, GroupList
from aiorocketmq.admin.mq_admin import MQAdmin, MQAdminError
from aiorocketmq.client.errors import MQBrokerError
from aiorocketmq.common.admin_bodies import (
    ConsumeStats,
    OffsetWrapper,
    TopicOffset,
    TopicStatsTable,
)
from aiorocketmq.common.message import MessageQueue
from aiorocketmq.common.route import KVTable
from aiorocketmq.common.subscription_group import SubscriptionGroupConfig
from aiorocketmq.common.topic_config import TopicConfig
from aiorocketmq.namesrv.server import NamesrvController
from aiorocketmq.remoting.client import RemotingClient
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.config import RemotingServerConfig
from aiorocketmq.remoting.connection import ProcessorTable, RemotingConnection
from aiorocketmq.remoting.server import RemotingServer
from tests.support.broker_double import BrokerDouble
from tests.support.cluster import wait_route

pytestmark = pytest.mark.timeout(30)


class AdminBrokerScript:
    """A broker that answers admin codes from canned bodies and records requests."""

    def __init__(self, name: str, bodies: dict[int, bytes]) -> None:
        self.name = name
        self.bodies = bodies
        self.received: list[RemotingCommand] = []
        table = ProcessorTable()
        table.set_default(self._answer)
        config = RemotingServerConfig(listen_host="127.0.0.1", listen_port=0)
        self.server = RemotingServer(table, config, name=f"script-{name}")

    def _answer(self, _conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        self.received.append(request)
        body = self.bodies.get(request.code, b"")
        return request.response_to(ResponseCode.SUCCESS, body=body)

    def last(self, code: int) -> RemotingCommand:
        return [r for r in self.received if r.code == code][-1]


def stats_body(broker: str, queues: int, tps: float) -> dict[int, bytes]:
    topic_stats = TopicStatsTable(
        {MessageQueue("MergeT", broker, q): TopicOffset(0, 10 + q, 0) for q in range(queues)}
    )
    consume = ConsumeStats(
        {MessageQueue("MergeT", broker, q): OffsetWrapper(10 + q, q, 0) for q in range(queues)},
        tps,
    )
    return {
        RequestCode.GET_TOPIC_STATS_INFO: topic_stats.encode(),
        RequestCode.GET_CONSUME_STATS: consume.encode(),
        RequestCode.GET_BROKER_RUNTIME_INFO: KVTable({"brokerVersionDesc": "V4_9_8"}).encode(),
        RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: GroupList([f"G-{broker}"]).encode(),
    }


@pytest.fixture
async def scripts(namesrv: NamesrvController) -> AsyncIterator[list[AdminBrokerScript]]:
    started: list[AdminBrokerScript] = []
    doubles: list[BrokerDouble] = []
    for name, queues, tps in (("b1", 2, 1.5), ("b2", 1, 2.25)):
        script = AdminBrokerScript(name, stats_body(name, queues, tps))
        await script.server.start()
        double = BrokerDouble(
            name, topics={"MergeT": queues, "%RETRY%G": 1}, broker_addr=script.server.address
        )
        await double.register(namesrv.address)
        started.append(script)
        doubles.append(double)
    await wait_route(namesrv.address, "MergeT", lambda r: len(r.broker_datas) == 2)
    yield started
    for script, double in zip(started, doubles, strict=True):
        await double.close()
        await script.server.shutdown()


async def test_stats_merge_over_the_route_brokers(
    admin: MQAdmin, scripts: list[AdminBrokerScript]
) -> None:
    stats = await admin.examine_topic_stats("MergeT")
    assert sorted(stats.offset_table) == [
        MessageQueue("MergeT", "b1", 0), MessageQueue("MergeT", "b1", 1),
        MessageQueue("MergeT", "b2", 0),
    ]  # fmt: skip
    assert stats.offset_table[MessageQueue("MergeT", "b1", 1)].max_offset == 11
    consume = await admin.examine_consume_stats("G")
    assert consume.consume_tps == pytest.approx(3.75)
    assert consume.compute_total_diff() == 30
    for script in scripts:  # Java asks every topic when none is given
        fields = script.last(RequestCode.GET_CONSUME_STATS).ext_fields
        assert fields == {"consumerGroup": "G"}
        assert script.last(RequestCode.GET_TOPIC_STATS_INFO).ext_fields == {"topic": "MergeT"}
    groups = await admin.query_topic_consume_by_who("MergeT")
    assert groups in (["G-b1"], ["G-b2"])


async def test_empty_answers_are_javas_not_found_errors(
    admin: MQAdmin, scripts: list[AdminBrokerScript]
) -> None:
    for script in scripts:
        script.bodies[RequestCode.GET_TOPIC_STATS_INFO] = TopicStatsTable().encode()
        script.bodies[RequestCode.GET_CONSUME_STATS] = ConsumeStats().encode()
    with pytest.raises(MQAdminError, match="Not found the topic stats info"):
        await admin.examine_topic_stats("MergeT")
    with pytest.raises(MQAdminError) as info:
        await admin.examine_consume_stats("G")
    assert info.value.code == ResponseCode.CONSUMER_NOT_ONLINE


async def test_requests_carry_javas_fields(scripts: list[AdminBrokerScript]) -> None:
    script = scripts[0]
    client = RemotingClient()
    api = BrokerAdminAPI(client, timeout_ms=2000)
    try:
        await api.create_topic(script.server.address, TopicConfig("T", 8, 4, 6, topic_sys_flag=1))
        assert script.last(RequestCode.UPDATE_AND_CREATE_TOPIC).ext_fields == {
            "topic": "T", "defaultTopic": "TBW102", "readQueueNums": "8", "writeQueueNums": "4",
            "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "1", "order": "false",
        }  # fmt: skip
        group = SubscriptionGroupConfig("G", retry_max_times=3)
        await api.create_subscription_group(script.server.address, group)
        sent = script.last(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)
        assert SubscriptionGroupConfig.decode(bytes(sent.body)) == group
        await api.delete_subscription_group(script.server.address, "G", remove_offset=True)
        assert script.last(RequestCode.DELETE_SUBSCRIPTIONGROUP).ext_fields == {
            "groupName": "G", "removeOffset": "true",
        }  # fmt: skip
        await api.delete_topic_in_broker(script.server.address, "T")
        assert script.last(RequestCode.DELETE_TOPIC_IN_BROKER).ext_fields == {"topic": "T"}
        runtime = await api.get_broker_runtime_info(script.server.address)
        assert runtime == {"brokerVersionDesc": "V4_9_8"}
    finally:
        await client.close()


async def test_malformed_and_error_replies_are_typed(scripts: list[AdminBrokerScript]) -> None:
    script = scripts[0]
    script.bodies[RequestCode.GET_TOPIC_STATS_INFO] = b"{not json"
    client = RemotingClient()
    api = BrokerAdminAPI(client, timeout_ms=2000)
    try:
        with pytest.raises(MQBrokerError) as info:
            await api.get_topic_stats_info(script.server.address, "MergeT")
        assert info.value.code == ResponseCode.SYSTEM_ERROR
        assert not info.value.retriable
        assert "malformed reply body of request code 202" in str(info.value)
        assert info.value.address == script.server.address
    finally:
        await client.close()


def test_group_list_round_trip() -> None:
    body = GroupList(["a", "b"]).encode()
    assert body == b'{"groupList":["a","b"]}'
    assert GroupList.decode(body).group_list == ["a", "b"]
    assert GroupList.decode(b"{}").group_list == []
