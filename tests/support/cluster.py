"""Real name servers and brokers for integration and interop tests.

Owns: writing a broker properties file (small files, a free port, 127.0.0.1 as
``brokerIP1``), starting ``mqnamesrv`` and ``mqbroker`` as child processes through
the ``start_process`` fixture (stopped by PID at teardown, which fails unless they
exit 0 on SIGTERM), waiting until a broker's route is visible on a name server, and
an in-process ``BrokerController`` for tests that need to look inside a broker.

Must not: fake a broker or a name server: these are the real ones.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiorocketmq.broker.config import load_broker_settings
from aiorocketmq.broker.controller import BrokerController
from aiorocketmq.common.properties_file import format_properties, parse_properties
from aiorocketmq.common.route import KVTable, TopicRouteData
from aiorocketmq.common.topic_config import TopicConfigSerializeWrapper
from aiorocketmq.namesrv.config import NamesrvConfig
from aiorocketmq.namesrv.server import NamesrvController
from aiorocketmq.remoting.broker_admin_headers import CreateTopicRequestHeader
from aiorocketmq.remoting.client import RemotingClient
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from tests.support.procs import ManagedProcess
from tests.support.wait import wait_until

__all__ = [
    "BROKER_READY",
    "NAMESRV_READY",
    "BrokerProcess",
    "broker_properties",
    "broker_request",
    "commitlog_max_offset",
    "create_topic",
    "get_route",
    "has_topic",
    "in_process_broker",
    "in_process_namesrv",
    "runtime_info",
    "start_broker",
    "start_namesrv",
    "wait_replicated",
    "wait_route",
]

NAMESRV_READY = r"mqnamesrv ready address=(?P<addr>\S+) pid=(?P<pid>\d+)"
BROKER_READY = (
    r"mqbroker ready address=(?P<addr>\S+) name=(?P<name>\S+) id=(?P<id>\d+) pid=(?P<pid>\d+)"
    r"(?: grpc=(?P<grpc>\S+))?"
)

StartProcess = Callable[..., ManagedProcess]

#: Small files so tests stay light: 4 MiB CommitLog files, 6,000-entry queues, and
#: ~0.5 MiB index files (the default 420 MB ones are fallocated, so every broker a test
#: starts would take that much real disk).
SMALL_FILES: Mapping[str, Any] = {
    "mappedFileSizeCommitLog": 4 * 1024 * 1024,
    "mappedFileSizeConsumeQueue": 6_000 * 20,
    "maxHashSlotNum": 5_000,
    "maxIndexNum": 20_000,
}


@dataclass
class BrokerProcess:
    """A running ``mqbroker``."""

    proc: ManagedProcess
    addr: str
    name: str
    config: Path

    @property
    def grpc(self) -> str:
        """``host:port`` of its gRPC v2 endpoint (on by default, on a free port)."""
        endpoint = self.proc.groups.get("grpc")
        if not endpoint:
            raise RuntimeError(f"{self.name} serves no gRPC endpoint")
        return endpoint


def broker_properties(
    directory: Path, name: str = "broker-a", namesrv: str | None = None, **settings: Any
) -> Path:
    """Write ``<directory>/<name>.properties``; keys are RocketMQ's names.

    Defaults: cluster DefaultCluster, brokerId 0, ASYNC_MASTER/ASYNC_FLUSH,
    listenPort 0, brokerIP1 127.0.0.1, store under ``<directory>/<name>-store``,
    small files, a free gRPC port. ``settings`` win.
    """
    directory.mkdir(parents=True, exist_ok=True)
    values: dict[str, Any] = {
        "brokerClusterName": "DefaultCluster",
        "brokerName": name,
        "brokerId": 0,
        "brokerRole": "ASYNC_MASTER",
        "flushDiskType": "ASYNC_FLUSH",
        "listenPort": 0,
        "brokerIP1": "127.0.0.1",
        "storePathRootDir": str(directory / f"{name}-store"),
        **SMALL_FILES,
    }
    if namesrv is not None:
        values["namesrvAddr"] = namesrv
    values.update(settings)
    if values["listenPort"] != 0 and "grpcListenPort" not in settings:
        # listenPort 0 gives a free gRPC port by itself; a fixed one would take 8081.
        values["grpcListenPort"] = -1
    path = directory / f"{name}.properties"
    text = format_properties(
        [(k, str(v).lower() if isinstance(v, bool) else v) for k, v in values.items()]
    )
    path.write_text(text, "utf-8")
    return path


async def start_namesrv(start_process: StartProcess, tmp_path: Path) -> tuple[ManagedProcess, str]:
    """A ``mqnamesrv`` on a free port; the process and its address."""
    proc = start_process(
        ["-m", "aiorocketmq.cli.namesrv", "--listenPort", "0", "--bindAddress", "127.0.0.1"],
        name="namesrv",
        ready=NAMESRV_READY,
        wait=False,
        env={"HOME": str(tmp_path)},
    )
    return proc, (await proc.wait_ready_async())["addr"]


async def start_broker(
    start_process: StartProcess,
    tmp_path: Path,
    namesrv: str,
    name: str = "broker-a",
    **settings: Any,
) -> BrokerProcess:
    """A ``mqbroker`` registered with ``namesrv`` (``;``-separated; waits until its
    route is visible on each)."""
    config = broker_properties(tmp_path / "brokers", name, namesrv, **settings)
    proc = start_process(
        ["-m", "aiorocketmq.cli.broker", "-c", str(config)],
        name=f"broker-{name}",
        ready=BROKER_READY,
        wait=False,
        env={"HOME": str(tmp_path)},
    )
    addr = (await proc.wait_ready_async())["addr"]
    for ns in namesrv.split(";"):
        await wait_route(ns, "TBW102", lambda route: addr in _addrs(route))
    return BrokerProcess(proc, addr, name, config)


def _addrs(route: TopicRouteData) -> set[str]:
    return {a for bd in route.broker_datas for a in bd.broker_addrs.values()}


async def get_route(namesrv: str, topic: str) -> TopicRouteData | None:
    """GET_ROUTEINFO_BY_TOPIC; None when the topic has no route."""
    client = RemotingClient()
    try:
        reply = await client.invoke(
            namesrv,
            RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}),
            3000,
        )
    finally:
        await client.close()
    if reply.code != ResponseCode.SUCCESS:
        return None
    return TopicRouteData.decode(reply.body)


async def wait_route(
    namesrv: str,
    topic: str,
    predicate: Callable[[TopicRouteData], bool] = lambda _route: True,
    timeout: float = 15.0,
) -> TopicRouteData:
    """Wait until ``namesrv`` has a route for ``topic`` satisfying ``predicate``."""
    found: list[TopicRouteData] = []

    async def check() -> bool:
        route = await get_route(namesrv, topic)
        if route is not None and predicate(route):
            found.append(route)
            return True
        return False

    await wait_until(check, timeout=timeout, what=f"route of {topic} on {namesrv}")
    return found[-1]


@contextlib.asynccontextmanager
async def in_process_broker(
    directory: Path, name: str = "broker-a", namesrv: str | None = None, **settings: Any
) -> AsyncIterator[BrokerController]:
    """A started ``BrokerController`` in this process, with the same defaults."""
    path = broker_properties(directory, name, namesrv, **settings)
    broker = BrokerController(load_broker_settings(parse_properties(path.read_text("utf-8"))))
    await broker.start()
    try:
        yield broker
    finally:
        await broker.shutdown()


@contextlib.asynccontextmanager
async def in_process_namesrv(directory: Path) -> AsyncIterator[NamesrvController]:
    """A started name server in this process on a free port (no expiry scans)."""
    config = NamesrvConfig(
        listen_host="127.0.0.1",
        listen_port=0,
        kv_config_path=str(directory / "namesrv-kv.json"),
        broker_scan_interval_millis=3_600_000,
        broker_scan_initial_delay_millis=3_600_000,
    )
    controller = NamesrvController(config)
    await controller.start()
    try:
        yield controller
    finally:
        await controller.shutdown()


# -- broker requests tests share -------------------------------------------------


async def runtime_info(addr: str) -> dict[str, str]:
    """GET_BROKER_RUNTIME_INFO's table."""
    client = RemotingClient()
    try:
        reply = await client.invoke(
            addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO), 5000
        )
    finally:
        await client.close()
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    return KVTable.decode(reply.body).table


