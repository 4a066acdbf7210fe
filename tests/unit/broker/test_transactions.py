"""Half messages, END_TRANSACTION and the transaction check on a real store and server.

A prepared message goes in through SEND_MESSAGE; consumers' view of the real topic
is read from the store (what PULL_MESSAGE serves). The check test's producer is a
real ``RemotingClient`` whose processor table answers CHECK_TRANSACTION_STATE the
way a Java producer does: with a oneway END_TRANSACTION (fromTransactionCheck).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiorocketmq.broker.context import BrokerContext
from aiorocketmq.broker.processors.client_manage import ClientManageProcessor
from aiorocketmq.broker.processors.end_transaction import EndTransactionProcessor
from aiorocketmq.broker.processors.send import SendProcessor
from aiorocketmq.broker.transaction.check_service import TransactionalMessageCheckService
from aiorocketmq.broker.transaction.half_service import (
    CID_SYS_RMQ_TRANS,
    TransactionalMessageBridge,
)
from aiorocketmq.common.constants import (
    RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
    MessageSysFlag,
    transaction_value,
)
from aiorocketmq.common.message_codec import RecordView, decode_record
from aiorocketmq.common.msg_id import decode_offset_msg_id
from aiorocketmq.common.properties import MessageConst
from aiorocketmq.common.protocol_bodies import HeartbeatData, ProducerData
from aiorocketmq.remoting.broker_admin_headers import (
    CheckTransactionStateRequestHeader,
    EndTransactionRequestHeader,
)
from aiorocketmq.remoting.broker_headers import SendMessageResponseHeader
from aiorocketmq.remoting.client import RemotingClient
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.connection import ProcessorTable, RemotingConnection
from aiorocketmq.store.message_store import MessageStore
from tests.support.wait import wait_until
from tests.unit.broker.broker_support import GROUP, TOPIC, Harness, harness
from tests.unit.broker.processor_support import send_request
from tests.unit.store.store_support import dispatched

PGROUP = "PID_tx"
REAL_QUEUE = 1
COMMIT = MessageSysFlag.TRANSACTION_COMMIT_TYPE
ROLLBACK = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
_C = MessageConst


@dataclass
class Parts:
    """What the harness's ``extra`` built."""

    bridge: TransactionalMessageBridge | None = None
    end: EndTransactionProcessor | None = None


@contextlib.asynccontextmanager
async def broker(tmp_path: Path, **kwargs: Any) -> AsyncIterator[tuple[Harness, Parts]]:
    parts = Parts()

    def register(ctx: BrokerContext, table: ProcessorTable) -> None:
        SendProcessor(ctx).register(table)
        ClientManageProcessor(ctx).register(table)
        parts.bridge = TransactionalMessageBridge(ctx)
        parts.end = EndTransactionProcessor(ctx, parts.bridge)
        parts.end.register(table)

    async with harness(tmp_path, extra=register, **kwargs) as h:
        yield h, parts


def now_ms() -> int:
    return int(time.time() * 1000)


def prepared(body: bytes, uniq: str, **extra: str) -> RemotingCommand:
    props = {
        "TAGS": "TagA", "WAIT": "true", "TRAN_MSG": "true", "PGROUP": PGROUP, "UNIQ_KEY": uniq,
    }  # fmt: skip
    props.update(extra)
    return send_request(
        body,
        properties="".join(f"{k}\x01{v}\x02" for k, v in props.items()),
        queue_id=REAL_QUEUE,
        sys_flag=MessageSysFlag.TRANSACTION_PREPARED_TYPE,
        producer_group=PGROUP,
        born_timestamp=now_ms(),
    )


async def send_half(h: Harness, body: bytes, uniq: str, **extra: str) -> SendMessageResponseHeader:
    reply = await h.invoke(prepared(body, uniq, **extra))
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    return SendMessageResponseHeader.from_ext_fields(reply.ext_fields)


def end_request(
    commit_log_offset: int,
    queue_offset: int,
    state: int,
    uniq: str,
    *,
    group: str = PGROUP,
    from_check: bool = False,
) -> RemotingCommand:
    header = EndTransactionRequestHeader(
        producer_group=group,
        tran_state_table_offset=queue_offset,
        commit_log_offset=commit_log_offset,
        commit_or_rollback=state,
        msg_id=uniq,
        from_transaction_check=from_check,
        transaction_id=uniq,
    )
    return RemotingCommand.request(RequestCode.END_TRANSACTION, header.to_ext_fields())


