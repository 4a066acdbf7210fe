"""PullConsumer: the caller decides which queue to read from which offset.

Owns (Java's ``DefaultMQPullConsumerImpl`` 4.9.8): the consumer's registration
(CONSUME_ACTIVELY) in its ``ClientInstance``, its subscriptions (a topic pulled
without ``subscribe`` is subscribed to ``*``, as Java's
``subscriptionAutomatically``), ``fetch_subscribe_message_queues``, ``pull``
(non-blocking) and ``pull_block_if_not_found`` (the broker holds the pull up to
``broker_suspend_max_time_millis``), and the committed offsets through an offset
store (on the brokers for CLUSTERING, in a local file for BROADCASTING).

Usage::

    async with PullConsumer("my-group", namesrv_addr="127.0.0.1:9876") as consumer:
        for mq in await consumer.fetch_subscribe_message_queues("TopicTest"):
            offset = max(0, await consumer.fetch_consume_offset(mq))
            result = await consumer.pull(mq, "*", offset, 32)
            for msg in result.msg_found_list:
                print(msg.queue_offset, msg.body)
            consumer.update_consume_offset(mq, result.next_begin_offset)
        # offsets are persisted every 5 s and at shutdown

Must not: rebalance or hold messages (the push consumer will), or retry pulls.
"""

from __future__ import annotations

import logging

from aiorocketmq.client.config import ClientConfig, PullConsumerConfig
from aiorocketmq.client.errors import (
    BrokerNotFoundError,
    ClientStateError,
    InvalidArgumentError,
    MQClientError,
)
from aiorocketmq.client.instance import ClientInstance, ClientManager
from aiorocketmq.client.member import InstanceMember
from aiorocketmq.client.offset_store import (
    LocalFileOffsetStore,
    ReadOffsetType,
    RemoteBrokerOffsetStore,
    new_offset_store,
)
from aiorocketmq.client.publish_info import route_to_subscribe_info
from aiorocketmq.client.pull_wrapper import PullAPIWrapper, build_pull_sys_flag
from aiorocketmq.client.results import PullResult
from aiorocketmq.common.message import MessageQueue
from aiorocketmq.common.protocol_bodies import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    MessageModel,
    SubscriptionData,
    build_subscription_data,
)
from aiorocketmq.runtime import BlockingExecutor

__all__ = ["PullConsumer"]

log = logging.getLogger(__name__)


