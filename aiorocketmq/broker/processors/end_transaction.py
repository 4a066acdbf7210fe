"""END_TRANSACTION (37): commit or roll back a half message.

Owns: RocketMQ 4.9.8's ``EndTransactionProcessor``: a slave refuses
(SLAVE_NOT_AVAILABLE); a pending state (``commitOrRollback`` 0) gets no reply,
whether from the producer's own end or from a check; a commit finds the half
message by ``commitLogOffset``, checks producer group, queue offset and CommitLog
offset, stores the real message (real topic and queue, transaction bits = COMMIT,
``preparedTransactionOffset`` = the half message's offset) and then writes the op
message; a rollback checks the same and writes only the op message.

Must not: read or write the half/op topics itself (``transaction.half_service``
does) or check back with producers (``transaction.check_service`` does).

A ``commitOrRollback`` other than 0, 8 or 12 is refused while the header is read,
as Java's ``checkFields`` does (SYSTEM_ERROR "commitOrRollback field wrong").

Beyond Java: the first end of a half message stands. A check's answer and the
producer's own late end can cross (the producer took longer than
``transactionTimeOut`` to end it); Java stores a second commit again, a duplicate for
every consumer. Here a later end of a half message this broker already ended answers
SUCCESS and writes nothing (the last ``_ENDED_MAX`` offsets are remembered, in memory).
"""

from __future__ import annotations

import logging
from typing import Final

from aiorocketmq.broker.context import BrokerContext
from aiorocketmq.broker.stored_copy import inner_from_stored, join_properties
from aiorocketmq.broker.transaction.half_service import TransactionalMessageBridge
from aiorocketmq.common.constants import MessageSysFlag, reset_transaction_value
from aiorocketmq.common.message import MessageExt
from aiorocketmq.common.properties import MessageConst
from aiorocketmq.remoting.broker_admin_headers import EndTransactionRequestHeader
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.connection import ProcessorTable, RemotingConnection
from aiorocketmq.remoting.errors import HeaderFieldError
from aiorocketmq.store.inner_message import MessageExtBrokerInner
from aiorocketmq.store.results import PutMessageStatus

__all__ = ["EndTransactionProcessor", "end_message_transaction"]

log = logging.getLogger(__name__)

_C = MessageConst
_NOT: Final = MessageSysFlag.TRANSACTION_NOT_TYPE
_COMMIT: Final = MessageSysFlag.TRANSACTION_COMMIT_TYPE
_ROLLBACK: Final = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
_NOT_FOUND: Final = "Find prepared transaction message failed"
_ENDED_MAX: Final = 65536