async def commitlog_max_offset(addr: str) -> int:
    """The broker's CommitLog max offset (from its runtime info)."""
    return int((await runtime_info(addr))["commitLogMaxOffset"])


async def wait_replicated(master: str, slave: str, within_s: float = 60) -> int:
    """Wait until the slave's CommitLog ends where the master's ends now; that offset."""
    target = await commitlog_max_offset(master)

    async def caught_up() -> bool:
        return await commitlog_max_offset(slave) == target

    await wait_until(caught_up, timeout=within_s, what=f"slave at master offset {target}")
    return target


async def broker_request(addr: str, request: RemotingCommand) -> RemotingCommand:
    """One request on a fresh connection; asserts SUCCESS."""
    client = RemotingClient()
    try:
        reply = await client.invoke(addr, request, 5000)
    finally:
        await client.close()
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    return reply


async def create_topic(addr: str, topic: str, queues: int = 4) -> None:
    """UPDATE_AND_CREATE_TOPIC with ``queues`` read/write queues, perm 6."""
    header = CreateTopicRequestHeader(topic, "TBW102", queues, queues, 6, "SINGLE_TAG")
    await broker_request(
        addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext_fields())
    )


async def has_topic(addr: str, topic: str) -> bool:
    """Whether the broker's topic table (GET_ALL_TOPIC_CONFIG) has ``topic``."""
    reply = await broker_request(addr, RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG))
    return topic in TopicConfigSerializeWrapper.decode(reply.body).topic_config_table