def end_for(sent: SendMessageResponseHeader, state: int, uniq: str, **kw: Any) -> RemotingCommand:
    offset = decode_offset_msg_id(sent.msg_id)[2]
    return end_request(offset, sent.queue_offset, state, uniq, **kw)


def stored(store: MessageStore, topic: str, queue_id: int) -> list[RecordView]:
    """Every record of a queue (decoded copies of the held bytes)."""
    result = store.get_message(GROUP, topic, queue_id, 0, 64)
    assert result is not None
    with result:
        return [decode_record(bytes(view)) for view in result.messages]


def real(store: MessageStore) -> list[RecordView]:
    return stored(store, TOPIC, REAL_QUEUE)


async def test_half_message_is_invisible_until_commit_then_visible_once(tmp_path: Path) -> None:
    async with broker(tmp_path) as (h, _parts):
        store = h.ctx.store
        sent = await send_half(h, b"order-42", "UNIQ-1")
        assert sent.queue_id == REAL_QUEUE  # the producer's queue, not the half queue
        await dispatched(store)
        assert real(store) == []
        (half,) = stored(store, RMQ_SYS_TRANS_HALF_TOPIC, 0)
        assert half.body == b"order-42"
        assert half.properties[_C.PROPERTY_REAL_TOPIC] == TOPIC
        assert half.properties[_C.PROPERTY_REAL_QUEUE_ID] == str(REAL_QUEUE)
        assert transaction_value(half.sys_flag) == MessageSysFlag.TRANSACTION_NOT_TYPE
        assert half.msg_id == sent.msg_id and half.queue_offset == sent.queue_offset

        reply = await h.invoke(end_for(sent, COMMIT, "UNIQ-1"))
        assert reply.code == ResponseCode.SUCCESS, reply.remark
        await dispatched(store)
        (msg,) = real(store)
        assert msg.body == b"order-42"
        assert msg.topic == TOPIC and msg.queue_id == REAL_QUEUE
        assert transaction_value(msg.sys_flag) == COMMIT
        assert msg.prepared_transaction_offset == half.physical_offset
        assert msg.properties[_C.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] == "UNIQ-1"
        assert msg.properties[_C.PROPERTY_TAGS] == "TagA"
        (op,) = stored(store, RMQ_SYS_TRANS_OP_HALF_TOPIC, 0)
        assert op.properties[_C.PROPERTY_TAGS] == "d"
        assert op.body == str(half.queue_offset).encode()


async def test_rolled_back_half_message_is_never_visible(tmp_path: Path) -> None:
    async with broker(tmp_path) as (h, _parts):
        store = h.ctx.store
        sent = await send_half(h, b"cancelled", "UNIQ-2")
        reply = await h.invoke(end_for(sent, ROLLBACK, "UNIQ-2"))
        assert reply.code == ResponseCode.SUCCESS, reply.remark
        await dispatched(store)
        assert real(store) == []
        (op,) = stored(store, RMQ_SYS_TRANS_OP_HALF_TOPIC, 0)
        assert op.body == str(sent.queue_offset).encode()


async def test_the_first_end_stands_when_a_checks_answer_and_the_producers_cross(
    tmp_path: Path,
) -> None:
    async with broker(tmp_path) as (h, _parts):
        store = h.ctx.store
        sent = await send_half(h, b"once", "UNIQ-X")
        # The check's COMMIT and the producer's own late COMMIT, in flight together.
        replies = await asyncio.gather(
            h.invoke(end_for(sent, COMMIT, "UNIQ-X", from_check=True)),
            h.invoke(end_for(sent, COMMIT, "UNIQ-X")),
        )
        assert [r.code for r in replies] == [ResponseCode.SUCCESS] * 2
        late_rollback = await h.invoke(end_for(sent, ROLLBACK, "UNIQ-X"))
        assert late_rollback.code == ResponseCode.SUCCESS
        await dispatched(store)
        assert [m.body for m in real(store)] == [b"once"], "stored once, and kept"
        assert len(stored(store, RMQ_SYS_TRANS_OP_HALF_TOPIC, 0)) == 1

        rolled = await send_half(h, b"never", "UNIQ-Y")
        for state in (ROLLBACK, COMMIT):  # a commit after the rollback resurrects nothing
            assert (await h.invoke(end_for(rolled, state, "UNIQ-Y"))).code == ResponseCode.SUCCESS
        await dispatched(store)
        assert [m.body for m in real(store)] == [b"once"]


