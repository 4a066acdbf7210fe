"""PULL_MESSAGE on running brokers: long polling timing and suggestWhichBrokerId.

suggestWhichBrokerId follows 4.9.8's PullMessageProcessor: with slaveReadEnable off
it is always 0 (master); with it on, a lagging consumer (the store's
suggestPullingFromSlave: more than accessMessageInMemoryMaxRatio % of RAM behind)
is sent to the group's whichBrokerWhenConsumeSlowly, a consumer keeping up to the
group's brokerId; a slave answering OFFSET_MOVED without offsetCheckInSlave says
PULL_RETRY_IMMEDIATELY and suggests the group's brokerId. accessMessageInMemoryMaxRatio=0
makes every FOUND pull lag (the threshold is 0 bytes).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.common import fastjson
from aiorocketmq.common.subscription_group import SubscriptionGroupConfig
from aiorocketmq.common.topic_config import TopicConfig
from aiorocketmq.remoting.broker_headers import PullMessageResponseHeader
from aiorocketmq.remoting.client import RemotingClient
from aiorocketmq.remoting.codes import ResponseCode
from tests.support.cluster import BROKER_READY, broker_properties, in_process_broker
from tests.support.procs import ManagedProcess
from tests.support.wait import wait_until
from tests.unit.broker.broker_support import pull_request
from tests.unit.broker.processor_support import send_request

pytestmark = pytest.mark.timeout(90)

StartProcess = Callable[..., ManagedProcess]
TOPIC = "TopicTest"
#: A group with non-default brokerId / whichBrokerWhenConsumeSlowly, so each branch
#: shows a distinct number.
GROUP = "CID_suggest"
GROUP_BROKER_ID = 2
GROUP_SLOW_ID = 3
ARRIVAL_BUDGET_S = 0.050


# -- long polling ---------------------------------------------------------------------


async def test_held_pull_is_answered_within_50ms_of_arrival_and_not_before(
    tmp_path: Path,
) -> None:
    async with in_process_broker(tmp_path) as broker:
        broker.ctx.topics.update_topic_config(TopicConfig(TOPIC, 1, 1))
        client = RemotingClient()
        try:
            for offset in range(5):
                pull = asyncio.ensure_future(
                    client.invoke(broker.address, pull_request(offset, suspend_ms=15_000), 20_000)
                )
                await wait_until(lambda: broker.hold.held_count == 1, timeout=5, what="held")
                assert not pull.done()  # held: no message yet, so no answer yet
                reply = await client.invoke(broker.address, send_request(b"x"), 5000)
                assert reply.code == ResponseCode.SUCCESS
                stored_at = time.perf_counter()
                answer = await asyncio.wait_for(pull, 5)
                late_by = time.perf_counter() - stored_at
                assert answer.code == ResponseCode.SUCCESS
                header = PullMessageResponseHeader.from_ext_fields(answer.ext_fields)
                assert header.next_begin_offset == offset + 1
                assert late_by <= ARRIVAL_BUDGET_S, f"answered {late_by * 1000:.1f} ms after"
        finally:
            await client.close()


async def test_held_pull_without_message_answers_not_found_after_its_timeout(
    tmp_path: Path,
) -> None:
    async with in_process_broker(tmp_path) as broker:
        broker.ctx.topics.update_topic_config(TopicConfig(TOPIC, 1, 1))
        client = RemotingClient()
        try:
            started = time.perf_counter()
            reply = await client.invoke(broker.address, pull_request(0, suspend_ms=400), 10_000)
            waited = time.perf_counter() - started
        finally:
            await client.close()
        assert reply.code == ResponseCode.PULL_NOT_FOUND
        assert waited >= 0.4  # not before the suspend timeout


# -- suggestWhichBrokerId ---------------------------------------------------------------


def _write_groups(store_root: Path) -> None:
    """subscriptionGroup.json with GROUP, before the broker starts."""
    group = SubscriptionGroupConfig(
        GROUP, broker_id=GROUP_BROKER_ID, which_broker_when_consume_slowly=GROUP_SLOW_ID
    )
    doc = {
        "dataVersion": {"counter": 1, "timestamp": 1},
        "subscriptionGroupTable": {GROUP: group.to_json_dict()},
    }
    (store_root / "config").mkdir(parents=True, exist_ok=True)
    (store_root / "config" / "subscriptionGroup.json").write_text(fastjson.dumps(doc), "utf-8")


async def _start(start_process: StartProcess, tmp_path: Path, name: str, **settings: Any) -> str:
    store_root = tmp_path / f"{name}-store"
    _write_groups(store_root)
    conf = broker_properties(tmp_path, name, storePathRootDir=str(store_root), **settings)
    proc = start_process(
        ["-m", "aiorocketmq.cli.broker", "-c", str(conf)],
        name=name,
        ready=BROKER_READY,
        wait=False,
    )
    return (await proc.wait_ready_async())["addr"]


async def _pull(
    client: RemotingClient, addr: str, offset: int, group: str = GROUP, topic: str = TOPIC
) -> tuple[int, int]:
    """(response code, suggestWhichBrokerId) of one pull that does not wait."""
    request = pull_request(offset, group=group, topic=topic, suspend_ms=2_000, sys_flag=0x4)
    reply = await client.invoke(addr, request, 5000)
    header = PullMessageResponseHeader.from_ext_fields(reply.ext_fields)
    return reply.code, header.suggest_which_broker_id


async def _fill(client: RemotingClient, addr: str, count: int) -> None:
    for i in range(count):
        reply = await client.invoke(addr, send_request(b"%d" % i, queue_id=0), 5000)
        assert reply.code == ResponseCode.SUCCESS, reply.remark


async def _found(client: RemotingClient, addr: str, offset: int, group: str = GROUP) -> int:
    """suggestWhichBrokerId of a FOUND pull at ``offset`` (waits for dispatch)."""
    found: list[int] = []

    async def check() -> bool:
        code, suggest = await _pull(client, addr, offset, group)
        if code == ResponseCode.SUCCESS:
            found.append(suggest)
            return True
        return False

    await wait_until(check, timeout=10, what=f"messages at {offset} on {addr}")
    return found[-1]


async def test_suggest_which_broker_id_on_running_brokers(
    start_process: StartProcess, tmp_path: Path
) -> None:
    brokers = await asyncio.gather(
        _start(start_process, tmp_path, "read-off", slaveReadEnable=False,
               accessMessageInMemoryMaxRatio=0),
        _start(start_process, tmp_path, "lagging", slaveReadEnable=True,
               accessMessageInMemoryMaxRatio=0),
        _start(start_process, tmp_path, "keeping-up", slaveReadEnable=True),
        _start(start_process, tmp_path, "slave", brokerId=1, brokerRole="SLAVE",
               slaveReadEnable=False, offsetCheckInSlave=False),
    )  # fmt: skip
    read_off, lagging, keeping_up, slave = brokers
    client = RemotingClient()
    try:
        for addr in (read_off, lagging, keeping_up):
            await _fill(client, addr, 3)
        # slaveReadEnable=false: always the master, lagging or not.
        assert await _found(client, read_off, 0) == 0
        # slaveReadEnable=true and lagging: whichBrokerWhenConsumeSlowly (the group's,
        # or 1 for a group the broker auto-created).
        assert await _found(client, lagging, 0) == GROUP_SLOW_ID
        assert await _found(client, lagging, 0, group="CID_auto_created") == 1
        # slaveReadEnable=true, nothing to read: not lagging -> the group's brokerId.
        assert await _pull(client, lagging, 3) == (ResponseCode.PULL_NOT_FOUND, GROUP_BROKER_ID)
        # slaveReadEnable=true and keeping up (40 % of RAM): the group's brokerId.
        assert await _found(client, keeping_up, 2) == GROUP_BROKER_ID
        # A slave without slaveReadEnable sends consumers back to the master (its
        # topic named after itself exists without any send: brokerTopicEnable)...
        assert await _pull(client, slave, 0, topic="slave") == (ResponseCode.PULL_NOT_FOUND, 0)
        # ...and an offset it cannot serve (offsetCheckInSlave=false) is retried, not
        # moved, with the group's brokerId.
        assert await _pull(client, slave, 5, topic="slave") == (
            ResponseCode.PULL_RETRY_IMMEDIATELY,
            GROUP_BROKER_ID,
        )
    finally:
        await client.close()
