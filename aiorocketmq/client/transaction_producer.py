"""Transactional producer: half messages, local transactions, and the brokers' checks.

Owns (Java 4.9.8's ``TransactionMQProducer`` and the transaction part of
``DefaultMQProducerImpl``): ``send_message_in_transaction`` (sets TRAN_MSG=true and
PGROUP, sends the half message synchronously, runs the local transaction, then
sends END_TRANSACTION oneway to the master that stored it), the answer to a
broker's CHECK_TRANSACTION_STATE (the checker's ``check_local_transaction``, then
END_TRANSACTION with ``fromTransactionCheck=true``), and ``TransactionSendResult``.

State on the wire (``commitOrRollback``): COMMIT_MESSAGE 8, ROLLBACK_MESSAGE 12,
UNKNOW 0. A local transaction or check that raises counts as UNKNOW and its error
goes in the request's remark; one that returns None counts as UNKNOW too. A half
message stored but not SEND_OK (flush or slave timeout) is rolled back without
running the local transaction, as Java.

Differences from Java, on purpose: the END_TRANSACTION ``transactionId`` is the
send reply's, or the message's UNIQ_KEY when the broker gives none (a 4.9.8
broker never does; the broker's check sends the UNIQ_KEY as transactionId, so
both paths now say the same). Checks run as tasks on the event loop instead of a
thread pool: a sync checker or local transaction must not block (make it async
for I/O); ``shutdown`` cancels checks still running.

Usage::

    class Checker:
        async def execute_local_transaction(self, msg, arg):
            return LocalTransactionState.COMMIT_MESSAGE  # or ROLLBACK_MESSAGE, UNKNOW

        async def check_local_transaction(self, msg):
            return LocalTransactionState.COMMIT_MESSAGE

    async with TransactionProducer("tx-group", namesrv_addr="127.0.0.1:9876",
                                   checker=Checker()) as producer:
        result = await producer.send_message_in_transaction(Message("T", b"x"), arg=None)

Must not: talk to brokers except through its ``ClientInstance``, or decide a
transaction itself.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias

from aiorocketmq.client.config import ClientConfig, ProducerConfig
from aiorocketmq.client.errors import InvalidArgumentError, MQClientError
from aiorocketmq.client.instance import ClientManager
from aiorocketmq.client.producer import Producer
from aiorocketmq.client.results import SendResult, SendStatus
from aiorocketmq.common.constants import MessageSysFlag
from aiorocketmq.common.errors import RemoteProtocolError
from aiorocketmq.common.message import Message, MessageExt
from aiorocketmq.common.msg_id import decode_offset_msg_id
from aiorocketmq.common.properties import MessageConst
from aiorocketmq.remoting.broker_admin_headers import (
    CheckTransactionStateRequestHeader,
    EndTransactionRequestHeader,
)

__all__ = [
    "LocalTransaction",
    "LocalTransactionState",
    "TransactionChecker",
    "TransactionProducer",
    "TransactionSendResult",
    "check_end_transaction_header",
    "end_transaction_header",
]

log = logging.getLogger(__name__)

_C = MessageConst
CHECK_END_TIMEOUT_MS = 3_000
"""Java's timeout of the END_TRANSACTION that answers a check."""


class LocalTransactionState(enum.Enum):
    """What the local transaction decided (Java's ``LocalTransactionState``)."""

    COMMIT_MESSAGE = MessageSysFlag.TRANSACTION_COMMIT_TYPE
    ROLLBACK_MESSAGE = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
    UNKNOW = MessageSysFlag.TRANSACTION_NOT_TYPE

    @property
    def commit_or_rollback(self) -> int:
        """The END_TRANSACTION ``commitOrRollback`` value (8, 12 or 0)."""
        return int(self.value)


StateOrAwaitable: TypeAlias = LocalTransactionState | Awaitable[LocalTransactionState | None] | None
LocalTransaction: TypeAlias = Callable[[Message, Any], StateOrAwaitable]
"""``(msg, arg) -> state`` (sync or async): the local transaction of one send."""


