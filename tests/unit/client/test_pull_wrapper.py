"""PullAPIWrapper: pullFromWhichNodeTable, broker choice, request flags and
processPullResult, one test per branch (records built with the store's encoder; the
broker side a RemotingServer on 127.0.0.1 that records what it receives)."""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator

import pytest

from aiorocketmq.client.config import ClientConfig
from aiorocketmq.client.errors import BrokerNotFoundError, MQBrokerError
from aiorocketmq.client.instance import ClientInstance
from aiorocketmq.client.pull_wrapper import PullAPIWrapper, build_pull_sys_flag
from aiorocketmq.client.results import PullResult, PullStatus
from aiorocketmq.common.constants import MessageSysFlag
from aiorocketmq.common.message import MessageQueue
from aiorocketmq.common.message_codec import encode_record
from aiorocketmq.common.properties import properties_to_string
from aiorocketmq.common.protocol_bodies import SubscriptionData, build_subscription_data
from aiorocketmq.namesrv.server import NamesrvController
from aiorocketmq.remoting.broker_headers import PullMessageRequestHeader, PullSysFlag
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.config import RemotingServerConfig
from aiorocketmq.remoting.connection import ProcessorTable, RemotingConnection
from aiorocketmq.remoting.server import RemotingServer

MQ = MessageQueue("T", "broker-a", 1)


def _wrapper() -> PullAPIWrapper:
    instance = ClientInstance(ClientConfig(namesrv_addr="127.0.0.1:1", client_ip="127.0.0.1"))
    return PullAPIWrapper(instance, "G")


def _record(offset: int, body: bytes, props: dict[str, str], sys_flag: int = 0) -> bytes:
    return bytes(
        encode_record(
            topic="T",
            body=body,
            properties=properties_to_string(props),
            queue_id=1,
            queue_offset=offset,
            physical_offset=offset * 1000,
            sys_flag=sys_flag,
            born_timestamp=1,
            born_host=("127.0.0.1", 1),
            store_timestamp=2,
            store_host=("127.0.0.1", 10911),
        )
    )


def _found(body: bytes, suggest: int = 0) -> PullResult:
    return PullResult(PullStatus.FOUND, 10, 2, 20, suggest, message_binary=body)


def test_recalculate_defaults_to_master_then_follows_suggestions() -> None:
    w = _wrapper()
    assert w.recalculate_pull_from_which_node(MQ) == 0
    w.update_pull_from_which_node(MQ, 1)
    assert w.recalculate_pull_from_which_node(MQ) == 1
    assert w.recalculate_pull_from_which_node(MessageQueue("T", "broker-a", 2)) == 0
    w.update_pull_from_which_node(MQ, 0)
    assert w.recalculate_pull_from_which_node(MQ) == 0


def test_connect_broker_by_user_pins_the_default_broker_id() -> None:
    w = _wrapper()
    w.update_pull_from_which_node(MQ, 1)
    w.connect_broker_by_user, w.default_broker_id = True, 2
    assert w.recalculate_pull_from_which_node(MQ) == 2


def test_process_found_filters_by_tag_and_annotates() -> None:
    w = _wrapper()
    body = (
        _record(0, b"a", {"TAGS": "TagA", "UNIQ_KEY": "U0"})
        + _record(1, b"b", {"TAGS": "TagB"})
        + _record(2, b"n", {})
        + _record(3, b"t", {"TAGS": "TagA", "TRAN_MSG": "true", "UNIQ_KEY": "TX"})
    )
    result = w.process_pull_result(
        MQ, _found(body, suggest=1), build_subscription_data("T", "TagA || TagC")
    )
    assert [m.body for m in result.msg_found_list] == [b"a", b"t"]
    assert result.message_binary is None
    first, tran = result.msg_found_list
    assert (first.get_property("MIN_OFFSET"), first.get_property("MAX_OFFSET")) == ("2", "20")
    assert first.transaction_id is None and tran.transaction_id == "TX"
    assert first.queue_offset == 0 and first.commit_log_offset == 0 and tran.queue_offset == 3
    assert w.recalculate_pull_from_which_node(MQ) == 1


@pytest.mark.parametrize(
    "subscription",
    [
        build_subscription_data("T", "*"),
        SubscriptionData("T", "TagA", ("TagA",), class_filter_mode=True),
    ],
)
def test_star_and_class_filter_keep_everything(subscription: SubscriptionData) -> None:
    body = (
        _record(0, b"a", {"TAGS": "TagA"})
        + _record(1, b"b", {"TAGS": "TagB"})
        + _record(2, b"n", {})
    )
    result = _wrapper().process_pull_result(MQ, _found(body), subscription)
    assert [m.body for m in result.msg_found_list] == [b"a", b"b", b"n"]


