"""The stock C++ client keeps consuming from the slave after its master dies.

A master and a slave (slaveReadEnable) run as processes; the C++ client produces
2,000 messages to the master, which replicates them; a slow stock PushConsumer
(20 ms per message) is part-way through when the master is SIGKILLed. The client
keeps pulling the dead master until its 30 s route refresh shows only the slave,
then consumes the rest from the slave: every message is received (at least once:
offsets committed to the dead master may be lost, so some come twice).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests.interop.stock_support import (
    CONSUMED,
    PRODUCED,
    StartProcess,
    expected_messages,
    finish,
    read_received,
    start_cpp,
)
from tests.support.cluster import (
    create_topic,
    has_topic,
    start_broker,
    start_namesrv,
    wait_replicated,
)
from tests.support.wait import wait_until

pytestmark = [
    pytest.mark.interop,
    pytest.mark.timeout(150),
    pytest.mark.skipif(
        importlib.util.find_spec("rocketmq") is None, reason="PyPI rocketmq (x86_64 Linux only)"
    ),
]

TOTAL = 2_000


async def test_cpp_push_consumer_moves_to_the_slave_after_the_master_dies(
    start_process: StartProcess, tmp_path: Path
) -> None:
    _, namesrv = await start_namesrv(start_process, tmp_path)
    master = await start_broker(start_process, tmp_path, namesrv, "broker-a")
    slave = await start_broker(
        start_process, tmp_path / "s", namesrv, "broker-a",
        brokerId=1, brokerRole="SLAVE", slaveReadEnable=True,
    )  # fmt: skip
    await create_topic(master.addr, "HATopic")
    await wait_until(lambda: has_topic(slave.addr, "HATopic"), timeout=15, what="topic on slave")
    produce = start_cpp(
        start_process, tmp_path / "home-p", "cpp-produce",
        ["produce", namesrv, "HATopic", "sync", str(TOTAL), "--prefix", "ha"], PRODUCED,
    )  # fmt: skip
    produced = await finish(produce, 60)
    assert produced["errors"] == "0"
    await wait_replicated(master.addr, slave.addr)
    out = tmp_path / "push.txt"
    push = start_cpp(
        start_process, tmp_path / "home-c", "cpp-push",
        ["push", namesrv, "HATopic", "GID_ha", "*", str(TOTAL), "120", str(out),
         "--work-ms", "20"],
        CONSUMED,
    )  # fmt: skip
    await wait_until(
        lambda: out.exists() and out.read_bytes().count(b"\n") >= 200,
        timeout=30,
        what="the consumer part-way through",
    )
    master.proc.kill()
    before_kill = out.read_bytes().count(b"\n")
    assert before_kill < TOTAL, "no backlog left when the master died"
    await finish(push, 120)
    received = read_received(out)
    keys = {r.key for r in received}
    assert keys == {m.key for m in expected_messages(TOTAL, "ha")}
