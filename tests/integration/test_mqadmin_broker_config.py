"""``mqadmin getBrokerConfig`` / ``updateBrokerConfig`` / ``wipeWritePerm`` /
``addWritePerm`` against real processes.

One ``mqnamesrv`` and one ``mqbroker`` process; the CLI runs in-process
(``main([...])`` in a thread, output through capsys), in table and ``--json`` form.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from aiorocketmq.cli.admin import main
from tests.support.cluster import create_topic, start_broker, start_namesrv, wait_route
from tests.support.procs import ManagedProcess

pytestmark = pytest.mark.timeout(90)

StartProcess = Callable[..., ManagedProcess]
CLUSTER = "DefaultCluster"


async def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``mqadmin args`` in a thread (main runs its own loop); (code, stdout, stderr)."""
    capsys.readouterr()
    code = await asyncio.to_thread(main, list(args))
    out, err = capsys.readouterr()
    return code, out, err


async def route_perm(capsys: pytest.CaptureFixture[str], namesrv: str, topic: str) -> int:
    """The perm of ``topic``'s one queue data, as ``topicRoute`` prints it."""
    code, out, err = await run(capsys, "topicRoute", "-n", namesrv, "-t", topic)
    assert code == 0, err
    # Java's route JSON has unquoted integer keys (brokerAddrs): not for json.loads.
    (perm,) = re.findall(r'"perm"\s*:\s*(\d+)', out)
    return int(perm)


