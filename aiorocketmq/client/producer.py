"""Producer: send messages to a topic's queues, with retries on another broker.

Owns (Java's ``DefaultMQProducerImpl`` 4.9.8): message checks, the client-made
UNIQ_KEY, compression of bodies of ``compress_msg_body_over_howmuch`` bytes and
more (COMPRESSED + ZLIB sysflag bits), the topic publish table (a new topic borrows
TBW102's route and the broker creates it), queue choice (round robin skipping the
broker whose attempt just failed, or a caller's selector or queue), and the retry
loop of a sync send: up to ``1 + retry_times_when_send_failed`` attempts within
``send_msg_timeout`` in all, moving on after a transport error, a client error or a
broker error whose code is retriable (``PRODUCER_RETRY_RESPONSE_CODES``); a stored
but not SEND_OK result is returned unless ``retry_another_broker_when_not_store_ok``.

Usage::

    async with Producer("my-group", namesrv_addr="127.0.0.1:9876") as producer:
        result = await producer.send(Message("TopicTest", b"hello"))
        pending = producer.send_async(Message("TopicTest", b"later"))
        await producer.send_oneway(Message("TopicTest", b"fire and forget"))
        await producer.send_batch([Message("TopicTest", b"a"), Message("TopicTest", b"b")])
        print(result.status, result.msg_id, (await pending).queue_offset)

Must not: talk to name servers or brokers except through its ``ClientInstance``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Any

from aiorocketmq.client.config import ClientConfig, ProducerConfig
from aiorocketmq.client.errors import (
    BrokerNotFoundError,
    InvalidArgumentError,
    MQBrokerError,
    MQClientError,
    MQTooMuchRequestError,
    NoRouteError,
    SendFailedError,
)
from aiorocketmq.client.instance import ClientInstance, ClientManager
from aiorocketmq.client.member import InstanceMember
from aiorocketmq.client.mq_client_api import v2_fields
from aiorocketmq.client.publish_info import TopicPublishInfo
from aiorocketmq.client.results import SendResult, SendStatus
from aiorocketmq.client.selectors import MessageQueueSelector
from aiorocketmq.common.batch_codec import encode_batch
from aiorocketmq.common.compression import compress_body
from aiorocketmq.common.constants import RETRY_GROUP_TOPIC_PREFIX, MessageSysFlag
from aiorocketmq.common.kernels import load_kernel
from aiorocketmq.common.message import BytesLike, Message, MessageQueue
from aiorocketmq.common.msg_id import UniqKeyGenerator
from aiorocketmq.common.properties import MessageConst, properties_to_string
from aiorocketmq.common.validators import (
    not_allowed_send_remark,
    validate_topic_client,
)
from aiorocketmq.remoting.codes import RequestCode

__all__ = ["Producer"]

log = logging.getLogger(__name__)

_C = MessageConst
_UNIQ_KEY = _C.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
_CHECKED_TOPICS_MAX = 1024  # topics known to pass the checks; forgotten past this
_KERNEL = load_kernel("aiorocketmq.client._produce_kernels")


@dataclass(slots=True)
class _Outgoing:
    """A message (or batch) ready for the wire; built once per send."""

    topic: str
    body: BytesLike
    sys_flag: int
    flag: int
    properties: str
    msg_id: str | None
    batch: bool = False
    reconsume_times: int = 0
    max_reconsume_times: int | None = None


class Producer(InstanceMember):
    """Sends messages (see the module docstring).

    Args:
        group: the producer group.
        namesrv_addr: ``host:port;host:port`` (or give ``client_config``).
        config: producer settings.
        client_config: client instance settings (its ``namesrv_addr`` wins).
        manager: share the client instance with others using this manager; None
            gives this producer an instance of its own.
    """

    def __init__(
        self,
        group: str,
        namesrv_addr: str | None = None,
        *,
        config: ProducerConfig | None = None,
        client_config: ClientConfig | None = None,
        manager: ClientManager | None = None,
    ) -> None:
        super().__init__("producer", group, namesrv_addr, client_config, manager)
        self.config = config or ProducerConfig()
        self._publish: dict[str, TopicPublishInfo] = {}
        self._uniq = UniqKeyGenerator(self.client_config.client_ip, os.getpid())
        self._pending: set[asyncio.Task[SendResult]] = set()
        self._checked_topics: set[str] = set()  # passed ``_check_message``'s topic rules

    # -- lifecycle ----------------------------------------------------------------------

    def _register(self, instance: ClientInstance) -> bool:
        return instance.register_producer(self.group, self)

    async def start(self) -> None:
        """Join (or start) the client instance and register this group."""
        if self._instance is not None:
            return
        instance = await self._acquire()
        self._publish.setdefault(self.config.create_topic_key, TopicPublishInfo())
        self._instance = instance
        await instance.send_heartbeat_to_all_brokers()

    async def shutdown(self) -> None:
        """Wait for pending async sends, unregister, release the instance (idempotent)."""
        instance, self._instance = self._instance, None
        if instance is None:
            return
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)
        await instance.unregister_producer(self.group)
        await self._release(instance)

    # -- ProducerInner ------------------------------------------------------------------

    def publish_topics(self) -> set[str]:
        """Topics this producer has publish info for (their routes are refreshed)."""
        return set(self._publish)

    def is_publish_topic_need_update(self, topic: str) -> bool:
        """No usable publish info for ``topic``."""
        info = self._publish.get(topic)
        return info is None or not info.ok()

    def update_topic_publish_info(self, topic: str, info: TopicPublishInfo) -> None:
        """Take the instance's new publish info (only for topics this producer uses).

        The round-robin index carries over: Java starts a changed route at a random
        queue, which skews the spread of the sends around each route change.
        """
        old = self._publish.get(topic)
        if old is not None:
            info.send_which_queue = old.send_which_queue
            self._publish[topic] = info

    # -- sending ------------------------------------------------------------------------

    async def send(
        self,
        msg: Message,
        *,
        timeout_ms: int | None = None,
        mq: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
    ) -> SendResult:
        """Send and wait for the broker's answer.

        Args:
            msg: the message (its UNIQ_KEY is set if absent).
            timeout_ms: time budget of the whole send (default ``send_msg_timeout``).
            mq: send to this queue (one attempt, no retry; as Java).
            selector: choose the queue with ``selector(queues, msg, arg)`` (one attempt).
            arg: passed to ``selector``.

        Raises:
            InvalidArgumentError: the message is invalid.
            NoRouteError: the topic has no route and TBW102 gives none either.
            SendFailedError: every attempt failed.
            MQBrokerError: a non-retriable broker error.
            MQRemotingError: the single attempt of a queue/selector send failed.
        """
        timeout = self.config.send_msg_timeout if timeout_ms is None else timeout_ms
        out = self._outgoing(msg)
        if mq is not None or selector is not None:
            target = await self._resolve_queue(out, msg, mq, selector, arg)
            return await self._send_once(out, target, timeout)
        return await self._send_default(out, self.config.retry_times_when_send_failed, timeout)

    def send_async(
        self,
        msg: Message,
        *,
        timeout_ms: int | None = None,
        mq: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
    ) -> asyncio.Task[SendResult]:
        """Start a send and return its task at once (await it for the ``SendResult``).

        Retries ``retry_times_when_send_async_failed`` times; ``shutdown`` waits for
        pending ones. Validation errors are raised here, not through the task.
        """
        self.instance  # noqa: B018 - raises ClientStateError before start
        out = self._outgoing(msg)
        timeout = self.config.send_msg_timeout if timeout_ms is None else timeout_ms
        if mq is not None or selector is not None:

            async def _chosen() -> SendResult:
                target = await self._resolve_queue(out, msg, mq, selector, arg)
                return await self._send_once(out, target, timeout)

            coro = _chosen()
        else:
            coro = self._send_default(
                out,
                self.config.retry_times_when_send_async_failed,
                timeout,
                retry_broker_errors=False,
            )
        task = asyncio.get_running_loop().create_task(coro, name=f"send-async:{msg.topic}")
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)
        return task

    async def send_oneway(
        self,
        msg: Message,
        *,
        mq: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
    ) -> None:
        """Send without waiting for any answer (one attempt; errors only locally)."""
        out = self._outgoing(msg)
        target = await self._resolve_queue(out, msg, mq, selector, arg)
        await self._send_kernel(out, target, self.config.send_msg_timeout, oneway=True)

    async def send_batch(
        self,
        msgs: Sequence[Message],
        *,
        timeout_ms: int | None = None,
        mq: MessageQueue | None = None,
    ) -> SendResult:
        """Send several messages of one topic as one SEND_BATCH_MESSAGE.

        Raises:
            InvalidArgumentError: empty batch, mixed topics or WAIT flags, a delay
                level or a retry topic (Java's ``MessageBatch`` rules), an invalid
                message, or a batch body over ``max_message_size``.
        """
        out = self._prepare_batch(msgs)
        timeout = self.config.send_msg_timeout if timeout_ms is None else timeout_ms
        if mq is not None:
            return await self._send_once(out, mq, timeout)
        return await self._send_default(out, self.config.retry_times_when_send_failed, timeout)

    async def fetch_publish_message_queues(self, topic: str) -> list[MessageQueue]:
        """The queues a send to ``topic`` may go to."""
        return list((await self._find_publish_info(topic)).message_queues)

    # -- preparation --------------------------------------------------------------------

    def _outgoing(self, msg: Message) -> _Outgoing:
        """``_check_message``, then ``_prepare``: for a usual message (a topic checked
        before, a small body, no transaction or retry), one call of the C kernel."""
        if _KERNEL is not None:
            cfg = self.config
            out: _Outgoing | None = _KERNEL.plain_outgoing(
                _Outgoing, msg, self._checked_topics, cfg.max_message_size,
                cfg.compress_msg_body_over_howmuch, self._uniq.next_id, properties_to_string,
            )  # fmt: skip
            if out is not None:
                return out
        self._check_message(msg)
        return self._prepare(msg)

    def _check_message(self, msg: Message) -> None:
        """Java's ``Validators.checkMessage``."""
        topic = msg.topic
        if topic not in self._checked_topics:
            remark = validate_topic_client(topic) or not_allowed_send_remark(topic)
            if remark is not None:
                raise InvalidArgumentError(remark)
            if len(self._checked_topics) >= _CHECKED_TOPICS_MAX:
                self._checked_topics.clear()
            self._checked_topics.add(topic)
        size = msg.body.nbytes if isinstance(msg.body, memoryview) else len(msg.body)
        if size == 0:
            raise InvalidArgumentError("the message body length is zero")
        if size > self.config.max_message_size:
            raise InvalidArgumentError(
                f"the message body size over max value, MAX: {self.config.max_message_size}"
            )

    def _set_uniq_id(self, msg: Message) -> str:
        # The properties dict directly, not the accessors: every send comes here.
        properties = msg.properties
        uniq = properties.get(_UNIQ_KEY)
        if uniq is None:
            uniq = properties[_UNIQ_KEY] = self._uniq.next_id()
        return uniq

    def _prepare(self, msg: Message) -> _Outgoing:
        uniq = self._set_uniq_id(msg)
        body, sys_flag = msg.body, 0
        size = body.nbytes if isinstance(body, memoryview) else len(body)
        if size >= self.config.compress_msg_body_over_howmuch:
            body = compress_body(body, self.config.zip_compress_level)
            sys_flag |= MessageSysFlag.COMPRESSED_FLAG | MessageSysFlag.COMPRESSION_ZLIB_TYPE
        properties = msg.properties
        prepared = properties.get(_C.PROPERTY_TRANSACTION_PREPARED)
        if prepared is not None and prepared.lower() == "true":
            sys_flag |= MessageSysFlag.TRANSACTION_PREPARED_TYPE
        reconsume, max_reconsume = 0, None
        if msg.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            # Java moves these two properties into the header for retry topics (from a
            # copy: the message keeps them).
            properties = dict(properties)
            reconsume = int(properties.pop(_C.PROPERTY_RECONSUME_TIME, "0"))
            raw_max = properties.pop(_C.PROPERTY_MAX_RECONSUME_TIMES, None)
            max_reconsume = None if raw_max is None else int(raw_max)
        return _Outgoing(  # positional: keywords cost ~0.2 µs of every send
            msg.topic, body, sys_flag, msg.flag, properties_to_string(properties), uniq,
            False, reconsume, max_reconsume,
        )  # fmt: skip

    def _prepare_batch(self, msgs: Sequence[Message]) -> _Outgoing:
        """Java's ``MessageBatch.generateFromList`` rules, then encode."""
        if not msgs:
            raise InvalidArgumentError("the batch is empty")
        first = msgs[0]
        for msg in msgs:
            if msg.delay_time_level > 0:
                raise InvalidArgumentError("TimeDelayLevel is not supported for batching")
            if msg.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                raise InvalidArgumentError("Retry Group is not supported for batching")
            if msg.topic != first.topic:
                raise InvalidArgumentError(
                    "The topic of the messages in one batch should be the same"
                )
            if msg.wait_store_msg_ok != first.wait_store_msg_ok:
                raise InvalidArgumentError(
                    "The waitStoreMsgOK of the messages in one batch should the same"
                )
            self._check_message(msg)
        ids = [self._set_uniq_id(msg) for msg in msgs]
        body = encode_batch(msgs)
        if len(body) > self.config.max_message_size:
            raise InvalidArgumentError(
                f"the message body size over max value, MAX: {self.config.max_message_size}"
            )
        wait = "true" if first.wait_store_msg_ok else "false"
        properties = properties_to_string({_C.PROPERTY_WAIT_STORE_MSG_OK: wait})
        return _Outgoing(first.topic, body, 0, 0, properties, ",".join(ids), batch=True)

    # -- the send paths -----------------------------------------------------------------

    async def _find_publish_info(self, topic: str) -> TopicPublishInfo:
        """Java's ``tryToFindTopicPublishInfo``: own route, else TBW102's."""
        info = self._publish.get(topic)
        if info is None or not info.ok():
            self._publish.setdefault(topic, TopicPublishInfo())
            await self.instance.update_topic_route(topic)
            info = self._publish[topic]
        if info.have_topic_router_info or info.ok():
            return info
        await self.instance.update_topic_route(
            topic,
            default_topic=self.config.create_topic_key,
            default_queue_nums=self.config.default_topic_queue_nums,
        )
        return self._publish[topic]

    async def _send_default(
        self, out: _Outgoing, retries: int, timeout_ms: int, *, retry_broker_errors: bool = True
    ) -> SendResult:
        """Java's ``sendDefaultImpl`` (see the module docstring).

        ``retry_broker_errors`` false is the async path, which Java retries only after
        transport and client errors (``onExceptionImpl``), never after an error reply.
        """
        begin = time.monotonic()
        info = self._publish.get(out.topic)
        if info is None or not info.ok():  # the route is not known yet (no await otherwise)
            info = await self._find_publish_info(out.topic)
            if not info.ok():
                raise NoRouteError(out.topic)
        brokers_sent: list[str] = []
        last: MQClientError | None = None
        result: SendResult | None = None
        mq: MessageQueue | None = None
        call_timeout = False
        for _ in range(1 + retries):
            mq = info.select_one_message_queue(None if mq is None else mq.broker_name)
            brokers_sent.append(mq.broker_name)
            left_ms = timeout_ms - int((time.monotonic() - begin) * 1000)
            if left_ms <= 0:
                call_timeout = True
                break
            try:
                result = await self._send_kernel(out, mq, left_ms, oneway=False)
            except MQBrokerError as exc:
                last = exc
                log.warning("send failed, broker=%s code=%s remark=%s", mq, exc.code, exc.remark)
                if exc.retriable and retry_broker_errors:  # PRODUCER_RETRY_RESPONSE_CODES
                    continue
                if result is not None:
                    return result  # an earlier attempt stored it (not SEND_OK), as Java
                raise
            except MQClientError as exc:
                last = exc
                log.warning("send failed, resend at once broker=%s error=%s", mq, exc)
                continue
            assert result is not None
            if result.status is SendStatus.SEND_OK or not (
                self.config.retry_another_broker_when_not_store_ok
            ):
                return result
        if result is not None:
            return result
        if call_timeout:
            raise MQTooMuchRequestError("sendDefaultImpl call timeout") from last
        cost_ms = int((time.monotonic() - begin) * 1000)
        raise SendFailedError(
            f"Send [{len(brokers_sent)}] times, still failed, cost [{cost_ms}]ms, "
            f"Topic: {out.topic}, BrokersSent: {brokers_sent}: {last}",
            brokers_sent,
            last,
        ) from last

    async def _resolve_queue(
        self,
        out: _Outgoing,
        msg: Message,
        mq: MessageQueue | None,
        selector: MessageQueueSelector | None,
        arg: Any,
    ) -> MessageQueue:
        """The given queue, the one ``selector`` picks, or the next round robin one."""
        if mq is not None:
            return mq
        info = await self._find_publish_info(out.topic)
        if not info.ok():
            raise NoRouteError(out.topic)
        if selector is None:
            return info.select_one_message_queue()
        return selector(list(info.message_queues), msg, arg)

    async def _send_once(self, out: _Outgoing, mq: MessageQueue, timeout_ms: int) -> SendResult:
        result = await self._send_kernel(out, mq, timeout_ms, oneway=False)
        assert result is not None
        return result

    def _send_kernel(
        self, out: _Outgoing, mq: MessageQueue, timeout_ms: int, *, oneway: bool
    ) -> Awaitable[SendResult | None]:
        """Java's ``sendKernelImpl``: find the master, build the header, send.

        A plain def returning the send's awaitable: with the master's address known
        (every send but the first), no coroutine of its own runs per send.
        """
        instance = self.instance
        address = instance.find_broker_address_in_publish(mq.broker_name)
        if address is None:
            return self._send_kernel_after_route(out, mq, timeout_ms, oneway=oneway)
        return self._send_to(instance, address, out, mq, timeout_ms, oneway)

    async def _send_kernel_after_route(
        self, out: _Outgoing, mq: MessageQueue, timeout_ms: int, *, oneway: bool
    ) -> SendResult | None:
        await self._find_publish_info(mq.topic)
        instance = self.instance
        address = instance.find_broker_address_in_publish(mq.broker_name)
        if address is None:
            raise BrokerNotFoundError(mq.broker_name)
        return await self._send_to(instance, address, out, mq, timeout_ms, oneway)

    def _send_to(  # noqa: PLR0917 - positional on every send
        self, instance: ClientInstance, address: str, out: _Outgoing, mq: MessageQueue,
        timeout_ms: int, oneway: bool,
    ) -> Awaitable[SendResult | None]:  # fmt: skip
        cfg = self.config
        build = v2_fields if _KERNEL is None else _KERNEL.v2_fields
        fields = build(
            self.group, out.topic, cfg.create_topic_key, cfg.default_topic_queue_nums,
            mq.queue_id, out.sys_flag, int(time.time() * 1000), out.flag, out.properties,
            out.reconsume_times, cfg.unit_mode, out.batch, out.max_reconsume_times,
            mq.broker_name,
        )  # fmt: skip
        code = RequestCode.SEND_BATCH_MESSAGE if out.batch else RequestCode.SEND_MESSAGE_V2
        return instance.api.send_message(
            address, mq, code, fields, out.body, topic=out.topic, timeout_ms=timeout_ms,
            msg_id=out.msg_id, oneway=oneway,
        )  # fmt: skip
