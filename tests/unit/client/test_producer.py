"""Producer: message preparation (pure), and sends to real in-process brokers and to
broker doubles that fail on purpose (retry rules)."""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator

import pytest

from aiorocketmq.client.config import ClientConfig, ProducerConfig
from aiorocketmq.client.errors import (
    ClientStateError,
    InvalidArgumentError,
    MQBrokerError,
    MQTooMuchRequestError,
    NoRouteError,
    SendFailedError,
)
from aiorocketmq.client.producer import Producer
from aiorocketmq.client.publish_info import SendWhichQueue, TopicPublishInfo
from aiorocketmq.client.results import SendStatus
from aiorocketmq.client.selectors import select_by_hash
from aiorocketmq.common.batch_codec import decode_batch
from aiorocketmq.common.constants import MessageSysFlag
from aiorocketmq.common.message import Message, MessageQueue
from aiorocketmq.common.properties import string_to_properties
from aiorocketmq.namesrv.server import NamesrvController
from aiorocketmq.remoting.broker_headers import SendMessageRequestHeader
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.connection import RemotingConnection
from tests.support.broker_double import BrokerDouble
from tests.support.wait import wait_until
from tests.unit.client.conftest import StartBroker

pytestmark = pytest.mark.timeout(60)


def _producer(namesrv: str = "127.0.0.1:1", **config: object) -> Producer:
    return Producer(
        "PG",
        client_config=ClientConfig(namesrv_addr=namesrv, client_ip="127.0.0.1"),
        config=ProducerConfig(**config),  # type: ignore[arg-type]
    )


# -- preparation (no network) ----------------------------------------------------------


def test_prepare_sets_uniq_key_compresses_and_moves_retry_properties() -> None:
    producer = _producer(compress_msg_body_over_howmuch=10)
    small = Message("T", b"short")
    out = producer._prepare(small)
    assert out.sys_flag == 0 and out.body == b"short"
    assert small.uniq_key is not None and len(small.uniq_key) == 32
    assert out.msg_id == small.uniq_key
    assert string_to_properties(out.properties)["UNIQ_KEY"] == small.uniq_key
    big = Message("T", b"x" * 100, properties={"UNIQ_KEY": "MINE"})
    out = producer._prepare(big)
    assert out.msg_id == "MINE"
    assert out.sys_flag == MessageSysFlag.COMPRESSED_FLAG | MessageSysFlag.COMPRESSION_ZLIB_TYPE
    assert zlib.decompress(out.body) == b"x" * 100 and big.body == b"x" * 100
    retry = Message(
        "%RETRY%G", b"r", properties={"RECONSUME_TIME": "3", "MAX_RECONSUME_TIMES": "5"}
    )
    out = producer._prepare(retry)
    assert (out.reconsume_times, out.max_reconsume_times) == (3, 5)
    assert "RECONSUME_TIME" not in string_to_properties(out.properties)
    tran = producer._prepare(Message("T", b"t", properties={"TRAN_MSG": "true"}))
    assert tran.sys_flag == MessageSysFlag.TRANSACTION_PREPARED_TYPE


@pytest.mark.parametrize(
    ("msg", "remark"),
    [
        (Message("", b"x"), "The specified topic is blank"),
        (Message("bad topic", b"x"), "contains illegal characters"),
        (
            Message("SCHEDULE_TOPIC_XXXX", b"x"),
            r"Sending message to topic\[SCHEDULE_TOPIC_XXXX\] is forbidden",
        ),
        (Message("T", b""), "the message body length is zero"),
        (Message("T", b"x" * 101), "the message body size over max value, MAX: 100"),
    ],
)
def test_check_message(msg: Message, remark: str) -> None:
    producer = _producer(max_message_size=100)
    producer._check_message(Message("T", b"x"))  # a topic that passed is remembered
    for _ in range(2):  # a refused one is not, and the body is checked every time
        with pytest.raises(InvalidArgumentError, match=remark):
            producer._check_message(msg)


def test_batch_rules() -> None:
    producer = _producer()
    delayed = Message("T", b"x")
    delayed.delay_time_level = 2
    cases = [
        ([], "the batch is empty"),
        ([Message("T", b"x"), delayed], "TimeDelayLevel is not supported"),
        ([Message("%RETRY%G", b"x")], "Retry Group is not supported"),
        ([Message("T", b"x"), Message("U", b"x")], "topic of the messages in one batch"),
        ([Message("T", b"x"), Message("T", b"x", properties={"WAIT": "false"})], "waitStoreMsgOK"),
    ]
    for msgs, remark in cases:
        with pytest.raises(InvalidArgumentError, match=remark):
            producer._prepare_batch(msgs)
    msgs = [Message("T", b"a"), Message("T", b"b", flag=7)]
    out = producer._prepare_batch(msgs)
    assert out.batch and out.msg_id == f"{msgs[0].uniq_key},{msgs[1].uniq_key}"
    assert string_to_properties(out.properties) == {"WAIT": "true"}
    decoded = decode_batch(out.body)
    assert [(m.body, m.flag) for m in decoded] == [(b"a", 0), (b"b", 7)]