_FINAL_PUT: Final[dict[PutMessageStatus, tuple[int, str | None]]] = {
    PutMessageStatus.PUT_OK: (ResponseCode.SUCCESS, None),
    PutMessageStatus.FLUSH_DISK_TIMEOUT: (ResponseCode.SUCCESS, None),
    PutMessageStatus.FLUSH_SLAVE_TIMEOUT: (ResponseCode.SUCCESS, None),
    PutMessageStatus.SLAVE_NOT_AVAILABLE: (ResponseCode.SUCCESS, None),
    PutMessageStatus.CREATE_MAPEDFILE_FAILED: (
        ResponseCode.SYSTEM_ERROR,
        "Create mapped file failed.",
    ),
    PutMessageStatus.SERVICE_NOT_AVAILABLE: (
        ResponseCode.SERVICE_NOT_AVAILABLE,
        "Service not available now.",
    ),
    PutMessageStatus.OS_PAGECACHE_BUSY: (
        ResponseCode.SYSTEM_ERROR,
        "OS page cache busy, please try another machine",
    ),
    PutMessageStatus.UNKNOWN_ERROR: (ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR"),
}
"""``sendFinalMessage``'s status table (MESSAGE_ILLEGAL and PROPERTIES_SIZE_EXCEEDED
have their own remark, with the size limit)."""


def end_message_transaction(half: MessageExt) -> MessageExtBrokerInner:
    """``endMessageTransaction``: the real message of a half message (still PREPARED-less).

    The stored string is serialised before ``REAL_TOPIC``/``REAL_QID`` leave the
    map, so it keeps them (as Java's does).
    """
    props = dict(half.properties)
    stored = join_properties(props)
    props.pop(_C.PROPERTY_REAL_TOPIC, None)
    real_qid = props.pop(_C.PROPERTY_REAL_QUEUE_ID)
    return inner_from_stored(
        half, topic=half.properties[_C.PROPERTY_REAL_TOPIC], queue_id=int(real_qid),
        properties=props, properties_string=stored,
    )  # fmt: skip


def _parse_header(request: RemotingCommand) -> EndTransactionRequestHeader:
    header = EndTransactionRequestHeader.from_ext_fields(request.ext_fields)
    if header.commit_or_rollback not in (_NOT, _COMMIT, _ROLLBACK):
        raise HeaderFieldError("commitOrRollback field wrong")
    return header


def _check_prepare_message(
    half: MessageExt | None, header: EndTransactionRequestHeader
) -> tuple[int, str | None]:
    """``checkPrepareMessage``: the half message matches the request, or why not."""
    if half is None:
        return ResponseCode.SYSTEM_ERROR, _NOT_FOUND
    if half.properties.get(_C.PROPERTY_PRODUCER_GROUP) != header.producer_group:
        return ResponseCode.SYSTEM_ERROR, "The producer group wrong"
    if half.queue_offset != header.tran_state_table_offset:
        return ResponseCode.SYSTEM_ERROR, "The transaction state table offset wrong"
    if half.commit_log_offset != header.commit_log_offset:
        return ResponseCode.SYSTEM_ERROR, "The commit log offset wrong"
    return ResponseCode.SUCCESS, None


class EndTransactionProcessor:
    """Handles END_TRANSACTION for one broker.

    Args:
        ctx: the broker's parts.
        bridge: the half/op message access (one per broker, shared with the check).
    """

    def __init__(self, ctx: BrokerContext, bridge: TransactionalMessageBridge) -> None:
        self._ctx = ctx
        self._bridge = bridge
        # Half messages' CommitLog offsets ended (or being ended), oldest first.
        self._ended: dict[int, None] = {}

    def register(self, table: ProcessorTable) -> None:
        """Register END_TRANSACTION."""
        table.register(RequestCode.END_TRANSACTION, self.process)

    async def process(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand | None:
        """One END_TRANSACTION -> its reply, or None (pending state: Java answers nothing)."""
        header = _parse_header(request)
        outcome = await self.end_transaction(header, conn.remote_address, request.remark)
        if outcome is None:
            return None
        return request.response_to(*outcome)

    async def end_transaction(
        self, header: EndTransactionRequestHeader, producer: str, remark: str | None = None
    ) -> tuple[int, str | None] | None:
        """Commit or roll back one half message: the reply's code and remark, or None
        for the pending state. Also the gRPC proxy's EndTransaction (``producer`` names
        the client for the log)."""
        if self._ctx.is_slave:
            log.warning("message store is slave mode, so end transaction is forbidden")
            return ResponseCode.SLAVE_NOT_AVAILABLE, None
        state = header.commit_or_rollback
        if state != _COMMIT:
            # Java logs every state but a plain commit, naming who said what.
            log.warning(
                "end transaction producer=%s state=%d from_check=%s offset=%d remark=%s",
                producer, state, header.from_transaction_check,
                header.commit_log_offset, remark,
            )  # fmt: skip
        if state == _NOT:
            return None
        half = await self._bridge.look_half_message(header.commit_log_offset)
        code, check_remark = _check_prepare_message(half, header)
        if code != ResponseCode.SUCCESS or half is None:
            return code, check_remark
        offset = header.commit_log_offset
        if offset in self._ended:
            log.info("end transaction offset=%d state=%d ignored: ended already", offset, state)
            return ResponseCode.SUCCESS, None
        self._remember(offset)  # before the first await: a crossing end sees it
        if state == _COMMIT:
            try:
                code, check_remark = await self._send_final_message(half, header)
            except BaseException:
                self._ended.pop(offset, None)
                raise
            if code != ResponseCode.SUCCESS:
                self._ended.pop(offset, None)  # not stored: a retry may end it
                return code, check_remark
        await self._bridge.put_op_message(half)
        return ResponseCode.SUCCESS, None

    def _remember(self, offset: int) -> None:
        ended = self._ended
        ended[offset] = None
        if len(ended) > _ENDED_MAX:
            del ended[next(iter(ended))]

    async def _send_final_message(
        self, half: MessageExt, header: EndTransactionRequestHeader
    ) -> tuple[int, str | None]:
        """Store the committed message (``sendFinalMessage``): its code and remark."""
        msg = end_message_transaction(half)
        msg.sys_flag = reset_transaction_value(msg.sys_flag, header.commit_or_rollback)
        msg.prepared_transaction_offset = header.commit_log_offset
        msg.properties.pop(_C.PROPERTY_TRANSACTION_PREPARED, None)
        result = await self._bridge.put_message(msg)
        known = _FINAL_PUT.get(result.status)
        if known is not None:
            return known
        if result.status in (
            PutMessageStatus.MESSAGE_ILLEGAL,
            PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
        ):
            limit = self._ctx.store_config.max_message_size
            return ResponseCode.MESSAGE_ILLEGAL, (
                "The message is illegal, maybe msg body or properties length not matched. "
                f"msg body length limit {limit}B, msg properties length limit 32KB."
            )
        return ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR DEFAULT"