async def test_end_transaction_refusals(tmp_path: Path) -> None:
    async with broker(tmp_path) as (h, parts):
        store = h.ctx.store
        sent = await send_half(h, b"x", "UNIQ-3")
        offset = decode_offset_msg_id(sent.msg_id)[2]
        cases = [
            (end_for(sent, COMMIT, "UNIQ-3", group="PID_other"), "The producer group wrong"),
            (
                end_request(offset, sent.queue_offset + 5, COMMIT, "UNIQ-3"),
                "The transaction state table offset wrong",
            ),
            (
                end_request(offset + 1, sent.queue_offset, ROLLBACK, "UNIQ-3"),
                "Find prepared transaction message failed",
            ),
            (end_request(10**9, 0, COMMIT, "UNIQ-3"), "Find prepared transaction message failed"),
            (end_request(offset, sent.queue_offset, 3, "UNIQ-3"), "commitOrRollback field wrong"),
        ]
        for request, remark in cases:
            reply = await h.invoke(request)
            assert (reply.code, reply.remark) == (ResponseCode.SYSTEM_ERROR, remark)
        # A normal message is not a half message.
        normal = await h.invoke(send_request(b"plain", queue_id=0))
        plain = SendMessageResponseHeader.from_ext_fields(normal.ext_fields)
        reply = await h.invoke(end_for(plain, COMMIT, "UNIQ-3"))
        assert reply.remark == "Find prepared transaction message failed"
        # Pending (0) gets no reply at all, from the producer or from a check.
        assert parts.end is not None
        conn = await h.client.connection(h.address)
        for from_check in (False, True):
            request = end_for(sent, 0, "UNIQ-3", from_check=from_check)
            assert await parts.end.process(conn, request) is None
        await dispatched(store)
        assert real(store) == []
        assert stored(store, RMQ_SYS_TRANS_OP_HALF_TOPIC, 0) == []
        # Still committable after all that.
        assert (await h.invoke(end_for(sent, COMMIT, "UNIQ-3"))).code == ResponseCode.SUCCESS


async def test_slave_refuses_end_transaction(tmp_path: Path) -> None:
    async with broker(tmp_path, store={"broker_role": "SLAVE"}) as (h, _parts):
        reply = await h.invoke(end_request(0, 0, COMMIT, "UNIQ-4"))
        assert reply.code == ResponseCode.SLAVE_NOT_AVAILABLE


@dataclass
class Producer:
    """A transactional producer's connection that answers checks (or not)."""

    answer: int | None
    checks: list[tuple[CheckTransactionStateRequestHeader, RecordView]] = field(
        default_factory=list
    )
    client: RemotingClient = field(init=False)

    def __post_init__(self) -> None:
        table = ProcessorTable()
        table.register(RequestCode.CHECK_TRANSACTION_STATE, self.on_check)
        self.client = RemotingClient(processors=table)

    async def on_check(self, conn: RemotingConnection, request: RemotingCommand) -> None:
        assert request.is_oneway
        header = CheckTransactionStateRequestHeader.from_ext_fields(request.ext_fields)
        self.checks.append((header, decode_record(bytes(request.body))))
        if self.answer is not None:
            assert header.msg_id is not None
            end = end_request(
                header.commit_log_offset,
                header.tran_state_table_offset,
                self.answer,
                header.msg_id,
                from_check=True,
            )
            await conn.invoke_oneway(end, 3)

    async def join(self, address: str) -> None:
        body = HeartbeatData("127.0.0.1@tx", producers=[ProducerData(PGROUP)]).encode()
        request = RemotingCommand(code=RequestCode.HEART_BEAT, body=body)
        assert (await self.client.invoke(address, request, 3000)).code == ResponseCode.SUCCESS


FAST_CHECK = {
    "transaction_time_out": 100,
    "transaction_check_interval": 20,
    "transaction_check_max": 3,
}


@contextlib.asynccontextmanager
async def checked_broker(
    tmp_path: Path, answer: int | None, **config: Any
) -> AsyncIterator[tuple[Harness, TransactionalMessageCheckService, Producer]]:
    async with broker(tmp_path, broker=FAST_CHECK | config) as (h, parts):
        assert parts.bridge is not None
        svc = TransactionalMessageCheckService(
            h.ctx, parts.bridge, invoke_oneway=h.server.invoke_oneway
        )
        producer = Producer(answer)
        await producer.join(h.address)
        await svc.start()
        try:
            yield h, svc, producer
        finally:
            await svc.shutdown()
            await producer.client.close()


async def more_rounds(svc: TransactionalMessageCheckService, n: int = 3) -> None:
    target = svc.rounds + n
    await wait_until(lambda: svc.rounds >= target, what=f"{n} more check rounds")


