"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320).

Owns: RocketMQ 4.9.8's send checks, in ``AbstractSendMessageProcessor.msgCheck`` +
``SendMessageProcessor`` order (broker perm, topic name, not-allowed-send topics,
topic exists or auto-create through the default topic, queueId range, %RETRY%
group and DLQ redirect), building the ``MessageExtBrokerInner`` /
``MessageExtBatch`` the store puts, and the reply header (every field a string).

Must not: encode records or check sizes (the store's put path answers
MESSAGE_ILLEGAL), refuse a SLAVE itself (the store answers SERVICE_NOT_AVAILABLE),
or map put statuses (``broker.status_map`` does). A prepared message is refused under
``rejectTransactionMessage`` (as Java) and otherwise stored as a half message by
``transaction.half_service``.

A message with RocketMQ 5's timer properties (``TIMER_DELIVER_MS``,
``TIMER_DELAY_SEC``, ``TIMER_DELAY_MS``; ``HookUtils.handleScheduleMessage``) due
later goes to the broker's durable timer (``broker.timer``) when one is given; a
delay level wins over them (they are dropped), as in RocketMQ 5. Batches are stored
as sent (RocketMQ 5 applies its timer hook to single puts only).

Batch or not is decided by the header's ``batch`` field, not the request code,
exactly as Java.

A plain single SEND_MESSAGE_V2 or SEND_MESSAGE (``broker.plain_send``) to a topic this
processor has seen pass the static checks takes ``_send_plain``: the same checks,
message, put and reply in fewer steps, from one reader call; everything else, the
general path.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Mapping
from typing import Final, Protocol, TypeVar

from aiorocketmq.broker.context import BrokerContext
from aiorocketmq.broker.plain_send import LONG_NAMES, V2_NAMES, fields_reader
from aiorocketmq.broker.status_map import disk_util_text, put_response
from aiorocketmq.broker.stored_copy import join_properties, sent_to_stored
from aiorocketmq.broker.timed_message import TIMER_PROPERTIES
from aiorocketmq.broker.transaction.half_service import put_half_message
from aiorocketmq.common.batch_codec import count_batch_entries
from aiorocketmq.common.constants import (
    DEFAULT_REGION,
    RETRY_GROUP_TOPIC_PREFIX,
    MessageSysFlag,
    dlq_topic,
    is_writeable,
)
from aiorocketmq.common.constants import PERM_READ as _PERM_READ
from aiorocketmq.common.constants import PERM_WRITE as _PERM_WRITE
from aiorocketmq.common.properties import (
    MessageConst,
    string_to_properties,
)
from aiorocketmq.common.topic_config import TopicConfig
from aiorocketmq.common.validators import not_allowed_send_remark, validate_topic
from aiorocketmq.remoting.broker_headers import SendMessageRequestHeader, SendMessageResponseHeader
from aiorocketmq.remoting.codes import MQVersion, RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.connection import ProcessorTable, RemotingConnection
from aiorocketmq.remoting.errors import ProcessorError
from aiorocketmq.store.inner_message import MessageExtBatch, MessageExtBrokerInner
from aiorocketmq.store.results import PutMessageResult, PutMessageStatus

__all__ = [
    "DLQ_NUMS_PER_GROUP",
    "SUGGEST_TODO",
    "TIMER_MARK",
    "TOPIC_SYS_FLAG_UNIT_SUB",
    "SendProcessor",
]

log = logging.getLogger(__name__)

DLQ_NUMS_PER_GROUP: Final = 1
"""Queues of a ``%DLQ%<group>`` topic (``SendMessageProcessor.DLQ_NUMS_PER_GROUP``)."""

SUGGEST_TODO: Final = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."
_TOPIC_SYS_FLAG_UNIT: Final = 0x1
TOPIC_SYS_FLAG_UNIT_SUB: Final = 0x2
_BATCH_TOPIC_MAX: Final = 127  # Byte.MAX_VALUE
_REGION_FIELDS: Final = {"MSG_REGION": DEFAULT_REGION, "TRACE_ON": "true"}
#: Entries of the per-processor memos (sendable topic names, peer addresses); a memo
#: that fills up is emptied, so hostile names cannot grow it.
_MEMO_MAX: Final = 4096
_V = TypeVar("_V")
#: Every timer property's name starts with this (a test holds it so): a properties text
#: without it holds none of them.
TIMER_MARK: Final = "TIMER_"
#: ``put_response`` of PUT_OK (its row quotes no limit, so the size given is unused).
_PUT_OK_RESPONSE: Final = put_response(PutMessageStatus.PUT_OK, max_message_size=0)


