"""routeByClientNetwork over real sockets on 127.0.0.1: a NamesrvController, brokers as
``BrokerDouble``s advertising an address that is not where they registered from.

Loopback counts as the name server's own network, so here every broker registers from
a local peer and every client asks from one: with the setting on, routes, cluster
info and a slave's master address name the address the broker registered from (on the
broker's own port); with it off (RocketMQ's behaviour), the advertised one. Which peers
are local is covered without sockets in tests/unit/namesrv/test_client_network.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from aiorocketmq.common.clock import ManualClock
from aiorocketmq.common.route import ClusterInfo, TopicRouteData
from aiorocketmq.namesrv.config import NamesrvConfig
from aiorocketmq.namesrv.server import NamesrvController
from aiorocketmq.remoting.client import RemotingClient
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from tests.support.broker_double import BrokerDouble

pytestmark = pytest.mark.timeout(30)

ADVERTISED_MASTER = "203.0.113.7:10911"
ADVERTISED_SLAVE = "203.0.113.7:10915"


@pytest.fixture
async def namesrv(tmp_path: Path) -> AsyncIterator[Callable[[bool], NamesrvController]]:
    started: list[NamesrvController] = []

    def make(per_network: bool) -> NamesrvController:
        config = NamesrvConfig(
            listen_host="127.0.0.1",
            listen_port=0,
            kv_config_path=str(tmp_path / f"kv-{len(started)}.json"),
            route_by_client_network=per_network,
        )
        controller = NamesrvController(config, clock=ManualClock())
        started.append(controller)
        return controller

    yield make
    for controller in started:
        await controller.shutdown()


async def _ask(addr: str, code: int, **fields: str) -> RemotingCommand:
    client = RemotingClient()
    try:
        reply = await client.invoke(addr, RemotingCommand.request(code, fields), 5_000)
    finally:
        await client.close()
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    return reply


async def _register_pair(addr: str) -> tuple[BrokerDouble, BrokerDouble, str | None]:
    master = BrokerDouble(broker_addr=ADVERTISED_MASTER)
    slave = BrokerDouble(broker_id=1, broker_addr=ADVERTISED_SLAVE)
    await master.register(addr)
    reply = await slave.register(addr)
    return master, slave, reply.master_addr


@pytest.mark.parametrize("per_network", [True, False], ids=["on", "off"])
async def test_local_clients_get_the_address_brokers_registered_from(
    namesrv: Callable[[bool], NamesrvController], per_network: bool
) -> None:
    controller = namesrv(per_network)
    await controller.start()
    master, slave, master_seen_by_slave = await _register_pair(controller.address)
    try:
        expected = (
            {0: "127.0.0.1:10911", 1: "127.0.0.1:10915"}
            if per_network
            else {0: ADVERTISED_MASTER, 1: ADVERTISED_SLAVE}
        )
        assert master_seen_by_slave == expected[0]  # the slave syncs from this address
        route = TopicRouteData.decode(
            (
                await _ask(
                    controller.address, RequestCode.GET_ROUTEINFO_BY_TOPIC, topic="TopicTest"
                )
            ).body
        )
        assert route.broker_datas[0].broker_addrs == expected
        info = ClusterInfo.decode(
            (await _ask(controller.address, RequestCode.GET_BROKER_CLUSTER_INFO)).body
        )
        assert info.broker_addr_table["broker-a"].broker_addrs == expected
    finally:
        await master.close()
        await slave.close()