async def test_get_and_update_broker_config_table_and_json(
    start_process: StartProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _ns, namesrv = await start_namesrv(start_process, tmp_path)
    broker = await start_broker(start_process, tmp_path, namesrv)

    code, out, err = await run(capsys, "getBrokerConfig", "-n", namesrv, "-b", broker.addr)
    assert code == 0, err
    assert out.startswith(f"============{broker.addr}============\n")
    assert any(line.split("=")[0].strip() == "brokerName" for line in out.splitlines())

    code, out, err = await run(capsys, "getBrokerConfig", "-n", namesrv, "-c", CLUSTER, "--json")
    assert code == 0, err
    (doc,) = json.loads(out)
    assert doc["brokerAddr"] == broker.addr and doc["role"] == "MASTER"
    assert doc["properties"]["brokerName"] == broker.name
    assert doc["properties"]["autoCreateTopicEnable"] == "true"
    counter = doc["version"]["counter"]

    code, out, err = await run(
        capsys, "updateBrokerConfig", "-n", namesrv, "-b", broker.addr,
        "-k", "autoCreateTopicEnable", "-v", "false",
    )  # fmt: skip
    assert code == 0, err
    assert out == f"update broker config success, {broker.addr}\n"

    code, out, err = await run(
        capsys, "updateBrokerConfig", "-n", namesrv, "-c", CLUSTER,
        "-k", "defaultQueryMaxNum", "-v", "77", "--json",
    )  # fmt: skip
    assert code == 0, err
    assert json.loads(out) == {"key": "defaultQueryMaxNum", "value": "77", "updated": [broker.addr]}

    code, out, err = await run(
        capsys, "getBrokerConfig", "-n", namesrv, "-b", broker.addr, "--json"
    )
    assert code == 0, err
    (doc,) = json.loads(out)
    assert doc["properties"]["autoCreateTopicEnable"] == "false"
    assert doc["properties"]["defaultQueryMaxNum"] == "77"
    assert doc["version"]["counter"] == counter + 2

    # configBlackList keys are refused, a bad value names the key: exit 1, nothing changes.
    code, out, err = await run(
        capsys, "updateBrokerConfig", "-n", namesrv, "-b", broker.addr,
        "-k", "brokerConfigPath", "-v", "/tmp/x",
    )  # fmt: skip
    assert code == 1 and "black list" in err and "brokerConfigPath" in err
    code, out, err = await run(
        capsys, "updateBrokerConfig", "-n", namesrv, "-b", broker.addr,
        "-k", "defaultQueryMaxNum", "-v", "many",
    )  # fmt: skip
    assert code == 1 and "defaultQueryMaxNum" in err

    # wipeWritePerm: the route's perm loses W (6 -> 4); addWritePerm gives it back.
    code, out, err = await run(
        capsys, "updateTopic", "-n", namesrv, "-c", CLUSTER, "-t", "PermIT", "-r", "2", "-w", "2"
    )
    assert code == 0, err
    # The broker answers, then registers the new topic (Java answers even before it
    # stores it): the route reaches the name server a moment later.
    await wait_route(namesrv, "PermIT")
    assert await route_perm(capsys, namesrv, "PermIT") == 6
    code, out, err = await run(capsys, "wipeWritePerm", "-n", namesrv, "-b", broker.name)
    assert code == 0, err
    assert out.startswith(
        f"wipe write perm of broker[{broker.name}] in name server[{namesrv}] OK, "
    )
    assert await route_perm(capsys, namesrv, "PermIT") == 4
    code, out, err = await run(capsys, "addWritePerm", "-n", namesrv, "-b", broker.name, "--json")
    assert code == 0, err
    (entry,) = json.loads(out)
    assert entry["namesrvAddr"] == namesrv and entry["brokerName"] == broker.name
    assert entry["addTopicCount"] >= 1 and entry["error"] is None
    assert await route_perm(capsys, namesrv, "PermIT") == 6

    code, out, err = await run(capsys, "topicClusterList", "-n", namesrv, "-t", "PermIT")
    assert (code, out) == (0, f"{CLUSTER}\n"), err
    code, out, err = await run(capsys, "topicClusterList", "-n", namesrv, "-t", "PermIT", "--json")
    assert json.loads(out) == {"topic": "PermIT", "clusters": [CLUSTER]}, err
    code, out, err = await run(capsys, "topicClusterList", "-n", namesrv, "-t", "NoSuchTopicIT")
    assert code == 1 and "topicClusterList" in err


def test_broker_config_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (
        ["updateBrokerConfig", "-b", "127.0.0.1:1", "-k", "a"],
        ["getBrokerConfig", "-x"],
        ["wipeWritePerm", "-n", "127.0.0.1:1"],
        ["addWritePerm"],
        ["topicClusterList", "-n", "127.0.0.1:1"],
    ):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
    # Neither -b nor -c: a usage error found by the command, before any request.
    assert main(["getBrokerConfig", "-n", "127.0.0.1:1"]) == 2
    assert "-b brokerAddr or -c clusterName" in capsys.readouterr().err


async def test_send_message_table_and_json_then_found_by_id(
    start_process: StartProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _ns, namesrv = await start_namesrv(start_process, tmp_path)
    broker = await start_broker(start_process, tmp_path, namesrv)
    await create_topic(broker.addr, "SendTopic")
    send = ["sendMessage", "-n", namesrv, "-t", "SendTopic", "-k", "k1", "-c", "TagA"]

    code, out, err = await run(capsys, *send, "-p", "hello table", "-b", broker.name, "-i", "2")
    assert code == 0, err
    header, row = out.splitlines()
    assert header.split() == ["#Broker", "Name", "#QID", "#Send", "Result", "#MsgId"]
    assert row.split()[:3] == [broker.name, "2", "SEND_OK"]

    code, out, err = await run(capsys, *send, "-p", "hello json", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["sendStatus"] == "SEND_OK" and doc["brokerName"] == broker.name
    query = ["queryMsgById", "-n", namesrv, "-i", doc["offsetMsgId"], "--bodyDir", str(tmp_path)]
    code, out, err = await run(capsys, *query)
    assert code == 0, err
    assert "Tags:                [TagA]" in out
    (body_path,) = re.findall(r"Message Body Path:\s+(\S+)", out)
    assert await asyncio.to_thread(Path(body_path).read_bytes) == b"hello json"

    code, _, err = await run(capsys, *send, "-p", "x", "-i", "1")  # a queue without -b
    assert code == 2 and "Broker name must be set" in err


async def test_cluster_send_msg_rt_table_tlog_and_json(
    start_process: StartProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _ns, namesrv = await start_namesrv(start_process, tmp_path)
    broker = await start_broker(start_process, tmp_path, namesrv)
    rt = ["clusterSendMsgRT", "-n", namesrv, "-a", "20", "-s", "64", "--rounds", "1"]

    code, out, err = await run(capsys, *rt)
    assert code == 0, err
    header, row = out.splitlines()
    assert header.split() == ["#Cluster", "Name", "#Broker", "Name", "#RT", "#successCount",
                              "#failCount"]  # fmt: skip
    cluster, name, mean_rt, ok, failed = row.split()
    assert (cluster, name, ok, failed) == (CLUSTER, broker.name, "20", "0")
    assert float(mean_rt) > 0

    code, out, err = await run(capsys, *rt, "-c", CLUSTER, "-p", "true", "-m", "room1")
    assert code == 0, err
    assert out.strip().split("|")[1:4] == ["room1", CLUSTER, broker.name]

    code, out, err = await run(capsys, *rt, "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert (doc["clusterName"], doc["brokerName"], doc["successCount"]) == (
        CLUSTER, broker.name, 20,
    )  # fmt: skip
    assert doc["failCount"] == 0 and doc["rtMs"] > 0

    code, _, err = await run(capsys, *rt, "-c", "NoSuchCluster")
    assert code == 1 and "cluster [NoSuchCluster] not exist" in err