class TransactionChecker(Protocol):
    """Answers the brokers' checks (Java's ``TransactionListener``).

    ``check_local_transaction(msg)`` is required; an ``execute_local_transaction(msg,
    arg)`` method, if present, is the local transaction of sends that give none.
    Either may be sync or async.
    """

    def check_local_transaction(self, msg: MessageExt) -> StateOrAwaitable:
        """The state of the local transaction of a half message nobody ended yet."""


@dataclass(slots=True)
class TransactionSendResult(SendResult):
    """A ``SendResult`` plus what the local transaction decided."""

    local_transaction_state: LocalTransactionState = LocalTransactionState.UNKNOW


def end_transaction_header(
    group: str, result: SendResult, state: LocalTransactionState, transaction_id: str | None
) -> EndTransactionRequestHeader:
    """END_TRANSACTION after a local transaction (Java's ``endTransaction``).

    The CommitLog offset comes from the half message's offsetMsgId (its msgId when
    there is none, as Java); the table offset is its queue offset.

    Raises:
        RemoteProtocolError: neither id is an offset message id.
    """
    _, _, commit_log_offset = decode_offset_msg_id(result.offset_msg_id or result.msg_id or "")
    return EndTransactionRequestHeader(
        producer_group=group,
        tran_state_table_offset=result.queue_offset,
        commit_log_offset=commit_log_offset,
        commit_or_rollback=state.commit_or_rollback,
        msg_id=result.msg_id or "",
        from_transaction_check=False,
        transaction_id=result.transaction_id or transaction_id,
    )


def check_end_transaction_header(
    group: str,
    msg: MessageExt,
    check: CheckTransactionStateRequestHeader,
    state: LocalTransactionState,
) -> EndTransactionRequestHeader:
    """END_TRANSACTION answering a check (Java's ``processTransactionState``).

    Offsets and transactionId are the check's (the half message's latest copy);
    msgId is the message's UNIQ_KEY, else its offset msgId.
    """
    return EndTransactionRequestHeader(
        producer_group=group,
        tran_state_table_offset=check.tran_state_table_offset,
        commit_log_offset=check.commit_log_offset,
        commit_or_rollback=state.commit_or_rollback,
        msg_id=msg.uniq_key or msg.msg_id,
        from_transaction_check=True,
        transaction_id=check.transaction_id,
    )


async def _decide(call: Callable[[], StateOrAwaitable]) -> LocalTransactionState:
    """Run a sync or async decision; None is UNKNOW, a non-state is an error."""
    value = call()
    if inspect.isawaitable(value):
        value = await value
    if value is None:
        return LocalTransactionState.UNKNOW
    if not isinstance(value, LocalTransactionState):
        raise TypeError(f"a local transaction returned {value!r}, not a LocalTransactionState")
    return value


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


