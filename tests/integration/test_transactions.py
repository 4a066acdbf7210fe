"""Transactional messages end to end: ``TransactionProducer`` against real processes.

One ``mqnamesrv`` and one ``mqbroker`` per test, the broker checking half messages
fast (``transactionTimeOut`` 1 s, every 0.5 s, at most 3 times). The real topic
is read back with ``PullConsumer`` from offset 0 of every queue.

- A committed half message is delivered exactly once and never checked.
- A rolled-back one is never delivered (nor checked); one whose local transaction
  raised is checked back and rolled back by the checker.
- An UNKNOW one is checked back; the checker's COMMIT delivers it once.
- One the checker never decides is checked at most ``transactionCheckMax`` + 1
  times, then moved to TRANS_CHECK_MAX_TIME_TOPIC, and never delivered.
- A producer that left before deciding is replaced by another of its group: the
  check goes to the new one (with the body inflated), whose COMMIT delivers it.

"Never" is shown with a barrier: a later half message that only a check can commit
is delivered, so the broker has finished a check round over the half queue after
the message in question (the half topic has one queue, walked in order).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.client import (
    LocalTransactionState,
    MessageExt,
    MQBrokerError,
    PullConsumer,
    PullStatus,
    TransactionProducer,
)
from aiorocketmq.client.config import ClientConfig
from aiorocketmq.common.constants import RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, MessageSysFlag
from aiorocketmq.common.message import Message, MessageQueue
from aiorocketmq.common.msg_id import decode_offset_msg_id
from aiorocketmq.common.properties import MessageConst
from aiorocketmq.remoting.codes import ResponseCode
from tests.support.cluster import (
    BrokerProcess,
    create_topic,
    start_broker,
    start_namesrv,
    wait_route,
)
from tests.support.procs import ManagedProcess
from tests.support.wait import wait_until

pytestmark = pytest.mark.timeout(120)

StartProcess = Callable[..., ManagedProcess]

_C = MessageConst
TOPIC = "TxTopic"
GROUP = "TxProducerGroup"
CHECK_MAX = 3
BROKER_SETTINGS: dict[str, Any] = {
    "transactionTimeOut": 1000,
    "transactionCheckInterval": 500,
    "transactionCheckMax": CHECK_MAX,
}
COMMIT = LocalTransactionState.COMMIT_MESSAGE
ROLLBACK = LocalTransactionState.ROLLBACK_MESSAGE
UNKNOW = LocalTransactionState.UNKNOW


class Checker:
    """Answers checks by body text (UNKNOW for bodies it was not told about)."""

    def __init__(self, **answers: LocalTransactionState) -> None:
        self.answers = answers
        self.checks: list[MessageExt] = []

    async def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        self.checks.append(msg)
        return self.answers.get(bytes(msg.body).decode(), UNKNOW)

    def checked(self, body: str) -> list[MessageExt]:
        """The checks of the message with ``body``, in arrival order."""
        return [m for m in self.checks if bytes(m.body) == body.encode()]


def _client(namesrv: str, name: str) -> ClientConfig:
    return ClientConfig(namesrv_addr=namesrv, client_ip="127.0.0.1", instance_name=name)


async def _cluster(start_process: StartProcess, tmp_path: Path) -> tuple[str, BrokerProcess]:
    _, namesrv = await start_namesrv(start_process, tmp_path)
    broker = await start_broker(start_process, tmp_path, namesrv, "broker-a", **BROKER_SETTINGS)
    await create_topic(broker.addr, TOPIC)
    await wait_route(namesrv, TOPIC)
    return namesrv, broker


async def _pull_all(consumer: PullConsumer, mqs: list[MessageQueue]) -> list[MessageExt]:
    found: list[MessageExt] = []
    for mq in mqs:
        offset = 0
        while True:
            result = await consumer.pull(mq, "*", offset, 32)
            if result.status is not PullStatus.FOUND:
                break
            found += result.msg_found_list
            offset = result.next_begin_offset
    return found


async def _delivered(consumer: PullConsumer) -> list[MessageExt]:
    """Every message of TOPIC, all queues from offset 0."""
    return await _pull_all(consumer, await consumer.fetch_subscribe_message_queues(TOPIC))


def _bodies(msgs: list[MessageExt]) -> Counter[str]:
    return Counter(bytes(m.body).decode() for m in msgs)


async def _wait_delivered(consumer: PullConsumer, body: str) -> list[MessageExt]:
    async def there() -> list[MessageExt] | None:
        msgs = await _delivered(consumer)
        return msgs if body in _bodies(msgs) else None

    result: list[MessageExt] = await wait_until(
        there, timeout=30, interval=0.05, what=f"{body!r} delivered to {TOPIC}"
    )
    return result


async def _barrier(
    producer: TransactionProducer, checker: Checker, consumer: PullConsumer
) -> Counter[str]:
    """Send a half message only a check commits; wait until it is delivered.

    Returns the bodies delivered then (a check round has passed every half message
    sent before the barrier).
    """
    checker.answers["barrier"] = COMMIT
    result = await producer.send_message_in_transaction(
        Message(TOPIC, b"barrier"), local_transaction=lambda _m, _a: UNKNOW
    )
    assert result.local_transaction_state is UNKNOW
    return _bodies(await _wait_delivered(consumer, "barrier"))


async def test_a_committed_half_message_is_delivered_once_and_never_checked(
    start_process: StartProcess, tmp_path: Path
) -> None:
    namesrv, _ = await _cluster(start_process, tmp_path)
    checker = Checker()
    async with (
        TransactionProducer(GROUP, client_config=_client(namesrv, "p"), checker=checker) as p,
        PullConsumer("TxConsumer", client_config=_client(namesrv, "c")) as consumer,
    ):
        msg = Message(TOPIC, b"committed")
        msg.keys = "order-1"
        result = await p.send_message_in_transaction(
            msg, "arg-1", local_transaction=lambda m, arg: COMMIT if arg == "arg-1" else ROLLBACK
        )
        assert result.local_transaction_state is COMMIT
        assert result.transaction_id == result.msg_id == msg.uniq_key
        (delivered,) = [m for m in await _wait_delivered(consumer, "committed")]
        assert delivered.uniq_key == result.msg_id and delivered.keys == ["order-1"]
        assert delivered.get_property(_C.PROPERTY_PRODUCER_GROUP) == GROUP
        assert delivered.sys_flag & MessageSysFlag.TRANSACTION_ROLLBACK_TYPE == (
            MessageSysFlag.TRANSACTION_COMMIT_TYPE
        )
        # The real message points back at the half message the send stored.
        half_offset = decode_offset_msg_id(result.offset_msg_id)[2]
        assert delivered.prepared_transaction_offset == half_offset
        assert delivered.commit_log_offset > half_offset
        assert await _barrier(p, checker, consumer) == Counter(["committed", "barrier"])
    assert checker.checked("committed") == []


async def test_a_rolled_back_half_message_is_never_delivered(
    start_process: StartProcess, tmp_path: Path
) -> None:
    namesrv, _ = await _cluster(start_process, tmp_path)
    checker = Checker(failed=ROLLBACK)

    def fails(_msg: Message, _arg: object) -> LocalTransactionState:
        raise RuntimeError("local database unavailable")

    async with (
        TransactionProducer(GROUP, client_config=_client(namesrv, "p"), checker=checker) as p,
        PullConsumer("TxConsumer", client_config=_client(namesrv, "c")) as consumer,
    ):
        rolled = await p.send_message_in_transaction(
            Message(TOPIC, b"rolled-back"), local_transaction=lambda _m, _a: ROLLBACK
        )
        failed = await p.send_message_in_transaction(
            Message(TOPIC, b"failed"), local_transaction=fails
        )
        assert (rolled.local_transaction_state, failed.local_transaction_state) == (
            ROLLBACK,
            UNKNOW,
        )
        assert await _barrier(p, checker, consumer) == Counter(["barrier"])
        assert _bodies(await _delivered(consumer)) == Counter(["barrier"])
    assert checker.checked("rolled-back") == []
    # The failed local transaction is unknown to the broker until the check rolls it back.
    assert [m.uniq_key for m in checker.checked("failed")] == [failed.msg_id]


async def test_an_unknown_half_message_is_checked_back_and_committed_once(
    start_process: StartProcess, tmp_path: Path
) -> None:
    namesrv, _ = await _cluster(start_process, tmp_path)
    checker = Checker(pending=COMMIT)

    async def unknown(_msg: Message, _arg: object) -> LocalTransactionState:
        return UNKNOW

    async with (
        TransactionProducer(GROUP, client_config=_client(namesrv, "p"), checker=checker) as p,
        PullConsumer("TxConsumer", client_config=_client(namesrv, "c")) as consumer,
    ):
        result = await p.send_message_in_transaction(
            Message(TOPIC, b"pending"), local_transaction=unknown
        )
        assert result.local_transaction_state is UNKNOW
        await _wait_delivered(consumer, "pending")
        assert await _barrier(p, checker, consumer) == Counter(["pending", "barrier"])
    first = checker.checked("pending")[0]
    assert (first.topic, first.uniq_key, first.transaction_id) == (
        TOPIC,
        result.msg_id,
        result.msg_id,
    )
    assert first.get_property(_C.PROPERTY_TRANSACTION_CHECK_TIMES) == "1"


async def test_a_half_message_never_decided_is_checked_a_bounded_number_of_times(
    start_process: StartProcess, tmp_path: Path
) -> None:
    namesrv, broker = await _cluster(start_process, tmp_path)
    checker = Checker()
    discard_mq = MessageQueue(RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, broker.name, 0)
    async with (
        TransactionProducer(GROUP, client_config=_client(namesrv, "p"), checker=checker) as p,
        PullConsumer("TxConsumer", client_config=_client(namesrv, "c")) as consumer,
    ):
        result = await p.send_message_in_transaction(
            Message(TOPIC, b"forever"), local_transaction=lambda _m, _a: UNKNOW
        )
        # Learn broker-a's address (the discard topic has no route of its own).
        assert await consumer.instance.update_topic_route(TOPIC)

        async def discarded() -> list[MessageExt]:
            try:
                return await _pull_all(consumer, [discard_mq])
            except MQBrokerError as exc:  # the broker creates the topic at the first discard
                if exc.code != ResponseCode.TOPIC_NOT_EXIST:
                    raise
                return []

        (dropped,) = await wait_until(
            discarded, timeout=30, interval=0.05, what="the half message discarded"
        )
        assert dropped.uniq_key == result.msg_id
        assert await _barrier(p, checker, consumer) == Counter(["barrier"])
    # Each check carries its count; the broker gives up after the CHECK_MAX-th (a
    # check whose 10 ms oneway write failed is skipped, not repeated).
    checks = checker.checked("forever")
    times = [int(m.get_property(_C.PROPERTY_TRANSACTION_CHECK_TIMES) or "0") for m in checks]
    assert 1 <= len(checks) <= CHECK_MAX + 1
    assert times == sorted(set(times)) and set(times) <= set(range(1, CHECK_MAX + 1))


async def test_another_producer_of_the_group_answers_after_the_first_one_left(
    start_process: StartProcess, tmp_path: Path
) -> None:
    namesrv, _ = await _cluster(start_process, tmp_path)
    body = b"big " * 2048  # over compressMsgBodyOverHowmuch: stored deflated
    first = Checker()
    async with TransactionProducer(
        GROUP, client_config=_client(namesrv, "first"), checker=first
    ) as p:
        result = await p.send_message_in_transaction(
            Message(TOPIC, body), local_transaction=lambda _m, _a: UNKNOW
        )
    assert result.local_transaction_state is UNKNOW
    second = Checker(**{body.decode(): COMMIT})
    async with (
        TransactionProducer(GROUP, client_config=_client(namesrv, "second"), checker=second),
        PullConsumer("TxConsumer", client_config=_client(namesrv, "c")) as consumer,
    ):
        (delivered,) = await _wait_delivered(consumer, body.decode())
    assert bytes(delivered.body) == body and delivered.uniq_key == result.msg_id
    # The check carried the message as the producer sent it (inflated).
    assert second.checks and all(bytes(m.body) == body for m in second.checks)
    assert first.checks == []
