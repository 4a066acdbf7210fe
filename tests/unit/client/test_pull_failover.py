"""Pulls move between master and slave: by suggestWhichBrokerId, and when the master dies.

The broker nodes are RemotingServers on 127.0.0.1 answering PULL_MESSAGE (and
recording what they get); ``BrokerDouble``s register their addresses with a real
in-process name server, as master (id 0) and slave (id 1) of broker-a.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from aiorocketmq.client.config import ClientConfig
from aiorocketmq.client.errors import MQConnectError
from aiorocketmq.client.pull_consumer import PullConsumer
from aiorocketmq.client.results import PullStatus
from aiorocketmq.common.message import MessageQueue
from aiorocketmq.namesrv.server import NamesrvController
from aiorocketmq.remoting.broker_headers import PullMessageRequestHeader
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.config import RemotingServerConfig
from aiorocketmq.remoting.connection import ProcessorTable, RemotingConnection
from aiorocketmq.remoting.server import RemotingServer
from tests.support.broker_double import BrokerDouble
from tests.support.wait import wait_until

pytestmark = pytest.mark.timeout(30)

MQ = MessageQueue("T", "broker-a", 0)


@dataclass
class PullNode:
    """Answers every pull with PULL_NOT_FOUND and the configured suggestion."""

    suggest: int = 0
    pulls: list[PullMessageRequestHeader] = field(default_factory=list)
    server: RemotingServer | None = None

    def _pull(self, _c: RemotingConnection, req: RemotingCommand) -> RemotingCommand:
        header = PullMessageRequestHeader.from_ext_fields(req.ext_fields)
        self.pulls.append(header)
        fields = {
            "suggestWhichBrokerId": str(self.suggest),
            "nextBeginOffset": str(header.queue_offset),
            "minOffset": "0",
            "maxOffset": str(header.queue_offset),
        }
        return req.response_to(ResponseCode.PULL_NOT_FOUND, None, fields)

    async def start(self) -> str:
        table = ProcessorTable()
        table.register(RequestCode.PULL_MESSAGE, self._pull)
        config = RemotingServerConfig(listen_host="127.0.0.1", listen_port=0)
        self.server = RemotingServer(table, config)
        await self.server.start()
        return self.server.address


@dataclass
class Pair:
    master: PullNode
    slave: PullNode
    master_addr: str
    slave_addr: str
    registrations: list[BrokerDouble]


@pytest.fixture
async def pair(namesrv: NamesrvController) -> AsyncIterator[Pair]:
    master, slave = PullNode(), PullNode()
    m, s = await master.start(), await slave.start()
    doubles = [
        BrokerDouble("broker-a", 0, topics={"T": 1}, broker_addr=m),
        BrokerDouble("broker-a", 1, topics={"T": 1}, broker_addr=s),
    ]
    for double in doubles:
        await double.register(namesrv.address)
    yield Pair(master, slave, m, s, doubles)
    for double in doubles:
        await double.close()
    for node in (master, slave):
        assert node.server is not None
        await node.server.shutdown()


def _consumer(namesrv: NamesrvController) -> PullConsumer:
    config = ClientConfig(
        namesrv_addr=namesrv.address,
        client_ip="127.0.0.1",
        poll_name_server_interval=3_600_000,  # only the failure may trigger a refresh
    )
    return PullConsumer("CG", client_config=config)


async def test_suggest_which_broker_id_moves_pulls_to_the_slave_and_back(
    namesrv: NamesrvController, pair: Pair
) -> None:
    async with _consumer(namesrv) as consumer:
        pair.master.suggest = 1  # "you are lagging: read from the slave"
        assert (await consumer.pull(MQ, "*", 0, 32)).status is PullStatus.NO_NEW_MSG
        assert consumer.pull_api.pull_from_which_node[MQ] == 1
        pair.slave.suggest = 1
        await consumer.pull(MQ, "*", 0, 32)
        assert (len(pair.master.pulls), len(pair.slave.pulls)) == (1, 1)
        pair.slave.suggest = 0  # caught up: back to the master
        await consumer.pull(MQ, "*", 0, 32)
        await consumer.pull(MQ, "*", 0, 32)
        assert (len(pair.master.pulls), len(pair.slave.pulls)) == (2, 2)


async def test_a_dead_master_costs_one_failed_pull_then_pulls_go_to_the_slave(
    namesrv: NamesrvController, pair: Pair
) -> None:
    async with _consumer(namesrv) as consumer:
        await consumer.pull(MQ, "*", 0, 32)
        assert len(pair.master.pulls) == 1
        instance = consumer.instance
        assert instance.broker_addr_table["broker-a"] == {0: pair.master_addr, 1: pair.slave_addr}
        # The master dies: its server stops and its name-server connection closes.
        assert pair.master.server is not None
        await pair.master.server.shutdown()
        pair.registrations[0].drop_connection(namesrv.address)
        with pytest.raises(MQConnectError):
            await consumer.pull(MQ, "*", 0, 32)
        await wait_until(
            lambda: instance.broker_addr_table["broker-a"] == {1: pair.slave_addr},
            what="the route refresh triggered by the failure",
        )
        for _ in range(3):
            assert (await consumer.pull(MQ, "*", 0, 32)).status is PullStatus.NO_NEW_MSG
        assert len(pair.slave.pulls) == 3
        assert not any(p.has_commit_offset for p in pair.slave.pulls)
