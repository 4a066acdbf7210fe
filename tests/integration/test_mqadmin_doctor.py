"""``mqadmin doctor`` against real processes: two name servers, broker-a master and
slave, and a ghost broker registered on one name server only at an address nothing
listens on (what a container IP looks like from outside); then a SYNC_MASTER whose
only slave stops, which every send then fails on (SLAVE_NOT_AVAILABLE): a FAIL. The
pure checks are also tested on hand-made tables."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from aiorocketmq.admin.doctor import (
    FAIL,
    OK,
    WARN,
    Finding,
    disk_finding,
    registry_findings,
    replication_findings,
    sync_master_findings,
)
from aiorocketmq.cli.admin import main
from aiorocketmq.common.route import BrokerData, ClusterInfo
from tests.support.broker_double import BrokerDouble
from tests.support.cluster import (
    broker_request,
    runtime_info,
    start_broker,
    start_namesrv,
    wait_replicated,
)
from tests.support.procs import ManagedProcess
from tests.support.wait import wait_until
from tests.unit.broker.processor_support import send_request

pytestmark = pytest.mark.timeout(120)

StartProcess = Callable[..., ManagedProcess]


def _info(*brokers: tuple[str, int, str]) -> ClusterInfo:
    table: dict[str, BrokerData] = {}
    for name, bid, addr in brokers:
        table.setdefault(name, BrokerData("C", name, {})).broker_addrs[bid] = addr
    return ClusterInfo(table, {"C": set(table)})


def test_registry_warns_about_a_broker_one_name_server_lacks() -> None:
    a, b = ("broker-a", 0, "10.0.0.1:10911"), ("broker-b", 0, "10.0.0.2:10911")
    findings, everyone = registry_findings({"ns1": _info(a, b), "ns2": _info(a)})
    assert everyone == {("broker-a", 0): a[2], ("broker-b", 0): b[2]}
    assert findings == [Finding(WARN, "registry", "broker-b/0 10.0.0.2:10911",
                                "missing from name server(s) ns2: clients asking them "
                                "do not see it")]  # fmt: skip
    findings, _ = registry_findings({"ns1": _info(a), "ns2": _info(a)})
    assert findings == [Finding(OK, "registry", "name servers", "all 2 agree")]


def test_replication_findings() -> None:
    brokers = {("a", 0): "m:1", ("a", 1): "s:1", ("b", 1): "s:2", ("c", 0): "m:3", ("c", 1): "s:3"}
    runtimes = {
        "m:1": {"commitLogMaxOffset": "1000"},
        "s:1": {"haConnected": "true", "commitLogMaxOffset": "400"},
        "s:2": {"haConnected": "true", "commitLogMaxOffset": "9"},
        "m:3": {"commitLogMaxOffset": "5"},
        "s:3": {"haConnected": "false"},
        "s:4": {},
    }
    brokers[("d", 1)] = "s:4"
    got = {(f.status, f.check, f.target): f.detail for f in replication_findings(brokers, runtimes)}
    assert got[(OK, "replication", "a/1 s:1")] == "connected to m:1, 600 bytes behind"
    assert got[(WARN, "master", "b")].startswith("no master registered")
    assert got[(FAIL, "replication", "c/1 s:3")].startswith("not connected to its master m:3")
    assert got[(WARN, "replication", "d/1 s:4")].startswith("does not report whether")


@pytest.mark.parametrize(
    ("ratio", "status"), [("0.5", OK), ("0.80", WARN), ("0.86", WARN), ("0.95", FAIL)]
)
def test_disk_against_the_brokers_own_thresholds(ratio: str, status: str) -> None:
    config = {"diskSpaceWarningLevelRatio": "0.9", "diskSpaceCleanForciblyRatio": "0.85",
              "diskMaxUsedSpaceRatio": "75"}  # fmt: skip
    assert disk_finding("t", {"commitLogDiskRatio": ratio}, config).status == status
    assert disk_finding("t", {}, config).status == WARN  # no figure: say so, do not pass


async def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = await asyncio.to_thread(main, list(args))
    out, err = capsys.readouterr()
    return code, out, err


async def test_doctor_finds_the_ghost_and_then_a_healthy_cluster(
    start_process: StartProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _p1, ns1 = await start_namesrv(start_process, tmp_path / "ns1")
    _p2, ns2 = await start_namesrv(start_process, tmp_path / "ns2")
    both = f"{ns1};{ns2}"
    master = await start_broker(start_process, tmp_path, both, "broker-a")
    slave = await start_broker(
        start_process, tmp_path / "s", both, "broker-a", brokerId=1, brokerRole="SLAVE"
    )
    await broker_request(master.addr, send_request(b"x", topic="TBW102"))
    await wait_replicated(master.addr, slave.addr)
    with socket.socket() as sock:  # bound, never listening: connections are refused
        sock.bind(("127.0.0.1", 0))
        ghost_addr = f"127.0.0.1:{sock.getsockname()[1]}"
        ghost = BrokerDouble("broker-ghost", 0, broker_addr=ghost_addr)
        try:
            await ghost.register(ns1)
            code, table, err = await run(capsys, "doctor", "-n", both)
            assert code == 1 and "1 check(s) failed" in err
            code, out, _err = await run(capsys, "doctor", "-n", both, "--json")
            assert code == 1
            doc = json.loads(out)
        finally:
            await ghost.close()
    summary = f"{len(doc['findings'])} checks: {doc['ok']} OK, {doc['warn']} WARN, 1 FAIL"
    assert table.endswith(f"\n{summary}\n")
    assert f"FAIL    broker       broker-ghost/0 {ghost_addr}" in table
    by = {(f["check"], f["target"]): f for f in doc["findings"]}
    assert by[("namesrv", ns1)]["status"] == by[("namesrv", ns2)]["status"] == OK
    ghost_key = f"broker-ghost/0 {ghost_addr}"
    assert by[("registry", ghost_key)]["status"] == WARN
    assert ns2 in by[("registry", ghost_key)]["detail"]
    assert by[("broker", ghost_key)]["status"] == FAIL
    assert "brokerIP1" in by[("broker", ghost_key)]["detail"]
    for bid, addr, role in ((0, master.addr, "master"), (1, slave.addr, "slave")):
        assert by[("broker", f"broker-a/{bid} {addr}")]["detail"] == f"V4_9_8 {role}"
        ratio = float((await runtime_info(addr))["commitLogDiskRatio"])
        disk = by[("disk", f"broker-a/{bid} {addr}")]
        assert disk["detail"].startswith(f"CommitLog disk {ratio:.0%} used")
        assert disk["status"] == (OK if ratio < 0.75 else WARN if ratio < 0.9 else FAIL)
    replication = by[("replication", f"broker-a/1 {slave.addr}")]
    assert replication["status"] == OK and replication["detail"].startswith(
        f"connected to {master.addr}, 0 bytes behind"
    )
    assert doc["fail"] == 1 and doc["ok"] + doc["warn"] + doc["fail"] == len(doc["findings"])

    # The ghost's connection closed: both name servers drop it at once; all is well.
    async def healthy() -> dict[str, object] | None:
        code, out, _err = await run(capsys, "doctor", "-n", both, "--json")
        return json.loads(out) if code == 0 else None

    doc = await wait_until(healthy, timeout=15, what="doctor to pass once the ghost is gone")
    assert doc["fail"] == 0
    assert {f["check"] for f in doc["findings"]} >= {"namesrv", "registry", "broker", "disk",
                                                       "replication"}  # fmt: skip


def test_sync_master_findings() -> None:
    brokers = {("a", 0): "m:1", ("a", 1): "s:1", ("b", 0): "m:2", ("c", 0): "m:3", ("c", 1): "s:3"}
    runtimes: dict[str, dict[str, str] | None] = {
        "m:1": {"haSlaveNum": "1"},
        "s:1": {"haConnected": "true"},
        "m:2": {"haSlaveNum": "0"},
        "m:3": {},  # not ours: no haSlaveNum, so its slaves are asked
        "s:3": {"haConnected": "false"},
    }
    roles = {"m:1": "SYNC_MASTER", "m:2": "SYNC_MASTER", "m:3": "SYNC_MASTER", "s:1": "SLAVE"}
    got = {(f.status, f.target): f.detail for f in sync_master_findings(brokers, runtimes, roles)}
    assert got[(OK, "a/0 m:1")] == "SYNC_MASTER, 1 slave(s) connected"
    assert got[(FAIL, "b/0 m:2")].startswith("SYNC_MASTER with no connected slave")
    assert (FAIL, "c/0 m:3") in got
    roles["m:2"] = "ASYNC_MASTER"  # an async master without slaves is fine
    assert all(f.target != "b/0 m:2" for f in sync_master_findings(brokers, runtimes, roles))


async def test_doctor_fails_a_sync_master_whose_slave_is_down(
    start_process: StartProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _p, namesrv = await start_namesrv(start_process, tmp_path / "ns")
    master = await start_broker(
        start_process, tmp_path, namesrv, "broker-s", brokerRole="SYNC_MASTER"
    )
    slave = await start_broker(
        start_process, tmp_path / "s", namesrv, "broker-s", brokerId=1, brokerRole="SLAVE"
    )

    async def report() -> dict[str, object]:
        code, out, _err = await run(capsys, "doctor", "-n", namesrv, "--json")
        doc = json.loads(out)
        doc["code"] = code
        return doc

    def sync_status(doc: dict[str, object]) -> str | None:
        findings = doc["findings"]
        assert isinstance(findings, list)
        return next((f["status"] for f in findings if f["check"] == "sync"), None)

    healthy = await wait_until(
        lambda: _when(report(), lambda d: sync_status(d) == OK),
        timeout=30, what="the slave connected",
    )  # fmt: skip
    assert healthy["code"] == 0
    assert await asyncio.to_thread(slave.proc.stop) == 0
    failing = await wait_until(
        lambda: _when(report(), lambda d: sync_status(d) == FAIL),
        timeout=30, what="doctor to see the SYNC_MASTER alone",
    )  # fmt: skip
    assert failing["code"] == 1 and failing["fail"] == 1
    finding = next(f for f in failing["findings"] if f["check"] == "sync")
    assert finding["target"] == f"broker-s/0 {master.addr}"
    assert "SLAVE_NOT_AVAILABLE" in finding["detail"]


async def _when(
    pending: Awaitable[dict[str, object]], ok: Callable[[dict[str, object]], bool]
) -> dict[str, object] | None:
    doc = await pending
    return doc if ok(doc) else None
