"""Offset stores: the file format, the local file store on real files, and the remote
store against a real in-process broker and recording master/slave servers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiorocketmq.client.config import ClientConfig
from aiorocketmq.client.errors import BrokerNotFoundError
from aiorocketmq.client.instance import ClientInstance
from aiorocketmq.client.offset_store import (
    LocalFileOffsetStore,
    ReadOffsetType,
    RemoteBrokerOffsetStore,
    decode_offsets_json,
    encode_offsets_json,
)
from aiorocketmq.common.errors import RemoteProtocolError
from aiorocketmq.common.message import MessageQueue
from aiorocketmq.namesrv.server import NamesrvController
from aiorocketmq.remoting.broker_headers import (
    QueryConsumerOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.config import RemotingServerConfig
from aiorocketmq.remoting.connection import ProcessorTable, RemotingConnection
from aiorocketmq.remoting.server import RemotingServer
from aiorocketmq.runtime import BlockingExecutor
from tests.support.wait import wait_until
from tests.unit.client.conftest import StartBroker

pytestmark = pytest.mark.timeout(60)

MQ0 = MessageQueue("T", "broker-a", 0)
MQ1 = MessageQueue("T", "broker-a", 1)

# What Java 4.9's LocalFileOffsetStore writes (fastjson pretty, object keys).
JAVA_PRETTY = """{
\t"offsetTable":{{
\t\t\t"brokerName":"broker-a",
\t\t\t"queueId":1,
\t\t\t"topic":"T"
\t\t}:42,{
\t\t\t"brokerName":"broker-a",
\t\t\t"queueId":0,
\t\t\t"topic":"T"
\t\t}:7
\t}
}"""


def test_reads_java_pretty_offsets_and_writes_fastjson_compact() -> None:
    assert decode_offsets_json(JAVA_PRETTY) == {MQ1: 42, MQ0: 7}
    text = encode_offsets_json({MQ1: 42, MQ0: 7})
    assert text == (
        '{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:7,'
        '{"brokerName":"broker-a","queueId":1,"topic":"T"}:42}}'
    )
    assert decode_offsets_json('{"offsetTable":{}}') == {}
    with pytest.raises(RemoteProtocolError):
        decode_offsets_json("{}")
    with pytest.raises(RemoteProtocolError):
        decode_offsets_json('{"offsetTable":{{"brokerName":"b","queueId":"x"}:1}}')


names = st.from_regex(r"[%|a-zA-Z0-9_-]{1,20}", fullmatch=True)


@given(
    st.dictionaries(
        st.builds(MessageQueue, names, names, st.integers(0, 1023)), st.integers(-1, 2**62)
    )
)
def test_offsets_round_trip(table: dict[MessageQueue, int]) -> None:
    assert decode_offsets_json(encode_offsets_json(table)) == table


def test_update_increase_only_remove_clone() -> None:
    store = RemoteBrokerOffsetStore(_instance("127.0.0.1:1"), "G")
    store.update_offset(MQ0, 5)
    store.update_offset(MQ0, 3, increase_only=True)
    assert store.offset_table[MQ0] == 5
    store.update_offset(MQ0, 3)
    assert store.offset_table[MQ0] == 3
    store.update_offset(MessageQueue("U", "b", 0), 1)
    assert store.clone_offset_table("T") == {MQ0: 3}
    store.remove_offset(MQ0)
    assert store.clone_offset_table("T") == {}


async def test_local_file_store_persists_loads_and_falls_back_to_bak(tmp_path: Path) -> None:
    executor = BlockingExecutor("offsets-test")
    try:
        store = LocalFileOffsetStore(tmp_path, "127.0.0.1@1", "G", executor)
        await store.load()
        assert await store.read_offset(MQ0, ReadOffsetType.MEMORY_FIRST_THEN_STORE) == -1
        store.update_offset(MQ0, 10)
        store.update_offset(MQ1, 20)
        await store.persist_all([MQ0, MQ1])
        store.update_offset(MQ0, 11)
        await store.persist_all([MQ0])  # the previous file becomes offsets.json.bak
        assert store.path == tmp_path / "127.0.0.1@1" / "G" / "offsets.json"
        again = LocalFileOffsetStore(tmp_path, "127.0.0.1@1", "G", executor)
        await again.load()
        assert again.offset_table == {MQ0: 11}
        assert await again.read_offset(MQ1, ReadOffsetType.READ_FROM_MEMORY) == -1
        store.path.write_text("{torn", "utf-8")
        third = LocalFileOffsetStore(tmp_path, "127.0.0.1@1", "G", executor)
        assert await third.read_offset(MQ1, ReadOffsetType.READ_FROM_STORE) == 20  # from .bak
        assert third.offset_table == {MQ1: 20}
    finally:
        await executor.shutdown()


def _instance(namesrv: str) -> ClientInstance:
    return ClientInstance(ClientConfig(namesrv_addr=namesrv, client_ip="127.0.0.1"))


async def test_remote_store_against_a_real_broker(
    namesrv: NamesrvController, start_broker: StartBroker
) -> None:
    broker = await start_broker("broker-a")
    instance = _instance(namesrv.address)
    instance.broker_addr_table["broker-a"] = {0: broker.address}
    store = RemoteBrokerOffsetStore(instance, "CG")
    mq = MessageQueue("TBW102", "broker-a", 0)
    try:
        store.update_offset(mq, 0)
        await store.persist(mq, oneway=False)
        store.offset_table.clear()
        assert await store.read_offset(mq, ReadOffsetType.READ_FROM_MEMORY) == -1
        assert await store.read_offset(mq, ReadOffsetType.MEMORY_FIRST_THEN_STORE) == 0
        assert store.offset_table == {mq: 0}
        store.update_offset(mq, 0)
        await store.persist_all([mq])  # oneway, as the periodic persist
        assert await store.read_offset(mq, ReadOffsetType.READ_FROM_STORE) == 0
    finally:
        await instance.remoting.close()


class Node:
    """A broker node that records offset requests and answers from its own table."""

    def __init__(self) -> None:
        self.offsets: dict[tuple[str, int], int] = {}
        self.updates: list[UpdateConsumerOffsetRequestHeader] = []
        self.server: RemotingServer | None = None

    def _update(self, _c: RemotingConnection, req: RemotingCommand) -> RemotingCommand:
        header = UpdateConsumerOffsetRequestHeader.from_ext_fields(req.ext_fields)
        self.updates.append(header)
        self.offsets[(header.topic, header.queue_id)] = header.commit_offset
        return req.response_to(ResponseCode.SUCCESS)

    def _query(self, _c: RemotingConnection, req: RemotingCommand) -> RemotingCommand:
        header = QueryConsumerOffsetRequestHeader.from_ext_fields(req.ext_fields)
        offset = self.offsets.get((header.topic, header.queue_id))
        if offset is None:
            return req.response_to(ResponseCode.QUERY_NOT_FOUND, "Not found, V3_0_6_SNAPSHOT maybe")
        return req.response_to(ResponseCode.SUCCESS, None, {"offset": str(offset)})

    async def start(self) -> str:
        table = ProcessorTable()
        table.register(RequestCode.UPDATE_CONSUMER_OFFSET, self._update)
        table.register(RequestCode.QUERY_CONSUMER_OFFSET, self._query)
        self.server = RemotingServer(
            table, RemotingServerConfig(listen_host="127.0.0.1", listen_port=0)
        )
        await self.server.start()
        return self.server.address


@pytest.fixture
async def master_slave() -> AsyncIterator[tuple[Node, Node, str, str]]:
    master, slave = Node(), Node()
    m, s = await master.start(), await slave.start()
    yield master, slave, m, s
    for node in (master, slave):
        assert node.server is not None
        await node.server.shutdown()


async def test_remote_store_writes_to_the_master_then_to_the_slave_when_the_master_is_gone(
    namesrv: NamesrvController, master_slave: tuple[Node, Node, str, str]
) -> None:
    master, slave, m, s = master_slave
    instance = _instance(namesrv.address)
    store = RemoteBrokerOffsetStore(instance, "CG")
    try:
        instance.broker_addr_table["broker-a"] = {0: m, 1: s}
        store.update_offset(MQ0, 5)
        await store.persist_all([MQ0])
        await wait_until(lambda: master.offsets.get(("T", 0)) == 5, what="oneway commit on master")
        assert slave.updates == []
        # Master gone from the route: commits go to the slave, reads ask it too.
        instance.broker_addr_table["broker-a"] = {1: s}
        store.update_offset(MQ0, 9)
        await store.persist(MQ0, oneway=False)
        assert slave.offsets[("T", 0)] == 9 and master.offsets[("T", 0)] == 5
        assert await store.read_offset(MQ0, ReadOffsetType.READ_FROM_STORE) == 9
        assert await store.read_offset(MQ1, ReadOffsetType.READ_FROM_STORE) == -1  # not found
        instance.broker_addr_table.clear()
        assert await store.read_offset(MQ1, ReadOffsetType.READ_FROM_STORE) == -2
        with pytest.raises(BrokerNotFoundError):
            await store.persist(MQ0)
    finally:
        await instance.remoting.close()


async def test_persist_all_forgets_queues_not_listed(
    namesrv: NamesrvController, master_slave: tuple[Node, Node, str, str]
) -> None:
    master, _slave, m, _s = master_slave
    instance = _instance(namesrv.address)
    instance.broker_addr_table["broker-a"] = {0: m}
    store = RemoteBrokerOffsetStore(instance, "CG")
    try:
        store.update_offset(MQ0, 1)
        store.update_offset(MQ1, 2)
        await store.persist_all([MQ1])
        assert store.offset_table == {MQ1: 2}
        await wait_until(lambda: master.offsets == {("T", 1): 2}, what="only MQ1 committed")
    finally:
        await instance.remoting.close()