class TransactionProducer(Producer):
    """A producer of transactional messages (see the module docstring).

    Args:
        group: the producer group (brokers check back with any producer of it).
        namesrv_addr: ``host:port;host:port`` (or give ``client_config``).
        checker: answers the brokers' checks (``check_local_transaction``).
        config: producer settings.
        client_config: client instance settings.
        manager: share the client instance (see ``Producer``).
    """

    def __init__(
        self,
        group: str,
        namesrv_addr: str | None = None,
        *,
        checker: TransactionChecker,
        config: ProducerConfig | None = None,
        client_config: ClientConfig | None = None,
        manager: ClientManager | None = None,
    ) -> None:
        super().__init__(
            group, namesrv_addr, config=config, client_config=client_config, manager=manager
        )
        self.checker = checker
        self._checks: set[asyncio.Task[None]] = set()

    async def shutdown(self) -> None:
        """Cancel checks still running, then shut down as ``Producer`` (idempotent)."""
        checks, self._checks = list(self._checks), set()
        for task in checks:
            task.cancel()
        await asyncio.gather(*checks, return_exceptions=True)
        await super().shutdown()

    async def __aenter__(self) -> TransactionProducer:
        await self.start()
        return self

    async def send_message_in_transaction(
        self, msg: Message, arg: Any = None, *, local_transaction: LocalTransaction | None = None
    ) -> TransactionSendResult:
        """Send a half message, run the local transaction, end the transaction.

        Args:
            msg: the message (its delay level is dropped, as Java).
            arg: passed to the local transaction.
            local_transaction: ``(msg, arg) -> state``; default: the checker's
                ``execute_local_transaction``.

        Returns:
            The half message's send result and the local transaction's state.

        Raises:
            InvalidArgumentError: no local transaction, or an invalid message.
            MQClientError: the half message could not be sent (as ``Producer.send``).
        """
        execute = local_transaction or getattr(self.checker, "execute_local_transaction", None)
        if execute is None:
            raise InvalidArgumentError("TransactionListener is null")
        msg.clear_property(_C.PROPERTY_DELAY_TIME_LEVEL)
        self._check_message(msg)
        msg.put_property(_C.PROPERTY_TRANSACTION_PREPARED, "true")
        msg.put_property(_C.PROPERTY_PRODUCER_GROUP, self.group)
        result = await self.send(msg)
        state, error = LocalTransactionState.UNKNOW, None
        if result.status is SendStatus.SEND_OK:
            msg.transaction_id = msg.uniq_key or None
            try:
                state = await _decide(lambda: execute(msg, arg))
            except Exception as exc:  # the user's code: any failure means "unknown"
                log.info("local transaction failed msg_id=%s error=%s", result.msg_id, exc)
                error = exc
        else:
            state = LocalTransactionState.ROLLBACK_MESSAGE
        if state is not LocalTransactionState.COMMIT_MESSAGE:
            log.info("local transaction state=%s msg_id=%s", state.name, result.msg_id)
        try:
            await self._end_transaction(msg, result, state, error)
        except (MQClientError, RemoteProtocolError) as exc:
            log.warning("local transaction %s, but END_TRANSACTION failed: %s", state.name, exc)
        return TransactionSendResult(
            status=result.status,
            msg_id=result.msg_id,
            offset_msg_id=result.offset_msg_id,
            message_queue=result.message_queue,
            queue_offset=result.queue_offset,
            transaction_id=result.transaction_id or msg.transaction_id,
            region_id=result.region_id,
            trace_on=result.trace_on,
            local_transaction_state=state,
        )

    async def _end_transaction(
        self,
        msg: Message,
        result: SendResult,
        state: LocalTransactionState,
        error: BaseException | None,
    ) -> None:
        header = end_transaction_header(self.group, result, state, msg.transaction_id)
        address = self.instance.find_broker_address_in_publish(result.message_queue.broker_name)
        if address is None:
            raise MQClientError(f"no master address of {result.message_queue.broker_name}")
        remark = None
        if error is not None:
            remark = f"executeLocalTransactionBranch exception: {_error_text(error)}"
        await self.instance.api.end_transaction_oneway(
            address, header, remark, self.config.send_msg_timeout
        )

    # -- the brokers' checks ------------------------------------------------------------

    def check_transaction_state(
        self, address: str, msg: MessageExt, header: CheckTransactionStateRequestHeader
    ) -> None:
        """A broker asks about ``msg``: ask the checker in a task, answer ``address``."""
        task = asyncio.get_running_loop().create_task(
            self._answer_check(address, msg, header), name=f"tx-check:{self.group}"
        )
        self._checks.add(task)
        task.add_done_callback(self._checks.discard)

    async def _answer_check(
        self, address: str, msg: MessageExt, header: CheckTransactionStateRequestHeader
    ) -> None:
        state, remark = LocalTransactionState.UNKNOW, None
        try:
            state = await _decide(lambda: self.checker.check_local_transaction(msg))
        except Exception as exc:  # the user's code: any failure means "unknown"
            log.error("check local transaction failed msg_id=%s error=%s", msg.uniq_key, exc)
            remark = f"checkLocalTransactionState Exception: {_error_text(exc)}"
        if state is not LocalTransactionState.COMMIT_MESSAGE:
            log.warning("broker check: %s msg_id=%s", state.name, msg.uniq_key)
        end = check_end_transaction_header(self.group, msg, header, state)
        try:
            await self.instance.api.end_transaction_oneway(
                address, end, remark, CHECK_END_TIMEOUT_MS
            )
        except MQClientError as exc:
            log.error("END_TRANSACTION after a check failed address=%s error=%s", address, exc)
