"""Transactions for gRPC producers: EndTransaction, and the broker's transaction check
relayed as Telemetry's ``recover_orphaned_transaction_command`` (RocketMQ 5's
``TransactionProcessor`` and ``GrpcClientChannel``; specs/grpc-v5.md §8).

Owns: the table from transaction id to the half message it names (producer group,
half-queue offset, CommitLog offset), filled when a TRANSACTION message is stored
and again when the check asks a gRPC producer, so an EndTransaction after a broker
restart (answering a check) still finds its half message; and choosing which gRPC
producer a check goes to (one whose Publishing settings name the topic, with an
open Telemetry stream).

Must not: commit or roll back itself (the broker's ``EndTransactionProcessor`` does,
exactly as for a remoting END_TRANSACTION), or decide when to check (the broker's
``TransactionalMessageCheckService`` does).
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from typing import Final

from aiorocketmq.broker.context import BrokerContext
from aiorocketmq.broker.processors.end_transaction import EndTransactionProcessor
from aiorocketmq.broker.transaction.half_service import TransactionalMessageBridge
from aiorocketmq.common.constants import MessageSysFlag
from aiorocketmq.common.errors import RemoteProtocolError
from aiorocketmq.common.message import MessageExt
from aiorocketmq.common.properties import MessageConst
from aiorocketmq.proxy.clients import ClientRegistry
from aiorocketmq.proxy.convert import to_v2
from aiorocketmq.proxy.status import ProxyError, status
from aiorocketmq.proxy.v2 import definition_pb2 as pb
from aiorocketmq.proxy.v2 import service_pb2 as rpc
from aiorocketmq.remoting.broker_admin_headers import EndTransactionRequestHeader
from aiorocketmq.remoting.codes import ResponseCode

__all__ = ["ProxyTransactions"]

log = logging.getLogger(__name__)

_MAX_RECORDS: Final = 100_000
_RESOLUTIONS: Final = {
    pb.TransactionResolution.COMMIT: MessageSysFlag.TRANSACTION_COMMIT_TYPE,
    pb.TransactionResolution.ROLLBACK: MessageSysFlag.TRANSACTION_ROLLBACK_TYPE,
}


@dataclass(frozen=True, slots=True)
class _HalfMessage:
    producer_group: str
    half_queue_offset: int
    commit_log_offset: int
    msg_id: str


class ProxyTransactions:
    """Transaction state of one proxy.

    Args:
        ctx: the broker's parts.
        bridge: the broker's half/op message access.
        clients: the gRPC clients (for their Telemetry streams).
    """

    def __init__(
        self, ctx: BrokerContext, bridge: TransactionalMessageBridge, clients: ClientRegistry
    ) -> None:
        self._ctx = ctx
        self._end = EndTransactionProcessor(ctx, bridge)
        self._clients = clients
        self._table: dict[str, _HalfMessage] = {}
        self._random = random.Random()
        self.checks_relayed = 0

    def record(
        self, transaction_id: str, group: str, half_queue_offset: int, commit_log_offset: int
    ) -> None:
        """Remember where a transaction's half message is (oldest forgotten past 100k)."""
        if len(self._table) >= _MAX_RECORDS:
            del self._table[next(iter(self._table))]
        self._table[transaction_id] = _HalfMessage(
            group, half_queue_offset, commit_log_offset, transaction_id
        )

    async def end_transaction(
        self, req: rpc.EndTransactionRequest, producer: str
    ) -> rpc.EndTransactionResponse:
        """EndTransaction: commit or roll back through the broker's END_TRANSACTION logic."""
        if not req.transaction_id.strip():
            raise ProxyError(pb.Code.INVALID_TRANSACTION_ID, "transaction id is blank")
        state = _RESOLUTIONS.get(req.resolution)
        if state is None:  # UNSPECIFIED: "not a transaction", nothing to do (as Java)
            return rpc.EndTransactionResponse(status=status())
        half = self._table.get(req.transaction_id)
        if half is None:
            raise ProxyError(
                pb.Code.INVALID_TRANSACTION_ID,
                f"no half message for transaction {req.transaction_id} (ended, or too old)",
            )
        header = EndTransactionRequestHeader(
            producer_group=half.producer_group,
            tran_state_table_offset=half.half_queue_offset,
            commit_log_offset=half.commit_log_offset,
            commit_or_rollback=state,
            msg_id=half.msg_id,
            from_transaction_check=req.source == pb.TransactionSource.SOURCE_SERVER_CHECK,
            transaction_id=req.transaction_id,
        )
        outcome = await self._end.end_transaction(header, producer)
        code, remark = outcome if outcome is not None else (ResponseCode.SUCCESS, None)
        if code != ResponseCode.SUCCESS:
            raise ProxyError(pb.Code.INTERNAL_SERVER_ERROR, remark or f"end transaction: {code}")
        self._table.pop(req.transaction_id, None)
        return rpc.EndTransactionResponse(status=status())

    async def check(self, group: str, half: MessageExt) -> bool:
        """The broker's check of a half message: ask one gRPC producer of ``group``
        (the topic: gRPC producers use it as their group) over Telemetry."""
        producers = self._clients.producers_of(group)
        if not producers:
            return False
        transaction_id = (
            half.properties.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or half.msg_id
        )
        self.record(transaction_id, group, half.queue_offset, half.commit_log_offset)
        try:
            message = to_v2(
                half,
                receipt_handle="",
                delivery_attempt=1,
                max_body=self._ctx.store_config.max_message_size,
            )
        except RemoteProtocolError as exc:
            log.error("transaction check: half message %s unreadable: %s", half.msg_id, exc)
            return False
        command = rpc.TelemetryCommand(
            recover_orphaned_transaction_command=rpc.RecoverOrphanedTransactionCommand(
                message=message, transaction_id=transaction_id
            )
        )
        client = self._random.choice(producers)
        self._random.choice(client.streams).put_nowait(command)
        self.checks_relayed += 1
        return True
