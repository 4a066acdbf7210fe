"""``mqbroker`` as a process: settings, registration, send/pull, SIGTERM, restart.

Every broker and name server here is a real child process on 127.0.0.1 with a
free port, stopped by PID at teardown (which fails unless it exits 0 on SIGTERM).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from aiorocketmq.common import fastjson
from aiorocketmq.common.message_codec import decode_pull_body
from aiorocketmq.common.route import ClusterInfo
from aiorocketmq.remoting.broker_admin_headers import CreateTopicRequestHeader
from aiorocketmq.remoting.broker_headers import PullMessageResponseHeader, SendMessageResponseHeader
from aiorocketmq.remoting.client import RemotingClient
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from tests.support.cluster import (
    BROKER_READY,
    broker_properties,
    get_route,
    start_broker,
    start_namesrv,
    wait_route,
)
from tests.support.procs import ManagedProcess
from tests.support.wait import wait_until
from tests.unit.broker.broker_support import pull_request
from tests.unit.broker.processor_support import send_request

pytestmark = pytest.mark.timeout(90)

StartProcess = Callable[..., ManagedProcess]
REPO_ROOT = Path(__file__).resolve().parents[2]
STOCK_CONF = REPO_ROOT / "tests" / "unit" / "broker" / "fixtures" / "broker.conf"


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``mqbroker`` with ``args``, to completion."""
    return subprocess.run(
        [sys.executable, "-m", "aiorocketmq.cli.broker", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO_ROOT,
        check=False,
    )


def test_print_settings_of_the_stock_broker_conf() -> None:
    everything = run_cli("-c", str(STOCK_CONF), "-p")
    assert everything.returncode == 0, everything.stderr
    lines = dict(line.split("=", 1) for line in everything.stdout.splitlines())
    assert lines["brokerName"] == "broker-a"
    assert lines["brokerRole"] == "ASYNC_MASTER"
    assert lines["listenPort"] == "10911"
    assert lines["fileReservedTime"] == "48"
    assert lines["mappedFileSizeCommitLog"] == str(1024**3)
    important = run_cli("-c", str(STOCK_CONF), "-m", "-n", "10.0.0.1:9876;10.0.0.2:9876")
    assert important.returncode == 0, important.stderr
    short = dict(line.split("=", 1) for line in important.stdout.splitlines())
    assert short["namesrvAddr"] == "10.0.0.1:9876;10.0.0.2:9876"
    assert "listenPort" not in short  # not an @ImportantField
    assert len(short) < len(lines)


def test_bad_setting_exits_2_naming_the_key(tmp_path: Path) -> None:
    conf = tmp_path / "bad.properties"
    conf.write_text("brokerName=b\nlistenPort=notaport\n", "utf-8")
    result = run_cli("-c", str(conf))
    assert result.returncode == 2
    assert "listenPort" in result.stderr


async def test_port_taken_exits_1(start_process: StartProcess, tmp_path: Path) -> None:
    _ns, namesrv = await start_namesrv(start_process, tmp_path)
    port = int(namesrv.rsplit(":", 1)[1])
    conf = broker_properties(tmp_path, "b1", namesrv, listenPort=port)
    proc = start_process(["-m", "aiorocketmq.cli.broker", "-c", str(conf)], name="b1")
    await wait_until(lambda: not proc.running, timeout=30, what="broker exit")
    assert proc.returncode == 1
    assert "failed to start" in proc.tail()


async def _send(client: RemotingClient, addr: str, topic: str, n: int) -> list[int]:
    offsets = []
    for i in range(n):
        reply = await client.invoke(
            addr,
            send_request(f"m{i}".encode(), topic=topic, code=RequestCode.SEND_MESSAGE_V2),
            5000,
        )
        assert reply.code == ResponseCode.SUCCESS, reply.remark
        offsets.append(SendMessageResponseHeader.from_ext_fields(reply.ext_fields).queue_offset)
    return offsets


async def test_registers_with_every_namesrv_serves_and_unregisters_on_sigterm(
    start_process: StartProcess, tmp_path: Path
) -> None:
    _ns1, ns1 = await start_namesrv(start_process, tmp_path)
    _ns2, ns2 = await start_namesrv(start_process, tmp_path)
    broker = await start_broker(start_process, tmp_path, f"{ns1};{ns2}")
    client = RemotingClient()
    try:
        # Auto-created through TBW102 on the first send; the broker re-registers at
        # once (not at its next 30 s tick), so both name servers route it.
        offsets = await _send(client, broker.addr, "NewTopic", 3)
        assert offsets == [0, 1, 2]
        for ns in (ns1, ns2):
            route = await wait_route(ns, "NewTopic", timeout=10)
            assert route.queue_datas[0].broker_name == "broker-a"
        reply = await client.invoke(
            broker.addr, pull_request(0, topic="NewTopic", suspend_ms=5000), 5000
        )
        assert reply.code == ResponseCode.SUCCESS
        header = PullMessageResponseHeader.from_ext_fields(reply.ext_fields)
        assert header.next_begin_offset == 3
        assert [bytes(m.body) for m in decode_pull_body(bytes(reply.body))] == [b"m0", b"m1", b"m2"]
    finally:
        await client.close()
    assert broker.proc.stop() == 0
    for ns in (ns1, ns2):
        assert await get_route(ns, "NewTopic") is None
        client = RemotingClient()
        try:
            reply = await client.invoke(
                ns, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), 3000
            )
        finally:
            await client.close()
        assert "broker-a" not in ClusterInfo.decode(reply.body).broker_addr_table