async def test_unanswered_half_message_is_checked_and_committed(tmp_path: Path) -> None:
    async with checked_broker(tmp_path, answer=COMMIT) as (h, svc, producer):
        store = h.ctx.store
        sent = await send_half(h, b"checked", "UNIQ-5")
        first_offset = decode_offset_msg_id(sent.msg_id)[2]
        await wait_until(lambda: len(real(store)) == 1, timeout=10, what="the commit")
        await more_rounds(svc)
        assert len(real(store)) == 1
        (msg,) = real(store)
        assert msg.body == b"checked" and transaction_value(msg.sys_flag) == COMMIT
        ((header, record),) = producer.checks
        # The check names the copy stored again at the end of the half queue.
        assert header.tran_state_table_offset == sent.queue_offset + 1
        assert header.commit_log_offset > first_offset
        assert decode_offset_msg_id(header.offset_msg_id or "")[2] == header.commit_log_offset
        assert header.msg_id == header.transaction_id == "UNIQ-5"
        assert (record.topic, record.queue_id, record.body) == (TOPIC, REAL_QUEUE, b"checked")
        assert record.properties[_C.PROPERTY_TRANSACTION_CHECK_TIMES] == "1"
        assert msg.prepared_transaction_offset == header.commit_log_offset
        offsets = h.ctx.offsets
        assert offsets.query_offset(CID_SYS_RMQ_TRANS, RMQ_SYS_TRANS_HALF_TOPIC, 0) == 2
        assert offsets.query_offset(CID_SYS_RMQ_TRANS, RMQ_SYS_TRANS_OP_HALF_TOPIC, 0) == 1


async def test_checked_and_rolled_back_is_never_delivered(tmp_path: Path) -> None:
    async with checked_broker(tmp_path, answer=ROLLBACK) as (h, svc, producer):
        store = h.ctx.store
        await send_half(h, b"nope", "UNIQ-6")
        await wait_until(
            lambda: len(stored(store, RMQ_SYS_TRANS_OP_HALF_TOPIC, 0)) == 1,
            timeout=10,
            what="the rollback's op message",
        )
        await more_rounds(svc)
        assert real(store) == []
        assert len(producer.checks) == 1


async def test_check_times_are_capped_then_the_message_is_discarded(tmp_path: Path) -> None:
    async with checked_broker(tmp_path, answer=None) as (h, svc, producer):
        store = h.ctx.store
        await send_half(h, b"silent", "UNIQ-7")
        await wait_until(lambda: svc.listener.discarded == 1, timeout=10, what="the discard")
        await more_rounds(svc)
        times = [r.properties[_C.PROPERTY_TRANSACTION_CHECK_TIMES] for _h, r in producer.checks]
        assert times == ["1", "2", "3"]  # transactionCheckMax = 3
        assert svc.listener.checks_sent == 3 and svc.listener.discarded == 1
        (gone,) = stored(store, RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, 0)
        assert gone.body == b"silent"
        assert gone.properties[_C.PROPERTY_REAL_TOPIC] == TOPIC
        assert real(store) == []


async def test_immune_half_message_is_checked_only_after_its_immunity(tmp_path: Path) -> None:
    # Every round counts as a check, immune or not (as Java): allow enough of them.
    async with checked_broker(tmp_path, COMMIT, transaction_check_max=1000) as (h, svc, producer):
        store = h.ctx.store
        born_ms = now_ms()
        sent = await send_half(h, b"immune", "UNIQ-8", CHECK_IMMUNITY_TIME_IN_SECONDS="1")
        # Past transactionTimeOut (100 ms) but immune for 1 s: stored again, not checked,
        # each copy remembering the first copy's queue offset.
        await wait_until(
            lambda: len(stored(store, RMQ_SYS_TRANS_HALF_TOPIC, 0)) >= 3, what="immune re-puts"
        )
        copies = stored(store, RMQ_SYS_TRANS_HALF_TOPIC, 0)[1:]
        assert all(
            c.properties[_C.PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET] == str(sent.queue_offset)
            for c in copies
        )
        await wait_until(lambda: producer.checks, timeout=10, what="the check after immunity")
        checked_at_ms = now_ms()
        await wait_until(lambda: len(real(store)) >= 1, timeout=10, what="the commit")
        await more_rounds(svc)
        assert checked_at_ms - born_ms >= 1000
        # A round 20 ms later may check again while the commit is still on its way
        # (Java's rule too: no op message yet), and each COMMIT answer then stores the
        # message (at least once, as RocketMQ). Once a commit has landed, checks stop.
        settled = len(producer.checks)
        await more_rounds(svc)
        assert len(producer.checks) == settled
        assert [m.body for m in real(store)] == [b"immune"] * settled
