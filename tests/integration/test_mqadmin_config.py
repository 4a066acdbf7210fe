"""mqadmin getNamesrvConfig, updateNamesrvConfig, updateKvConfig, deleteKvConfig and
updateTopicPerm against real ``mqnamesrv`` and ``mqbroker`` processes, as Java's
text and as ``--json``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.admin.mq_admin import MQAdmin
from aiorocketmq.common.properties_file import parse_properties
from tests.support.cluster import start_broker, start_namesrv, wait_route
from tests.support.mqadmin import Admin
from tests.support.procs import ManagedProcess

pytestmark = pytest.mark.timeout(120)

StartProcess = Callable[..., ManagedProcess]


async def test_name_server_config_and_kv(
    start_process: StartProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home_a, home_b = tmp_path / "a", tmp_path / "b"
    _a, ns_a = await start_namesrv(start_process, home_a)
    _b, ns_b = await start_namesrv(start_process, home_b)
    admin = Admin(capsys, f"{ns_a};{ns_b}")

    text = await admin.table("getNamesrvConfig")
    assert text.startswith(f"============{ns_a}============\n")
    assert f"============{ns_b}============\n" in text
    assert f"{'orderMessageEnable':<50}=  false\n" in text
    doc = await admin.json("getNamesrvConfig")
    assert list(doc) == [ns_a, ns_b] and doc[ns_a]["orderMessageEnable"] == "false"

    text = await admin.table("updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true")
    assert (
        text == f"update name server config success![{ns_a}, {ns_b}]\norderMessageEnable : true\n"
    )
    doc = await admin.json("getNamesrvConfig")
    assert [doc[ns]["orderMessageEnable"] for ns in (ns_a, ns_b)] == ["true", "true"]
    # Persisted as RocketMQ does, to configStorePath (~/namesrv/namesrv.properties).
    for home in (home_a, home_b):
        stored = parse_properties((home / "namesrv" / "namesrv.properties").read_text())
        assert stored == {"orderMessageEnable": "true"}
    doc = await admin.json("updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "false")
    assert doc == {"key": "orderMessageEnable", "value": "false", "updated": [ns_a, ns_b]}

    # Refused: a black-listed key (NO_PERMISSION, code 16), a value that does not fit.
    code, _out, err = await admin.run("updateNamesrvConfig", "-k", "kvConfigPath", "-v", "/x")
    assert code == 1 and "CODE: 16" in err and "kvConfigPath" in err
    code, _out, err = await admin.run(
        "updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "maybe"
    )
    assert code == 1 and "orderMessageEnable" in err
    with pytest.raises(SystemExit) as usage:  # argparse's own exit
        await admin.run("updateNamesrvConfig", "-k", "orderMessageEnable")
    assert usage.value.code == 2

    # KV config: written to and deleted from every name server.
    text = await admin.table("updateKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", "T", "-v", "b:4")
    assert text == "create or update kv config to namespace success.\n"
    async with MQAdmin(admin.namesrv) as client:
        for ns in (ns_a, ns_b):
            client.namesrv.update_addresses(ns)
            assert await client.namesrv.get_kv_config("ORDER_TOPIC_CONFIG", "T") == "b:4"
        doc = await admin.json("deleteKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", "T")
        assert doc == {"namespace": "ORDER_TOPIC_CONFIG", "key": "T"}
        for ns in (ns_a, ns_b):
            client.namesrv.update_addresses(ns)
            assert await client.namesrv.get_kv_config("ORDER_TOPIC_CONFIG", "T") is None
    text = await admin.table("deleteKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", "T")
    assert text == "delete kv config from namespace success.\n"


async def test_update_topic_perm(
    start_process: StartProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _ns, namesrv = await start_namesrv(start_process, tmp_path)
    a = await start_broker(start_process, tmp_path, namesrv, "broker-a")
    b = await start_broker(start_process, tmp_path, namesrv, "broker-b")
    admin = Admin(capsys, namesrv)
    topic = "PermTopic"
    await admin.table("updateTopic", "-c", "DefaultCluster", "-t", topic, "-r", "3", "-w", "3")
    await wait_route(namesrv, topic, lambda r: len(r.queue_datas) == 2)

    def perms(route: Any) -> dict[str, int]:
        return {q.broker_name: q.perm for q in route.queue_datas}

    # -b: one master becomes read-only; the queue counts stay as routed.
    text = await admin.table("updateTopicPerm", "-t", topic, "-p", "4", "-b", a.addr)
    assert text.splitlines() == [
        f"update topic perm from 6 to 4 in {a.addr} success.",
        f"TopicConfig [topicName={topic}, readQueueNums=3, writeQueueNums=3, perm=R--, "
        "topicFilterType=SINGLE_TAG, topicSysFlag=0, order=false].",
    ]
    route = await wait_route(namesrv, topic, lambda r: perms(r) == {"broker-a": 4, "broker-b": 6})
    assert {q.write_queue_nums for q in route.queue_datas} == {3}
    text = await admin.table("updateTopicPerm", "-t", topic, "-p", "4", "-b", a.addr)
    assert text == "new perm equals to the old one!\n"

    # -c: every master of the cluster.
    doc = await admin.json("updateTopicPerm", "-t", topic, "-p", "2", "-c", "DefaultCluster")
    assert doc["updated"] == sorted([a.addr, b.addr]) and doc["perm"] == 2
    assert doc["topicConfig"]["perm"] == 2 and doc["unchanged"] is False
    await wait_route(namesrv, topic, lambda r: perms(r) == {"broker-a": 2, "broker-b": 2})

    # Bad input: a perm outside 2/4/6, no target, an address that is no master.
    for argv, expect in (
        (("-p", "7", "-c", "DefaultCluster"), (2, "2 (W), 4 (R) or 6 (RW)")),
        (("-p", "6"), (2, "-b brokerAddr or -c clusterName")),
        (("-p", "6", "-b", "127.0.0.1:1"), (1, "broker not exit or broker is not master")),
    ):
        code, _out, err = await admin.run("updateTopicPerm", "-t", topic, *argv)
        assert (code, expect[1] in err) == (expect[0], True), err
