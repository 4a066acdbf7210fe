"""NamesrvAPI against real in-process name servers on 127.0.0.1, failover included.

Brokers are ``BrokerDouble``s registering with every name server. A "dead" name
server is a socket bound but not listening (connection refused), a "silent" one
accepts and never answers (timeout).
"""

from __future__ import annotations

import asyncio
import random
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from aiorocketmq.client.errors import (
    MQConnectError,
    MQNamesrvError,
    NoNameServerError,
    NoRouteError,
)
from aiorocketmq.client.namesrv_api import NamesrvAPI, parse_namesrv_addr
from aiorocketmq.namesrv.config import NamesrvConfig
from aiorocketmq.namesrv.server import NamesrvController
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.config import RemotingServerConfig
from aiorocketmq.remoting.connection import ProcessorTable, RemotingConnection
from aiorocketmq.remoting.server import RemotingServer
from tests.support.broker_double import BrokerDouble

pytestmark = pytest.mark.timeout(30)


class FirstChoice(random.Random):
    """Chooses index 0 first, so a test knows which name server is tried first."""

    def randrange(self, *args: object, **kwargs: object) -> int:  # type: ignore[override]
        return 0


async def _start_namesrv(path: Path) -> NamesrvController:
    config = NamesrvConfig(
        listen_host="127.0.0.1",
        listen_port=0,
        kv_config_path=str(path / "kvConfig.json"),
        broker_scan_interval_millis=3_600_000,
        broker_scan_initial_delay_millis=3_600_000,
    )
    controller = NamesrvController(config)
    await controller.start()
    return controller


@pytest.fixture
async def namesrvs(tmp_path: Path) -> AsyncIterator[list[NamesrvController]]:
    started = []
    for i in range(2):
        (tmp_path / str(i)).mkdir()
        started.append(await _start_namesrv(tmp_path / str(i)))
    yield started
    for controller in started:
        await controller.shutdown()


@pytest.fixture
async def broker(namesrvs: list[NamesrvController]) -> AsyncIterator[BrokerDouble]:
    double = BrokerDouble(topics={"TopicTest": 4})
    for controller in namesrvs:
        await double.register(controller.address)
    yield double
    await double.close()


