"""RouteInfoManager driven by a manual clock: RocketMQ 4.9.8's route rules, one by one.

No sockets and no loop: connections are plain tokens compared by identity, and
time moves only when a test advances the clock.
"""

from __future__ import annotations

import pytest

from aiorocketmq.common.clock import ManualClock
from aiorocketmq.common.route import (
    BrokerData,
    DataVersion,
    QueueData,
    TopicConfig,
    TopicConfigSerializeWrapper,
)
from aiorocketmq.namesrv.route_info import RegisterBrokerResult, RouteInfoManager

pytestmark = pytest.mark.timeout(30)

EXPIRY_MS = 120_000
MASTER_A = "10.0.0.1:10911"
SLAVE_A = "10.0.0.2:10911"
MASTER_B = "10.0.0.3:10911"
V1 = DataVersion(1, 1)


class Conn:
    """A stand-in for a connection: only its identity matters."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"Conn({self.name})"


def wrapper(version: DataVersion, **topics: int) -> TopicConfigSerializeWrapper:
    return TopicConfigSerializeWrapper(
        {name: TopicConfig(name, n, n) for name, n in topics.items()}, version
    )


class World:
    """A RouteInfoManager, its clock, and a helper that registers like a broker."""

    def __init__(self) -> None:
        self.clock = ManualClock()
        self.rim = RouteInfoManager(self.clock, EXPIRY_MS)

    def register(
        self,
        addr: str,
        name: str = "broker-a",
        broker_id: int = 0,
        conn: object | None = None,
        version: DataVersion = V1,
        cluster: str = "DefaultCluster",
        filter_servers: list[str] | None = None,
        **topics: int,
    ) -> RegisterBrokerResult:
        host, _, port = addr.rpartition(":")
        return self.rim.register_broker(
            cluster_name=cluster,
            broker_addr=addr,
            broker_name=name,
            broker_id=broker_id,
            ha_server_addr=f"{host}:{int(port) + 1}",
            topic_config_wrapper=wrapper(version, **(topics or {"TopicTest": 4})),
            filter_server_list=filter_servers,
            channel=conn if conn is not None else Conn(addr),
        )

    def addrs(self, topic: str = "TopicTest") -> dict[str, dict[int, str]]:
        route = self.rim.pickup_topic_route_data(topic)
        assert route is not None, f"no route for {topic}"
        return {bd.broker_name: bd.broker_addrs for bd in route.broker_datas}


@pytest.fixture
def world() -> World:
    return World()


def test_first_registration_creates_every_table(world: World) -> None:
    result = world.register(MASTER_A, TopicTest=4, Other=2)
    assert result == RegisterBrokerResult()
    rim = world.rim
    assert rim.cluster_addr_table == {"DefaultCluster": {"broker-a"}}
    assert rim.broker_addr_table == {
        "broker-a": BrokerData("DefaultCluster", "broker-a", {0: MASTER_A})
    }
    assert rim.topic_queue_table["TopicTest"] == {"broker-a": QueueData("broker-a", 4, 4, 6)}
    assert set(rim.broker_live_table) == {MASTER_A}
    route = rim.pickup_topic_route_data("Other")
    assert route is not None
    assert route.queue_datas == [QueueData("broker-a", 2, 2, 6)]
    assert route.broker_datas == [BrokerData("DefaultCluster", "broker-a", {0: MASTER_A})]


def test_unknown_topic_has_no_route(world: World) -> None:
    assert world.rim.pickup_topic_route_data("TopicTest") is None
    world.register(MASTER_A)
    assert world.rim.pickup_topic_route_data("Nope") is None


def test_refresh_keeps_a_broker_alive_past_the_expiry(world: World) -> None:
    conn = Conn("a")
    world.register(MASTER_A, conn=conn)
    for _ in range(10):  # 30 s registrations for 5 minutes
        world.clock.advance(30_000)
        world.register(MASTER_A, conn=conn)
        assert world.rim.scan_not_active_broker() == []
    assert world.addrs() == {"broker-a": {0: MASTER_A}}


def test_silent_broker_expires_after_120_s_and_its_connection_is_returned(world: World) -> None:
    conn = Conn("a")
    world.register(MASTER_A, conn=conn)
    world.clock.advance(EXPIRY_MS)
    assert world.rim.scan_not_active_broker() == []  # not yet: strictly older than expiry
    world.clock.advance(1)
    assert world.rim.scan_not_active_broker() == [conn]
    assert world.rim.pickup_topic_route_data("TopicTest") is None
    assert world.rim.broker_addr_table == {}
    assert world.rim.cluster_addr_table == {}
    assert world.rim.broker_live_table == {}
    # The caller closes the connection; that close finds nothing left to remove.
    world.rim.on_channel_destroy("127.0.0.1:50000", conn)
    assert world.rim.topic_queue_table == {}


def test_connection_close_evicts_at_once(world: World) -> None:
    conn_a, conn_b = Conn("a"), Conn("b")
    world.register(MASTER_A, conn=conn_a)
    world.register(MASTER_B, name="broker-b", conn=conn_b)
    world.rim.on_channel_destroy("127.0.0.1:50001", conn_a)
    assert world.addrs() == {"broker-b": {0: MASTER_B}}
    assert set(world.rim.broker_live_table) == {MASTER_B}
    assert world.rim.cluster_addr_table == {"DefaultCluster": {"broker-b"}}


def test_close_of_a_connection_no_broker_registered_on_changes_nothing(world: World) -> None:
    world.register(MASTER_A, conn=Conn("a"))
    before = world.rim.generation
    world.rim.on_channel_destroy("127.0.0.1:50002", Conn("a client"))
    assert world.addrs() == {"broker-a": {0: MASTER_A}}
    assert world.rim.generation == before


def test_old_connection_closing_after_a_reconnect_does_not_evict(world: World) -> None:
    old, new = Conn("old"), Conn("new")
    world.register(MASTER_A, conn=old)
    world.register(MASTER_A, conn=new)  # the broker reconnected and registered again
    world.rim.on_channel_destroy("127.0.0.1:50003", old)
    assert world.addrs() == {"broker-a": {0: MASTER_A}}


def test_unregister_removes_broker_name_and_its_topics(world: World) -> None:
    world.register(MASTER_A)
    world.register(MASTER_B, name="broker-b", Only=1, TopicTest=2)
    world.rim.unregister_broker("DefaultCluster", MASTER_B, "broker-b", 0)
    assert world.addrs() == {"broker-a": {0: MASTER_A}}
    assert world.rim.pickup_topic_route_data("Only") is None
    assert world.rim.cluster_addr_table == {"DefaultCluster": {"broker-a"}}
    world.rim.unregister_broker("DefaultCluster", MASTER_A, "broker-a", 0)
    assert world.rim.topic_queue_table == {}
    assert world.rim.cluster_addr_table == {}


def test_slave_gets_master_and_ha_address_only_when_master_is_live(world: World) -> None:
    assert world.register(SLAVE_A, broker_id=1) == RegisterBrokerResult()
    world.register(MASTER_A)
    result = world.register(SLAVE_A, broker_id=1)
    assert result == RegisterBrokerResult(ha_server_addr="10.0.0.1:10912", master_addr=MASTER_A)
    assert world.register(MASTER_A) == RegisterBrokerResult()  # masters get nothing


def test_slaves_never_add_queue_data(world: World) -> None:
    world.register(SLAVE_A, broker_id=1, SlaveOnly=8)
    assert "SlaveOnly" not in world.rim.topic_queue_table
    assert world.rim.broker_addr_table["broker-a"].broker_addrs == {1: SLAVE_A}


def test_master_gone_slave_stays_and_keeps_serving_reads(world: World) -> None:
    master, slave = Conn("m"), Conn("s")
    world.register(MASTER_A, conn=master)
    world.register(SLAVE_A, broker_id=1, conn=slave)
    assert world.addrs() == {"broker-a": {0: MASTER_A, 1: SLAVE_A}}
    world.rim.on_channel_destroy("127.0.0.1:50004", master)
    assert world.addrs() == {"broker-a": {1: SLAVE_A}}  # queues stay: the slave serves
    assert world.rim.cluster_addr_table == {"DefaultCluster": {"broker-a"}}
    # The slave, still registered, no longer learns a master.
    assert world.register(SLAVE_A, broker_id=1, conn=slave) == RegisterBrokerResult()


def test_master_expires_slave_stays(world: World) -> None:
    world.register(MASTER_A)
    world.clock.advance(60_000)
    world.register(SLAVE_A, broker_id=1)
    world.clock.advance(60_001)
    assert len(world.rim.scan_not_active_broker()) == 1
    assert world.addrs() == {"broker-a": {1: SLAVE_A}}


def test_slave_to_master_switch_keeps_one_id_per_address(world: World) -> None:
    world.register(MASTER_A)
    world.register(SLAVE_A, broker_id=1)
    world.rim.unregister_broker("DefaultCluster", MASTER_A, "broker-a", 0)
    world.register(SLAVE_A, broker_id=0, version=DataVersion(2, 2))  # promoted
    assert world.addrs() == {"broker-a": {0: SLAVE_A}}


def test_queue_data_follows_the_data_version(world: World) -> None:
    world.register(MASTER_A, version=DataVersion(1, 1), TopicTest=4)
    # Same version, different table: ignored (the name server trusts the version).
    world.register(MASTER_A, version=DataVersion(1, 1), TopicTest=8, New=1)
    assert world.rim.topic_queue_table["TopicTest"]["broker-a"].write_queue_nums == 4
    assert "New" not in world.rim.topic_queue_table
    # New version: re-read.
    world.register(MASTER_A, version=DataVersion(2, 2), TopicTest=8, New=1)
    assert world.rim.topic_queue_table["TopicTest"]["broker-a"].write_queue_nums == 8
    assert world.rim.topic_queue_table["New"] == {"broker-a": QueueData("broker-a", 1, 1, 6)}


def test_a_master_coming_back_on_a_new_address_is_a_first_registration(world: World) -> None:
    world.register(MASTER_A, version=DataVersion(1, 1), TopicTest=4)
    world.rim.on_channel_destroy(MASTER_A, None)  # no channel: the address is used
    assert world.rim.pickup_topic_route_data("TopicTest") is None
    world.register(MASTER_A, version=DataVersion(1, 1), TopicTest=4)
    assert world.addrs() == {"broker-a": {0: MASTER_A}}


def test_generation_moves_only_when_a_reader_could_see_it(world: World) -> None:
    world.register(MASTER_A)
    g = world.rim.generation
    world.clock.advance(30_000)
    world.register(MASTER_A)  # a heartbeat-like refresh
    assert world.rim.generation == g
    world.register(MASTER_A, version=DataVersion(2, 2), TopicTest=5)
    assert world.rim.generation > g


def test_query_data_version_helpers(world: World) -> None:
    world.register(MASTER_A, version=DataVersion(3, 3))
    assert world.rim.query_broker_topic_config(MASTER_A) == DataVersion(3, 3)
    assert not world.rim.is_broker_topic_config_changed(MASTER_A, DataVersion(3, 3))
    assert world.rim.is_broker_topic_config_changed(MASTER_A, DataVersion(3, 4))
    assert world.rim.is_broker_topic_config_changed("unknown:1", DataVersion(3, 3))
    world.clock.advance(EXPIRY_MS)
    world.rim.update_broker_info_update_timestamp(MASTER_A)
    world.clock.advance(1)
    assert world.rim.scan_not_active_broker() == []


def test_delete_topic_everywhere_and_per_cluster(world: World) -> None:
    world.register(MASTER_A, cluster="c1", TopicTest=4)
    world.register(MASTER_B, name="broker-b", cluster="c2", TopicTest=4)
    world.rim.delete_topic("TopicTest", "c1")
    assert world.addrs() == {"broker-b": {0: MASTER_B}}
    world.rim.delete_topic("TopicTest", "unknown-cluster")
    assert world.addrs() == {"broker-b": {0: MASTER_B}}
    world.rim.delete_topic("TopicTest", "c2")
    assert world.rim.pickup_topic_route_data("TopicTest") is None
    world.register(MASTER_A, cluster="c1", version=DataVersion(5, 5), TopicTest=4)
    world.rim.delete_topic("TopicTest")
    assert "TopicTest" not in world.rim.topic_queue_table


def test_wipe_and_add_write_perm(world: World) -> None:
    world.register(MASTER_A, TopicTest=4, Other=2)
    world.register(MASTER_B, name="broker-b", TopicTest=4)
    assert world.rim.wipe_write_perm_of_broker("broker-a") == 2
    route = world.rim.pickup_topic_route_data("TopicTest")
    assert route is not None
    assert {q.broker_name: q.perm for q in route.queue_datas} == {"broker-a": 4, "broker-b": 6}
    assert world.rim.wipe_write_perm_of_broker("nobody") == 0
    assert world.rim.add_write_perm_of_broker("broker-a") == 2
    assert world.rim.topic_queue_table["Other"]["broker-a"].perm == 6


def test_filter_servers_reach_routes_and_clear(world: World) -> None:
    world.register(MASTER_A, filter_servers=["10.0.0.1:30000"])
    route = world.rim.pickup_topic_route_data("TopicTest")
    assert route is not None
    assert route.filter_server_table == {MASTER_A: ["10.0.0.1:30000"]}
    world.register(MASTER_A, filter_servers=None)  # None leaves them alone
    assert world.rim.filter_server_table == {MASTER_A: ["10.0.0.1:30000"]}
    world.register(MASTER_A, filter_servers=[])  # empty clears
    assert world.rim.filter_server_table == {}


def test_cluster_info_and_topic_lists(world: World) -> None:
    world.register(MASTER_A, cluster="c1", TopicTest=4, A=1)
    world.register(SLAVE_A, broker_id=1, cluster="c1")
    world.register(MASTER_B, name="broker-b", cluster="c2", B=1)
    info = world.rim.get_all_cluster_info()
    assert info.cluster_addr_table == {"c1": {"broker-a"}, "c2": {"broker-b"}}
    assert info.broker_addr_table["broker-a"].broker_addrs == {0: MASTER_A, 1: SLAVE_A}
    info.broker_addr_table["broker-a"].broker_addrs.clear()  # a snapshot, not the table
    assert world.rim.broker_addr_table["broker-a"].broker_addrs
    assert world.rim.get_all_topic_list().topic_list == ["A", "B", "TopicTest"]
    assert world.rim.get_topics_by_cluster("c1").topic_list == ["A", "TopicTest"]
    assert world.rim.get_topics_by_cluster("nope").topic_list == []
    system = world.rim.get_system_topic_list()
    assert system.topic_list == ["broker-a", "broker-b", "c1", "c2"]
    assert system.broker_addr in (MASTER_A, MASTER_B)


def test_unit_topic_lists_use_topic_sys_flag(world: World) -> None:
    table = {
        "Unit": TopicConfig("Unit", 1, 1, topic_sys_flag=1),
        "UnitSub": TopicConfig("UnitSub", 1, 1, topic_sys_flag=2),
        "Both": TopicConfig("Both", 1, 1, topic_sys_flag=3),
        "Plain": TopicConfig("Plain", 1, 1),
    }
    world.rim.register_broker(
        cluster_name="c",
        broker_addr=MASTER_A,
        broker_name="broker-a",
        broker_id=0,
        ha_server_addr="h:1",
        topic_config_wrapper=TopicConfigSerializeWrapper(table, DataVersion(1, 1)),
        filter_server_list=None,
        channel=Conn("a"),
    )
    assert world.rim.get_unit_topics().topic_list == ["Both", "Unit"]
    assert world.rim.get_has_unit_sub_topic_list().topic_list == ["Both", "UnitSub"]
    assert world.rim.get_has_unit_sub_un_unit_topic_list().topic_list == ["UnitSub"]


def test_register_topic_needs_known_brokers_and_a_new_topic(world: World) -> None:
    world.register(MASTER_A)
    assert not world.rim.register_topic("X", [QueueData("broker-z", 1, 1, 6)])
    assert not world.rim.register_topic("X", [])
    assert world.rim.register_topic("X", [QueueData("broker-a", 2, 2, 6)])
    assert world.addrs("X") == {"broker-a": {0: MASTER_A}}
    assert not world.rim.register_topic("X", [QueueData("broker-a", 9, 9, 6)])
    assert world.rim.topic_queue_table["X"]["broker-a"].write_queue_nums == 2