def test_group_and_namesrv_required() -> None:
    with pytest.raises(InvalidArgumentError):
        Producer("bad group", "127.0.0.1:1")
    with pytest.raises(InvalidArgumentError):
        Producer("PG")
    with pytest.raises(InvalidArgumentError, match="can not equal DEFAULT_PRODUCER"):
        Producer("DEFAULT_PRODUCER", "127.0.0.1:1")
    with pytest.raises(ClientStateError):
        _ = _producer().instance


def test_a_changed_route_keeps_the_round_robin_position() -> None:
    producer = _producer()
    queues = [MessageQueue("T", "broker-a", i) for i in range(4)]
    producer.update_topic_publish_info("T", TopicPublishInfo(queues))  # not used: ignored
    assert "T" not in producer.publish_topics()
    producer._publish["T"] = TopicPublishInfo(list(queues))
    picked = [producer._publish["T"].select_one_message_queue().queue_id for _ in range(3)]
    # A fresh index that would pick a different next queue than the old one does.
    fresh = SendWhichQueue(start=picked[-1] + 1)
    producer.update_topic_publish_info("T", TopicPublishInfo(list(queues), send_which_queue=fresh))
    picked += [producer._publish["T"].select_one_message_queue().queue_id for _ in range(5)]
    assert picked == [(picked[0] + i) % 4 for i in range(8)]


# -- real brokers ----------------------------------------------------------------------


async def test_send_sync_async_oneway_batch_and_selector_to_a_real_broker(
    namesrv: NamesrvController, start_broker: StartBroker
) -> None:
    await start_broker("broker-a")
    async with _producer(namesrv.address) as producer:
        first = await producer.send(Message("NewTopic", b"hello", properties={"KEYS": "k1"}))
        assert first.status is SendStatus.SEND_OK
        assert (
            first.message_queue.topic == "NewTopic"
            and first.message_queue.broker_name == "broker-a"
        )
        assert first.queue_offset == 0 and first.msg_id is not None
        queues = await producer.fetch_publish_message_queues("NewTopic")
        assert len(queues) == 4  # auto-created with defaultTopicQueueNums
        pending = producer.send_async(Message("NewTopic", b"async"))
        await producer.send_oneway(Message("NewTopic", b"oneway"))
        batch = await producer.send_batch(
            [Message("NewTopic", b"b1"), Message("NewTopic", b"b2")], mq=first.message_queue
        )
        assert batch.status is SendStatus.SEND_OK and batch.queue_offset >= 1
        assert len(batch.offset_msg_id.split(",")) == 2
        assert (await pending).status is SendStatus.SEND_OK
        hashed = [
            (await producer.send(Message("NewTopic", b"h"), selector=select_by_hash, arg="order-1"))
            for _ in range(3)
        ]
        assert {r.message_queue.queue_id for r in hashed} == {
            select_by_hash(queues, Message("NewTopic"), "order-1").queue_id
        }
        big = await producer.send(Message("NewTopic", b"z" * 10_000))
        assert big.status is SendStatus.SEND_OK


async def test_send_to_an_unknown_topic_with_auto_create_off_fails_with_no_route(
    namesrv: NamesrvController, start_broker: StartBroker
) -> None:
    await start_broker("broker-a", autoCreateTopicEnable=False)
    async with _producer(namesrv.address) as producer:
        with pytest.raises(NoRouteError):
            await producer.send(Message("Missing", b"x"))


async def test_two_producers_of_one_group_in_one_instance_are_refused(
    namesrv: NamesrvController,
) -> None:
    from aiorocketmq.client.instance import ClientManager

    manager = ClientManager()
    config = ClientConfig(namesrv_addr=namesrv.address, client_ip="127.0.0.1")
    async with Producer("PG", client_config=config, manager=manager):
        with pytest.raises(ClientStateError, match="has been created before"):
            await Producer("PG", client_config=config, manager=manager).start()
    await manager.close()


# -- retry rules with broker doubles ---------------------------------------------------


