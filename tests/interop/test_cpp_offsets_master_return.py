"""Issue 24's five steps with the stock C++ push consumer (PyPI ``rocketmq``).

The group consumes part of a topic and stops; the SYNC_MASTER is SIGKILLed; the
group restarts and consumes the rest from the slave. Started after the kill, the
C++ client's first route shows only the slave; it pulls there and sends its
UPDATE_CONSUMER_OFFSET commits there too (the slave's table reaches the full
count, which only this consumer could have committed), as the Java client does.
The master returns, new messages are sent and the group starts again: the
returning master answers the slave's offsets, so the group gets the new messages
and at most 1 % of the outage's again.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from aiorocketmq.testing import ClusterFactory
from tests.chaos.test_offsets_survive_master_return import (
    BEFORE,
    GROUP,
    OUTAGE,
    QUEUES,
    TOPIC,
    send,
    start_master_slave,
    wait_committed,
)
from tests.chaos.workload import committed_offsets
from tests.interop.stock_support import CONSUMED, StartProcess, finish, read_received, start_cpp
from tests.support.cluster import runtime_info
from tests.support.procs import ManagedProcess
from tests.support.wait import wait_until

pytestmark = [
    pytest.mark.interop,
    pytest.mark.timeout(300),
    pytest.mark.skipif(
        importlib.util.find_spec("rocketmq") is None, reason="PyPI rocketmq (x86_64 Linux only)"
    ),
]

AFTER = 300


def _push(
    start_process: StartProcess, tmp_path: Path, phase: str, namesrv: str
) -> tuple[ManagedProcess, Path]:
    """A stock push consumer of the group until ``<phase>.stop`` exists; the process
    and its records."""
    out, stop = tmp_path / f"{phase}.txt", tmp_path / f"{phase}.stop"
    proc = start_cpp(
        start_process, tmp_path / f"home-{phase}", f"cpp-{phase}",
        ["push", namesrv, TOPIC, GROUP, "*", "1000000", "150", str(out),
         "--stop-file", str(stop), "--linger-s", "0"],
        CONSUMED,
    )  # fmt: skip
    return proc, out


async def _consume(
    start_process: StartProcess, tmp_path: Path, phase: str, namesrv: str, keys: set[str]
) -> set[str]:
    """Run the stock consumer until it has every key of ``keys``, then stop it
    (its shutdown persists the offsets); every key it received."""
    proc, out = _push(start_process, tmp_path, phase, namesrv)
    await wait_until(
        lambda: keys <= {r.key for r in read_received(out)},
        timeout=150,
        interval=0.2,
        what=f"the C++ consumer got {len(keys)} keys ({phase})",
        describe=lambda: len(keys - {r.key for r in read_received(out)}),
    )
    (tmp_path / f"{phase}.stop").touch()
    await finish(proc, 60)
    return {r.key for r in read_received(out)}


async def test_cpp_group_consumed_on_the_slave_is_not_sent_back_by_the_returning_master(
    rocketmq_cluster: ClusterFactory, start_process: StartProcess, tmp_path: Path
) -> None:
    cluster = await start_master_slave(rocketmq_cluster)
    namesrv, master, slave = (
        cluster.namesrv_addr, cluster.address("broker-a"), cluster.address("broker-a-s")
    )  # fmt: skip
    first = set(await send(namesrv, "before", BEFORE))
    await _consume(start_process, tmp_path, "before", namesrv, first)
    await wait_committed(master, BEFORE, "offsets committed on the master")
    await wait_committed(slave, BEFORE, "the master's offsets synced to the slave")
    outage = set(await send(namesrv, "outage", OUTAGE))
    await cluster.wait_caught_up_async(30)
    await cluster.kill_async("broker-a")
    during = await _consume(start_process, tmp_path, "outage", namesrv, outage)
    assert not during & first
    # What the stock client committed while its master was away: on the slave.
    on_slave = await wait_committed(slave, BEFORE + OUTAGE, "C++ offsets on the slave")
    await cluster.restart_async("broker-a")
    assert await committed_offsets(master, GROUP, TOPIC, QUEUES) == on_slave

    async def slave_connected() -> bool:
        return (await runtime_info(master)).get("haSlaveNum") == "1"

    await wait_until(slave_connected, timeout=30, interval=0.1, what="the slave reconnected")
    new = set(await send(namesrv, "after", AFTER))
    after = await _consume(start_process, tmp_path, "after", namesrv, new)
    await wait_committed(master, BEFORE + OUTAGE + AFTER, "final offsets on the master")
    again = after & outage
    assert len(again) <= OUTAGE // 100, f"{len(again)} outage messages delivered again"
    assert not after & first
