"""Transactional producer: END_TRANSACTION headers, states, and answers to checks.

The checks come over real sockets from a broker-side ``RemotingServer`` that sends
CHECK_TRANSACTION_STATE built by the broker's own code and records the
END_TRANSACTION answers.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from aiorocketmq.broker.transaction.check_service import check_transaction_state_request
from aiorocketmq.client import LocalTransactionState, TransactionProducer
from aiorocketmq.client.config import ClientConfig
from aiorocketmq.client.errors import InvalidArgumentError
from aiorocketmq.client.results import SendResult, SendStatus
from aiorocketmq.client.transaction_producer import (
    _decide,
    check_end_transaction_header,
    end_transaction_header,
)
from aiorocketmq.common.errors import RemoteProtocolError
from aiorocketmq.common.message import Message, MessageExt, MessageQueue
from aiorocketmq.common.msg_id import create_offset_msg_id
from aiorocketmq.common.properties import MessageConst
from aiorocketmq.namesrv.server import NamesrvController
from aiorocketmq.remoting.broker_admin_headers import CheckTransactionStateRequestHeader
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.config import RemotingServerConfig
from aiorocketmq.remoting.connection import ProcessorTable, RemotingConnection
from aiorocketmq.remoting.server import RemotingServer
from tests.support.wait import wait_until

_C = MessageConst
GROUP = "TxUnitGroup"
UNIQ = "7F00000100002A9F0000000000000001"


def _send_result(**changes: object) -> SendResult:
    values: dict[str, object] = {
        "status": SendStatus.SEND_OK,
        "msg_id": UNIQ,
        "offset_msg_id": create_offset_msg_id("127.0.0.1", 10911, 123_456_789),
        "message_queue": MessageQueue("TxTopic", "broker-a", 2),
        "queue_offset": 17,
    }
    values.update(changes)
    return SendResult(**values)  # type: ignore[arg-type]


# -- states and headers -------------------------------------------------------------------


def test_states_map_to_the_commit_or_rollback_values_of_the_wire() -> None:
    assert LocalTransactionState.COMMIT_MESSAGE.commit_or_rollback == 8
    assert LocalTransactionState.ROLLBACK_MESSAGE.commit_or_rollback == 12
    assert LocalTransactionState.UNKNOW.commit_or_rollback == 0


async def test_decide_accepts_sync_and_async_and_treats_none_as_unknown() -> None:
    async def later() -> LocalTransactionState:
        return LocalTransactionState.ROLLBACK_MESSAGE

    assert await _decide(lambda: LocalTransactionState.COMMIT_MESSAGE) is (
        LocalTransactionState.COMMIT_MESSAGE
    )
    assert await _decide(later) is LocalTransactionState.ROLLBACK_MESSAGE
    assert await _decide(lambda: None) is LocalTransactionState.UNKNOW
    with pytest.raises(TypeError, match="not a LocalTransactionState"):
        await _decide(lambda: "COMMIT")  # type: ignore[arg-type, return-value]


def test_end_header_takes_offsets_from_the_half_message_send_result() -> None:
    header = end_transaction_header(
        GROUP, _send_result(), LocalTransactionState.COMMIT_MESSAGE, UNIQ
    )
    assert header.to_ext_fields() == {
        "producerGroup": GROUP,
        "tranStateTableOffset": "17",
        "commitLogOffset": "123456789",
        "commitOrRollback": "8",
        "fromTransactionCheck": "false",
        "msgId": UNIQ,
        "transactionId": UNIQ,
    }


def test_end_header_prefers_the_broker_transaction_id_and_falls_back_to_msg_id() -> None:
    offset_id = create_offset_msg_id("127.0.0.1", 10911, 4096)
    # No offsetMsgId: Java decodes the msgId instead.
    result = _send_result(offset_msg_id="", msg_id=offset_id, transaction_id="from-broker")
    header = end_transaction_header(GROUP, result, LocalTransactionState.ROLLBACK_MESSAGE, UNIQ)
    assert (header.commit_log_offset, header.commit_or_rollback) == (4096, 12)
    assert header.transaction_id == "from-broker"


def test_end_header_refuses_a_result_without_an_offset_id() -> None:
    with pytest.raises(RemoteProtocolError):
        end_transaction_header(
            GROUP, _send_result(offset_msg_id="", msg_id=None), LocalTransactionState.UNKNOW, UNIQ
        )


def test_check_answer_header_uses_the_check_offsets_and_the_unique_key() -> None:
    msg = MessageExt("TxTopic", b"x", properties={_C.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: UNIQ})
    msg.msg_id = create_offset_msg_id("127.0.0.1", 10911, 1)
    check = CheckTransactionStateRequestHeader(99, 8192, UNIQ, "tx-1", msg.msg_id)
    header = check_end_transaction_header(GROUP, msg, check, LocalTransactionState.UNKNOW)
    assert header.to_ext_fields() == {
        "producerGroup": GROUP,
        "tranStateTableOffset": "99",
        "commitLogOffset": "8192",
        "commitOrRollback": "0",
        "fromTransactionCheck": "true",
        "msgId": UNIQ,
        "transactionId": "tx-1",
    }
    del msg.properties[_C.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX]
    no_key = check_end_transaction_header(GROUP, msg, check, LocalTransactionState.UNKNOW)
    assert no_key.msg_id == msg.msg_id


# -- answering checks over real sockets ------------------------------------------------------


@dataclass
class FakeBroker:
    """A broker-side server: sends checks, records END_TRANSACTION."""

    server: RemotingServer
    ends: asyncio.Queue[RemotingCommand]

    def conn(self) -> RemotingConnection:
        (conn,) = self.server.connections
        return conn

    async def check(self, msg: MessageExt) -> None:
        await self.server.invoke_oneway(self.conn(), check_transaction_state_request(msg))


class Checker:
    """Answers checks with a scripted state (or raises); records what it saw."""

    def __init__(self, answer: LocalTransactionState | Exception) -> None:
        self.answer = answer
        self.seen: list[MessageExt] = []

    async def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        self.seen.append(msg)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


@pytest.fixture
async def fake_broker() -> AsyncIterator[FakeBroker]:
    ends: asyncio.Queue[RemotingCommand] = asyncio.Queue()
    table = ProcessorTable()

    def on_end(_conn: RemotingConnection, request: RemotingCommand) -> None:
        ends.put_nowait(request)

    table.register(RequestCode.END_TRANSACTION, on_end)
    server = RemotingServer(table, RemotingServerConfig(listen_host="127.0.0.1", listen_port=0))
    await server.start()
    yield FakeBroker(server, ends)
    await server.shutdown()


async def _producer(
    namesrv: NamesrvController, fake: FakeBroker, checker: Checker, group: str = GROUP
) -> TransactionProducer:
    config = ClientConfig(
        namesrv_addr=namesrv.address, client_ip="127.0.0.1", instance_name=f"tx-{group}"
    )
    producer = TransactionProducer(group, client_config=config, checker=checker)
    await producer.start()
    # Be connected to the name server before the test ends: RemotingClient.close()
    # racing the start-up route refresh's connect leaves a "Task exception was never
    # retrieved" (a remoting bug, reported; filterwarnings=error turns it into a failure).
    await producer.instance.remoting.connection(namesrv.address)
    await producer.instance.remoting.connection(fake.server.address)
    await wait_until(lambda: len(fake.server.connections) == 1, what="client connected")
    return producer


def _half(group: str = GROUP, uniq: str = UNIQ) -> MessageExt:
    msg = MessageExt(
        "TxTopic",
        b"half body",
        properties={
            _C.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: uniq,
            _C.PROPERTY_PRODUCER_GROUP: group,
            _C.PROPERTY_TRANSACTION_PREPARED: "true",
        },
        queue_id=0,
        queue_offset=5,
        commit_log_offset=4242,
        born_timestamp=1,
        born_host=("127.0.0.1", 50000),
        store_timestamp=2,
        store_host=("127.0.0.1", 10911),
    )
    msg.msg_id = create_offset_msg_id("127.0.0.1", 10911, 4242)
    return msg


async def _next_end(fake: FakeBroker) -> RemotingCommand:
    async with asyncio.timeout(10):
        return await fake.ends.get()


async def test_a_check_is_answered_with_the_checker_state(
    namesrv: NamesrvController, fake_broker: FakeBroker
) -> None:
    checker = Checker(LocalTransactionState.COMMIT_MESSAGE)
    producer = await _producer(namesrv, fake_broker, checker)
    try:
        await fake_broker.check(_half())
        end = await _next_end(fake_broker)
    finally:
        await producer.shutdown()
    assert end.is_oneway and end.remark is None
    assert end.ext_fields == {
        "producerGroup": GROUP,
        "tranStateTableOffset": "5",
        "commitLogOffset": "4242",
        "commitOrRollback": "8",
        "fromTransactionCheck": "true",
        "msgId": UNIQ,
        "transactionId": UNIQ,
    }
    (seen,) = checker.seen
    assert (seen.topic, bytes(seen.body), seen.transaction_id) == ("TxTopic", b"half body", UNIQ)
    assert seen.get_property(_C.PROPERTY_PRODUCER_GROUP) == GROUP


@pytest.mark.parametrize(
    ("answer", "state", "remark"),
    [
        (LocalTransactionState.ROLLBACK_MESSAGE, "12", None),
        (LocalTransactionState.UNKNOW, "0", None),
        (
            RuntimeError("db down"),
            "0",
            "checkLocalTransactionState Exception: RuntimeError: db down",
        ),
    ],
)
async def test_rollback_unknown_and_a_failing_checker(
    namesrv: NamesrvController,
    fake_broker: FakeBroker,
    answer: LocalTransactionState | Exception,
    state: str,
    remark: str | None,
) -> None:
    producer = await _producer(namesrv, fake_broker, Checker(answer))
    try:
        await fake_broker.check(_half())
        end = await _next_end(fake_broker)
    finally:
        await producer.shutdown()
    assert (end.ext_fields["commitOrRollback"], end.remark) == (state, remark)
    assert end.ext_fields["fromTransactionCheck"] == "true"


async def test_a_check_for_another_group_gets_no_answer(
    namesrv: NamesrvController, fake_broker: FakeBroker
) -> None:
    checker = Checker(LocalTransactionState.COMMIT_MESSAGE)
    producer = await _producer(namesrv, fake_broker, checker)
    try:
        await fake_broker.check(_half(group="SomeoneElse", uniq="OTHER"))
        await fake_broker.check(_half())  # same connection, so handled after the first
        end = await _next_end(fake_broker)
    finally:
        await producer.shutdown()
    assert end.ext_fields["msgId"] == UNIQ
    assert [m.uniq_key for m in checker.seen] == [UNIQ]
    assert fake_broker.ends.empty()


async def test_a_two_way_check_with_a_bad_body_gets_a_clear_error(
    namesrv: NamesrvController, fake_broker: FakeBroker
) -> None:
    checker = Checker(LocalTransactionState.COMMIT_MESSAGE)
    producer = await _producer(namesrv, fake_broker, checker)
    try:
        fields = CheckTransactionStateRequestHeader(1, 2, UNIQ, UNIQ).to_ext_fields()
        request = RemotingCommand.request(RequestCode.CHECK_TRANSACTION_STATE, fields, b"junk")
        reply = await fake_broker.server.invoke(fake_broker.conn(), request, 5.0)
        no_header = RemotingCommand.request(RequestCode.CHECK_TRANSACTION_STATE, {}, b"")
        bad_header = await fake_broker.server.invoke(fake_broker.conn(), no_header, 5.0)
    finally:
        await producer.shutdown()
    assert reply.code == ResponseCode.SYSTEM_ERROR
    assert reply.remark is not None and reply.remark.startswith("decode message failed")
    assert bad_header.code != ResponseCode.SUCCESS and bad_header.remark
    assert checker.seen == []


async def test_send_in_transaction_needs_a_local_transaction(
    namesrv: NamesrvController,
) -> None:
    config = ClientConfig(namesrv_addr=namesrv.address, client_ip="127.0.0.1")
    producer = TransactionProducer(
        GROUP, client_config=config, checker=Checker(LocalTransactionState.UNKNOW)
    )
    with pytest.raises(InvalidArgumentError, match="TransactionListener is null"):
        await producer.send_message_in_transaction(Message("TxTopic", b"x"))
