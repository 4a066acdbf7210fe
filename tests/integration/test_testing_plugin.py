"""The ``rocketmq_cluster`` pytest plugin, used the way a user's suite uses it.

``pytester`` writes a small user test file into a fresh directory and runs pytest
on it in a subprocess (the plugin is found through its ``pytest11`` entry point,
as after ``pip install aiorocketmq``). The user test starts the 2m-2s-sync layout,
sends messages, SIGKILLs the broker-a master and reads every message sent to
broker-a from its slave. A second run checks that teardown stopped every node by
PID: the PIDs the user test printed are gone afterwards.
"""

from __future__ import annotations

import re

import pytest

from aiorocketmq.deploy.process import pid_alive

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.timeout(180)

USER_TEST = '''
import asyncio
import time

import pytest

from aiorocketmq.client.config import ClientConfig
from aiorocketmq.client.errors import MQClientError
from aiorocketmq.client.producer import Producer
from aiorocketmq.client.pull_consumer import PullConsumer
from aiorocketmq.client.results import PullStatus, SendStatus
from aiorocketmq.common.message import Message


def config(cluster, name):
    return ClientConfig(namesrv_addr=cluster.namesrv_addr, client_ip="127.0.0.1",
                        instance_name=name)


async def read_all(consumer, mq, deadline):
    """Every body in ``mq``, retrying while the client moves off the dead master."""
    bodies, offset = [], 0
    while time.monotonic() < deadline:
        try:
            result = await consumer.pull(mq, "*", offset, 32)
        except MQClientError:
            await asyncio.sleep(0.02)  # the client is still routing to the dead master
            continue
        if result.status is not PullStatus.FOUND:
            return bodies
        bodies += [m.body for m in result.msg_found_list]
        offset = result.next_begin_offset
    raise AssertionError(f"{mq}: still reading at the deadline ({len(bodies)} read)")


@pytest.mark.asyncio
async def test_slave_serves_after_master_is_killed(rocketmq_cluster):
    cluster = rocketmq_cluster("2m-2s-sync")
    roles = {name: node.role for name, node in cluster.nodes.items()}
    assert roles == {"namesrv-1": "NAMESRV", "namesrv-2": "NAMESRV",
                     "broker-a": "SYNC_MASTER", "broker-a-s": "SLAVE",
                     "broker-b": "SYNC_MASTER", "broker-b-s": "SLAVE"}
    print("PIDS", " ".join(str(cluster.pid(name)) for name in cluster.nodes))
    await cluster.create_topic_async("Orders")
    sent_to_a = []
    async with Producer("PG", client_config=config(cluster, "producer")) as producer:
        for i in range(40):
            result = await producer.send(Message("Orders", b"order-%d" % i))
            assert result.status is SendStatus.SEND_OK
            if result.message_queue.broker_name == "broker-a":
                sent_to_a.append(b"order-%d" % i)
    assert sent_to_a, "round-robin over 8 queues reaches broker-a"
    await cluster.wait_caught_up_async()
    await cluster.kill_async("broker-a")
    assert cluster.pid("broker-a") is None and not cluster.running("broker-a")
    async with PullConsumer("CG", client_config=config(cluster, "consumer")) as consumer:
        mqs = await consumer.fetch_subscribe_message_queues("Orders")
        read = []
        deadline = time.monotonic() + 30
        for mq in sorted(m for m in mqs if m.broker_name == "broker-a"):
            read += await read_all(consumer, mq, deadline)
    assert sorted(read) == sorted(sent_to_a)
    rows = {row.name: row for row in cluster.status()}
    assert not rows["broker-a"].running and rows["broker-a-s"].running
    assert rows["broker-a-s"].max_offset > 0
'''


def test_user_suite_kills_a_master_and_reads_from_the_slave(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user=USER_TEST)
    result = pytester.runpytest_subprocess("-s", "-p", "no:cacheprovider", timeout=150)
    result.assert_outcomes(passed=1)
    pids_line = next(line for line in result.outlines if "PIDS " in line)
    pids = [int(p) for p in re.findall(r"\d+", pids_line.split("PIDS ", 1)[1])]
    assert len(pids) == 6
    # Teardown stopped every node by PID (the killed master was already gone).
    assert [p for p in pids if pid_alive(p)] == []


def test_unknown_layout_is_a_clear_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_bad="""
        import pytest
        from aiorocketmq.deploy import LayoutError

        def test_bad(rocketmq_cluster):
            with pytest.raises(LayoutError, match="no layout 'nope'"):
                rocketmq_cluster("nope")
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=60)
    result.assert_outcomes(passed=1)


SYNC_USER_TEST = """
from aiorocketmq.deploy import standard_layout


def test_plain_sync_test(rocketmq_cluster):
    cluster = rocketmq_cluster(
        standard_layout(["broker-a"], slaves=True, role="ASYNC_MASTER"),
        settings={"fileReservedTime": 1},
    )
    assert cluster.masters == ["broker-a"] and cluster.slaves == ["broker-a-s"]
    assert cluster.namesrv_addr == cluster.nodes["namesrv-1"].address
    conf = (cluster.directory / "conf" / "broker-a.properties").read_text()
    assert "fileReservedTime=1" in conf and "mappedFileSizeCommitLog=4194304" in conf
    cluster.create_topic("T")
    first = cluster.pid("broker-a-s")
    cluster.stop("broker-a-s")
    assert cluster.pid("broker-a-s") is None
    cluster.restart("broker-a-s")
    assert cluster.pid("broker-a-s") not in (None, first)
    cluster.wait_registered()
    assert cluster.wait_caught_up() == {"broker-a-s": 0}
    assert [row.running for row in cluster.status()] == [True, True, True]
"""


def test_plain_sync_user_test_with_an_inline_layout(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_sync=SYNC_USER_TEST)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=120)
    result.assert_outcomes(passed=1)
