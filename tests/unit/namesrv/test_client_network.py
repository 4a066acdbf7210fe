"""routeByClientNetwork's pieces without sockets: which peers are on the name server's
own networks (from a /proc/net/route text), and the book of brokers' second addresses.

The table below is what a container on a compose bridge network reads: a default route
through the bridge's gateway 172.19.0.1 and the directly connected 172.19.0.0/16.
"""

from __future__ import annotations

import pytest

from aiorocketmq.common.route import BrokerData, ClusterInfo, QueueData, TopicRouteData
from aiorocketmq.namesrv.client_network import (
    BrokerAddressBook,
    LocalNetworks,
    read_route_table,
    split_host,
)

CONTAINER_ROUTES = """\
Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT
eth0\t00000000\t010013AC\t0003\t0\t0\t0\t00000000\t0\t0\t0
eth0\t000013AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0
"""


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_route_table_gives_subnets_and_gateways() -> None:
    subnets, gateways = read_route_table(CONTAINER_ROUTES + "garbage line\n")
    assert [str(n) for n in subnets] == ["172.19.0.0/16"]
    assert [str(g) for g in gateways] == ["172.19.0.1"]


@pytest.mark.parametrize(
    ("peer", "local"),
    [
        ("172.19.0.5", True),  # a client container on the bridge
        ("172.19.0.1", False),  # the host, through a published port (the gateway)
        ("192.168.1.20", False),  # a LAN client, DNAT keeps its address
        ("127.0.0.1", True),  # mqadmin inside the name server's own container
        ("::1", True),
        ("::ffff:172.19.0.5", True),
        ("2001:db8::5", False),
        ("not-an-ip", False),
    ],
)
def test_local_peers(peer: str, local: bool) -> None:
    assert LocalNetworks(lambda: CONTAINER_ROUTES).is_local(peer) is local


def test_without_a_route_table_only_loopback_is_local() -> None:
    networks = LocalNetworks(lambda: "")
    assert networks.is_local("127.0.0.1")
    assert not networks.is_local("172.19.0.5")


def test_the_table_is_read_again_after_the_refresh_period() -> None:
    reads: list[int] = []
    tables = iter(["", CONTAINER_ROUTES])
    clock = Clock()

    def read() -> str:
        reads.append(1)
        return next(tables)

    networks = LocalNetworks(read, clock)
    assert not networks.is_local("172.19.0.5")
    clock.now = 5.0
    assert not networks.is_local("172.19.0.5") and len(reads) == 1
    clock.now = 10.5  # a network attached since (docker network connect) counts now
    assert networks.is_local("172.19.0.5") and len(reads) == 2


def test_split_host() -> None:
    assert split_host("172.19.0.5:41234") == "172.19.0.5"
    assert split_host("[::1]:41234") == "::1"
    assert split_host("broker-a") == "broker-a"


def _book() -> BrokerAddressBook:
    return BrokerAddressBook(LocalNetworks(lambda: CONTAINER_ROUTES))


def test_a_broker_registering_from_the_bridge_gets_its_bridge_address() -> None:
    book = _book()
    book.learn("127.0.0.1:10911", "172.19.0.7:50000")
    book.learn("127.0.0.1:10921", "172.19.0.1:50001")  # came through the gateway: none
    assert book.generation == 1
    assert book.address("127.0.0.1:10911") == "172.19.0.7:10911"
    assert book.address("127.0.0.1:10921") == "127.0.0.1:10921"
    assert book.for_peer("172.19.0.9:1234") and not book.for_peer("172.19.0.1:1234")
    route = TopicRouteData(
        [QueueData("broker-a", 4, 4, 6)],
        [BrokerData("c", "broker-a", {0: "127.0.0.1:10911", 1: "127.0.0.1:10915"})],
    )
    local = book.route(route)
    assert local.broker_datas[0].broker_addrs == {0: "172.19.0.7:10911", 1: "127.0.0.1:10915"}
    assert route.broker_datas[0].broker_addrs[0] == "127.0.0.1:10911"  # a copy
    info = book.cluster(ClusterInfo({"broker-a": route.broker_datas[0]}, {"c": {"broker-a"}}))
    assert info.broker_addr_table["broker-a"].broker_addrs[0] == "172.19.0.7:10911"


def test_relearning_changes_and_forgets() -> None:
    book = _book()
    book.learn("127.0.0.1:10911", "172.19.0.7:50000")
    book.learn("127.0.0.1:10911", "172.19.0.7:50002")  # same address: no change
    assert book.generation == 1
    book.learn("127.0.0.1:10911", "172.19.0.8:50003")  # restarted with a new IP
    assert (book.generation, book.address("127.0.0.1:10911")) == (2, "172.19.0.8:10911")
    book.learn("127.0.0.1:10911", "10.0.0.3:50004")  # now registers from elsewhere
    assert (book.generation, book.address("127.0.0.1:10911")) == (3, "127.0.0.1:10911")
    assert not book.for_peer("172.19.0.9:1")  # nothing to translate
