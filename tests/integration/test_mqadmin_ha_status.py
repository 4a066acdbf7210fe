"""``mqadmin haStatus`` against a running master and slave."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from aiorocketmq.admin.ha_status import ha_rows, ha_status_text
from aiorocketmq.common.route import BrokerData
from tests.integration.test_mqadmin import mqadmin
from tests.support.cluster import broker_request, start_broker, start_namesrv, wait_replicated
from tests.support.procs import ManagedProcess
from tests.unit.broker.processor_support import send_request

pytestmark = pytest.mark.timeout(90)

StartProcess = Callable[..., ManagedProcess]


def test_rows_from_runtime_info() -> None:
    data = BrokerData("c", "broker-a", {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"})
    runtimes = {
        "10.0.0.1:10911": {
            "commitLogMaxOffset": "5000",
            "haSlaveNum": "1",
            "haSlaveAddr_0": "10.0.0.2:40001",
            "haSlaveAckOffset_0": "4800",
            "haSlaveLag_0": "200",
        },
        "10.0.0.2:10911": {"commitLogMaxOffset": "4800", "haConnected": "true"},
    }
    master, slave = ha_rows(data, runtimes)
    assert (master.role, master.max_offset, master.connected) == ("MASTER", "5000", "1 slave(s)")
    assert (slave.role, slave.acked_offset, slave.lag, slave.connected) == (
        "SLAVE", "4800", "200", "true",
    )  # fmt: skip
    # A master that is down: the slave's own offset, no acknowledged offset, lag unknown.
    down = ha_rows(data, {"10.0.0.1:10911": None, "10.0.0.2:10911": runtimes["10.0.0.2:10911"]})
    assert down[0].max_offset == "DOWN" and down[1].acked_offset == "-" and down[1].lag == "-"
    text = ha_status_text([master, slave])
    assert text.splitlines()[0].split()[:3] == ["#Broker", "Name", "#BID"]
    assert len(text.splitlines()) == 3


async def test_ha_status_shows_master_and_caught_up_slave(
    start_process: StartProcess, tmp_path: Path
) -> None:
    _, namesrv = await start_namesrv(start_process, tmp_path)
    master = await start_broker(start_process, tmp_path, namesrv, "broker-a")
    slave = await start_broker(
        start_process, tmp_path / "s", namesrv, "broker-a", brokerId=1, brokerRole="SLAVE"
    )
    for i in range(20):
        await broker_request(master.addr, send_request(b"%d" % i))
    end = await wait_replicated(master.addr, slave.addr)
    result = await mqadmin("haStatus", "-n", namesrv, "-c", "DefaultCluster")
    assert result.returncode == 0, result.err
    rows = [line.split() for line in result.out.splitlines()[1:]]
    by_role = {row[3]: row for row in rows}
    assert by_role["MASTER"][2] == master.addr and by_role["MASTER"][4] == str(end)
    slave_row = by_role["SLAVE"]
    assert slave_row[2] == slave.addr
    assert slave_row[4] == str(end)  # its CommitLog ends where the master's does
    assert slave_row[5] == str(end)  # and the master saw it acknowledge that
    assert slave_row[6] == "0"