class CodedBroker(BrokerDouble):
    """Answers sends with the given codes in turn, then SUCCESS."""

    def __init__(self, name: str, codes: list[int]) -> None:
        super().__init__(name, topics={"T": 2})
        self.codes = list(codes)

    def _on_send(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        if not self.codes:
            return super()._on_send(conn, request)
        code = self.codes.pop(0)
        if code in (ResponseCode.FLUSH_DISK_TIMEOUT, ResponseCode.SLAVE_NOT_AVAILABLE):
            stored = super()._on_send(conn, request)  # stored, with a caveat
            stored.code = code
            return stored
        self._record(request)
        return request.response_to(code, "scripted")


@pytest.fixture
async def doubles(namesrv: NamesrvController) -> AsyncIterator[list[BrokerDouble]]:
    made: list[BrokerDouble] = []
    yield made
    for double in made:
        await double.close()


async def _serve(
    namesrv: NamesrvController, made: list[BrokerDouble], double: BrokerDouble
) -> BrokerDouble:
    await double.serve()
    await double.register(namesrv.address)
    made.append(double)
    return double


def _sent_header(request: RemotingCommand) -> SendMessageRequestHeader:
    assert request.code == RequestCode.SEND_MESSAGE_V2
    return SendMessageRequestHeader.from_ext_fields_v2(request.ext_fields)


async def test_retriable_broker_code_moves_to_the_other_broker(
    namesrv: NamesrvController, doubles: list[BrokerDouble]
) -> None:
    a = await _serve(namesrv, doubles, CodedBroker("broker-a", [ResponseCode.SYSTEM_ERROR] * 9))
    b = await _serve(namesrv, doubles, CodedBroker("broker-b", [ResponseCode.SYSTEM_ERROR] * 9))
    async with _producer(namesrv.address) as producer:
        with pytest.raises(SendFailedError) as failed:
            await producer.send(Message("T", b"x"))
        assert failed.value.code == ResponseCode.SYSTEM_ERROR
        sent = failed.value.brokers_sent
        assert len(sent) == 3 and sent[0] != sent[1] and sent[1] != sent[2]
        assert len(a.sends()) + len(b.sends()) == 3
        assert _sent_header(a.sends()[0]).broker_name == "broker-a"


async def test_non_retriable_code_is_raised_at_once_and_not_ok_status_returned(
    namesrv: NamesrvController, doubles: list[BrokerDouble]
) -> None:
    a = await _serve(
        namesrv,
        doubles,
        CodedBroker("broker-a", [ResponseCode.MESSAGE_ILLEGAL, ResponseCode.FLUSH_DISK_TIMEOUT]),
    )
    async with _producer(namesrv.address) as producer:
        with pytest.raises(MQBrokerError) as err:
            await producer.send(Message("T", b"x"))
        assert err.value.code == ResponseCode.MESSAGE_ILLEGAL and len(a.sends()) == 1
        a.codes = [ResponseCode.FLUSH_DISK_TIMEOUT]
        result = await producer.send(Message("T", b"x"))
        assert result.status is SendStatus.FLUSH_DISK_TIMEOUT  # stored, not retried
        assert len(a.sends()) == 2


async def test_a_dead_broker_is_skipped_and_routes_refresh(
    namesrv: NamesrvController, doubles: list[BrokerDouble]
) -> None:
    a = await _serve(namesrv, doubles, CodedBroker("broker-a", []))
    b = await _serve(namesrv, doubles, CodedBroker("broker-b", []))
    async with _producer(namesrv.address) as producer:
        await producer.send(Message("T", b"warm"))
        assert a.server is not None
        await a.server.shutdown()  # broker-a's port now refuses; its route is still listed
        for i in range(6):
            result = await producer.send(Message("T", f"m{i}".encode()))
            assert result.message_queue.broker_name == "broker-b"
        assert len(b.sends()) >= 6
        job = producer.instance.route_job
        assert job is not None
        await wait_until(lambda: job.runs >= 2, what="a route refresh after the refused connect")


async def test_async_send_does_not_retry_an_error_reply(
    namesrv: NamesrvController, doubles: list[BrokerDouble]
) -> None:
    a = await _serve(namesrv, doubles, CodedBroker("broker-a", [ResponseCode.SYSTEM_ERROR]))
    async with _producer(namesrv.address) as producer:
        with pytest.raises(MQBrokerError) as err:
            await producer.send_async(Message("T", b"x"))
        assert err.value.code == ResponseCode.SYSTEM_ERROR and len(a.sends()) == 1
        assert (await producer.send_async(Message("T", b"y"))).status is SendStatus.SEND_OK


async def test_retry_another_broker_when_not_store_ok(
    namesrv: NamesrvController, doubles: list[BrokerDouble]
) -> None:
    a = await _serve(namesrv, doubles, CodedBroker("broker-a", [ResponseCode.FLUSH_DISK_TIMEOUT]))
    b = await _serve(namesrv, doubles, CodedBroker("broker-b", [ResponseCode.FLUSH_DISK_TIMEOUT]))
    async with _producer(namesrv.address, retry_another_broker_when_not_store_ok=True) as producer:
        result = await producer.send(Message("T", b"x"))
        # Both brokers stored it with a caveat, then the third attempt got SEND_OK.
        assert result.status is SendStatus.SEND_OK
        assert len(a.sends()) + len(b.sends()) == 3
        a.codes = [ResponseCode.FLUSH_DISK_TIMEOUT] * 3
        b.codes = [ResponseCode.FLUSH_DISK_TIMEOUT] * 3
        last = await producer.send(Message("T", b"y"))
        assert last.status is SendStatus.FLUSH_DISK_TIMEOUT  # the last stored result


async def test_a_spent_time_budget_is_a_call_timeout(
    namesrv: NamesrvController, doubles: list[BrokerDouble]
) -> None:
    await _serve(namesrv, doubles, CodedBroker("broker-a", []))
    async with _producer(namesrv.address) as producer:
        await producer.send(Message("T", b"warm"))
        with pytest.raises(MQTooMuchRequestError, match="sendDefaultImpl call timeout"):
            await producer.send(Message("T", b"x"), timeout_ms=0)
