"""Real ``mqnamesrv`` processes on 127.0.0.1: side by side, killed, evicting, restarted.

Each name server is its own process (``python -m aiorocketmq.cli.namesrv --listenPort 0``)
started by the ``start_process`` fixture, which waits for its ready line and, at
teardown, asserts it exits 0 on SIGTERM. A ``BrokerDouble`` registers through its
own connection, so closing that connection is a broker going away.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from aiorocketmq.common.route import TopicRouteData
from aiorocketmq.remoting.client import RemotingClient
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.config import RemotingClientConfig
from tests.support.broker_double import BrokerDouble
from tests.support.procs import ManagedProcess
from tests.support.wait import wait_until

pytestmark = pytest.mark.timeout(60)

READY = r"mqnamesrv ready address=(?P<addr>\S+) pid=(?P<pid>\d+)"

StartProcess = Callable[..., ManagedProcess]


async def start_namesrv(
    start_process: StartProcess, tmp_path: Path, name: str, **settings: object
) -> tuple[ManagedProcess, str]:
    """Start one mqnamesrv with its own kvConfig.json; returns it and its address."""
    conf = tmp_path / f"{name}.properties"
    lines = [f"kvConfigPath={tmp_path / name / 'kvConfig.json'}"]
    lines += [f"{key}={value}" for key, value in settings.items()]
    conf.write_text("\n".join(lines) + "\n")
    args = [
        "-m",
        "aiorocketmq.cli.namesrv",
        "--listenPort",
        "0",
        "--bindAddress",
        "127.0.0.1",
        "-c",
        str(conf),
    ]
    proc = start_process(args, name=name, ready=READY, wait=False)
    groups = await proc.wait_ready_async()
    assert int(groups["pid"]) == proc.pid
    return proc, groups["addr"]


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    c = RemotingClient(RemotingClientConfig(serialize_type="JSON", connect_timeout_millis=1000))
    yield c
    await c.close()


@pytest.fixture
async def broker() -> AsyncIterator[BrokerDouble]:
    double = BrokerDouble(topics={"TopicTest": 4, "%RETRY%CID": 1})
    yield double
    await double.close()


async def route_of(client: RemotingClient, addr: str, topic: str = "TopicTest") -> object:
    """The decoded route, or the response code when there is none."""
    request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    reply = await client.invoke(addr, request, 3_000)
    if reply.code != ResponseCode.SUCCESS:
        return reply.code
    json.loads(bytes(reply.body))  # our client is 4.9.8: strict JSON
    return TopicRouteData.decode(reply.body)


async def test_two_name_servers_serve_routes_and_one_survives_the_others_kill(
    start_process: StartProcess, tmp_path: Path, client: RemotingClient, broker: BrokerDouble
) -> None:
    a, addr_a = await start_namesrv(start_process, tmp_path, "namesrv-a")
    b, addr_b = await start_namesrv(start_process, tmp_path, "namesrv-b")
    assert addr_a != addr_b
    for addr in (addr_a, addr_b):
        assert await route_of(client, addr) == ResponseCode.TOPIC_NOT_EXIST
        await broker.register(addr)
    route_a, route_b = await route_of(client, addr_a), await route_of(client, addr_b)
    assert isinstance(route_a, TopicRouteData)
    assert route_a == route_b
    assert route_a.broker_datas[0].broker_addrs == {0: broker.broker_addr}
    assert a.kill() == -9  # SIGKILL: no goodbye
    route = await route_of(client, addr_b)
    assert isinstance(route, TopicRouteData) and route == route_b
    retry = await route_of(client, addr_b, "%RETRY%CID")
    assert isinstance(retry, TopicRouteData) and retry.queue_datas[0].write_queue_nums == 1
    assert await b.stop_async() == 0  # SIGTERM: a clean exit


async def test_broker_connection_close_evicts_at_once(
    start_process: StartProcess, tmp_path: Path, client: RemotingClient, broker: BrokerDouble
) -> None:
    # The default 120 s expiry: only the closed connection can explain a fast eviction.
    _, addr = await start_namesrv(start_process, tmp_path, "namesrv")
    await broker.register(addr)
    assert isinstance(await route_of(client, addr), TopicRouteData)
    broker.drop_connection(addr)

    async def evicted() -> bool:
        return await route_of(client, addr) == ResponseCode.TOPIC_NOT_EXIST

    await wait_until(evicted, timeout=5, what="the route to disappear after the close")


async def test_silent_broker_expires_with_a_short_configured_expiry(
    start_process: StartProcess, tmp_path: Path, client: RemotingClient, broker: BrokerDouble
) -> None:
    _, addr = await start_namesrv(
        start_process,
        tmp_path,
        "namesrv-fast-expiry",
        brokerChannelExpiredMillis=400,
        brokerScanIntervalMillis=50,
        brokerScanInitialDelayMillis=0,
    )
    await broker.register(addr)  # then silence, with the connection left open
    assert isinstance(await route_of(client, addr), TopicRouteData)

    async def expired() -> bool:
        return await route_of(client, addr) == ResponseCode.TOPIC_NOT_EXIST

    await wait_until(expired, timeout=10, what="the silent broker to expire")
    # The name server also closed the expired broker's connection.
    await wait_until(lambda: broker.client.addresses == [], timeout=5, what="connection closed")


async def test_kv_config_survives_a_restart(
    start_process: StartProcess, tmp_path: Path, client: RemotingClient
) -> None:
    proc, addr = await start_namesrv(start_process, tmp_path, "namesrv-kv")
    put = RemotingCommand.request(
        RequestCode.PUT_KV_CONFIG,
        {"namespace": "ORDER_TOPIC_CONFIG", "key": "TopicTest", "value": "broker-a:4"},
    )
    assert (await client.invoke(addr, put, 3_000)).code == ResponseCode.SUCCESS
    assert await proc.stop_async() == 0
    kv_file = tmp_path / "namesrv-kv" / "kvConfig.json"
    assert json.loads(kv_file.read_text()) == {
        "configTable": {"ORDER_TOPIC_CONFIG": {"TopicTest": "broker-a:4"}}
    }
    _, addr2 = await start_namesrv(start_process, tmp_path, "namesrv-kv")
    get = RemotingCommand.request(
        RequestCode.GET_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "TopicTest"}
    )
    reply = await client.invoke(addr2, get, 3_000)
    assert (reply.code, reply.ext_fields.get("value")) == (ResponseCode.SUCCESS, "broker-a:4")


def test_a_taken_port_fails_with_exit_1(start_process: StartProcess, tmp_path: Path) -> None:
    first = start_process(
        ["-m", "aiorocketmq.cli.namesrv", "--listenPort", "0", "--bindAddress", "127.0.0.1"],
        name="namesrv-first",
        ready=READY,
        env={"HOME": str(tmp_path)},
    )
    port = first.groups["addr"].rsplit(":", 1)[1]
    second = start_process(
        ["-m", "aiorocketmq.cli.namesrv", "--listenPort", port, "--bindAddress", "127.0.0.1"],
        name="namesrv-second",
        env={"HOME": str(tmp_path)},
    )
    second.popen.wait(30)
    assert second.stop() == 1, second.tail()
    assert "failed to start" in second.stderr_path.read_text()
