"""The transaction check: ask producers about half messages nobody ended.

Owns: RocketMQ 4.9.8's ``TransactionalMessageCheckService`` (every
``transactionCheckInterval`` ms), ``TransactionalMessageServiceImpl.check`` (the walk
over each half queue from the system group's offset, matched against the op queue)
and the check listener (``AbstractTransactionalMessageCheckListener`` +
``DefaultTransactionalMessageCheckListener``):

* a half message with an op message is done: both offsets move past it;
* one stored after this round began, or younger than ``transactionTimeOut`` (or its
  ``CHECK_IMMUNITY_TIME_IN_SECONDS``), ends the round for its queue;
* one checked ``transactionCheckMax`` times already (``TRANSACTION_CHECK_TIMES``),
  or older than ``fileReservedTime``, is discarded: Java logs it and moves it to
  ``TRANS_CHECK_MAX_TIME_TOPIC``;
* any other is stored again at the end of the half queue with
  ``TRANSACTION_CHECK_TIMES`` + 1 (so the next round finds it again unless it was
  ended), and CHECK_TRANSACTION_STATE goes oneway to one connected producer of
  its ``PGROUP`` with the new copy's offsets and, as body, the message in stored
  form with its real topic and queue; the producer answers with END_TRANSACTION.

Must not: run on a slave, end transactions itself, or spin: where Java re-reads
the op queue in a loop until a message times out, a round stops once the op queue
has nothing more and the message is not due yet; the next round sees it again.
A re-put that fails also stops the round for that queue (Java retries it at once
until its 60 s budget is spent).
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Awaitable, Callable
from typing import Final

from aiorocketmq.broker.context import BrokerContext
from aiorocketmq.broker.stored_copy import join_properties
from aiorocketmq.broker.transaction.half_service import (
    REMOVE_TAG,
    PullStatus,
    StorePull,
    TransactionalMessageBridge,
)
from aiorocketmq.common.constants import (
    PERM_READ,
    PERM_WRITE,
    RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
)
from aiorocketmq.common.errors import LocalProtocolError
from aiorocketmq.common.message import MessageExt
from aiorocketmq.common.message_codec import encode_record
from aiorocketmq.common.properties import MessageConst
from aiorocketmq.common.tag_hash import tags_code
from aiorocketmq.remoting.broker_admin_headers import CheckTransactionStateRequestHeader
from aiorocketmq.remoting.codes import LanguageCode, RequestCode
from aiorocketmq.remoting.command import RPC_ONEWAY, RemotingCommand
from aiorocketmq.remoting.connection import RemotingConnection
from aiorocketmq.remoting.errors import RemotingError
from aiorocketmq.runtime.lifecycle import Service
from aiorocketmq.store.inner_message import MessageExtBrokerInner
from aiorocketmq.store.results import PutMessageStatus

__all__ = [
    "MAX_PROCESS_TIME_LIMIT_MS",
    "OnewaySender",
    "TransactionalMessageCheckListener",
    "TransactionalMessageCheckService",
    "check_transaction_state_request",
]

log = logging.getLogger(__name__)

MAX_PROCESS_TIME_LIMIT_MS: Final = 60_000
"""Longest walk over one half queue in one round (Java's ``MAX_PROCESS_TIME_LIMIT``)."""
OP_PULL_BATCH: Final = 32
"""Op messages read at a time."""
MAX_RETRY_COUNT_WHEN_HALF_NULL: Final = 1
"""Unreadable half offsets skipped in one round before it stops."""
CHECK_ONEWAY_TIMEOUT_S: Final = 0.01
"""Java's 10 ms oneway timeout: a producer that does not read is checked next round."""
TCMT_QUEUE_NUMS: Final = 1
"""Queues of ``TRANS_CHECK_MAX_TIME_TOPIC``."""
_YIELD_EVERY: Final = 256
"""Steps of a walk between two yields to the loop (a walk may read many records)."""

#: How the check sends a oneway request on a producer's connection
#: (``RemotingServer.invoke_oneway`` bound, or the connection's own).
OnewaySender = Callable[[RemotingConnection, RemotingCommand, float], Awaitable[None]]

_C = MessageConst


def _java_long(text: str) -> int:
    """Java's ``Long.parseLong`` or -1, as the check's ``getLong``."""
    body = text[1:] if text[:1] in "+-" else text
    # More than 19 significant digits is out of range anyway; checking first keeps
    # int() away from Python's 4,300-digit limit (a ValueError from peer input).
    digits = body.lstrip("0") or "0"
    if not (body.isascii() and body.isdigit()) or len(digits) > 19:
        log.error("not a long: %r", text)
        return -1
    value = -int(digits) if text[:1] == "-" else int(digits)
    if not -(2**63) <= value < 2**63:
        log.error("not a long: %r", text)
        return -1
    return value


def check_transaction_state_request(msg: MessageExt) -> RemotingCommand:
    """CHECK_TRANSACTION_STATE for a half message already moved to its real topic/queue.

    The header carries the stored copy's offsets and ids; the body is the message
    in stored form (``MessageDecoder.encode``).

    Raises:
        LocalProtocolError: the message cannot be encoded.
    """
    uniq = msg.properties.get(_C.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    header = CheckTransactionStateRequestHeader(
        tran_state_table_offset=msg.queue_offset,
        commit_log_offset=msg.commit_log_offset,
        msg_id=uniq,
        transaction_id=uniq,
        offset_msg_id=msg.msg_id,
    )
    body = encode_record(
        topic=msg.topic, body=msg.body, properties=join_properties(msg.properties),
        queue_id=msg.queue_id, flag=msg.flag, queue_offset=msg.queue_offset,
        physical_offset=msg.commit_log_offset, sys_flag=msg.sys_flag,
        born_timestamp=msg.born_timestamp, born_host=msg.born_host,
        store_timestamp=msg.store_timestamp, store_host=msg.store_host,
        reconsume_times=msg.reconsume_times,
        prepared_transaction_offset=msg.prepared_transaction_offset, body_crc=msg.body_crc,
    )  # fmt: skip
    return RemotingCommand(
        code=RequestCode.CHECK_TRANSACTION_STATE,
        flag=RPC_ONEWAY,
        language=LanguageCode.JAVA,
        ext_fields=header.to_ext_fields(),
        body=bytes(body),
    )


async def _connection_oneway(
    conn: RemotingConnection, request: RemotingCommand, timeout_s: float
) -> None:
    await conn.invoke_oneway(request, timeout_s)


class TransactionalMessageCheckListener:
    """What happens to a half message the check picked (Java's check listener).

    Args:
        ctx: the broker's parts (producers, topics, store).
        bridge: the half/op message access.
        invoke_oneway: how to send on a producer connection (default: the
            connection's own ``invoke_oneway``).

    Attributes:
        checks_sent: CHECK_TRANSACTION_STATE requests written.
        discarded: half messages given up (checked too often or too old).
    """

    def __init__(
        self,
        ctx: BrokerContext,
        bridge: TransactionalMessageBridge,
        invoke_oneway: OnewaySender | None = None,
    ) -> None:
        self._ctx = ctx
        self._bridge = bridge
        self._invoke_oneway = invoke_oneway or _connection_oneway
        self.checks_sent = 0
        self.discarded = 0
        # Asks a producer that has no remoting channel (a gRPC client, through the proxy's
        # Telemetry stream): ``(group, half message with its real topic) -> asked``.
        self.other_producers: Callable[[str, MessageExt], Awaitable[bool]] | None = None

    async def resolve_half_msg(self, msg: MessageExt) -> bool:
        """``sendCheckMessage``: ask one producer of the group; True when sent."""
        props = msg.properties
        real_qid = _java_long(props.get(_C.PROPERTY_REAL_QUEUE_ID, ""))
        real_topic = props.get(_C.PROPERTY_REAL_TOPIC)
        if real_topic is None or not 0 <= real_qid < 2**31:
            log.error("half message without a real topic/queue: %s", msg.msg_id)
            return False
        group = props.get(_C.PROPERTY_PRODUCER_GROUP)
        channel = self._ctx.producers.available_channel(group) if group else None
        if not isinstance(channel, RemotingConnection) or channel.is_closed:
            msg.topic, msg.queue_id, msg.store_size = real_topic, real_qid, 0
            if (
                group
                and self.other_producers is not None
                and await self.other_producers(group, msg)
            ):
                self.checks_sent += 1
                return True
            log.warning("check transaction failed, channel is null. groupId=%s", group)
            return False
        msg.topic, msg.queue_id, msg.store_size = real_topic, real_qid, 0
        try:
            request = check_transaction_state_request(msg)
            await self._invoke_oneway(channel, request, CHECK_ONEWAY_TIMEOUT_S)
        except (RemotingError, LocalProtocolError) as exc:
            log.error(
                "check transaction failed because invoke producer exception. "
                "group=%s, msgId=%s, error=%s", group, msg.msg_id, exc,
            )  # fmt: skip
            return False
        self.checks_sent += 1
        return True

    async def resolve_discard_msg(self, msg: MessageExt) -> None:
        """Move a half message checked too often to ``TRANS_CHECK_MAX_TIME_TOPIC``."""
        self.discarded += 1
        log.error(
            "half message %s (real topic %s) has been checked too many times, so discard it"
            " by moving it to system topic TRANS_CHECK_MAXTIME_TOPIC",
            msg.msg_id, msg.properties.get(_C.PROPERTY_REAL_TOPIC),
        )  # fmt: skip
        config = self._ctx.topics.create_topic_in_send_message_back_method(
            RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, TCMT_QUEUE_NUMS, PERM_READ | PERM_WRITE, 0
        )
        props = dict(msg.properties)
        inner = MessageExtBrokerInner(
            topic=config.topic_name,
            queue_id=0,  # nextInt(99999999) % TCMT_QUEUE_NUMS
            body=msg.body,
            properties=props | {_C.PROPERTY_WAIT_STORE_MSG_OK: "false"},
            properties_string=join_properties(props),
            flag=msg.flag,
            sys_flag=msg.sys_flag,
            born_timestamp=msg.born_timestamp,
            born_host=msg.born_host,
            store_host=msg.store_host,
            reconsume_times=msg.reconsume_times,
            tags_code=tags_code(msg.tags),
        )
        result = await self._bridge.put_message(inner)
        if result.status is not PutMessageStatus.PUT_OK:
            log.error("put checked-too-many-times half message failed: %s", result.status.value)


class _Step(enum.Enum):
    NEXT = "next"  # this half offset is settled: go on with the next
    STOP = "stop"  # end this queue's round here
    MORE_OPS = "more_ops"  # read more op messages, then look at this offset again


class _QueueCheck:
    """One round over one half queue (the body of Java's ``check`` loop)."""

    def __init__(
        self, svc: TransactionalMessageCheckService, queue_id: int, timeout_ms: int, check_max: int
    ) -> None:
        self._bridge = svc.bridge
        self._listener = svc.listener
        self._ctx = svc.bridge.ctx
        self._queue_id = queue_id
        self._timeout_ms = timeout_ms
        self._check_max = check_max
        self._remove_map: dict[int, int] = {}  # half queue offset -> op queue offset
        self._done_op: list[int] = []
        self._start_ms = 0

    def _now(self) -> int:
        return self._ctx.clock.now_ms()

    async def run(self) -> None:
        """Walk the queue once and commit the new half and op offsets."""
        bridge, qid = self._bridge, self._queue_id
        self._start_ms = self._now()
        half_offset = bridge.fetch_consume_offset(RMQ_SYS_TRANS_HALF_TOPIC, qid)
        op_offset = bridge.fetch_consume_offset(RMQ_SYS_TRANS_OP_HALF_TOPIC, qid)
        if half_offset < 0 or op_offset < 0:
            log.error("half queue %d: illegal offsets half=%d op=%d", qid, half_offset, op_offset)
            return
        pull = self._fill_op_remove_map(op_offset, half_offset)
        if pull is None:
            log.error("half queue %d: op queue unreadable at %d", qid, op_offset)
            return
        new_offset = await self._walk(half_offset, pull)
        if new_offset != half_offset:
            bridge.update_consume_offset(RMQ_SYS_TRANS_HALF_TOPIC, qid, new_offset)
        new_op_offset = op_offset
        for done in sorted(self._done_op):  # calculateOpOffset: the contiguous prefix
            if done != new_op_offset:
                break
            new_op_offset += 1
        if new_op_offset != op_offset:
            bridge.update_consume_offset(RMQ_SYS_TRANS_OP_HALF_TOPIC, qid, new_op_offset)

    async def _walk(self, half_offset: int, pull: StorePull) -> int:
        """Settle half offsets from ``half_offset`` on; the first one not settled."""
        null_count = 1
        i = new_offset = half_offset
        steps = 0
        while self._now() - self._start_ms <= MAX_PROCESS_TIME_LIMIT_MS:
            steps += 1
            if steps % _YIELD_EVERY == 0:
                await asyncio.sleep(0)
            if i in self._remove_map:
                self._done_op.append(self._remove_map.pop(i))
                i = new_offset = i + 1
                continue
            got = self._bridge.get_half_message(self._queue_id, i, 1)
            if got is None or got.messages is None:
                if null_count > MAX_RETRY_COUNT_WHEN_HALF_NULL:
                    break
                null_count += 1
                if got is None or got.status is PullStatus.NO_NEW_MSG:
                    break
                i = new_offset = got.next_begin_offset  # an illegal offset: skip ahead
                continue
            step = await self._examine(got.messages[0], pull)
            if step is _Step.STOP:
                break
            if step is _Step.MORE_OPS:
                refilled = self._fill_op_remove_map(pull.next_begin_offset, half_offset)
                if refilled is None:
                    break
                pull = refilled
                continue
            i = new_offset = i + 1
        return new_offset

    async def _examine(self, msg: MessageExt, pull: StorePull) -> _Step:
        """Decide one half message that has no op message (yet)."""
        if self._need_discard(msg) or self._need_skip(msg):
            await self._listener.resolve_discard_msg(msg)
            return _Step.NEXT
        if msg.store_timestamp >= self._start_ms:
            return _Step.STOP  # stored during this round
        age_ms = self._now() - msg.born_timestamp
        immunity_ms = self._timeout_ms
        raw = msg.properties.get(_C.PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS)
        if raw is not None:
            seconds = _java_long(raw)
            immunity_ms = self._timeout_ms if seconds == -1 else seconds * 1000
            if age_ms < immunity_ms and await self._check_prepare_queue_offset(msg):
                return _Step.NEXT
        elif 0 <= age_ms < immunity_ms:
            return _Step.STOP  # not due yet
        ops = pull.messages
        need_check = (
            (ops is None and age_ms > immunity_ms)
            or (ops is not None and ops[-1].born_timestamp - self._start_ms > self._timeout_ms)
            or age_ms <= -1
        )
        if not need_check:
            # Java re-reads the op queue until the message is due; once there is no
            # op message left to read, the next round decides instead.
            return _Step.MORE_OPS if ops is not None else _Step.STOP
        if not await self._put_back_half_msg_queue(msg):
            return _Step.STOP
        await self._listener.resolve_half_msg(msg)
        return _Step.NEXT

    def _need_discard(self, msg: MessageExt) -> bool:
        """``needDiscard``: checked ``check_max`` times already; else count this check."""
        raw = msg.properties.get(_C.PROPERTY_TRANSACTION_CHECK_TIMES)
        times = 1
        if raw is not None:
            body = raw[1:] if raw[:1] in "+-" else raw
            digits = body.lstrip("0") or "0"
            digits_ok = body.isascii() and body.isdigit() and len(digits) <= 10
            times = (-int(digits) if raw[:1] == "-" else int(digits)) if digits_ok else -1
            if times >= self._check_max:
                return True
            times += 1
        msg.properties[_C.PROPERTY_TRANSACTION_CHECK_TIMES] = str(times)
        return False

    def _need_skip(self, msg: MessageExt) -> bool:
        """``needSkip``: born longer ago than the CommitLog keeps files."""
        reserved_ms = self._ctx.store_config.file_reserved_time * 3_600_000
        if self._now() - msg.born_timestamp > reserved_ms:
            log.info("half message %s exceeds the file reserved time, skipped", msg.msg_id)
            return True
        return False

    async def _put_back_half_msg_queue(self, msg: MessageExt) -> bool:
        """Store ``msg`` again in its half queue; on success it takes the new offsets."""
        result = await self._bridge.put_message(self._bridge.renew_half_message_inner(msg))
        if result.status is not PutMessageStatus.PUT_OK or not result.msg_ids:
            log.error("put back to half queue failed: %s, msgId=%s", result.status, msg.msg_id)
            return False
        msg.queue_offset = result.queue_offset
        msg.commit_log_offset = result.physical_offset
        msg.msg_id = result.msg_ids[0]
        return True

    async def _check_prepare_queue_offset(self, msg: MessageExt) -> bool:
        """``checkPrepareQueueOffset``: True when this immune message is settled."""
        raw = msg.properties.get(_C.PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET)
        if raw is not None:
            first = _java_long(raw)
            if first == -1:
                return False
            if first in self._remove_map:
                self._done_op.append(self._remove_map.pop(first))
                return True
        inner = self._bridge.renew_immunity_half_message_inner(msg)
        result = await self._bridge.put_message(inner)
        return result.status is PutMessageStatus.PUT_OK

    def _fill_op_remove_map(self, op_offset: int, mini_offset: int) -> StorePull | None:
        """Read op messages from ``op_offset``; remember which half offsets they end."""
        pull = self._bridge.get_op_message(self._queue_id, op_offset, OP_PULL_BATCH)
        if pull is None:
            return None
        if pull.status in (PullStatus.OFFSET_ILLEGAL, PullStatus.NO_MATCHED_MSG):
            log.warning("op queue %d: offset %d is illegal", self._queue_id, op_offset)
            self._bridge.update_consume_offset(
                RMQ_SYS_TRANS_OP_HALF_TOPIC, self._queue_id, pull.next_begin_offset
            )
            return pull
        for op in pull.messages or ():
            half_offset = _java_long(bytes(op.body).decode("utf-8", "replace"))
            if op.tags != REMOVE_TAG:
                log.error("op message %s has an illegal tag %r", op.msg_id, op.tags)
            elif half_offset < mini_offset:
                self._done_op.append(op.queue_offset)
            else:
                self._remove_map[half_offset] = op.queue_offset
        return pull


class TransactionalMessageCheckService(Service):
    """Runs the check every ``transactionCheckInterval`` ms (a master's service).

    Args:
        ctx: the broker's parts; ``ctx.config`` gives ``transactionTimeOut``,
            ``transactionCheckMax`` and ``transactionCheckInterval``.
        bridge: the half/op message access (shared with END_TRANSACTION).
        invoke_oneway: how to send CHECK_TRANSACTION_STATE on a producer's
            connection; the controller passes ``RemotingServer.invoke_oneway``.

    Attributes:
        bridge, listener: the parts a round uses.
        rounds: rounds completed.
    """

    def __init__(
        self,
        ctx: BrokerContext,
        bridge: TransactionalMessageBridge,
        *,
        invoke_oneway: OnewaySender | None = None,
    ) -> None:
        super().__init__("transaction-check")
        self._ctx = ctx
        self.bridge = bridge
        self.listener = TransactionalMessageCheckListener(ctx, bridge, invoke_oneway)
        self.rounds = 0

    async def on_start(self) -> None:
        """Start the periodic check."""
        interval_s = max(self._ctx.config.transaction_check_interval, 1) / 1000
        self.periodic(interval_s, self.check_once, name="check")

    async def check_once(self) -> None:
        """One round with the configured timeout and check limit (none on a slave)."""
        if self._ctx.is_slave:
            return
        cfg = self._ctx.config
        await self.check(cfg.transaction_time_out, cfg.transaction_check_max)

    async def check(self, timeout_ms: int, check_max: int) -> None:
        """Check every half queue once (``TransactionalMessageServiceImpl.check``)."""
        for queue_id in self.bridge.fetch_queue_ids(RMQ_SYS_TRANS_HALF_TOPIC):
            await _QueueCheck(self, queue_id, timeout_ms, check_max).run()
        self.rounds += 1