async def test_restart_keeps_messages_topics_and_offsets(
    start_process: StartProcess, tmp_path: Path
) -> None:
    _ns, namesrv = await start_namesrv(start_process, tmp_path)
    broker = await start_broker(start_process, tmp_path, namesrv)
    client = RemotingClient()
    try:
        await _send(client, broker.addr, "Durable", 5)
        commit = pull_request(
            0, topic="Durable", suspend_ms=5000, sys_flag=0x1 | 0x2 | 0x4, commit_offset=3
        )
        assert (await client.invoke(broker.addr, commit, 5000)).code == ResponseCode.SUCCESS
    finally:
        await client.close()
    assert broker.proc.stop() == 0
    store = Path(broker_properties_store(broker.config))
    # fastjson's form: bare integer keys ({0:3}), read with the tolerant reader.
    offsets = fastjson.loads((store / "config" / "consumerOffset.json").read_text())
    assert offsets["offsetTable"]["Durable@CID_test"] == {"0": 3}
    assert "Durable" in (store / "config" / "topics.json").read_text()
    again = start_process(
        ["-m", "aiorocketmq.cli.broker", "-c", str(broker.config)],
        name="broker-again",
        ready=BROKER_READY,
        wait=False,
    )
    addr = (await again.wait_ready_async())["addr"]
    await wait_route(namesrv, "Durable")  # topics.json reloaded and registered
    client = RemotingClient()
    try:
        reply = await client.invoke(addr, pull_request(3, topic="Durable", suspend_ms=5000), 5000)
        assert reply.code == ResponseCode.SUCCESS
        bodies = [bytes(m.body) for m in decode_pull_body(bytes(reply.body))]
        assert bodies == [b"m3", b"m4"]
        assert await _send(client, addr, "Durable", 1) == [5]
    finally:
        await client.close()


def broker_properties_store(config: Path) -> str:
    """``storePathRootDir`` of a properties file written by ``broker_properties``."""
    for line in config.read_text("utf-8").splitlines():
        if line.startswith("storePathRootDir="):
            return line.split("=", 1)[1]
    raise AssertionError(f"no storePathRootDir in {config}")


async def test_created_topic_reaches_the_name_server_at_once(
    start_process: StartProcess, tmp_path: Path
) -> None:
    # The periodic registration is 30 s away; the topic change triggers one now.
    _ns, namesrv = await start_namesrv(start_process, tmp_path)
    broker = await start_broker(start_process, tmp_path, namesrv)
    header = CreateTopicRequestHeader("Created", "TBW102", 3, 5, 6, "SINGLE_TAG")
    client = RemotingClient()
    try:
        request = RemotingCommand.request(
            RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext_fields()
        )
        reply = await client.invoke(broker.addr, request, 5000)
        assert reply.code == ResponseCode.SUCCESS, reply.remark
    finally:
        await client.close()
    route = await wait_route(namesrv, "Created", timeout=10)
    (queues,) = route.queue_datas
    assert (queues.read_queue_nums, queues.write_queue_nums, queues.perm) == (3, 5, 6)