@pytest.fixture
def dead_address() -> Iterator[str]:
    """Bound, not listening: connecting is refused, and nobody else gets the port."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    yield f"127.0.0.1:{sock.getsockname()[1]}"
    sock.close()


@pytest.fixture
async def silent_address() -> AsyncIterator[str]:
    """Accepts connections, reads, never answers."""

    async def swallow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while await reader.read(65536):
            pass
        writer.close()

    server = await asyncio.start_server(swallow, "127.0.0.1", 0)
    yield f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
    server.close()
    await server.wait_closed()


def test_parse_namesrv_addr() -> None:
    assert parse_namesrv_addr(" a:1; b:2;;a:1 ") == ["a:1", "b:2"]
    assert parse_namesrv_addr(["x:1", "y:2"]) == ["x:1", "y:2"]
    with pytest.raises(NoNameServerError):
        parse_namesrv_addr(" ; ")


async def test_route_cluster_and_topic_lists(
    namesrvs: list[NamesrvController], broker: BrokerDouble
) -> None:
    async with NamesrvAPI(namesrvs[0].address) as api:
        route = await api.get_route("TopicTest")
        assert [(q.broker_name, q.read_queue_nums) for q in route.queue_datas] == [("broker-a", 4)]
        assert route.broker_datas[0].broker_addrs == {0: broker.broker_addr}
        cluster = await api.get_cluster_info()
        assert cluster.cluster_addr_table == {"DefaultCluster": {"broker-a"}}
        assert cluster.broker_addr_table["broker-a"].broker_addrs == {0: broker.broker_addr}
        assert "TopicTest" in (await api.get_all_topic_list()).topic_list
        assert "TopicTest" in (await api.get_topics_by_cluster("DefaultCluster")).topic_list
        with pytest.raises(NoRouteError) as missing:
            await api.get_route("NoSuchTopic")
        assert missing.value.topic == "NoSuchTopic"
        assert "No topic route info in name server for the topic: NoSuchTopic" in str(missing.value)


async def test_delete_topic_goes_to_every_namesrv(
    namesrvs: list[NamesrvController], broker: BrokerDouble
) -> None:
    addrs = ";".join(c.address for c in namesrvs)
    async with NamesrvAPI(addrs) as api:
        await api.delete_topic_in_namesrv("TopicTest")
        for controller in namesrvs:
            with pytest.raises(NoRouteError):
                await api.get_route("TopicTest", address=controller.address)


async def test_kv_config_put_get_list_delete_on_every_namesrv(
    namesrvs: list[NamesrvController],
) -> None:
    addrs = [c.address for c in namesrvs]
    async with NamesrvAPI(addrs) as api:
        assert await api.get_kv_config("NS", "k") is None
        assert await api.get_kv_list_by_namespace("NS") == {}
        await api.put_kv_config("NS", "k", "v1")
        await api.put_kv_config("NS", "k2", "v2")
        for address in addrs:
            assert await api.get_kv_config("NS", "k", address=address) == "v1"
            assert await api.get_kv_list_by_namespace("NS", address=address) == {
                "k": "v1",
                "k2": "v2",
            }
        await api.delete_kv_config("NS", "k")
        for address in addrs:
            assert await api.get_kv_config("NS", "k", address=address) is None


async def test_write_perm_wipe_and_add(
    namesrvs: list[NamesrvController], broker: BrokerDouble
) -> None:
    address = namesrvs[0].address
    async with NamesrvAPI(address) as api:
        assert await api.wipe_write_perm_of_broker("broker-a", address=address) >= 1
        route = await api.get_route("TopicTest")
        assert route.queue_datas[0].perm & 2 == 0
        assert await api.add_write_perm_of_broker("broker-a", address=address) >= 1
        assert (await api.get_route("TopicTest")).queue_datas[0].perm & 2 == 2


async def test_fails_over_from_a_refusing_namesrv_and_stays_on_the_good_one(
    namesrvs: list[NamesrvController], broker: BrokerDouble, dead_address: str
) -> None:
    good = namesrvs[0].address
    async with NamesrvAPI([dead_address, good], rng=FirstChoice()) as api:
        assert api.chosen == dead_address
        route = await api.get_route("TopicTest")
        assert route.broker_datas[0].broker_addrs == {0: broker.broker_addr}
        assert api.chosen == good
        await api.get_cluster_info()
        assert api.chosen == good


async def test_fails_over_from_a_silent_namesrv_after_the_timeout(
    namesrvs: list[NamesrvController], broker: BrokerDouble, silent_address: str
) -> None:
    good = namesrvs[1].address
    async with NamesrvAPI([silent_address, good], rng=FirstChoice(), timeout_ms=200) as api:
        route = await api.get_route("TopicTest")
        assert route.queue_datas[0].broker_name == "broker-a"
        assert api.chosen == good


async def test_an_error_reply_is_not_failed_over(
    namesrvs: list[NamesrvController], broker: BrokerDouble
) -> None:
    """TOPIC_NOT_EXIST from the first name server is the answer, even if the second knows."""
    first, second = (c.address for c in namesrvs)
    await broker.unregister(first)
    async with NamesrvAPI([first, second], rng=FirstChoice()) as api:
        with pytest.raises(NoRouteError):
            await api.get_route("TopicTest")
        assert api.chosen == first


@pytest.fixture
async def odd_server() -> AsyncIterator[str]:
    """A server answering GET_BROKER_CLUSTER_INFO with SYSTEM_BUSY, routes with garbage."""

    def busy(_conn: RemotingConnection, req: RemotingCommand) -> RemotingCommand:
        return req.response_to(ResponseCode.SYSTEM_BUSY, "too busy")

    def garbage(_conn: RemotingConnection, req: RemotingCommand) -> RemotingCommand:
        return req.response_to(ResponseCode.SUCCESS, body=b"{not json")

    table = ProcessorTable()
    table.register(RequestCode.GET_BROKER_CLUSTER_INFO, busy)
    table.register(RequestCode.GET_ROUTEINFO_BY_TOPIC, garbage)
    server = RemotingServer(table, RemotingServerConfig(listen_host="127.0.0.1", listen_port=0))
    await server.start()
    yield server.address
    await server.shutdown()


async def test_error_replies_and_bad_bodies_are_typed_errors(odd_server: str) -> None:
    async with NamesrvAPI(odd_server) as api:
        with pytest.raises(MQNamesrvError) as busy:
            await api.get_cluster_info()
        assert (busy.value.code, busy.value.remark) == (ResponseCode.SYSTEM_BUSY, "too busy")
        assert busy.value.address == odd_server
        with pytest.raises(MQNamesrvError) as bad:
            await api.get_route("T")
        assert bad.value.code == ResponseCode.SYSTEM_ERROR and not bad.value.retriable
        assert "malformed reply body" in str(bad.value)


async def test_all_namesrvs_down(dead_address: str) -> None:
    async with NamesrvAPI(dead_address) as api:
        with pytest.raises(NoNameServerError) as down:
            await api.get_route("TopicTest")
        assert dead_address in str(down.value)
        assert down.value.retriable
        with pytest.raises(MQConnectError):
            await api.get_cluster_info(address=dead_address)


async def test_update_addresses_keeps_the_chosen_one() -> None:
    api = NamesrvAPI("a:1;b:2;c:3", rng=FirstChoice())
    await api.close()
    api.update_addresses("c:3;a:1")
    assert api.chosen == "a:1"
    api.update_addresses("d:4")
    assert api.chosen == "d:4" and api.addresses == ["d:4"]
