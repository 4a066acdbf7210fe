"""``mqadmin`` as a process against real ``mqnamesrv`` and ``mqbroker`` processes.

Each command runs as ``python -m aiorocketmq.cli.admin`` (an asyncio subprocess,
so this test's own connections, such as a consumer's heartbeat channel, stay
served meanwhile). Messages, heartbeats and offset commits go through a
``RemotingClient`` as a stock client would send them.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from aiorocketmq.admin.broker_api import BrokerAdminAPI
from aiorocketmq.remoting.client import RemotingClient
from tests.support.cluster import get_route, start_broker, start_namesrv, wait_route
from tests.support.procs import ManagedProcess

pytestmark = pytest.mark.timeout(120)

StartProcess = Callable[..., ManagedProcess]
REPO_ROOT = Path(__file__).resolve().parents[2]
CLUSTER = "DefaultCluster"


@dataclass
class Result:
    """A finished ``mqadmin`` run."""

    returncode: int
    out: str
    err: str


async def mqadmin(*args: str, env: dict[str, str] | None = None) -> Result:
    """Run ``mqadmin args`` to completion."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "aiorocketmq.cli.admin",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=REPO_ROOT,
        env={**os.environ, **(env or {})},
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return Result(proc.returncode, out.decode(), err.decode())


async def ok(*args: str) -> str:
    """``mqadmin args``, which must succeed; its stdout."""
    result = await mqadmin(*args)
    assert result.returncode == 0, f"mqadmin {args}: {result.err}"
    return result.out


async def test_update_topic_route_list_and_delete(
    start_process: StartProcess, tmp_path: Path
) -> None:
    _ns, namesrv = await start_namesrv(start_process, tmp_path)
    broker = await start_broker(start_process, tmp_path, namesrv)
    out = await ok(
        "updateTopic", "-n", namesrv, "-c", CLUSTER, "-t", "AdminIT", "-r", "4", "-w", "3"
    )
    assert out == (
        f"create topic to {broker.addr} success.\n"
        "TopicConfig [topicName=AdminIT, readQueueNums=4, writeQueueNums=3, perm=RW-, "
        "topicFilterType=SINGLE_TAG, topicSysFlag=0, order=false]\n"
    )
    # The broker re-registers at once on a topic change: the name server routes it.
    await wait_route(namesrv, "AdminIT", timeout=10)
    route = await ok("topicRoute", "-n", namesrv, "-t", "AdminIT")
    assert route == (
        "{\n"
        '\t"brokerDatas":[\n'
        "\t\t{\n"
        f'\t\t\t"brokerAddrs":{{0:"{broker.addr}"\n'
        "\t\t\t},\n"
        '\t\t\t"brokerName":"broker-a",\n'
        f'\t\t\t"cluster":"{CLUSTER}"\n'
        "\t\t}\n"
        "\t],\n"
        '\t"filterServerTable":{},\n'
        '\t"queueDatas":[\n'
        "\t\t{\n"
        '\t\t\t"brokerName":"broker-a",\n'
        '\t\t\t"perm":6,\n'
        '\t\t\t"readQueueNums":4,\n'
        '\t\t\t"topicSysFlag":0,\n'
        '\t\t\t"writeQueueNums":3\n'
        "\t\t}\n"
        "\t]\n"
        "}\n"
    )
    # NAMESRV_ADDR instead of -n, as Java's tools accept.
    listed = await mqadmin("topicList", env={"NAMESRV_ADDR": namesrv})
    assert listed.returncode == 0, listed.err
    assert {"AdminIT", "TBW102", CLUSTER, "broker-a"} <= set(listed.out.splitlines())

    out = await ok("deleteTopic", "-n", namesrv, "-t", "AdminIT", "-c", CLUSTER)
    assert out == (
        f"delete topic [AdminIT] from cluster [{CLUSTER}] success.\n"
        "delete topic [AdminIT] from NameServer success.\n"
    )
    assert await get_route(namesrv, "AdminIT") is None
    client = RemotingClient()
    try:
        table = await BrokerAdminAPI(client).get_all_topic_config(broker.addr)
    finally:
        await client.close()
    assert "AdminIT" not in table.topic_config_table
    gone = await mqadmin("topicRoute", "-n", namesrv, "-t", "AdminIT")
    assert gone.returncode == 1
    assert "No route info of this topic: AdminIT" in gone.err
    assert gone.out == ""


async def test_errors_exit_non_zero_with_the_reason(
    start_process: StartProcess, tmp_path: Path
) -> None:
    _ns, namesrv = await start_namesrv(start_process, tmp_path)
    broker = await start_broker(start_process, tmp_path, namesrv)
    bad = await mqadmin("updateTopic", "-n", namesrv, "-b", broker.addr, "-t", "bad topic!")
    assert bad.returncode == 1
    assert "CODE: 1 DESC: " in bad.err
    assert broker.addr in bad.err
    unknown = await mqadmin("updateSubGroup", "-n", namesrv, "-c", "NoCluster", "-g", "G")
    assert unknown.returncode == 1
    assert "cluster [NoCluster] not found" in unknown.err
    usage = await mqadmin("topicStatus", "-n", namesrv)
    assert usage.returncode == 2
    assert "-t/--topic" in usage.err
