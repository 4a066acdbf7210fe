"""PushConsumer: the client pulls for you and calls your listener (or yields to ``async for``).

Owns (Java 4.9.8 ``DefaultMQPushConsumerImpl`` + ``PullMessageService``): the
consumer's registration (CONSUME_PASSIVELY) and heartbeat entry, its
subscriptions (in clustering also ``%RETRY%<group>``), the rebalance loop (every
``rebalance_interval_millis``, at once on NOTIFY_CONSUMER_IDS_CHANGED or when a
subscribed topic's queues change, and after 1 s when it left work undone), the
orderly lock renewal (every 20 s), one long-polling pull loop per owned queue
(flow control by count, size and span; ``suggestWhichBrokerId`` followed through
``PullAPIWrapper``), sending failed messages back (CONSUMER_SEND_MSG_BACK, falling
back to a send to ``%RETRY%<group>`` as Java does), the ``messages()`` iterator
and graceful shutdown (consumes stopped, locks released, offsets persisted, the
client unregistered).

Pulls always carry the subscription expression (the SUBSCRIPTION bit set, as
Java's ``postSubscriptionWhenPull``), so a pull never depends on whether the
broker has seen our heartbeat yet.

Usage::

    consumer = PushConsumer("my-group", namesrv_addr="127.0.0.1:9876")
    consumer.subscribe("TopicTest", "TagA || TagB")
    async with consumer:
        async for delivery in consumer.deliveries():
            async with delivery:  # ack on success, nack (retry) when it raises
                print(delivery.message.topic, delivery.message.body)

``consumer.messages()`` yields the messages themselves and acknowledges them
implicitly; a listener (``register_message_listener``) runs ``async def`` on the
loop and ``def`` on a thread pool (``listener`` module).

Must not: decide queue ownership (``rebalance``), pull (``pull_service``), or
decide how a listener's answer is applied (``consume_service``, ``message_stream``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from types import TracebackType

from aiorocketmq.client.allocate import AllocateStrategy, allocate_averagely
from aiorocketmq.client.config import ClientConfig, PushConsumerConfig
from aiorocketmq.client.consume_service import (
    ConcurrentConsumeService,
    OrderlyConsumeService,
    RetrySender,
)
from aiorocketmq.client.errors import (
    BrokerNotFoundError,
    ClientStateError,
    InvalidArgumentError,
    MQClientError,
)
from aiorocketmq.client.instance import ClientInstance, ClientManager
from aiorocketmq.client.listener import (
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyStatus,
    Listener,
    ListenerRunner,
    is_async_listener,
)
from aiorocketmq.client.member import InstanceMember
from aiorocketmq.client.message_stream import (
    DeliveryStream,
    IteratorConsumeService,
    MessageStream,
    Settle,
    settle_for,
)
from aiorocketmq.client.offset_store import (
    LocalFileOffsetStore,
    ReadOffsetType,
    RemoteBrokerOffsetStore,
    new_offset_store,
)
from aiorocketmq.client.process_queue import REBALANCE_LOCK_INTERVAL_MS, ProcessQueue
from aiorocketmq.client.pull_service import PullMessageService
from aiorocketmq.client.pull_wrapper import PullAPIWrapper
from aiorocketmq.client.rebalance import RebalanceImpl, consume_timestamp_or_default
from aiorocketmq.client.stats import ConsumerStatsManager
from aiorocketmq.common.constants import retry_topic
from aiorocketmq.common.message import MessageExt, MessageQueue
from aiorocketmq.common.protocol_bodies import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    MessageModel,
    build_subscription_data,
)
from aiorocketmq.common.running_info import (
    PROP_CONSUME_ORDERLY,
    PROP_CONSUMER_START_TIMESTAMP,
    PROP_THREADPOOL_CORE_SIZE,
    ConsumerRunningInfo,
)
from aiorocketmq.runtime import BlockingExecutor

__all__ = ["PushConsumer"]

log = logging.getLogger(__name__)


class PushConsumer(InstanceMember):
    """Consumes subscribed topics through a listener or ``messages()`` (module docstring).

    Args:
        group: the consumer group.
        namesrv_addr: ``host:port;host:port`` (or give ``client_config``).
        config: push consumer settings.
        client_config: client instance settings.
        manager: share the client instance through this manager (None: own instance).
        allocate_strategy: how the group's queues are shared (clustering).
    """

    def __init__(
        self,
        group: str,
        namesrv_addr: str | None = None,
        *,
        config: PushConsumerConfig | None = None,
        client_config: ClientConfig | None = None,
        manager: ClientManager | None = None,
        allocate_strategy: AllocateStrategy = allocate_averagely,
    ) -> None:
        super().__init__("consumer", group, namesrv_addr, client_config, manager)
        self.config = config or PushConsumerConfig()
        self.model = MessageModel[self.config.message_model]
        self.consume_message_batch_max_size = self.config.consume_message_batch_max_size
        self.suspend_current_queue_time_millis = self.config.suspend_current_queue_time_millis
        self.allocate_strategy = allocate_strategy
        self._subscriptions: dict[str, str] = {}
        self._listener: Listener | None = None
        self._threaded: bool | None = None
        self.orderly = False
        self._rebalance: RebalanceImpl | None = None
        self._wrapper: PullAPIWrapper | None = None
        self._offsets: RemoteBrokerOffsetStore | LocalFileOffsetStore | None = None
        self._service: ConcurrentConsumeService | OrderlyConsumeService | None = None
        self._executor: BlockingExecutor | None = None
        self._sender: RetrySender | None = None
        self._pulls = PullMessageService(self)
        self._background: list[asyncio.Task[None]] = []
        self._rebalance_now = asyncio.Event()
        self._running = False
        self._start_timestamp_ms = 0
        self.rebalance_count = 0

    # -- setup ---------------------------------------------------------------------------

    def subscribe(self, topic: str, expression: str = "*") -> None:
        """Consume ``topic`` messages whose tag matches ``expression`` (``"TagA || TagB"``)."""
        build_subscription_data(topic, expression)  # validates the expression now
        self._subscriptions[topic] = expression
        if self._rebalance is not None:
            self._rebalance.subscription_inner[topic] = build_subscription_data(topic, expression)
            self._rebalance_now.set()

    def unsubscribe(self, topic: str) -> None:
        """Stop consuming ``topic`` (its queues are dropped at the next rebalance)."""
        self._subscriptions.pop(topic, None)
        if self._rebalance is not None:
            self._rebalance.subscription_inner.pop(topic, None)
            self._rebalance_now.set()

    def register_message_listener(
        self, listener: Listener, *, orderly: bool = False, threaded: bool | None = None
    ) -> None:
        """Set the listener: ``listener(msgs, context)``, ``def`` or ``async def``.

        Returning None (or the status of success) means consumed; raising (or
        RECONSUME_LATER / SUSPEND_CURRENT_QUEUE_A_MOMENT) means consume again; any
        other value counts as success with one warning (``listener`` module).

        Args:
            listener: concurrent listeners may return ``ConsumeConcurrentlyStatus``,
                orderly ones ``ConsumeOrderlyStatus``.
            orderly: consume each queue in offset order, one consume at a time.
            threaded: None (default): a ``def`` listener runs on a pool of
                ``consume_thread_max`` threads, an ``async def`` one on the loop;
                False: a ``def`` listener runs on the loop too (it must not block).

        Raises:
            ClientStateError: the consumer is already started.
            InvalidArgumentError: ``threaded=True`` with an ``async def`` listener.
        """
        if self._running:
            raise ClientStateError("register the listener before start")
        if threaded and is_async_listener(listener):
            raise InvalidArgumentError("an async listener runs on the event loop: threaded=True")
        self._listener, self.orderly, self._threaded = listener, orderly, threaded

    @property
    def max_reconsume_times(self) -> int:
        """Retries before the DLQ: -1 means 16 (concurrent) or unlimited (orderly, -1)."""
        value = self.config.max_reconsume_times
        return 16 if value == -1 and not self.orderly else value

    @property
    def rebalance(self) -> RebalanceImpl:
        """The rebalance (its ``process_queue_table`` shows the owned queues)."""
        if self._rebalance is None:
            raise ClientStateError(f"push consumer {self.group} is not started")
        return self._rebalance

    @property
    def offset_store(self) -> RemoteBrokerOffsetStore | LocalFileOffsetStore:
        """Where offsets are kept (raises ``ClientStateError`` before ``start``)."""
        if self._offsets is None:
            raise ClientStateError(f"push consumer {self.group} is not started")
        return self._offsets

    @property
    def stats(self) -> ConsumerStatsManager:
        """The instance's consumer figures (raises ``ClientStateError`` before ``start``)."""
        return self.instance.consumer_stats

    async def running_info(self) -> ConsumerRunningInfo:
        """GET_CONSUMER_RUNNING_INFO's answer for this group (Java's ``consumerRunningInfo``)."""
        rebalance = self.rebalance
        # Java's MixAll.object2Properties: every setting but the unset ones.
        props = {
            str(k): str(v).lower() if isinstance(v, bool) else str(v)
            for k, v in self.config.model_dump(by_alias=True).items()
            if v is not None
        }
        props[PROP_CONSUME_ORDERLY] = str(self.orderly).lower()
        props[PROP_THREADPOOL_CORE_SIZE] = str(self.config.consume_thread_min)
        props[PROP_CONSUMER_START_TIMESTAMP] = str(self._start_timestamp_ms)
        info = ConsumerRunningInfo(properties=props)
        info.subscription_set = list(rebalance.subscription_inner.values())
        for mq, pq in list(rebalance.process_queue_table.items()):
            offset = await self.offset_store.read_offset(mq, ReadOffsetType.READ_FROM_MEMORY)
            info.mq_table[mq] = pq.info(offset)
        for topic in rebalance.subscription_inner:
            info.status_table[topic] = self.stats.consume_status(self.group, topic)
        return info

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        """Join the instance, heartbeat, rebalance at once, and start pulling.

        Raises:
            ClientStateError: no subscription, or the group is already registered here.
        """
        if self._running:
            return
        if not self._subscriptions:
            raise ClientStateError("subscribe to at least one topic before start")
        instance = await self._acquire()
        try:
            self._offsets, self._executor = new_offset_store(
                instance,
                self.group,
                broadcasting=self.model is MessageModel.BROADCASTING,
                directory=self.config.offset_store_dir,
            )
            await self._offsets.load()
        except BaseException:  # e.g. an unreadable offsets file: leave nothing registered
            await instance.unregister_consumer(self.group)
            await self._release(instance)
            if self._executor is not None:
                await self._executor.shutdown()
            raise
        self._instance = instance
        self._start_timestamp_ms = int(time.time() * 1000)
        self._wrapper = PullAPIWrapper(instance, self.group, self.config.unit_mode)
        self._rebalance = self._make_rebalance(instance, self._offsets)
        if self.model is MessageModel.CLUSTERING:
            self._rebalance.subscription_inner[retry_topic(self.group)] = build_subscription_data(
                retry_topic(self.group), "*"
            )
        self._service = self._make_service()
        self._service.start()
        self._running = True
        for topic in sorted(self._rebalance.subscription_inner):
            await self._refresh_route(topic)
        await instance.send_heartbeat_to_all_brokers()
        self._background.append(asyncio.create_task(self._rebalance_loop(), name="rebalance"))
        if self.orderly and self.model is MessageModel.CLUSTERING:
            self._background.append(asyncio.create_task(self._lock_loop(), name="lock-all"))
        log.info("push consumer started group=%s client_id=%s", self.group, instance.client_id)

    def _register(self, instance: ClientInstance) -> bool:
        return instance.register_consumer(self.group, self)

    def _make_rebalance(
        self, instance: ClientInstance, store: RemoteBrokerOffsetStore | LocalFileOffsetStore
    ) -> RebalanceImpl:
        timestamp = consume_timestamp_or_default(self.config.consume_timestamp_ms)
        rebalance = RebalanceImpl(
            instance,
            self.group,
            self.model,
            strategy=self.allocate_strategy,
            store=store,
            host=self,
            orderly=self.orderly,
            consume_from_where=ConsumeFromWhere[self.config.consume_from_where],
            consume_timestamp_ms=timestamp,
        )
        for topic, expression in self._subscriptions.items():
            rebalance.subscription_inner[topic] = build_subscription_data(topic, expression)
        return rebalance

    def _make_service(self) -> ConcurrentConsumeService | OrderlyConsumeService:
        if self._listener is None:
            return IteratorConsumeService(self)
        threads = self.config.consume_thread_max
        if self.orderly:
            runner = ListenerRunner(
                self._listener, ConsumeOrderlyStatus, self.group, threads, self._threaded
            )
            return OrderlyConsumeService(self, runner)
        concurrent = ListenerRunner(
            self._listener, ConsumeConcurrentlyStatus, self.group, threads, self._threaded
        )
        return ConcurrentConsumeService(self, concurrent, threads)

    async def shutdown(self) -> None:
        """Stop pulling and consuming, unlock, persist offsets, unregister (idempotent).

        An ``async for`` loop's message in hand counts as consumed (the loop
        ended without an exception); ``async with consumer`` passes on how its
        block ended instead (see ``messages()``).
        """
        await self._shutdown(Settle.ACK)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._shutdown(settle_for(exc))

    async def _shutdown(self, settle: Settle) -> None:
        instance = self._instance
        if instance is None or not self._running:
            return
        self._running = False
        tasks = self._background + self._pulls.tasks()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._background = []
        self._pulls.clear()
        if isinstance(self._service, IteratorConsumeService):
            await self._service.shutdown(settle)
        elif self._service is not None:
            await self._service.shutdown()
        try:
            for pq in self.rebalance.process_queue_table.values():
                pq.dropped = True
            # Offsets first, then the locks: the next owner of a queue must find our
            # offset when it gets the lock.
            await self._persist(oneway=False)
            if self.orderly and self.model is MessageModel.CLUSTERING:
                await self.rebalance.unlock_all()
        finally:
            self._instance = None
            await instance.unregister_consumer(self.group)
            await self._release(instance)
            if self._sender is not None:
                await self._sender.shutdown()
                self._sender = None
            if self._executor is not None:
                await self._executor.shutdown()
        log.info("push consumer stopped group=%s", self.group)

    def is_running(self) -> bool:
        """Whether the consumer is started and not shut down."""
        return self._running

    # -- iterator ------------------------------------------------------------------------

    def messages(self) -> MessageStream:
        """Yield consumed messages, acknowledged implicitly (consumers without a listener).

        A message is acknowledged when the loop asks for the next one, or when the
        loop ends without an exception (``break``): at the stream's close, when
        another loop starts, or at shutdown. When the loop raises and the exception
        reaches ``async with consumer`` (or ``async with consumer.messages() as
        stream``), the message in hand is sent back and consumed again later.
        No ``aclosing`` is needed. For per-message control use ``deliveries()``.

        Raises:
            ClientStateError: not started, or a listener is registered.
        """
        return self._stream_service().open_messages()

    def deliveries(self) -> DeliveryStream:
        """Yield ``Delivery`` objects to ``ack()`` / ``nack()`` yourself (or ``async with``).

        Nothing is acknowledged for you: an unsettled delivery holds its queue's
        committed offset, so it is consumed again after a restart or rebalance.

        Raises:
            ClientStateError: not started, or a listener is registered.
        """
        return self._stream_service().open_deliveries()

    def _stream_service(self) -> IteratorConsumeService:
        service = self._service
        if not isinstance(service, IteratorConsumeService) or not self._running:
            raise ClientStateError("async for is for started consumers without a listener")
        return service

    # -- ConsumerInner -------------------------------------------------------------------

    def consumer_data(self) -> ConsumerData:
        """The heartbeat entry: CONSUME_PASSIVELY with every subscription."""
        subs = list(self._rebalance.subscription_inner.values()) if self._rebalance else []
        return ConsumerData(
            group_name=self.group,
            consume_type=ConsumeType.CONSUME_PASSIVELY,
            message_model=self.model,
            consume_from_where=ConsumeFromWhere[self.config.consume_from_where],
            subscriptions=subs,
            unit_mode=self.config.unit_mode,
        )

    def subscribe_topics(self) -> set[str]:
        """The subscribed topics (with the retry topic in clustering)."""
        return set(self._rebalance.subscription_inner) if self._rebalance else set()

    def is_subscribe_topic_need_update(self, topic: str) -> bool:
        """A subscribed topic whose queues are not known yet."""
        rb = self._rebalance
        return (
            rb is not None
            and topic in rb.subscription_inner
            and (topic not in rb.topic_subscribe_info)
        )

    def update_topic_subscribe_info(self, topic: str, mqs: set[MessageQueue]) -> None:
        """Take the readable queues of a subscribed topic (a changed set rebalances now)."""
        rb = self._rebalance
        if rb is not None and topic in rb.subscription_inner:
            if rb.topic_subscribe_info.get(topic) != mqs:
                self._rebalance_now.set()
            rb.topic_subscribe_info[topic] = set(mqs)

    async def persist_consumer_offset(self) -> None:
        """Persist the offsets of the owned queues (oneway to the brokers)."""
        await self._persist(oneway=True)

    async def _persist(self, *, oneway: bool) -> None:
        if self._offsets is None or self._rebalance is None:
            return
        await self._offsets.persist_all(list(self._rebalance.process_queue_table), oneway=oneway)

    async def reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        """A broker relayed ``mqadmin resetOffsetByTime``: see ``RebalanceImpl.reset_offsets``."""
        if self._rebalance is not None:
            await self._rebalance.reset_offsets(topic, offsets)
            self._rebalance_now.set()

    def on_consumer_ids_changed(self) -> None:
        """The group's membership changed: rebalance now."""
        self._rebalance_now.set()

    # -- rebalance and locks -------------------------------------------------------------

    async def _refresh_route(self, topic: str) -> None:
        try:
            await self.instance.update_topic_route(topic)
        except MQClientError as exc:
            log.warning("route refresh failed topic=%s error=%s", topic, exc)

    async def do_rebalance(self) -> bool:
        """One rebalance now (routes of topics without queues refreshed first)."""
        rb = self.rebalance
        for topic in sorted(rb.subscription_inner):
            if topic not in rb.topic_subscribe_info:
                await self._refresh_route(topic)
        self.rebalance_count += 1
        return await rb.do_rebalance()

    async def _rebalance_loop(self) -> None:
        interval = self.config.rebalance_interval_millis / 1000
        while self._running:
            self._rebalance_now.clear()
            try:
                await self.do_rebalance()
            except Exception:
                log.exception("rebalance failed group=%s", self.group)
            # Undone work (an orderly lock its previous owner still holds, a failed
            # request) is tried again after 1 s rather than a whole interval later.
            wait = min(1.0, interval) if self.rebalance.retry_soon else interval
            try:
                async with asyncio.timeout(wait):
                    await self._rebalance_now.wait()
            except TimeoutError:
                pass

    async def _lock_loop(self) -> None:
        while self._running:
            await asyncio.sleep(REBALANCE_LOCK_INTERVAL_MS / 1000)
            await self.rebalance.lock_all()

    async def lock_and_check(self, mq: MessageQueue) -> bool:
        """LOCK_BATCH_MQ for ``mq`` (orderly consume service)."""
        return await self.rebalance.lock(mq)

    async def max_offset(self, mq: MessageQueue) -> int:
        """GET_MAX_OFFSET from the queue's master."""
        return await self.instance.api.get_max_offset(
            await self._master(mq), mq, self.client_config.mq_client_api_timeout
        )

    async def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP on the queue's master."""
        return await self.instance.api.search_offset(
            await self._master(mq), mq, timestamp_ms, self.client_config.mq_client_api_timeout
        )

    async def _master(self, mq: MessageQueue) -> str:
        address = self.instance.find_broker_address_in_publish(mq.broker_name)
        if address is None:
            await self.instance.update_topic_route(mq.topic)
            address = self.instance.find_broker_address_in_publish(mq.broker_name)
        if address is None:
            raise BrokerNotFoundError(mq.broker_name)
        return address

    # -- pulling -------------------------------------------------------------------------

    def dispatch_pull_request(self, mq: MessageQueue, pq: ProcessQueue, next_offset: int) -> None:
        """Start the pull loop of a newly owned queue (``PullMessageService``)."""
        self._pulls.dispatch(mq, pq, next_offset)

    def submit_pulled(
        self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue, dispatch: bool
    ) -> None:
        """Hand pulled messages to the consume service."""
        assert self._service is not None
        self._service.submit(msgs, pq, mq, dispatch)

    def rebalance_soon(self) -> None:
        """Ask the rebalance loop to run now."""
        self._rebalance_now.set()

    @property
    def pull_wrapper(self) -> PullAPIWrapper:
        """The pull API wrapper (raises ``ClientStateError`` before ``start``)."""
        if self._wrapper is None:
            raise ClientStateError(f"push consumer {self.group} is not started")
        return self._wrapper

    # -- send back -----------------------------------------------------------------------

    async def send_message_back(self, msg: MessageExt, delay_level: int, broker_name: str) -> bool:
        """CONSUMER_SEND_MSG_BACK to the queue's master; a %RETRY% send if that fails."""
        return await self._retry_sender().send_back(msg, delay_level, broker_name)

    async def send_message_back_orderly(self, msg: MessageExt) -> bool:
        """An orderly message past its retries goes to %RETRY% (the broker moves it to the DLQ)."""
        return await self._retry_sender().send_to_retry_topic(msg, msg.reconsume_times)

    def _retry_sender(self) -> RetrySender:
        if self._sender is None:
            self._sender = RetrySender(
                self.instance, self.group, self.client_config, self.max_reconsume_times
            )
        return self._sender