class PullConsumer(InstanceMember):
    """Pulls messages from queues the caller chooses (see the module docstring).

    Args:
        group: the consumer group.
        namesrv_addr: ``host:port;host:port`` (or give ``client_config``).
        config: pull consumer settings.
        client_config: client instance settings.
        manager: share the client instance through this manager; None gives this
            consumer an instance of its own.
    """

    def __init__(
        self,
        group: str,
        namesrv_addr: str | None = None,
        *,
        config: PullConsumerConfig | None = None,
        client_config: ClientConfig | None = None,
        manager: ClientManager | None = None,
    ) -> None:
        super().__init__("consumer", group, namesrv_addr, client_config, manager)
        self.config = config or PullConsumerConfig()
        self._wrapper: PullAPIWrapper | None = None
        self._offsets: RemoteBrokerOffsetStore | LocalFileOffsetStore | None = None
        self._executor: BlockingExecutor | None = None
        self.subscriptions: dict[str, SubscriptionData] = {}
        self.topic_subscribe_info: dict[str, set[MessageQueue]] = {}

    # -- lifecycle ----------------------------------------------------------------------

    @property
    def offset_store(self) -> RemoteBrokerOffsetStore | LocalFileOffsetStore:
        """Where offsets are kept (raises ``ClientStateError`` before ``start``)."""
        if self._offsets is None:
            raise ClientStateError(f"pull consumer {self.group} is not started")
        return self._offsets

    @property
    def pull_api(self) -> PullAPIWrapper:
        """The pull wrapper (its ``pull_from_which_node`` table is public)."""
        if self._wrapper is None:
            raise ClientStateError(f"pull consumer {self.group} is not started")
        return self._wrapper

    async def start(self) -> None:
        """Join the client instance, register the group, load the offset store."""
        if self._instance is not None:
            return
        instance = await self._acquire()
        self._instance = instance
        self._wrapper = PullAPIWrapper(instance, self.group, self.config.unit_mode)
        self._offsets, self._executor = new_offset_store(
            instance,
            self.group,
            broadcasting=self.config.message_model == "BROADCASTING",
            directory=self.config.offset_store_dir,
        )
        await self._offsets.load()

    async def shutdown(self) -> None:
        """Persist offsets, unregister, release the instance (idempotent)."""
        instance, self._instance = self._instance, None
        if instance is None:
            return
        try:
            await self.persist_consumer_offset()
        finally:
            await instance.unregister_consumer(self.group)
            await self._release(instance)
            if self._executor is not None:
                await self._executor.shutdown()

    def _register(self, instance: ClientInstance) -> bool:
        return instance.register_consumer(self.group, self)

    # -- ConsumerInner ------------------------------------------------------------------

    def consumer_data(self) -> ConsumerData:
        """The heartbeat entry: CONSUME_ACTIVELY with the current subscriptions."""
        model = MessageModel[self.config.message_model]
        return ConsumerData(
            group_name=self.group,
            consume_type=ConsumeType.CONSUME_ACTIVELY,
            message_model=model,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
            subscriptions=list(self.subscriptions.values()),
            unit_mode=self.config.unit_mode,
        )

    def subscribe_topics(self) -> set[str]:
        """Topics subscribed so far."""
        return set(self.subscriptions)

    def is_subscribe_topic_need_update(self, topic: str) -> bool:
        """A subscribed topic whose queues are not known yet."""
        return topic in self.subscriptions and topic not in self.topic_subscribe_info

    def update_topic_subscribe_info(self, topic: str, mqs: set[MessageQueue]) -> None:
        """Take the readable queues of a subscribed topic."""
        if topic in self.subscriptions:
            self.topic_subscribe_info[topic] = set(mqs)

    async def persist_consumer_offset(self) -> None:
        """Persist every offset this consumer holds."""
        if self._offsets is not None:
            await self._offsets.persist_all(list(self._offsets.offset_table))

    def on_consumer_ids_changed(self) -> None:
        """A pull consumer does not rebalance: nothing to do."""

    # -- queues and offsets -------------------------------------------------------------

    def subscribe(self, topic: str, expression: str = "*") -> SubscriptionData:
        """Record a subscription (sent in heartbeats; ``pull`` passes its own expression)."""
        data = build_subscription_data(topic, expression)
        self.subscriptions[topic] = data
        return data

    async def fetch_subscribe_message_queues(self, topic: str) -> list[MessageQueue]:
        """The readable queues of ``topic``, sorted, asked from the name servers.

        Raises:
            NoRouteError: the topic has no route.
            MQClientError: the route has no readable queue.
        """
        route = await self.instance.namesrv.get_route(topic)
        mqs = route_to_subscribe_info(topic, route)
        if not mqs:
            raise MQClientError(f"Can not find Message Queue for this topic, {topic}")
        return sorted(mqs)

    async def fetch_consume_offset(self, mq: MessageQueue, from_store: bool = False) -> int:
        """The committed offset of ``mq`` (-1 none, -2 could not ask)."""
        kind = (
            ReadOffsetType.READ_FROM_STORE if from_store else ReadOffsetType.MEMORY_FIRST_THEN_STORE
        )
        return await self.offset_store.read_offset(mq, kind)

    def update_consume_offset(self, mq: MessageQueue, offset: int) -> None:
        """Set ``mq``'s offset in memory; it is persisted every 5 s and at shutdown."""
        self.offset_store.update_offset(mq, offset)

    async def persist_offsets_now(self) -> None:
        """Send every cached offset and wait for the brokers' answers (or write the file)."""
        store = self.offset_store
        if isinstance(store, RemoteBrokerOffsetStore):
            await store.persist_all(list(store.offset_table), oneway=False)
        else:
            await store.persist_all(list(store.offset_table))

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

    # -- pulling ------------------------------------------------------------------------

    async def pull(
        self,
        mq: MessageQueue,
        expression: str,
        offset: int,
        max_nums: int,
        *,
        timeout_ms: int | None = None,
    ) -> PullResult:
        """Pull up to ``max_nums`` messages of ``mq`` from ``offset``; the broker does not wait.

        Raises:
            InvalidArgumentError: ``offset < 0`` or ``max_nums <= 0``.
            MQBrokerError / MQRemotingError / BrokerNotFoundError: the pull failed.
        """
        timeout = self.config.consumer_pull_timeout_millis if timeout_ms is None else timeout_ms
        return await self._pull(mq, expression, offset, max_nums, block=False, timeout_ms=timeout)

    async def pull_block_if_not_found(
        self, mq: MessageQueue, expression: str, offset: int, max_nums: int
    ) -> PullResult:
        """As ``pull``, but the broker holds the request until a message arrives or
        ``broker_suspend_max_time_millis`` passes."""
        timeout = self.config.consumer_timeout_millis_when_suspend
        return await self._pull(mq, expression, offset, max_nums, block=True, timeout_ms=timeout)

    async def _pull(
        self,
        mq: MessageQueue,
        expression: str,
        offset: int,
        max_nums: int,
        *,
        block: bool,
        timeout_ms: int,
    ) -> PullResult:
        if offset < 0:
            raise InvalidArgumentError("offset < 0")
        if max_nums <= 0:
            raise InvalidArgumentError("maxNums <= 0")
        if mq.topic not in self.subscriptions:
            self.subscribe(mq.topic, "*")  # Java's subscriptionAutomatically
        subscription = build_subscription_data(mq.topic, expression)
        wrapper = self.pull_api
        result = await wrapper.pull_kernel(
            mq,
            subscription,
            offset,
            max_nums,
            sys_flag=build_pull_sys_flag(False, block, True),
            suspend_timeout_ms=self.config.broker_suspend_max_time_millis,
            timeout_ms=timeout_ms,
        )
        return wrapper.process_pull_result(mq, result, subscription)
