"""Broker requests of the client, mapped to typed results and errors.

Owns: ``MQClientAPI``: one method per broker request a producer or consumer sends
(send single/batch, pull, consumer offsets, queue offsets, heartbeat, unregister,
consumer list, send-back, lock/unlock, end transaction), and the pure functions that turn a reply
into a result (``process_send_response``, ``process_pull_response``), following
Java's ``MQClientAPIImpl`` 4.9.8. Transport failures become ``MQRemotingError``
subclasses; error replies become ``MQBrokerError(code, remark)``.

Must not: choose brokers or queues, retry, decode pulled records (``pull_wrapper``
does), or keep state beyond the shared ``RemotingClient``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, TypeVar

from aiorocketmq.client.errors import MQBrokerError, MQRemotingError, from_remoting
from aiorocketmq.client.results import (
    PULL_STATUS_BY_CODE,
    SEND_STATUS_BY_CODE,
    PullResult,
    SendResult,
    SendStatus,
)
from aiorocketmq.common.constants import DEFAULT_REGION
from aiorocketmq.common.errors import RemoteProtocolError
from aiorocketmq.common.kernels import load_kernel
from aiorocketmq.common.message import MessageExt, MessageQueue
from aiorocketmq.common.protocol_bodies import (
    ConsumerListBody,
    HeartbeatData,
    LockBatchRequestBody,
    LockBatchResponseBody,
    UnlockBatchRequestBody,
)
from aiorocketmq.remoting.broker_admin_headers import EndTransactionRequestHeader
from aiorocketmq.remoting.broker_headers import (
    ConsumerSendMsgBackRequestHeader,
    GetConsumerListByGroupRequestHeader,
    OffsetResponseHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    QueryConsumerOffsetRequestHeader,
    SearchOffsetRequestHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
    TopicQueueRequestHeader,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from aiorocketmq.remoting.client import RemotingClient
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import Body, RemotingCommand
from aiorocketmq.remoting.errors import ProcessorError, RemotingError

__all__ = [
    "MQClientAPI",
    "process_pull_response",
    "process_send_response",
    "py_send_result",
    "send_fields_v2",
    "v2_fields",
]

_T = TypeVar("_T")

_KERNEL = load_kernel("aiorocketmq.client._produce_kernels")


def _malformed(address: str, what: str, exc: Exception) -> MQBrokerError:
    return MQBrokerError(
        ResponseCode.SYSTEM_ERROR,
        f"malformed reply ({what}): {exc}",
        address=address,
        retriable=False,
    )


#: What a header or body parser raises for a reply it cannot read (TypeError: a field
#: that is not text, which no decoder of ours gives but a peer's frame might).
_MALFORMED_REPLY: Final = (ProcessorError, RemoteProtocolError, ValueError, TypeError)


def _parse(address: str, what: str, parse: Callable[[], _T]) -> _T:
    """Run a header/body parser; a bad reply is a typed, non-retriable broker error."""
    try:
        return parse()
    except _MALFORMED_REPLY as exc:
        raise _malformed(address, what, exc) from exc


def send_fields_v2(header: SendMessageRequestHeader) -> dict[str, str]:
    """``header.to_ext_fields_v2()`` built directly: the same keys, order and strings
    (``v2_fields`` of the header's values; a unit test pins the equality)."""
    build = v2_fields if _KERNEL is None else _KERNEL.v2_fields
    return build(
        header.producer_group, header.topic, header.default_topic,
        header.default_topic_queue_nums, header.queue_id, header.sys_flag,
        header.born_timestamp, header.flag, header.properties, header.reconsume_times,
        header.unit_mode, header.batch, header.max_reconsume_times, header.broker_name,
    )  # fmt: skip


def v2_fields(  # noqa: PLR0917 - the header's fields, positional on the hot path
    producer_group: str, topic: str, default_topic: str, default_topic_queue_nums: int,
    queue_id: int, sys_flag: int, born_timestamp: int, flag: int, properties: str | None,
    reconsume_times: int | None, unit_mode: bool, batch: bool,
    max_reconsume_times: int | None, broker_name: str | None,
) -> dict[str, str]:  # fmt: skip
    """A SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE header's one-letter fields from its values:
    the reference of the C kernel's ``v2_fields``, which takes every send when built.

    Every send builds these. The generic path (a name->value dict, a renaming
    comprehension, a per-value type check) cost ~4 µs of a ~30 µs send encode in the
    client benchmark's profile, and a header object per send another 0.7 µs.
    """
    fields = {
        "a": producer_group,
        "b": topic,
        "c": default_topic,
        "d": str(default_topic_queue_nums),
        "e": str(queue_id),
        "f": str(sys_flag),
        "g": str(born_timestamp),
        "h": str(flag),
    }
    if properties is not None:
        fields["i"] = properties
    if reconsume_times is not None:
        fields["j"] = str(reconsume_times)
    fields["k"] = "true" if unit_mode else "false"
    if max_reconsume_times is not None:
        fields["l"] = str(max_reconsume_times)
    fields["m"] = "true" if batch else "false"
    if broker_name is not None:
        fields["n"] = broker_name
    return fields


def process_send_response(
    broker_name: str, topic: str, msg_id: str | None, reply: RemotingCommand, address: str,
    *, sent: MessageQueue | None = None,
) -> SendResult:  # fmt: skip
    """A SEND_MESSAGE* reply -> ``SendResult`` (Java's ``processSendResponse``).

    Args:
        broker_name: the broker the message went to.
        topic: the message's topic.
        msg_id: its UNIQ_KEY (comma-joined for a batch).
        reply: the broker's reply.
        address: the broker's address (for errors).
        sent: the queue the request named; the result shares it when the reply names
            the same queue (the usual case: no new queue object per send).

    Raises:
        MQBrokerError: any code but SUCCESS, FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT,
            SLAVE_NOT_AVAILABLE; or a malformed header.
    """
    status = SEND_STATUS_BY_CODE.get(reply.code)
    if status is None:
        raise MQBrokerError(reply.code, reply.remark, address=address)
    if _KERNEL is not None:  # the usual reply, in C; anything else below
        result: SendResult | None = _KERNEL.send_result(
            SendResult, status, msg_id, reply.ext_fields, sent, topic, broker_name
        )
        if result is not None:
            return result
    return py_send_result(status, msg_id, reply.ext_fields, sent, topic, broker_name, address)


def py_send_result(  # noqa: PLR0917 - the kernel's signature
    status: SendStatus, msg_id: str | None, fields: dict[str, str], sent: MessageQueue | None,
    topic: str, broker_name: str, address: str,
) -> SendResult:  # fmt: skip
    """The ``SendResult`` of a reply with a success code: the reference, and every
    reply ``_produce_kernels.send_result`` leaves to it.

    Raises:
        MQBrokerError: a malformed header.
    """
    try:
        header = SendMessageResponseHeader.from_ext_fields(fields)
    except _MALFORMED_REPLY as exc:  # as _parse, without a closure per send
        raise _malformed(address, "send", exc) from exc
    queue_id = header.queue_id
    if (
        sent is None or sent.queue_id != queue_id or sent.topic != topic
        or sent.broker_name != broker_name
    ):  # fmt: skip
        sent = MessageQueue(topic, broker_name, queue_id)
    return SendResult(
        status, msg_id, header.msg_id, sent, header.queue_offset, header.transaction_id,
        header.msg_region or DEFAULT_REGION, fields.get("TRACE_ON") != "false",
    )  # fmt: skip


def process_pull_response(reply: RemotingCommand, address: str) -> PullResult:
    """A PULL_MESSAGE reply -> ``PullResult`` with the raw body (Java's ``processPullResponse``).

    Raises:
        MQBrokerError: a code other than SUCCESS, PULL_NOT_FOUND,
            PULL_RETRY_IMMEDIATELY, PULL_OFFSET_MOVED; or a malformed header.
    """
    status = PULL_STATUS_BY_CODE.get(reply.code)
    if status is None:
        raise MQBrokerError(reply.code, reply.remark, address=address)
    header = _parse(
        address, "pull", lambda: PullMessageResponseHeader.from_ext_fields(reply.ext_fields)
    )
    return PullResult(
        status=status,
        next_begin_offset=header.next_begin_offset,
        min_offset=header.min_offset,
        max_offset=header.max_offset,
        suggest_which_broker_id=header.suggest_which_broker_id,
        # A large reply's body is already a bytearray of its own (FrameDecoder): no copy.
        message_binary=reply.body if isinstance(reply.body, bytearray) else bytes(reply.body),
    )


class MQClientAPI:
    """Broker requests over a shared ``RemotingClient`` (see the module docstring).

    Args:
        remoting: the client every request goes through.
        on_transport_error: called with the address and error of every request that
            failed at the transport level (the client instance refreshes routes at
            once, so a dead master is not retried until the next 30 s refresh).
    """

    def __init__(
        self,
        remoting: RemotingClient,
        on_transport_error: Callable[[str, MQRemotingError], None] | None = None,
    ) -> None:
        self.remoting = remoting
        self.on_transport_error = on_transport_error

    def _transport_error(self, address: str, exc: RemotingError) -> MQRemotingError:
        mapped = from_remoting(exc)
        if self.on_transport_error is not None:
            self.on_transport_error(address, mapped)
        return mapped

    async def invoke(
        self, address: str, code: int, fields: dict[str, str], body: Body, timeout_ms: int
    ) -> RemotingCommand:
        """Send one request; transport failures become ``MQRemotingError``."""
        request = RemotingCommand.request(code, fields, body)
        try:
            return await self.remoting.invoke(address, request, timeout_ms)
        except RemotingError as exc:
            raise self._transport_error(address, exc) from exc

    async def invoke_oneway(
        self, address: str, code: int, fields: dict[str, str], body: Body, timeout_ms: int
    ) -> None:
        """Send one oneway request; transport failures become ``MQRemotingError``."""
        request = RemotingCommand.request(code, fields, body)
        try:
            await self.remoting.invoke_oneway(address, request, timeout_ms)
        except RemotingError as exc:
            raise self._transport_error(address, exc) from exc

    async def _ok(
        self, address: str, code: int, fields: dict[str, str], body: Body, timeout_ms: int
    ) -> RemotingCommand:
        reply = await self.invoke(address, code, fields, body, timeout_ms)
        if reply.code != ResponseCode.SUCCESS:
            raise MQBrokerError(reply.code, reply.remark, address=address)
        return reply

    # -- send ---------------------------------------------------------------------------

    async def send_message(
        self,
        address: str,
        queue: MessageQueue,
        code: RequestCode,
        fields: dict[str, str],
        body: Body,
        *,
        topic: str,
        timeout_ms: int,
        msg_id: str | None,
        oneway: bool = False,
    ) -> SendResult | None:
        """SEND_MESSAGE_V2 or SEND_BATCH_MESSAGE (``v2_fields``), or SEND_MESSAGE
        (``SendMessageRequestHeader.to_ext_fields``).

        Args:
            address: the broker (a master).
            queue: the queue the header names (its broker name goes into the result).
            code: the request code.
            fields: the request header's fields.
            body: the (possibly compressed) body, or the encoded batch.
            topic: the message's topic (the result's queue's; Java takes the message's).
            timeout_ms: the reply timeout.
            msg_id: the UNIQ_KEY(s) the result reports.
            oneway: send without waiting (returns None).

        Raises:
            MQBrokerError: error reply. MQRemotingError: transport failure.
        """
        if oneway:
            await self.invoke_oneway(address, code, fields, body, timeout_ms)
            return None
        try:  # ``invoke`` inline: one coroutine less per send
            reply = await self.remoting.invoke(
                address, RemotingCommand.request(code, fields, body), timeout_ms
            )
        except RemotingError as exc:
            raise self._transport_error(address, exc) from exc
        return process_send_response(queue.broker_name, topic, msg_id, reply, address, sent=queue)

    # -- pull ---------------------------------------------------------------------------

    async def pull_message(
        self, address: str, header: PullMessageRequestHeader, timeout_ms: int
    ) -> PullResult:
        """PULL_MESSAGE; the result keeps the raw body for ``PullAPIWrapper``."""
        reply = await self.invoke(
            address, RequestCode.PULL_MESSAGE, header.to_ext_fields(), b"", timeout_ms
        )
        return process_pull_response(reply, address)

    # -- offsets ------------------------------------------------------------------------

    async def _offset(
        self, address: str, code: int, fields: dict[str, str], timeout_ms: int
    ) -> int:
        reply = await self._ok(address, code, fields, b"", timeout_ms)
        return _parse(
            address, "offset", lambda: OffsetResponseHeader.from_ext_fields(reply.ext_fields)
        ).offset

    async def query_consumer_offset(
        self, address: str, header: QueryConsumerOffsetRequestHeader, timeout_ms: int
    ) -> int:
        """QUERY_CONSUMER_OFFSET: the group's committed offset.

        Raises:
            MQBrokerError: e.g. QUERY_NOT_FOUND when the group has none.
        """
        return await self._offset(
            address, RequestCode.QUERY_CONSUMER_OFFSET, header.to_ext_fields(), timeout_ms
        )

    async def update_consumer_offset(
        self,
        address: str,
        header: UpdateConsumerOffsetRequestHeader,
        timeout_ms: int,
        *,
        oneway: bool = False,
    ) -> None:
        """UPDATE_CONSUMER_OFFSET (oneway: as Java's ``updateConsumerOffsetOneway``)."""
        code, fields = RequestCode.UPDATE_CONSUMER_OFFSET, header.to_ext_fields()
        if oneway:
            await self.invoke_oneway(address, code, fields, b"", timeout_ms)
        else:
            await self._ok(address, code, fields, b"", timeout_ms)

    async def get_max_offset(self, address: str, mq: MessageQueue, timeout_ms: int) -> int:
        """GET_MAX_OFFSET: the queue's next offset to be written."""
        fields = TopicQueueRequestHeader(mq.topic, mq.queue_id).to_ext_fields()
        return await self._offset(address, RequestCode.GET_MAX_OFFSET, fields, timeout_ms)

    async def get_min_offset(self, address: str, mq: MessageQueue, timeout_ms: int) -> int:
        """GET_MIN_OFFSET: the queue's smallest offset still stored."""
        fields = TopicQueueRequestHeader(mq.topic, mq.queue_id).to_ext_fields()
        return await self._offset(address, RequestCode.GET_MIN_OFFSET, fields, timeout_ms)

    async def search_offset(
        self, address: str, mq: MessageQueue, timestamp_ms: int, timeout_ms: int
    ) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP: the first offset stored at or after ``timestamp_ms``."""
        fields = SearchOffsetRequestHeader(mq.topic, mq.queue_id, timestamp_ms).to_ext_fields()
        return await self._offset(
            address, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, fields, timeout_ms
        )

    # -- client management --------------------------------------------------------------

    async def send_heartbeat(self, address: str, heartbeat: HeartbeatData, timeout_ms: int) -> int:
        """HEART_BEAT; returns the broker's remoting version (Java uses it for features)."""
        reply = await self._ok(address, RequestCode.HEART_BEAT, {}, heartbeat.encode(), timeout_ms)
        return reply.version

    async def unregister_client(
        self,
        address: str,
        client_id: str,
        timeout_ms: int,
        *,
        producer_group: str | None = None,
        consumer_group: str | None = None,
    ) -> None:
        """UNREGISTER_CLIENT for one producer or consumer group."""
        fields = UnregisterClientRequestHeader(
            client_id, producer_group, consumer_group
        ).to_ext_fields()
        await self._ok(address, RequestCode.UNREGISTER_CLIENT, fields, b"", timeout_ms)

    async def get_consumer_id_list_by_group(
        self, address: str, consumer_group: str, timeout_ms: int
    ) -> list[str]:
        """GET_CONSUMER_LIST_BY_GROUP: the client ids of the group's live consumers.

        Raises:
            MQBrokerError: e.g. SYSTEM_ERROR "no consumer for this group" when none.
        """
        fields = GetConsumerListByGroupRequestHeader(consumer_group).to_ext_fields()
        reply = await self._ok(
            address, RequestCode.GET_CONSUMER_LIST_BY_GROUP, fields, b"", timeout_ms
        )
        body = _parse(address, "consumer list", lambda: ConsumerListBody.decode(reply.body))
        return list(body.consumer_id_list)

    async def consumer_send_message_back(
        self,
        address: str,
        msg: MessageExt,
        consumer_group: str,
        delay_level: int,
        timeout_ms: int,
        *,
        max_reconsume_times: int = 16,
    ) -> None:
        """CONSUMER_SEND_MSG_BACK: hand a failed message back for retry (or the DLQ)."""
        header = ConsumerSendMsgBackRequestHeader(
            offset=msg.commit_log_offset,
            group=consumer_group,
            delay_level=delay_level,
            origin_msg_id=msg.msg_id,
            origin_topic=msg.topic,
            max_reconsume_times=max_reconsume_times,
        )
        await self._ok(
            address, RequestCode.CONSUMER_SEND_MSG_BACK, header.to_ext_fields(), b"", timeout_ms
        )

    async def lock_batch_mq(
        self, address: str, body: LockBatchRequestBody, timeout_ms: int
    ) -> set[MessageQueue]:
        """LOCK_BATCH_MQ: the queues this client now holds the lock of."""
        reply = await self._ok(address, RequestCode.LOCK_BATCH_MQ, {}, body.encode(), timeout_ms)
        decoded = _parse(address, "lock", lambda: LockBatchResponseBody.decode(reply.body))
        return set(decoded.lock_ok_mq_set)

    async def unlock_batch_mq(
        self,
        address: str,
        body: UnlockBatchRequestBody,
        timeout_ms: int,
        *,
        oneway: bool = False,
    ) -> None:
        """UNLOCK_BATCH_MQ."""
        if oneway:
            await self.invoke_oneway(
                address, RequestCode.UNLOCK_BATCH_MQ, {}, body.encode(), timeout_ms
            )
        else:
            await self._ok(address, RequestCode.UNLOCK_BATCH_MQ, {}, body.encode(), timeout_ms)

    # -- transactions -------------------------------------------------------------------

    async def end_transaction_oneway(
        self,
        address: str,
        header: EndTransactionRequestHeader,
        remark: str | None,
        timeout_ms: int,
    ) -> None:
        """END_TRANSACTION oneway (Java's ``endTransactionOneway``).

        Args:
            address: the broker that stored the half message.
            header: commit/rollback/unknown and the half message's offsets.
            remark: why (a local transaction's exception), or None.
            timeout_ms: the write timeout.

        Raises:
            MQRemotingError: transport failure.
        """
        request = RemotingCommand.request(RequestCode.END_TRANSACTION, header.to_ext_fields())
        request.remark = remark
        try:
            await self.remoting.invoke_oneway(address, request, timeout_ms)
        except RemotingError as exc:
            raise self._transport_error(address, exc) from exc
