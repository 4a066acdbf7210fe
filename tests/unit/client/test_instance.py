"""ClientInstance: broker lookup as Java, and routes/heartbeats/notifications against an
in-process name server and broker doubles serving on 127.0.0.1."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from aiorocketmq.client.config import ClientConfig
from aiorocketmq.client.errors import MQConnectError
from aiorocketmq.client.instance import (
    ClientInstance,
    ClientManager,
    FindBrokerResult,
    route_changed,
)
from aiorocketmq.client.publish_info import TopicPublishInfo
from aiorocketmq.common.message import MessageQueue
from aiorocketmq.common.protocol_bodies import ConsumerData, HeartbeatData
from aiorocketmq.common.route import BrokerData, QueueData, TopicRouteData
from aiorocketmq.namesrv.config import NamesrvConfig
from aiorocketmq.namesrv.server import NamesrvController
from aiorocketmq.remoting.codes import RequestCode
from aiorocketmq.remoting.command import RemotingCommand
from tests.support.broker_double import BrokerDouble
from tests.support.wait import wait_until

pytestmark = pytest.mark.timeout(30)


def _instance(namesrv: str = "127.0.0.1:1", **kw: object) -> ClientInstance:
    return ClientInstance(ClientConfig(namesrv_addr=namesrv, client_ip="127.0.0.1", **kw))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("addrs", "broker_id", "only", "expected"),
    [
        ({0: "m", 1: "s1"}, 0, True, ("m", False)),
        ({0: "m", 1: "s1"}, 1, True, ("s1", True)),
        ({0: "m", 2: "s2"}, 1, True, ("s2", True)),  # a slave id falls through to id + 1
        ({0: "m", 3: "s3"}, 1, True, None),
        ({0: "m", 3: "s3"}, 1, False, ("m", False)),  # ... then to the first listed
        ({1: "s1", 2: "s2"}, 0, True, None),  # master gone, only this broker: nothing
        ({1: "s1", 2: "s2"}, 0, False, ("s1", True)),  # master gone: a slave
        ({}, 0, False, None),
    ],
)
def test_find_broker_address_in_subscribe(
    addrs: dict[int, str], broker_id: int, only: bool, expected: tuple[str, bool] | None
) -> None:
    instance = _instance()
    instance.broker_addr_table["b"] = addrs
    found = instance.find_broker_address_in_subscribe("b", broker_id, only)
    assert (found and (found.address, found.slave)) == (expected or None)
    assert instance.find_broker_address_in_subscribe("other", 0, False) is None


def test_find_in_publish_and_admin_and_versions() -> None:
    instance = _instance()
    instance.broker_addr_table["b"] = {1: "s1", 0: "m"}
    instance.broker_version_table["b"] = {"m": 409}
    assert instance.find_broker_address_in_publish("b") == "m"
    assert instance.find_broker_address_in_admin("b") == FindBrokerResult("m", False, 409)
    instance.broker_addr_table["b"] = {1: "s1"}
    assert instance.find_broker_address_in_publish("b") is None
    assert instance.find_broker_address_in_admin("b") == FindBrokerResult("s1", True, 0)


def test_route_changed_ignores_order() -> None:
    a = TopicRouteData(
        [QueueData("x", 4, 4, 6), QueueData("y", 4, 4, 6)],
        [BrokerData("c", "x", {0: "1"}), BrokerData("c", "y", {0: "2", 1: "3"})],
    )
    b = TopicRouteData(
        [QueueData("y", 4, 4, 6), QueueData("x", 4, 4, 6)],
        [BrokerData("c", "y", {1: "3", 0: "2"}), BrokerData("c", "x", {0: "1"})],
    )
    assert not route_changed(a, b)
    assert route_changed(None, b)
    b.queue_datas[0] = QueueData("y", 8, 8, 6)
    assert route_changed(a, b)


class FakeProducer:
    def __init__(self, topics: set[str]) -> None:
        self.topics = topics
        self.infos: dict[str, TopicPublishInfo] = {}

    def publish_topics(self) -> set[str]:
        return set(self.topics)

    def is_publish_topic_need_update(self, topic: str) -> bool:
        return topic not in self.infos or not self.infos[topic].ok()

    def update_topic_publish_info(self, topic: str, info: TopicPublishInfo) -> None:
        self.infos[topic] = info


class FakeConsumer:
    def __init__(self, group: str, topics: set[str]) -> None:
        self.group = group
        self.topics = topics
        self.mqs: dict[str, set[MessageQueue]] = {}
        self.persisted = 0
        self.changed = 0

    def consumer_data(self) -> ConsumerData:
        return ConsumerData(self.group)

    def subscribe_topics(self) -> set[str]:
        return set(self.topics)

    def is_subscribe_topic_need_update(self, topic: str) -> bool:
        return topic not in self.mqs

    def update_topic_subscribe_info(self, topic: str, mqs: set[MessageQueue]) -> None:
        self.mqs[topic] = mqs

    async def persist_consumer_offset(self) -> None:
        self.persisted += 1

    def on_consumer_ids_changed(self) -> None:
        self.changed += 1


class Cluster:
    def __init__(self, namesrv: NamesrvController) -> None:
        self.namesrv = namesrv
        self.brokers: list[BrokerDouble] = []

    async def broker(self, name: str, broker_id: int = 0) -> BrokerDouble:
        double = BrokerDouble(name, broker_id, topics={"T": 4})
        await double.serve()
        await double.register(self.namesrv.address)
        self.brokers.append(double)
        return double


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    config = NamesrvConfig(
        listen_host="127.0.0.1",
        listen_port=0,
        kv_config_path=str(tmp_path / "kv.json"),
        broker_scan_interval_millis=3_600_000,
        broker_scan_initial_delay_millis=3_600_000,
    )
    controller = NamesrvController(config)
    await controller.start()
    c = Cluster(controller)
    yield c
    for double in c.brokers:
        await double.close()
    await controller.shutdown()


async def test_route_update_feeds_producers_and_consumers(cluster: Cluster) -> None:
    master = await cluster.broker("broker-a")
    slave = await cluster.broker("broker-a", 1)
    instance = _instance(cluster.namesrv.address, poll_name_server_interval=3_600_000)
    producer, consumer = FakeProducer({"T"}), FakeConsumer("G", {"T"})
    async with _started(instance, quiet=True):
        assert instance.register_producer("P", producer)
        assert not instance.register_producer("P", producer)
        assert instance.register_consumer("G", consumer)
        assert await instance.update_topic_route("T")
        assert not await instance.update_topic_route("T")  # unchanged
        assert instance.broker_addr_table == {
            "broker-a": {0: master.broker_addr, 1: slave.broker_addr}
        }
        assert producer.infos["T"].message_queues == [
            MessageQueue("T", "broker-a", i) for i in range(4)
        ]
        assert consumer.mqs["T"] == {MessageQueue("T", "broker-a", i) for i in range(4)}
        assert not await instance.update_topic_route("NoSuchTopic")
        # A new topic borrows TBW102's route, capped to the default queue count.
        await master.register(cluster.namesrv.address)
        master.change_topics({"T": 4, "TBW102": 8})
        await master.register(cluster.namesrv.address)
        assert await instance.update_topic_route(
            "New", default_topic="TBW102", default_queue_nums=3
        )
        assert len(producer.infos["New"].message_queues) == 3


async def test_heartbeats_masters_only_without_consumers_then_all(cluster: Cluster) -> None:
    master = await cluster.broker("broker-a")
    slave = await cluster.broker("broker-a", 1)
    instance = _instance(cluster.namesrv.address, heartbeat_broker_interval=3_600_000)
    instance.register_producer("P", FakeProducer({"T"}))
    async with _started(instance):
        await instance.update_topic_route("T")
        assert await instance.send_heartbeat_to_all_brokers() == 1
        beats = [r for r in master.received if r.code == RequestCode.HEART_BEAT]
        body = HeartbeatData.decode(beats[0].body)
        assert body.client_id == instance.client_id
        assert [p.group_name for p in body.producers] == ["P"] and body.consumers == []
        assert not [r for r in slave.received if r.code == RequestCode.HEART_BEAT]
        instance.register_consumer("G", FakeConsumer("G", {"T"}))
        assert await instance.send_heartbeat_to_all_brokers() == 2
        assert instance.find_broker_version("broker-a", slave.broker_addr) > 0
        await instance.unregister_producer("P")
        assert any(r.code == RequestCode.UNREGISTER_CLIENT for r in master.received)


async def test_a_broker_learned_from_a_route_is_greeted_at_once(cluster: Cluster) -> None:
    """Without waiting for the (here hour-long) heartbeat tick; only the new brokers."""
    master = await cluster.broker("broker-a")
    instance = _instance(cluster.namesrv.address, heartbeat_broker_interval=3_600_000,
                         poll_name_server_interval=3_600_000)  # fmt: skip

    def beats(double: BrokerDouble) -> int:
        return sum(r.code == RequestCode.HEART_BEAT for r in double.received)

    async with _started(instance, quiet=True):
        instance.register_producer("P", FakeProducer({"T"}))
        assert await instance.update_topic_route("T")
        await wait_until(lambda: beats(master) == 1, timeout=5, what="broker-a greeted")
        other = await cluster.broker("broker-b")
        assert await instance.update_topic_route("T")
        await wait_until(lambda: beats(other) == 1, timeout=5, what="broker-b greeted")
        assert beats(master) == 1  # already known: left to the periodic heartbeat


async def test_clean_offline_brokers(cluster: Cluster) -> None:
    await cluster.broker("broker-a")
    instance = _instance(cluster.namesrv.address)
    instance.broker_addr_table["gone"] = {0: "127.0.0.1:9"}
    instance.register_producer("P", FakeProducer({"T"}))
    async with _started(instance):
        await instance.update_topic_route("T")
        instance.clean_offline_brokers()
        assert set(instance.broker_addr_table) == {"broker-a"}


async def test_notify_consumer_ids_changed_reaches_the_consumer(cluster: Cluster) -> None:
    master = await cluster.broker("broker-a")
    instance = _instance(cluster.namesrv.address)
    consumer = FakeConsumer("G", {"T"})
    instance.register_consumer("G", consumer)
    async with _started(instance):
        await instance.update_topic_route("T")
        await instance.send_heartbeat_to_all_brokers()
        assert master.server is not None
        (conn,) = master.server.connections
        notify = RemotingCommand.request(
            RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": "G"}
        )
        bad = RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {})
        await master.server.invoke_oneway(conn, bad)  # no consumerGroup: ignored, no crash
        await master.server.invoke_oneway(conn, notify)
        await wait_until(lambda: consumer.changed == 1, what="the consumer told")
        bad_reply = await master.server.invoke(conn, bad, 5.0)
        assert (bad_reply.code, bad_reply.remark) == (1, "the custom field <consumerGroup> is null")
        two_way = RemotingCommand.request(
            RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": "other"}
        )
        reply = await master.server.invoke(conn, two_way, 5.0)
        assert reply.code == 0 and instance.consumer_ids_changed_count == 2
        assert consumer.changed == 1
    assert consumer.persisted >= 1  # shutdown persists offsets once more


async def test_a_failed_broker_request_refreshes_routes_at_once(cluster: Cluster) -> None:
    master = await cluster.broker("broker-a")
    instance = _instance(cluster.namesrv.address, poll_name_server_interval=3_600_000)
    instance.register_producer("P", FakeProducer({"T"}))
    async with _started(instance):
        assert instance.route_job is not None
        await wait_until(lambda: instance.route_job is not None and instance.route_job.runs >= 1)
        address = master.broker_addr
        await master.close()
        runs = instance.route_job.runs
        with pytest.raises(MQConnectError):
            await instance.api.send_heartbeat(address, instance.heartbeat_data(), 1000)
        await wait_until(
            lambda: instance.route_job is not None and instance.route_job.runs > runs,
            what="a route refresh right after the failure",
        )


async def test_client_manager_shares_by_namesrv_set_and_client_id() -> None:
    manager = ClientManager()
    a = ClientConfig(namesrv_addr="127.0.0.1:1;127.0.0.1:2", client_ip="10.0.0.1")
    b = ClientConfig(namesrv_addr="127.0.0.1:2;127.0.0.1:1", client_ip="10.0.0.1")
    c = ClientConfig(namesrv_addr="127.0.0.1:1", client_ip="10.0.0.1", instance_name="other")
    first = await manager.acquire(a)
    assert await manager.acquire(b) is first
    other = await manager.acquire(c)
    assert other is not first and other.client_id == "10.0.0.1@other"
    await manager.release(first)
    assert first.running
    await manager.release(first)
    assert not first.running
    await manager.close()
    assert not other.running


class _started:
    """Run an instance; ``quiet`` stops its route and heartbeat jobs first.

    A quiet instance's tables change only through the test's own calls: else the
    route job's first tick (10 ms after start, later on a loaded machine) could
    apply a route between a test's registration and its ``update_topic_route``.
    """

    def __init__(self, instance: ClientInstance, *, quiet: bool = False) -> None:
        self.instance = instance
        self.quiet = quiet

    async def __aenter__(self) -> ClientInstance:
        await self.instance.start()
        if self.quiet:
            jobs = [self.instance.route_job, self.instance.heartbeat_job]
            for job in jobs:
                assert job is not None and job.task is not None
                job.stop()
            await asyncio.wait_for(asyncio.gather(*(j.task for j in jobs if j and j.task)), 5)
        return self.instance

    async def __aexit__(self, *_exc: object) -> None:
        await self.instance.shutdown()
