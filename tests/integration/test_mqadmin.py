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
from aiorocketmq.common.protocol_bodies import (
    ConsumerData,
    HeartbeatData,
    ProducerData,
    build_subscription_data,
)
from aiorocketmq.remoting.broker_headers import UpdateConsumerOffsetRequestHeader
from aiorocketmq.remoting.client import RemotingClient
from aiorocketmq.remoting.codes import LanguageCode, RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from tests.support.cluster import get_route, start_broker, start_namesrv, wait_route
from tests.support.procs import ManagedProcess
from tests.unit.broker.processor_support import send_request

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


async def send(client: RemotingClient, addr: str, topic: str, queue_id: int, n: int) -> None:
    for i in range(n):
        request = send_request(f"m{i}".encode(), topic=topic, queue_id=queue_id)
        reply = await client.invoke(addr, request, 5000)
        assert reply.code == ResponseCode.SUCCESS, reply.remark


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
    listed = (await ok("topicList", "-n", namesrv)).splitlines()
    assert {"AdminIT", "TBW102", CLUSTER, "broker-a"} <= set(listed)

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


async def test_cluster_list_and_broker_status_show_the_broker(
    start_process: StartProcess, tmp_path: Path
) -> None:
    _ns, namesrv = await start_namesrv(start_process, tmp_path)
    broker = await start_broker(start_process, tmp_path, namesrv)
    # NAMESRV_ADDR instead of -n, as Java's tools accept.
    result = await mqadmin("clusterList", env={"NAMESRV_ADDR": namesrv})
    assert result.returncode == 0, result.err
    header, row = result.out.splitlines()
    assert header.split()[:6] == ["#Cluster", "Name", "#Broker", "Name", "#BID", "#Addr"]
    assert row.split()[:5] == [CLUSTER, "broker-a", "0", broker.addr, "V4_9_8"]
    assert result.err == ""  # runtime info answered: no warning

    text = await ok("brokerStatus", "-n", namesrv, "-b", broker.addr)
    pairs = [line.partition(": ") for line in text.splitlines()]
    status = {key.strip(): value for key, _, value in pairs}
    assert status["brokerVersionDesc"] == "V4_9_8"
    assert "putTps" in status
    assert list(status) == sorted(status)
    by_cluster = (await ok("brokerStatus", "-n", namesrv, "-c", CLUSTER)).splitlines()
    assert len(by_cluster) == len(status)
    assert all(line.startswith(broker.addr.ljust(24) + " ") for line in by_cluster)


async def test_topic_status_after_sends(start_process: StartProcess, tmp_path: Path) -> None:
    _ns, namesrv = await start_namesrv(start_process, tmp_path)
    broker = await start_broker(start_process, tmp_path, namesrv)
    await ok("updateTopic", "-n", namesrv, "-b", broker.addr, "-t", "StatIT", "-r", "2", "-w", "2")
    await wait_route(namesrv, "StatIT", timeout=10)
    client = RemotingClient()
    try:
        await send(client, broker.addr, "StatIT", 0, 3)
        await send(client, broker.addr, "StatIT", 1, 1)
    finally:
        await client.close()
    lines = (await ok("topicStatus", "-n", namesrv, "-t", "StatIT")).splitlines()
    assert lines[0].split() == [
        "#Broker", "Name", "#QID", "#Min", "Offset", "#Max", "Offset", "#Last", "Updated",
    ]  # fmt: skip
    rows = [line.split() for line in lines[1:]]
    assert [row[:4] for row in rows] == [["broker-a", "0", "0", "3"], ["broker-a", "1", "0", "1"]]
    for row in rows:  # "yyyy-MM-dd HH:mm:ss,SSS" of the last store time
        assert len(row) == 6
        assert row[4].count("-") == 2
        assert row[5].count(":") == 2
        assert "," in row[5]


def heartbeat(group: str, topic: str) -> RemotingCommand:
    data = HeartbeatData(
        "127.0.0.1@admin-it",
        producers=[ProducerData("PID_admin_it")],
        consumers=[ConsumerData(group, subscriptions=[build_subscription_data(topic, "*")])],
    )
    return RemotingCommand(
        code=RequestCode.HEART_BEAT, language=LanguageCode.JAVA, body=data.encode()
    )


