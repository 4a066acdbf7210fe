"""LitePullConsumer: batches on demand with ``poll()``, as Java 4.6+'s DefaultLitePullConsumer.

Owns (Java 4.9's ``DefaultLitePullConsumerImpl``): the two ways of getting queues,
``subscribe`` (the group shares the topic's queues; a rebalance as the push
consumer's, at start, every ``rebalance_interval_millis`` and when the group or the
queues change) or ``assign`` (exactly the queues given; no rebalance), mutually
exclusive as in Java; ``poll(timeout)``; ``seek``, ``seek_to_begin``,
``seek_to_end``; ``pause`` / ``resume``; offsets, committed automatically
(``auto_commit``, every ``auto_commit_interval_millis`` and at shutdown) or by
``commit_sync()`` / ``commit(offsets)``; and the consumer's registration
(CONSUME_ACTIVELY) in its client instance.

A polled message counts as consumed: its queue's consumed offset moves past it
(Java's ``removeMessage`` + ``updateConsumeOffset``), and a commit stores that
offset on the brokers (a local file in BROADCASTING). Nothing is sent back for
retry: what is polled and not committed is read again after a restart or a
rebalance. This is aiokafka's ``getmany`` with ``enable_auto_commit``.

Usage::

    consumer = LitePullConsumer("my-group", namesrv_addr="127.0.0.1:9876")
    consumer.subscribe("TopicTest", "TagA || TagB")
    async with consumer:
        while True:
            for msg in await consumer.poll(timeout_s=1.0):
                print(msg.queue_id, msg.queue_offset, msg.body)

Must not: pull (``lite_pull_fetcher``) or decide queue ownership (``rebalance``).
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Iterable, Mapping

from aiorocketmq.client.allocate import AllocateStrategy, allocate_averagely
from aiorocketmq.client.config import ClientConfig, LitePullConsumerConfig
from aiorocketmq.client.errors import (
    BrokerNotFoundError,
    ClientStateError,
    InvalidArgumentError,
    MQClientError,
)
from aiorocketmq.client.instance import ClientInstance, ClientManager
from aiorocketmq.client.lite_pull_fetcher import AssignedQueue, Fetcher
from aiorocketmq.client.member import InstanceMember
from aiorocketmq.client.offset_store import (
    LocalFileOffsetStore,
    ReadOffsetType,
    RemoteBrokerOffsetStore,
    new_offset_store,
)
from aiorocketmq.client.process_queue import ProcessQueue
from aiorocketmq.client.publish_info import route_to_subscribe_info
from aiorocketmq.client.pull_wrapper import PullAPIWrapper
from aiorocketmq.client.rebalance import (
    RebalanceImpl,
    compute_pull_from_where,
    consume_timestamp_or_default,
)
from aiorocketmq.common.message import MessageExt, MessageQueue
from aiorocketmq.common.protocol_bodies import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    MessageModel,
    SubscriptionData,
    build_subscription_data,
)
from aiorocketmq.runtime import BlockingExecutor

__all__ = ["LitePullConsumer"]

log = logging.getLogger(__name__)


class _Mode(enum.Enum):
    NONE = "NONE"
    SUBSCRIBE = "SUBSCRIBE"
    ASSIGN = "ASSIGN"


_EXCLUSIVE = "Subscribe and assign are mutually exclusive."


class LitePullConsumer(InstanceMember):
    """Pulls in the background and hands out batches on ``poll()`` (module docstring).

    Args:
        group: the consumer group.
        namesrv_addr: ``host:port;host:port`` (None: ``client_config`` or ``NAMESRV_ADDR``).
        config: lite pull consumer settings.
        client_config: client instance settings.
        manager: share the client instance through this manager (None: own instance).
        allocate_strategy: how the group's queues are shared (subscribe mode).
    """

    def __init__(
        self,
        group: str,
        namesrv_addr: str | None = None,
        *,
        config: LitePullConsumerConfig | None = None,
        client_config: ClientConfig | None = None,
        manager: ClientManager | None = None,
        allocate_strategy: AllocateStrategy = allocate_averagely,
    ) -> None:
        super().__init__("consumer", group, namesrv_addr, client_config, manager)
        self.config = config or LitePullConsumerConfig()
        self.model = MessageModel[self.config.message_model]
        self.allocate_strategy = allocate_strategy
        self._mode = _Mode.NONE
        self._subscriptions: dict[str, SubscriptionData] = {}
        self._assigned: set[MessageQueue] = set()
        self._queue_sets: dict[str, set[MessageQueue]] = {}
        self._offsets: RemoteBrokerOffsetStore | LocalFileOffsetStore | None = None
        self._executor: BlockingExecutor | None = None
        self._rebalance: RebalanceImpl | None = None
        self._fetcher: Fetcher | None = None
        self._background: list[asyncio.Task[None]] = []
        self._rebalance_now = asyncio.Event()
        self._running = False

    # -- what to read ---------------------------------------------------------------------

    def subscribe(self, topic: str, expression: str = "*") -> None:
        """Read ``topic``'s messages whose tag matches ``expression``, sharing its queues.

        Raises:
            ClientStateError: ``assign`` was used.
        """
        if self._mode is _Mode.ASSIGN:
            raise ClientStateError(_EXCLUSIVE)
        data = build_subscription_data(topic, expression)
        self._mode = _Mode.SUBSCRIBE
        self._subscriptions[topic] = data
        if self._rebalance is not None:
            self._rebalance.subscription_inner[topic] = data
        self._rebalance_now.set()

    def unsubscribe(self, topic: str) -> None:
        """Stop reading ``topic`` (its queues go at the next rebalance)."""
        self._subscriptions.pop(topic, None)
        if self._rebalance is not None:
            self._rebalance.subscription_inner.pop(topic, None)
        self._rebalance_now.set()

    def assign(self, mqs: Iterable[MessageQueue]) -> None:
        """Read exactly these queues (no rebalance); replaces an earlier assignment.

        Raises:
            ClientStateError: ``subscribe`` was used.
            InvalidArgumentError: no queue given.
        """
        if self._mode is _Mode.SUBSCRIBE:
            raise ClientStateError(_EXCLUSIVE)
        queues = set(mqs)
        if not queues:
            raise InvalidArgumentError("Message queues can not be null or empty.")
        self._mode = _Mode.ASSIGN
        self._assigned = queues
        self._rebalance_now.set()

    def assignment(self) -> set[MessageQueue]:
        """The queues pulled now (subscribe: what the rebalance gave this consumer)."""
        return set(self._fetcher.queues) if self._fetcher is not None else set()

    # -- lifecycle ------------------------------------------------------------------------

    @property
    def offset_store(self) -> RemoteBrokerOffsetStore | LocalFileOffsetStore:
        """Where committed offsets are kept (raises ``ClientStateError`` before ``start``)."""
        if self._offsets is None:
            raise ClientStateError(f"lite pull consumer {self.group} is not started")
        return self._offsets

    async def start(self) -> None:
        """Join the client instance, then rebalance (or take the assignment) and pull.

        Raises:
            ClientStateError: neither ``subscribe`` nor ``assign`` was called, or the
                group is already registered in the instance.
        """
        if self._running:
            return
        if self._mode is _Mode.NONE:
            raise ClientStateError("subscribe or assign before start")
        instance = await self._acquire()
        try:
            self._offsets, self._executor = new_offset_store(
                instance,
                self.group,
                broadcasting=self.model is MessageModel.BROADCASTING,
                directory=self.config.offset_store_dir,
            )
            await self._offsets.load()
        except BaseException:
            await instance.unregister_consumer(self.group)
            await self._release(instance)
            raise
        self._instance = instance
        wrapper = PullAPIWrapper(instance, self.group, self.config.unit_mode)
        self._fetcher = Fetcher(self.group, self.config, wrapper, self._subscriptions.get)
        if self._mode is _Mode.SUBSCRIBE:
            self._rebalance = self._make_rebalance(instance, self._offsets)
        self._running = True
        for topic in sorted(self.subscribe_topics()):
            await self._refresh_route(topic)
        await instance.send_heartbeat_to_all_brokers()
        self._background.append(asyncio.create_task(self._rebalance_loop(), name="lite-rebalance"))
        if self.config.auto_commit:
            self._background.append(asyncio.create_task(self._auto_commit_loop(), name="commit"))
        log.info("lite pull consumer started group=%s mode=%s", self.group, self._mode.value)

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
            consume_from_where=ConsumeFromWhere[self.config.consume_from_where],
            consume_timestamp_ms=timestamp,
        )
        rebalance.subscription_inner.update(self._subscriptions)
        return rebalance

    async def shutdown(self) -> None:
        """Stop pulling, commit (auto commit), persist offsets, unregister (idempotent)."""
        instance = self._instance
        if instance is None or not self._running:
            return
        self._running = False
        for task in self._background:
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        self._background = []
        try:
            if self.config.auto_commit:
                self._stage_consumed_offsets()
            await self._persist(oneway=False)
        finally:
            if self._fetcher is not None:
                await self._fetcher.shutdown()
            self._instance = None
            await instance.unregister_consumer(self.group)
            await self._release(instance)
            if self._executor is not None:
                await self._executor.shutdown()
        log.info("lite pull consumer stopped group=%s", self.group)

    def _fetching(self) -> Fetcher:
        if self._fetcher is None or not self._running:
            raise ClientStateError(f"lite pull consumer {self.group} is not running")
        return self._fetcher

    # -- poll, seek, pause ----------------------------------------------------------------

    async def poll(self, timeout_s: float | None = None) -> list[MessageExt]:
        """The next pulled batch (up to ``pull_batch_size`` messages of one queue).

        Args:
            timeout_s: how long to wait for one; None: ``poll_timeout_millis``.

        Returns:
            The messages, in queue order, or ``[]`` when none came in time.

        Raises:
            ClientStateError: not started, or shut down.
        """
        fetcher = self._fetching()
        wait_s = self.config.poll_timeout_millis / 1000 if timeout_s is None else timeout_s
        batch = await fetcher.take(wait_s)
        if batch is None:
            return []
        queue = batch.queue
        offset = queue.pq.remove_messages(batch.msgs)
        if offset >= 0:
            queue.consumed_offset = offset
            if self.config.auto_commit:  # staged now, persisted by the commit loop
                self.offset_store.update_offset(queue.mq, offset)
        return batch.msgs

    async def seek(self, mq: MessageQueue, offset: int) -> None:
        """Read ``mq`` from ``offset`` next; what was pulled and not polled is dropped.

        Raises:
            ClientStateError: ``mq`` is not assigned now (subscribe: maybe rebalancing).
            InvalidArgumentError: ``offset`` is outside the queue's [min, max].
        """
        queue = self._assigned_queue(mq)
        low, high = await self.min_offset(mq), await self.max_offset(mq)
        if not low <= offset <= high:
            raise InvalidArgumentError(
                f"Seek offset illegal, seek offset = {offset}, min offset = {low}, "
                f"max offset = {high}"
            )
        self._fetching().seek(queue, offset)
        if self.config.auto_commit:
            self.offset_store.update_offset(mq, offset)

    async def seek_to_begin(self, mq: MessageQueue) -> None:
        """``seek`` to the queue's smallest offset."""
        await self.seek(mq, await self.min_offset(mq))

    async def seek_to_end(self, mq: MessageQueue) -> None:
        """``seek`` to the queue's end (only messages written from now on)."""
        await self.seek(mq, await self.max_offset(mq))

    def pause(self, mqs: Iterable[MessageQueue]) -> None:
        """Stop pulling these queues (already pulled batches are still polled)."""
        for mq in mqs:
            queue = self._fetching().queues.get(mq)
            if queue is not None:
                queue.paused = True

    def resume(self, mqs: Iterable[MessageQueue]) -> None:
        """Pull these queues again."""
        for mq in mqs:
            queue = self._fetching().queues.get(mq)
            if queue is not None:
                queue.paused = False
                queue.wake.set()

    def _assigned_queue(self, mq: MessageQueue) -> AssignedQueue:
        queue = self._fetching().queues.get(mq)
        if queue is None:
            raise ClientStateError(
                f"The message queue is not in assigned list, may be rebalancing, "
                f"message queue: {mq}"
            )
        return queue

    # -- offsets --------------------------------------------------------------------------

    async def commit_sync(self) -> None:
        """Store the polled offsets of every assigned queue and wait for the brokers."""
        self._stage_consumed_offsets()
        await self._persist(oneway=False)

    async def commit(self, offsets: Mapping[MessageQueue, int], *, persist: bool = True) -> None:
        """Store these offsets (the next message to read, per queue).

        Raises:
            InvalidArgumentError: a negative offset.
        """
        for mq, offset in offsets.items():
            if offset < 0:
                raise InvalidArgumentError(f"offset of {mq} must not be negative: {offset}")
            self.offset_store.update_offset(mq, offset)
        if persist:  # per queue: persist_all would forget the queues not named here
            for mq in offsets:
                await self.offset_store.persist(mq, oneway=False)

    async def committed(self, mq: MessageQueue) -> int:
        """The offset stored for ``mq`` on the brokers (-1 none)."""
        return await self.offset_store.read_offset(mq, ReadOffsetType.READ_FROM_STORE)

    def _stage_consumed_offsets(self) -> None:
        for queue in list(self._fetcher.queues.values() if self._fetcher else ()):
            if queue.consumed_offset >= 0 and not queue.pq.dropped:
                self.offset_store.update_offset(queue.mq, queue.consumed_offset)

    async def _persist(self, *, oneway: bool) -> None:
        if self._offsets is None or self._fetcher is None:
            return
        queues = list(self._fetcher.queues)
        if queues:
            await self._offsets.persist_all(queues, oneway=oneway)

    async def _auto_commit_loop(self) -> None:
        interval_s = self.config.auto_commit_interval_millis / 1000
        while self._running:
            await asyncio.sleep(interval_s)
            try:
                self._stage_consumed_offsets()
                await self._persist(oneway=True)
            except MQClientError as exc:
                log.warning("auto commit failed group=%s error=%s", self.group, exc)

    async def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        """The readable queues of ``topic``, sorted (to ``assign`` some of them)."""
        route = await self.instance.namesrv.get_route(topic)
        return sorted(route_to_subscribe_info(topic, route))

    async def offset_for_timestamp(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """The first offset of ``mq`` stored at or after ``timestamp_ms``."""
        return await self.search_offset(mq, timestamp_ms)

    async def max_offset(self, mq: MessageQueue) -> int:
        """GET_MAX_OFFSET from the queue's master."""
        return await self.instance.api.get_max_offset(
            await self._master(mq), mq, self.client_config.mq_client_api_timeout
        )

    async def min_offset(self, mq: MessageQueue) -> int:
        """GET_MIN_OFFSET from the queue's master."""
        return await self.instance.api.get_min_offset(
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

    # -- queue ownership ------------------------------------------------------------------

    def dispatch_pull_request(self, mq: MessageQueue, pq: ProcessQueue, next_offset: int) -> None:
        """The rebalance gave us ``mq``: pull it from ``next_offset``."""
        self._fetching().add(mq, pq, next_offset)

    async def _refresh_route(self, topic: str) -> None:
        try:
            await self.instance.update_topic_route(topic)
        except MQClientError as exc:
            log.warning("route refresh failed topic=%s error=%s", topic, exc)

    async def _apply_assignment(self) -> None:
        """Assign mode: pull exactly the assigned queues."""
        fetcher = self._fetching()
        for mq in [mq for mq in fetcher.queues if mq not in self._assigned]:
            fetcher.drop(mq)
            await self.offset_store.persist(mq)
            self.offset_store.remove_offset(mq)
        where = ConsumeFromWhere[self.config.consume_from_where]
        timestamp = consume_timestamp_or_default(self.config.consume_timestamp_ms)
        for mq in sorted(self._assigned - set(fetcher.queues)):
            offset = await compute_pull_from_where(mq, where, self.offset_store, self, timestamp)
            if offset >= 0:
                fetcher.add(mq, ProcessQueue(), offset)
            else:
                self._rebalance_now.set()  # the store could not say: try again soon

    async def _rebalance_loop(self) -> None:
        interval_s = self.config.rebalance_interval_millis / 1000
        while self._running:
            self._rebalance_now.clear()
            retry_soon = False
            try:
                if self._rebalance is not None:
                    for topic in sorted(self._rebalance.subscription_inner):
                        if topic not in self._rebalance.topic_subscribe_info:
                            await self._refresh_route(topic)
                    await self._rebalance.do_rebalance()
                    retry_soon = self._rebalance.retry_soon
                else:
                    await self._apply_assignment()
            except Exception:
                log.exception("lite pull rebalance failed group=%s", self.group)
                retry_soon = True
            try:
                async with asyncio.timeout(min(1.0, interval_s) if retry_soon else interval_s):
                    await self._rebalance_now.wait()
            except TimeoutError:
                pass

    # -- ConsumerInner --------------------------------------------------------------------

    def consumer_data(self) -> ConsumerData:
        """The heartbeat entry: CONSUME_ACTIVELY, as Java's lite pull consumer."""
        if self._rebalance is not None:
            subs = list(self._rebalance.subscription_inner.values())
        else:
            subs = [
                build_subscription_data(t, "*") for t in sorted({q.topic for q in self._assigned})
            ]
        return ConsumerData(
            group_name=self.group,
            consume_type=ConsumeType.CONSUME_ACTIVELY,
            message_model=self.model,
            consume_from_where=ConsumeFromWhere[self.config.consume_from_where],
            subscriptions=subs,
            unit_mode=self.config.unit_mode,
        )

    def subscribe_topics(self) -> set[str]:
        """The subscribed topics, or (assign) the assigned queues' topics."""
        if self._mode is _Mode.ASSIGN:
            return {mq.topic for mq in self._assigned}
        return set(self._subscriptions)

    def is_subscribe_topic_need_update(self, topic: str) -> bool:
        """A subscribed topic whose queues are not known yet."""
        rb = self._rebalance
        return (
            rb is not None
            and topic in rb.subscription_inner
            and topic not in rb.topic_subscribe_info
        )

    def update_topic_subscribe_info(self, topic: str, mqs: set[MessageQueue]) -> None:
        """Take the readable queues of a subscribed topic (a changed set rebalances now)."""
        rb = self._rebalance
        if rb is not None and topic in rb.subscription_inner:
            if rb.topic_subscribe_info.get(topic) != mqs:
                self._rebalance_now.set()
            rb.topic_subscribe_info[topic] = set(mqs)

    async def persist_consumer_offset(self) -> None:
        """Persist the stored offsets of the assigned queues (oneway)."""
        await self._persist(oneway=True)

    def on_consumer_ids_changed(self) -> None:
        """The group's membership changed: rebalance now."""
        self._rebalance_now.set()