def _refusal(request: RemotingCommand, exc: ProcessorError) -> RemotingCommand:
    # Java's preSend puts MSG_REGION and TRACE_ON on every reply after parsing.
    return request.response_to(exc.code, exc.remark, dict(_REGION_FIELDS))


def _remember(memo: dict[str, _V], key: str, value: _V) -> _V:
    if len(memo) >= _MEMO_MAX:
        memo.clear()
    memo[key] = value
    return value


def _parse_host(address: str) -> tuple[str, int]:
    """``"ip:port"`` (as ``RemotingConnection.remote_address``) -> ``(ip, port)``."""
    host, _, port = address.rpartition(":")
    try:
        return host, int(port)
    except ValueError:
        return "127.0.0.1", 0


class TimerHook(Protocol):
    """What the send path needs of the durable timer (``broker.timer``)."""

    def due_ms(self, props: Mapping[str, str], topic: str, now_ms: int) -> int | None:
        """When a message with timer properties is due (None: not a timed message);
        ValueError for a value that is not an integer."""

    def schedule(self, msg: MessageExtBrokerInner, deliver_ms: int) -> Awaitable[PutMessageResult]:
        """Park ``msg`` until ``deliver_ms``."""


#: The single-send codes the plain lane takes, with the names their headers use.
_PLAIN_NAMES: Final[dict[int, tuple[str, ...]]] = {
    RequestCode.SEND_MESSAGE_V2: V2_NAMES,
    RequestCode.SEND_MESSAGE: LONG_NAMES,
}