async def test_sub_group_consumer_progress_and_connections(
    start_process: StartProcess, tmp_path: Path
) -> None:
    _ns, namesrv = await start_namesrv(start_process, tmp_path)
    broker = await start_broker(start_process, tmp_path, namesrv)
    out = await ok("updateSubGroup", "-n", namesrv, "-c", CLUSTER, "-g", "CID_admin_it", "-r", "5")
    assert out.startswith(f"create subscription group to {broker.addr} success.\n")
    assert "retryMaxTimes=5" in out
    await ok("updateTopic", "-n", namesrv, "-c", CLUSTER, "-t", "ProgIT", "-w", "1", "-r", "1")
    client = RemotingClient()
    try:
        await send(client, broker.addr, "ProgIT", 0, 5)
        reply = await client.invoke(broker.addr, heartbeat("CID_admin_it", "ProgIT"), 5000)
        assert reply.code == ResponseCode.SUCCESS
        commit = UpdateConsumerOffsetRequestHeader("CID_admin_it", "ProgIT", 0, 2)
        request = RemotingCommand.request(
            RequestCode.UPDATE_CONSUMER_OFFSET, commit.to_ext_fields()
        )
        assert (await client.invoke(broker.addr, request, 5000)).code == ResponseCode.SUCCESS
        # The heartbeat created %RETRY%CID_admin_it; the broker registered it at once.
        await wait_route(namesrv, "%RETRY%CID_admin_it", timeout=10)

        lines = (await ok("consumerProgress", "-n", namesrv, "-g", "CID_admin_it")).splitlines()
        assert lines[0].split()[:3] == ["#Topic", "#Broker", "Name"]
        assert [line.split()[:6] for line in lines[1:-3]] == [
            ["ProgIT", "broker-a", "0", "5", "2", "3"]
        ]
        assert lines[-3:] == ["", "Consume TPS: 0.00", "Diff Total: 3"]

        groups = (await ok("consumerProgress", "-n", namesrv)).splitlines()
        assert groups[0].split() == [
            "#Group", "#Count", "#Version", "#Type", "#Model", "#TPS", "#Diff", "Total",
        ]  # fmt: skip
        assert ["CID_admin_it", "1", "V4_9_8", "PUSH", "CLUSTERING", "0", "3"] in [
            g.split() for g in groups[1:]
        ]

        conn = (await ok("consumerConnection", "-n", namesrv, "-g", "CID_admin_it")).splitlines()
        assert conn[1].split()[0] == "127.0.0.1@admin-it"
        assert conn[1].split()[2:] == ["JAVA", "V4_9_8"]
        assert conn[-3:] == [
            "ConsumeType: CONSUME_PASSIVELY",
            "MessageModel: CLUSTERING",
            "ConsumeFromWhere: CONSUME_FROM_LAST_OFFSET",
        ]
        assert ["ProgIT", "*"] in [line.split() for line in conn]
        producers = await ok(
            "producerConnection", "-n", namesrv, "-g", "PID_admin_it", "-t", "ProgIT"
        )
        assert producers.split()[:2] == ["0001", "127.0.0.1@admin-it"]
    finally:
        await client.close()
    missing = await mqadmin("consumerProgress", "-n", namesrv, "-g", "CID_nobody")
    assert missing.returncode == 1
    assert "No route info of this topic: %RETRY%CID_nobody" in missing.err


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


async def test_closed_stdout_ends_quietly(start_process: StartProcess, tmp_path: Path) -> None:
    # `mqadmin topicList | head -1`: the reader leaves; no traceback, exit 1.
    _ns, namesrv = await start_namesrv(start_process, tmp_path)
    await start_broker(start_process, tmp_path, namesrv)
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "aiorocketmq.cli.admin", "topicList", "-n", namesrv,
            stdout=write_end, stderr=asyncio.subprocess.PIPE, cwd=REPO_ROOT,
        )  # fmt: skip
    finally:
        os.close(write_end)
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 1
    assert err.decode() == ""