def test_compressed_bodies_are_inflated() -> None:
    flag = MessageSysFlag.COMPRESSED_FLAG | MessageSysFlag.COMPRESSION_ZLIB_TYPE
    body = _record(0, zlib.compress(b"y" * 5000, 5), {}, sys_flag=flag)
    result = _wrapper().process_pull_result(MQ, _found(body), build_subscription_data("T", "*"))
    (msg,) = result.msg_found_list
    assert msg.body == b"y" * 5000 and msg.sys_flag & MessageSysFlag.COMPRESSED_FLAG


@pytest.mark.parametrize(
    "status", [PullStatus.NO_NEW_MSG, PullStatus.NO_MATCHED_MSG, PullStatus.OFFSET_ILLEGAL]
)
def test_other_statuses_only_record_the_suggestion(status: PullStatus) -> None:
    w = _wrapper()
    result = w.process_pull_result(
        MQ, PullResult(status, 5, 0, 5, 1, message_binary=b""), build_subscription_data("T", "*")
    )
    assert result.msg_found_list == [] and result.message_binary is None
    assert w.recalculate_pull_from_which_node(MQ) == 1


def test_malformed_found_body_is_a_typed_error() -> None:
    with pytest.raises(MQBrokerError) as err:
        _wrapper().process_pull_result(
            MQ, _found(b"\x00\x00\x00\x30junk"), build_subscription_data("T", "*")
        )
    assert err.value.code == ResponseCode.SYSTEM_ERROR and not err.value.retriable


def test_sys_flag_bits() -> None:
    assert build_pull_sys_flag(True, True, True) == 0x7
    assert (
        build_pull_sys_flag(False, True, False, True)
        == PullSysFlag.SUSPEND | PullSysFlag.CLASS_FILTER
    )


class Recorder:
    """Two brokers' servers answering PULL_NOT_FOUND, recording requests."""

    def __init__(self) -> None:
        self.requests: dict[str, list[RemotingCommand]] = {}
        self.servers: dict[str, RemotingServer] = {}

    async def start(self, name: str) -> str:
        table = ProcessorTable()

        def pull(_conn: RemotingConnection, req: RemotingCommand) -> RemotingCommand:
            self.requests.setdefault(name, []).append(req)
            fields = {
                "suggestWhichBrokerId": "0",
                "nextBeginOffset": "5",
                "minOffset": "0",
                "maxOffset": "5",
            }
            return req.response_to(ResponseCode.PULL_NOT_FOUND, None, fields)

        table.register(RequestCode.PULL_MESSAGE, pull)
        server = RemotingServer(table, RemotingServerConfig(listen_host="127.0.0.1", listen_port=0))
        await server.start()
        self.servers[name] = server
        return server.address


@pytest.fixture
async def nodes() -> AsyncIterator[Recorder]:
    rec = Recorder()
    yield rec
    for server in rec.servers.values():
        await server.shutdown()


async def test_pull_goes_to_the_suggested_node_and_a_slave_gets_no_commit_bit(
    nodes: Recorder,
) -> None:
    master, slave = await nodes.start("master"), await nodes.start("slave")
    w = _wrapper()
    w.instance.broker_addr_table["broker-a"] = {0: master, 1: slave}
    sub = build_subscription_data("T", "TagA")
    flag = build_pull_sys_flag(True, False, True)
    try:
        first = await w.pull_kernel(MQ, sub, 3, 32, sys_flag=flag, commit_offset=2, timeout_ms=3000)
        assert first.status is PullStatus.NO_NEW_MSG
        w.update_pull_from_which_node(MQ, 1)
        await w.pull_kernel(MQ, sub, 3, 32, sys_flag=flag, commit_offset=2, timeout_ms=3000)
        to_master = PullMessageRequestHeader.from_ext_fields(nodes.requests["master"][0].ext_fields)
        to_slave = PullMessageRequestHeader.from_ext_fields(nodes.requests["slave"][0].ext_fields)
        assert to_master.has_commit_offset and not to_slave.has_commit_offset
        assert to_slave.has_subscription and to_slave.subscription == "TagA"
        assert (to_slave.queue_offset, to_slave.max_msg_nums, to_slave.consumer_group) == (
            3,
            32,
            "G",
        )
        # Master gone from the table: the pull falls back to the slave (onlyThisBroker false).
        w.update_pull_from_which_node(MQ, 0)
        w.instance.broker_addr_table["broker-a"] = {1: slave}
        await w.pull_kernel(MQ, sub, 4, 32, sys_flag=flag, timeout_ms=3000)
        assert len(nodes.requests["slave"]) == 2
    finally:
        await w.instance.remoting.close()


async def test_unknown_broker_is_looked_up_once_then_broker_not_found(
    namesrv: NamesrvController,
) -> None:
    instance = ClientInstance(ClientConfig(namesrv_addr=namesrv.address, client_ip="127.0.0.1"))
    w = PullAPIWrapper(instance, "G")
    try:
        with pytest.raises(BrokerNotFoundError, match=r"The broker\[nowhere\] not exist"):
            await w.find_broker(MessageQueue("T", "nowhere", 0))
    finally:
        await instance.remoting.close()