class SendProcessor:
    """Handles the three send codes for one broker.

    Args:
        ctx: the broker's parts.
        timer: the durable timer for RocketMQ 5's timed messages (None: they are
            stored at once, as before RocketMQ 5).
    """

    def __init__(self, ctx: BrokerContext, timer: TimerHook | None = None) -> None:
        self._ctx = ctx
        self._timer = timer
        self._random = random.Random()
        # Names that passed the static checks (characters, length, not a system topic
        # clients may not send to): the same answer every time, so asked once.
        self._sendable_names: dict[str, bool] = {}
        self._hosts: dict[str, tuple[str, int]] = {}
        self._read_plain = fields_reader()

    def register(self, table: ProcessorTable) -> None:
        """Register SEND_MESSAGE, SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE."""
        table.register(RequestCode.SEND_MESSAGE, self.process)
        table.register(RequestCode.SEND_MESSAGE_V2, self.process)
        table.register(RequestCode.SEND_BATCH_MESSAGE, self.process)

    def process(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand | bytes | Awaitable[RemotingCommand]:
        """One send request -> its reply (a bad header raises ``HeaderFieldError``).

        The reply is returned inline when the store completed the put inline (no file
        to wait for, no flush or replica promise): no coroutine and no task per request.
        """
        names = _PLAIN_NAMES.get(request.code)
        if names is not None:
            reply = self._send_plain(conn, request, names)
            if reply is not None:
                return reply
        # Java decodes SEND_BATCH_MESSAGE with the one-letter V2 header too; a 320
        # carrying long names (no "a" field) is still read the long way.
        v2 = request.code == RequestCode.SEND_MESSAGE_V2 or (
            request.code == RequestCode.SEND_BATCH_MESSAGE and "a" in request.ext_fields
        )
        if v2:
            header = SendMessageRequestHeader.from_ext_fields_v2(request.ext_fields)
        else:
            header = SendMessageRequestHeader.from_ext_fields(request.ext_fields)
        try:
            return self._send(conn, request, header)
        except ProcessorError as exc:
            return _refusal(request, exc)

    def _send_plain(
        self, conn: RemotingConnection, request: RemotingCommand, names: tuple[str, ...]
    ) -> RemotingCommand | bytes | Awaitable[RemotingCommand] | None:
        """The usual single send in fewer steps; None: the general path takes it.

        Usual: a plain send (``broker.plain_send``) to a topic that passed the static
        checks before, that exists here, is not a ``%RETRY%`` topic and has the queue,
        on a broker that takes writes. Then the header, the checks and the properties
        edit come from one reader call, and the store's ``plain_putter`` stores it from
        those fields; what it does not take goes to the store as the general path
        sends it: the same records, replies and refusals (a test holds them equal).
        """
        ctx = self._ctx
        cfg = ctx.config
        plain = self._read_plain(
            request.ext_fields, cfg.broker_cluster_name, cfg.max_properties_size, names
        )
        if plain is None:
            return None
        topic, queue_id, sys_flag, born, flag, reconsume, props, stored = plain
        if topic not in self._sendable_names or topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return None
        config = ctx.topics.select_topic_config(topic)
        if (
            config is None or not is_writeable(cfg.broker_permission)
            or queue_id >= max(config.write_queue_nums, config.read_queue_nums)
        ):  # fmt: skip
            return None
        if config.topic_filter_type == "MULTI_TAG":
            sys_flag |= MessageSysFlag.MULTI_TAGS_FLAG
        address = conn.remote_address
        born_host = self._hosts.get(address) or self._born_host(address)
        plain_putter = ctx.store.plain_putter
        if plain_putter is not None:
            plain_put = plain_putter.put(
                topic, queue_id, request.body, stored, flag, sys_flag, born, born_host,
                ctx.store_host, reconsume,
            )  # fmt: skip
            if plain_put is not None:  # stored: ``_reply``'s PUT_OK answer, without a result
                fields = SendMessageResponseHeader.stored_fields(
                    plain_put[0], queue_id, plain_put[1], DEFAULT_REGION
                )
                code = _PUT_OK_RESPONSE[0]
                encoded = conn.encode_reply(request, code, fields)
                return encoded if encoded is not None else request.response_to(code, None, fields)
        msg = MessageExtBrokerInner(
            topic=topic, queue_id=queue_id, body=request.body, properties=props,
            properties_string=stored, flag=flag, sys_flag=sys_flag, born_timestamp=born,
            born_host=born_host, store_host=ctx.store_host, reconsume_times=reconsume,
        )  # fmt: skip
        put = ctx.store.put_message_nowait(msg)
        if isinstance(put, PutMessageResult):
            return self._reply(request, put, queue_id)
        return self._reply_later(request, put, queue_id)

    def _send(
        self, conn: RemotingConnection, request: RemotingCommand, header: SendMessageRequestHeader
    ) -> RemotingCommand | Awaitable[RemotingCommand]:
        """``msgCheck``, then the single or batch path, then the reply."""
        topic_config = self._msg_check(header, conn.remote_address)
        self._check_limits(request, header)
        queue_id = header.queue_id
        if queue_id < 0:
            queue_id = self._random_queue_id(topic_config.write_queue_nums)
        if header.batch:
            put = self._send_batch(conn, request, header, topic_config, queue_id)
        else:
            put, queue_id = self._send_one(conn, request, header, topic_config, queue_id)
        if isinstance(put, PutMessageResult):
            return self._reply(request, put, queue_id)
        return self._reply_later(request, put, queue_id)

    async def _reply_later(
        self, request: RemotingCommand, put: Awaitable[PutMessageResult], queue_id: int
    ) -> RemotingCommand:
        try:
            return self._reply(request, await put, queue_id)
        except ProcessorError as exc:
            return _refusal(request, exc)

    def _check_limits(self, request: RemotingCommand, header: SendMessageRequestHeader) -> None:
        """``maxPropertiesSize`` and ``maxBatchMessageNums``: MESSAGE_ILLEGAL naming the limit."""
        cfg = self._ctx.config
        props = header.properties
        # A code point is at most 4 UTF-8 bytes: encode only when it could matter.
        if props and len(props) * 4 > cfg.max_properties_size:
            size = len(props.encode("utf-8", "surrogatepass"))
            if size > cfg.max_properties_size:
                raise ProcessorError(
                    ResponseCode.MESSAGE_ILLEGAL,
                    f"message properties are {size} bytes, over maxPropertiesSize "
                    f"{cfg.max_properties_size}",
                )
        limit = cfg.max_batch_message_nums
        if header.batch and count_batch_entries(request.body, stop_after=limit) > limit:
            raise ProcessorError(
                ResponseCode.MESSAGE_ILLEGAL,
                f"the batch holds more than maxBatchMessageNums {limit} messages",
            )

    def _born_host(self, address: str) -> tuple[str, int]:
        host = self._hosts.get(address)
        if host is None:
            host = _remember(self._hosts, address, _parse_host(address))
        return host

    def _random_queue_id(self, write_queue_nums: int) -> int:
        """Java's ``randomQueueId``: ``nextInt(99999999) % writeQueueNums``."""
        return self._random.randrange(99999999) % max(write_queue_nums, 1)

    def _msg_check(self, header: SendMessageRequestHeader, remote: str) -> TopicConfig:
        """``msgCheck``: the topic config to send to, or ``ProcessorError``."""
        ctx = self._ctx
        topic = header.topic
        if not is_writeable(ctx.config.broker_permission) and ctx.topics.is_order_topic(topic):
            raise ProcessorError(
                ResponseCode.NO_PERMISSION,
                f"the broker[{ctx.config.broker_ip1}] sending message is forbidden",
            )
        if topic not in self._sendable_names:
            remark = validate_topic(topic)
            if remark is not None:
                raise ProcessorError(ResponseCode.SYSTEM_ERROR, remark)
            remark = not_allowed_send_remark(topic)
            if remark is not None:
                raise ProcessorError(ResponseCode.NO_PERMISSION, remark)
            _remember(self._sendable_names, topic, True)
        config = ctx.topics.select_topic_config(topic) or self._auto_create(header, remote)
        valid = max(config.write_queue_nums, config.read_queue_nums)
        if header.queue_id >= valid:
            raise ProcessorError(
                ResponseCode.SYSTEM_ERROR,
                f"request queueId[{header.queue_id}] is illegal, {config} Producer: {remote}",
            )
        return config

    def _auto_create(self, header: SendMessageRequestHeader, remote: str) -> TopicConfig:
        """Create an unknown topic from the default topic, or TOPIC_NOT_EXIST."""
        topic = header.topic
        is_retry = topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
        sys_flag = 0
        if header.unit_mode:
            sys_flag = TOPIC_SYS_FLAG_UNIT_SUB if is_retry else _TOPIC_SYS_FLAG_UNIT
        log.warning("the topic %s not exist, producer: %s", topic, remote)
        topics = self._ctx.topics
        config = topics.create_topic_in_send_message_method(
            topic, header.default_topic, remote, header.default_topic_queue_nums, sys_flag
        )
        if config is None and is_retry:
            config = topics.create_topic_in_send_message_back_method(
                topic, 1, _PERM_WRITE | _PERM_READ, sys_flag
            )
        if config is None:
            raise ProcessorError(
                ResponseCode.TOPIC_NOT_EXIST,
                f"topic[{topic}] not exist, apply first please!{SUGGEST_TODO}",
            )
        return config

    def _retry_and_dlq(
        self, request: RemotingCommand, header: SendMessageRequestHeader, msg: MessageExtBrokerInner
    ) -> TopicConfig | None:
        """``handleRetryAndDLQ`` for a ``%RETRY%`` topic: redirect an exhausted retry to
        ``%DLQ%<group>``.

        Returns the DLQ topic config when redirected, else None.
        """
        group = header.topic[len(RETRY_GROUP_TOPIC_PREFIX) :]
        group_config = self._ctx.groups.find_subscription_group_config(group)
        if group_config is None:
            raise ProcessorError(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group not exist, {group} {SUGGEST_TODO}",
            )
        max_times = group_config.retry_max_times
        if request.version >= MQVersion.V3_4_9 and header.max_reconsume_times is not None:
            max_times = header.max_reconsume_times
        if (header.reconsume_times or 0) < max_times:
            return None
        msg.topic = dlq_topic(group)
        msg.queue_id = self._random.randrange(99999999) % DLQ_NUMS_PER_GROUP
        return self._ctx.topics.create_topic_in_send_message_back_method(
            msg.topic, DLQ_NUMS_PER_GROUP, _PERM_WRITE | _PERM_READ, 0
        )

    def _send_one(
        self,
        conn: RemotingConnection,
        request: RemotingCommand,
        header: SendMessageRequestHeader,
        topic_config: TopicConfig,
        queue_id: int,
    ) -> tuple[PutMessageResult | Awaitable[PutMessageResult], int]:
        """``asyncSendMessage``: build the inner message and put it."""
        ctx = self._ctx
        props = string_to_properties(header.properties or "")
        msg = MessageExtBrokerInner(topic=header.topic, queue_id=queue_id, properties=props)
        if header.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            topic_config = self._retry_and_dlq(request, header, msg) or topic_config
        sys_flag = header.sys_flag
        if topic_config.topic_filter_type == "MULTI_TAG":
            sys_flag |= MessageSysFlag.MULTI_TAGS_FLAG
        msg.sys_flag = sys_flag
        msg.body = request.body
        msg.flag = header.flag
        msg.born_timestamp = header.born_timestamp
        address = conn.remote_address
        msg.born_host = self._hosts.get(address) or self._born_host(address)
        msg.store_host = ctx.store_host
        msg.reconsume_times = header.reconsume_times or 0
        msg.properties_string = sent_to_stored(
            header.properties or "", props, ctx.config.broker_cluster_name
        )
        prepared = props.get(MessageConst.PROPERTY_TRANSACTION_PREPARED, "")
        if prepared.lower() == "true":
            if ctx.config.reject_transaction_message:
                raise ProcessorError(
                    ResponseCode.NO_PERMISSION,
                    f"the broker[{ctx.config.broker_ip1}] sending transaction message is forbidden",
                )
            real_queue_id = msg.queue_id  # the reply names it, not the half queue (as Java)
            return put_half_message(ctx.store, msg), real_queue_id
        queue_id = msg.queue_id  # a timed message's reply names its real queue (as Java)
        if self._timer is not None and TIMER_MARK in (header.properties or ""):
            timed = self._timed(msg)
            if timed is not None:
                return timed, queue_id
        return ctx.store.put_message_nowait(msg), queue_id

    def _timed(self, msg: MessageExtBrokerInner) -> Awaitable[PutMessageResult] | None:
        """RocketMQ 5's ``handleScheduleMessage`` for a message that is not a half
        message: its put through the timer when it is due later, else None."""
        timer, cfg = self._timer, self._ctx.store_config
        sent = msg.properties
        if timer is None or sent.keys().isdisjoint(TIMER_PROPERTIES) or self._ctx.is_slave:
            return None  # (a slave's store refuses the put itself)
        wait = MessageConst.PROPERTY_WAIT_STORE_MSG_OK
        props = {k: v for k, v in sent.items() if k != wait}  # the stored ones
        if props.get(MessageConst.PROPERTY_DELAY_TIME_LEVEL, "0") not in ("", "0"):
            for key in TIMER_PROPERTIES:  # a delay level wins; RocketMQ drops the rest
                props.pop(key, None)
                msg.properties.pop(key, None)
            msg.properties_string = join_properties(props)
            return None
        if not cfg.timer_wheel_enable:
            raise ProcessorError(
                ResponseCode.SYSTEM_ERROR,
                "accurate timer message is not enabled, timerWheelEnable is false",
            )
        now = self._ctx.clock.now_ms()
        try:
            due = timer.due_ms(props, msg.topic, now)
        except ValueError:
            due = now + cfg.timer_max_delay_sec * 1000 + 1  # refused below, as Java
        if due is None or due <= now:
            return None
        if due - now > cfg.timer_max_delay_sec * 1000:
            raise ProcessorError(
                ResponseCode.MESSAGE_ILLEGAL,
                "timer message illegal, the delay time should not be bigger than the max "
                f"delay {cfg.timer_max_delay_sec * 1000}ms; or if set del msg, the delay time "
                "should be bigger than the current time",
            )
        msg.properties = props
        return timer.schedule(msg, due)

    def _send_batch(
        self,
        conn: RemotingConnection,
        request: RemotingCommand,
        header: SendMessageRequestHeader,
        topic_config: TopicConfig,
        queue_id: int,
    ) -> PutMessageResult | Awaitable[PutMessageResult]:
        """``asyncSendBatchMessage``: the body goes to the store as sent."""
        ctx = self._ctx
        if len(header.topic) > _BATCH_TOPIC_MAX:
            raise ProcessorError(
                ResponseCode.MESSAGE_ILLEGAL, f"message topic length too long {len(header.topic)}"
            )
        sys_flag = header.sys_flag
        if topic_config.topic_filter_type == "MULTI_TAG":
            sys_flag |= MessageSysFlag.MULTI_TAGS_FLAG
        props = string_to_properties(header.properties or "")
        props[MessageConst.PROPERTY_CLUSTER] = ctx.config.broker_cluster_name
        batch = MessageExtBatch(
            topic=header.topic,
            queue_id=queue_id,
            body=request.body,
            properties=props,
            sys_flag=sys_flag,
            born_timestamp=header.born_timestamp,
            born_host=self._born_host(conn.remote_address),
            store_host=ctx.store_host,
            reconsume_times=header.reconsume_times or 0,
        )
        return ctx.store.put_messages_nowait(batch)

    def _reply(
        self, request: RemotingCommand, result: PutMessageResult, queue_id: int
    ) -> RemotingCommand:
        """``handlePutMessageResult``: status -> code; a stored message's header."""
        if result.status is PutMessageStatus.PUT_OK:  # the usual answer, looked up once
            code, remark, stored = _PUT_OK_RESPONSE
        else:
            disk_util = ""
            if result.status is PutMessageStatus.SERVICE_NOT_AVAILABLE:
                disk_util = disk_util_text(*self._ctx.store.disk_ratios())
            code, remark, stored = put_response(
                result.status,
                max_message_size=self._ctx.store_config.max_message_size,
                disk_util=disk_util,
            )
        if stored:
            fields = SendMessageResponseHeader.stored_fields(
                ",".join(result.msg_ids), queue_id, result.queue_offset, DEFAULT_REGION
            )
            return request.response_to(code, None, fields)
        return request.response_to(code, remark, dict(_REGION_FIELDS))
