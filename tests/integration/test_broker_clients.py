"""Client bookkeeping on a running ``mqbroker``: heartbeats, the consumer list, and
NOTIFY_CONSUMER_IDS_CHANGED when a group's members change (join, unregister, close).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from aiorocketmq.common.protocol_bodies import (
    ConsumerData,
    ConsumerListBody,
    ConsumeType,
    HeartbeatData,
    SubscriptionData,
)
from aiorocketmq.remoting.client import RemotingClient
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.connection import ProcessorTable, RemotingConnection
from tests.support.cluster import BROKER_READY, broker_properties
from tests.support.procs import ManagedProcess
from tests.support.wait import wait_until

pytestmark = pytest.mark.timeout(60)

StartProcess = Callable[..., ManagedProcess]
GROUP = "CID_members"


class Member:
    """One consumer client: its own connection, heartbeats, and the notifications it got."""

    def __init__(self, client_id: str) -> None:
        self.client_id = client_id
        self.notified: list[str] = []
        table = ProcessorTable()
        table.register(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, self._on_notify)
        self.client = RemotingClient(processors=table)

    def _on_notify(self, _conn: RemotingConnection, request: RemotingCommand) -> None:
        self.notified.append(request.ext_fields.get("consumerGroup", ""))

    async def heartbeat(self, addr: str) -> None:
        data = HeartbeatData(
            self.client_id,
            consumers=[
                ConsumerData(
                    GROUP,
                    consume_type=ConsumeType.CONSUME_PASSIVELY,
                    subscriptions=[SubscriptionData("TopicTest", "TagA", ("TagA",))],
                )
            ],
        )
        reply = await self.client.invoke(
            addr, RemotingCommand.request(RequestCode.HEART_BEAT, body=data.encode()), 5000
        )
        assert reply.code == ResponseCode.SUCCESS, reply.remark

    async def consumer_ids(self, addr: str) -> list[str]:
        request = RemotingCommand.request(
            RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": GROUP}
        )
        reply = await self.client.invoke(addr, request, 5000)
        if reply.code != ResponseCode.SUCCESS:
            return []
        return sorted(ConsumerListBody.decode(reply.body).consumer_id_list)


@pytest.fixture
async def broker(start_process: StartProcess, tmp_path: Path) -> AsyncIterator[str]:
    proc = start_process(
        ["-m", "aiorocketmq.cli.broker", "-c", str(broker_properties(tmp_path))],
        name="broker",
        ready=BROKER_READY,
        wait=False,
    )
    yield (await proc.wait_ready_async())["addr"]


async def test_group_members_are_listed_and_notified_of_changes(broker: str) -> None:
    first, second = Member("10.0.0.1@first"), Member("10.0.0.2@second")
    try:
        # Every join changes the group, and every channel of the group is told, the
        # newcomer included (ConsumerManager.registerConsumer -> CHANGE).
        await first.heartbeat(broker)
        await wait_until(lambda: first.notified == [GROUP], timeout=5, what="own join")
        assert await first.consumer_ids(broker) == ["10.0.0.1@first"]
        await second.heartbeat(broker)
        await wait_until(lambda: len(first.notified) == 2, timeout=5, what="join notice")
        await wait_until(lambda: second.notified == [GROUP], timeout=5, what="newcomer")
        assert await first.consumer_ids(broker) == ["10.0.0.1@first", "10.0.0.2@second"]
        # A repeated heartbeat with the same subscriptions changes nothing (a notice
        # would precede the reply that follows it on this connection).
        await first.heartbeat(broker)
        assert await first.consumer_ids(broker) == ["10.0.0.1@first", "10.0.0.2@second"]
        assert len(first.notified) == 2
        # The second member's connection closes: the first is told and the list shrinks.
        await second.client.close()
        await wait_until(lambda: len(first.notified) == 3, timeout=5, what="leave notice")
        assert await first.consumer_ids(broker) == ["10.0.0.1@first"]
        assert first.notified == [GROUP] * 3
    finally:
        await first.client.close()
        await second.client.close()
