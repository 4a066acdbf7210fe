"""ClientInstance: what the producers and consumers of one client id share.

Owns (Java's ``MQClientInstance``): one ``RemotingClient`` (which also answers the
brokers' NOTIFY_CONSUMER_IDS_CHANGED and hands CHECK_TRANSACTION_STATE to the
transactional producer of the message's group), the ``NamesrvAPI`` and ``MQClientAPI`` over
it, the route tables (``topic_route_table``, ``broker_addr_table``,
``broker_version_table``), the registered producers and consumers by group, and
the periodic work: route refresh of every used topic (``pollNameServerInterval``,
30 s, and at once after a request to a broker failed at the transport level),
heartbeats to every broker (30 s; only masters when there is no consumer) with
the removal of brokers no route lists any more, and consumer offset persistence
(5 s). ``ClientManager`` shares one instance per (name-server set, client id).

Broker lookup follows Java exactly: ``find_broker_address_in_publish`` is the
master; ``find_broker_address_in_subscribe(name, id, only_this_broker)`` tries
``id``, then for a slave ``id + 1``, then (unless ``only_this_broker``) whichever
address the table lists first (the smallest id, as Java's HashMap of small Longs).

Must not: choose queues, retry sends, decode messages, or keep process-global
state (sharing goes through an explicit ``ClientManager``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from aiorocketmq.client.config import ClientConfig
from aiorocketmq.client.diagnostics import stack_dump
from aiorocketmq.client.errors import MQClientError, MQRemotingError, NoRouteError
from aiorocketmq.client.mq_client_api import MQClientAPI
from aiorocketmq.client.namesrv_api import NamesrvAPI, parse_namesrv_addr
from aiorocketmq.client.publish_info import (
    TopicPublishInfo,
    route_to_publish_info,
    route_to_subscribe_info,
)
from aiorocketmq.client.stats import ConsumerStatsManager
from aiorocketmq.common.admin_bodies import ResetOffsetBody
from aiorocketmq.common.compression import decompress_body
from aiorocketmq.common.constants import MASTER_ID
from aiorocketmq.common.errors import ProtocolError
from aiorocketmq.common.message import MessageQueue
from aiorocketmq.common.message_codec import decode_record
from aiorocketmq.common.properties import MessageConst
from aiorocketmq.common.protocol_bodies import ConsumerData, HeartbeatData, ProducerData
from aiorocketmq.common.route import QueueData, TopicRouteData
from aiorocketmq.common.running_info import (
    PROP_CLIENT_VERSION,
    PROP_CONSUME_TYPE,
    PROP_NAMESERVER_ADDR,
    ConsumerRunningInfo,
)
from aiorocketmq.remoting.broker_admin_headers import (
    CheckTransactionStateRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    ResetOffsetRequestHeader,
)
from aiorocketmq.remoting.broker_headers import NotifyConsumerIdsChangedRequestHeader
from aiorocketmq.remoting.client import RemotingClient
from aiorocketmq.remoting.codes import CURRENT_VERSION, MQVersion, RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.connection import ProcessorTable, RemotingConnection
from aiorocketmq.runtime import Periodic, Service

__all__ = [
    "AUTO_CREATE_TOPIC_KEY",
    "ClientInstance",
    "ClientManager",
    "ConsumerInner",
    "FindBrokerResult",
    "ProducerInner",
]

log = logging.getLogger(__name__)

AUTO_CREATE_TOPIC_KEY = "TBW102"
"""The topic whose route a producer borrows for a topic that has none yet."""


class ProducerInner(Protocol):
    """What the instance needs from a producer (Java's ``MQProducerInner``)."""

    def publish_topics(self) -> set[str]:
        """Topics the producer sent to (their routes are refreshed)."""

    def is_publish_topic_need_update(self, topic: str) -> bool:
        """True when the producer has no usable publish info for ``topic``."""

    def update_topic_publish_info(self, topic: str, info: TopicPublishInfo) -> None:
        """Take new publish info for ``topic``."""


class ConsumerInner(Protocol):
    """What the instance needs from a consumer (Java's ``MQConsumerInner``)."""

    def consumer_data(self) -> ConsumerData:
        """The heartbeat entry (group, model, subscriptions...)."""

    def subscribe_topics(self) -> set[str]:
        """Topics the consumer reads (their routes are refreshed)."""

    def is_subscribe_topic_need_update(self, topic: str) -> bool:
        """True when the consumer has no queue set for ``topic`` yet."""

    def update_topic_subscribe_info(self, topic: str, mqs: set[MessageQueue]) -> None:
        """Take the readable queues of ``topic``."""

    async def persist_consumer_offset(self) -> None:
        """Write the cached offsets out (broker or file)."""

    def on_consumer_ids_changed(self) -> None:
        """The group's membership changed (a rebalance is due)."""


@dataclass(slots=True, frozen=True)
class FindBrokerResult:
    """A broker address found for a pull or an offset request (Java's FindBrokerResult)."""

    address: str
    slave: bool
    broker_version: int = 0


def _sorted_route(route: TopicRouteData) -> tuple[Any, ...]:
    queues = sorted(route.queue_datas, key=lambda q: q.broker_name)
    brokers = sorted(
        (b.broker_name, b.cluster, sorted(b.broker_addrs.items())) for b in route.broker_datas
    )
    return (route.order_topic_conf, queues, brokers)


def route_changed(old: TopicRouteData | None, new: TopicRouteData) -> bool:
    """Java's ``topicRouteDataIsChange``: differs once both are sorted."""
    return old is None or _sorted_route(old) != _sorted_route(new)


class ClientInstance(Service):
    """The shared part of producers and consumers with one client id (module docstring).

    Args:
        config: the settings; ``config.client_id()`` names this instance.
    """

    def __init__(self, config: ClientConfig) -> None:
        super().__init__(f"client:{config.client_id()}")
        self.config = config
        self.client_id = config.client_id()
        table = ProcessorTable()
        table.register(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, self._on_consumer_ids_changed)
        table.register(RequestCode.CHECK_TRANSACTION_STATE, self._on_check_transaction_state)
        table.register(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, self._on_reset_offset)
        table.register(RequestCode.GET_CONSUMER_RUNNING_INFO, self._on_get_running_info)
        #: Pull and consume figures of this instance's consumers (consumerStatus).
        self.consumer_stats = ConsumerStatsManager()
        self.remoting = RemotingClient(
            config.remoting, processors=table, credentials=config.credentials()
        )
        self.namesrv = NamesrvAPI(
            config.namesrv_addr, self.remoting, timeout_ms=config.mq_client_api_timeout
        )
        self.api = MQClientAPI(self.remoting, on_transport_error=self._on_transport_error)
        self.topic_route_table: dict[str, TopicRouteData] = {}
        self.broker_addr_table: dict[str, dict[int, str]] = {}
        self.broker_version_table: dict[str, dict[str, int]] = {}
        self.producers: dict[str, ProducerInner] = {}
        self.consumers: dict[str, ConsumerInner] = {}
        self.route_job: Periodic | None = None
        self.heartbeat_job: Periodic | None = None
        self.persist_job: Periodic | None = None
        self.consumer_ids_changed_count = 0
        self._route_locks: dict[str, asyncio.Lock] = {}

    # -- lifecycle ----------------------------------------------------------------------

    async def on_start(self) -> None:
        """Start route refresh, heartbeats and offset persistence (Java's startScheduledTask)."""
        c = self.config
        self.route_job = self.periodic(
            c.poll_name_server_interval / 1000,
            self.update_all_topic_routes,
            name="route-refresh",
            initial_delay_s=0.01,
        )
        self.heartbeat_job = self.periodic(
            c.heartbeat_broker_interval / 1000,
            self._heartbeat_tick,
            name="heartbeat",
            initial_delay_s=min(1.0, c.heartbeat_broker_interval / 1000),
        )
        self.persist_job = self.periodic(
            c.persist_consumer_offset_interval / 1000,
            self.persist_all_consumer_offsets,
            name="persist-offsets",
        )
        log.info("client instance started client_id=%s namesrv=%s", self.client_id, c.namesrv_addr)

    async def on_shutdown(self) -> None:
        """Persist consumer offsets one last time, then close every connection."""
        try:
            await self.persist_all_consumer_offsets()
        finally:
            await self.remoting.close()
        log.info("client instance stopped client_id=%s", self.client_id)

    # -- registration -------------------------------------------------------------------

    def register_producer(self, group: str, producer: ProducerInner) -> bool:
        """Add a producer; False if the group already has one in this instance."""
        if group in self.producers:
            return False
        self.producers[group] = producer
        return True

    def register_consumer(self, group: str, consumer: ConsumerInner) -> bool:
        """Add a consumer; False if the group already has one in this instance."""
        if group in self.consumers:
            return False
        self.consumers[group] = consumer
        return True

    async def unregister_producer(self, group: str) -> None:
        """Forget a producer and tell every master (UNREGISTER_CLIENT)."""
        if self.producers.pop(group, None) is not None:
            await self._unregister_client(producer_group=group)

    async def unregister_consumer(self, group: str) -> None:
        """Forget a consumer and tell every broker (UNREGISTER_CLIENT)."""
        if self.consumers.pop(group, None) is not None:
            await self._unregister_client(consumer_group=group)

    async def _unregister_client(
        self, *, producer_group: str | None = None, consumer_group: str | None = None
    ) -> None:
        for broker_name, addrs in list(self.broker_addr_table.items()):
            for broker_id, address in list(addrs.items()):
                try:
                    await self.api.unregister_client(
                        address,
                        self.client_id,
                        self.config.mq_client_api_timeout,
                        producer_group=producer_group,
                        consumer_group=consumer_group,
                    )
                except MQClientError as exc:
                    log.warning(
                        "unregister client failed broker=%s id=%d address=%s error=%s",
                        broker_name,
                        broker_id,
                        address,
                        exc,
                    )

    # -- routes -------------------------------------------------------------------------

    async def update_topic_route(
        self, topic: str, *, default_topic: str | None = None, default_queue_nums: int = 4
    ) -> bool:
        """Fetch ``topic``'s route and hand it to producers and consumers if it changed.

        Args:
            topic: the topic.
            default_topic: borrow this topic's route instead (a producer's first send
                to a topic that does not exist yet; queue counts capped at
                ``default_queue_nums``, as Java).
            default_queue_nums: see ``default_topic``.

        Returns:
            True when the tables were updated; False when the route is unchanged or
            the name server has none.

        Raises:
            MQClientError: the name servers could not be asked.
        """
        lock = self._route_locks.setdefault(topic, asyncio.Lock())
        async with lock:
            try:
                route = await self.namesrv.get_route(default_topic or topic)
            except NoRouteError:
                log.debug("no route on the name server topic=%s", default_topic or topic)
                return False
            if default_topic is not None:
                route.queue_datas = [
                    _cap_queues(qd, default_queue_nums) for qd in route.queue_datas
                ]
            if not route_changed(self.topic_route_table.get(topic), route) and not (
                self._need_update(topic)
            ):
                return False
            self._apply_route(topic, route)
            return True

    def _need_update(self, topic: str) -> bool:
        return any(p.is_publish_topic_need_update(topic) for p in self.producers.values()) or any(
            c.is_subscribe_topic_need_update(topic) for c in self.consumers.values()
        )

    def _apply_route(self, topic: str, route: TopicRouteData) -> None:
        known = {a for addrs in self.broker_addr_table.values() for a in addrs.values()}
        for bd in route.broker_datas:
            self.broker_addr_table[bd.broker_name] = dict(bd.broker_addrs)
        fresh = {a for bd in route.broker_datas for a in bd.broker_addrs.values()} - known
        if fresh and self.running:
            # Else a new broker would not know our groups until the next 30 s tick.
            self.spawn(self.send_heartbeat_to_all_brokers(only=fresh), name="heartbeat-new")
        if self.producers:
            for producer in self.producers.values():
                producer.update_topic_publish_info(topic, route_to_publish_info(topic, route))
        if self.consumers:
            mqs = route_to_subscribe_info(topic, route)
            for consumer in self.consumers.values():
                consumer.update_topic_subscribe_info(topic, set(mqs))
        self.topic_route_table[topic] = route
        log.info("topic route updated topic=%s brokers=%s", topic, self.broker_addr_table)

    def used_topics(self) -> set[str]:
        """Every topic a registered producer or consumer uses."""
        topics: set[str] = set()
        for producer in self.producers.values():
            topics |= producer.publish_topics()
        for consumer in self.consumers.values():
            topics |= consumer.subscribe_topics()
        return topics

    async def update_all_topic_routes(self) -> None:
        """Refresh every used topic; one topic's failure does not stop the others."""
        for topic in sorted(self.used_topics()):
            try:
                await self.update_topic_route(topic)
            except MQClientError as exc:
                log.warning("route refresh failed topic=%s error=%s", topic, exc)

    def _on_transport_error(self, address: str, exc: MQRemotingError) -> None:
        if self.route_job is not None and self.running and self._is_broker_address(address):
            log.info("broker request failed address=%s error=%s: refreshing routes", address, exc)
            self.route_job.wakeup()

    def _is_broker_address(self, address: str) -> bool:
        return any(address in addrs.values() for addrs in self.broker_addr_table.values())

    # -- broker lookup ------------------------------------------------------------------

    def find_broker_address_in_publish(self, broker_name: str) -> str | None:
        """The master's address of ``broker_name``, if known."""
        return self.broker_addr_table.get(broker_name, {}).get(MASTER_ID)

    def find_broker_address_in_subscribe(
        self, broker_name: str, broker_id: int, only_this_broker: bool
    ) -> FindBrokerResult | None:
        """Java's ``findBrokerAddressInSubscribe`` (see the module docstring)."""
        addrs = self.broker_addr_table.get(broker_name)
        if not addrs:
            return None
        slave = broker_id != MASTER_ID
        address = addrs.get(broker_id)
        if address is None and slave:
            address = addrs.get(broker_id + 1)
        if address is None and not only_this_broker:
            first_id = min(addrs)
            address, slave = addrs[first_id], first_id != MASTER_ID
        if address is None:
            return None
        return FindBrokerResult(address, slave, self.find_broker_version(broker_name, address))

    def find_broker_address_in_admin(self, broker_name: str) -> FindBrokerResult | None:
        """Any address of ``broker_name`` (the first listed), for admin-style requests."""
        addrs = self.broker_addr_table.get(broker_name)
        if not addrs:
            return None
        first_id = min(addrs)
        address = addrs[first_id]
        return FindBrokerResult(
            address, first_id != MASTER_ID, self.find_broker_version(broker_name, address)
        )

    def find_broker_version(self, broker_name: str, address: str) -> int:
        """The remoting version the broker answered our last heartbeat with (0: unknown)."""
        return self.broker_version_table.get(broker_name, {}).get(address, 0)

    # -- heartbeat ----------------------------------------------------------------------

    def heartbeat_data(self) -> HeartbeatData:
        """This instance's HEART_BEAT body (Java's ``prepareHeartbeatData``)."""
        return HeartbeatData(
            client_id=self.client_id,
            producers=[ProducerData(group) for group in self.producers],
            consumers=[consumer.consumer_data() for consumer in self.consumers.values()],
        )

    async def _heartbeat_tick(self) -> None:
        self.clean_offline_brokers()
        await self.send_heartbeat_to_all_brokers()

    async def send_heartbeat_to_all_brokers(self, only: set[str] | None = None) -> int:
        """Send the heartbeat to every broker (masters only when there is no consumer),
        or ``only`` to these addresses; returns how many brokers answered."""
        data = self.heartbeat_data()
        if not data.producers and not data.consumers:
            return 0
        answered = 0
        for broker_name, addrs in list(self.broker_addr_table.items()):
            for broker_id, address in sorted(addrs.items()):
                wanted = only is None or address in only
                if not wanted or (not data.consumers and broker_id != MASTER_ID):
                    continue
                try:
                    version = await self.api.send_heartbeat(
                        address, data, self.config.mq_client_api_timeout
                    )
                except MQClientError as exc:
                    log.info(
                        "heartbeat failed broker=%s address=%s error=%s", broker_name, address, exc
                    )
                    continue
                self.broker_version_table.setdefault(broker_name, {})[address] = version
                answered += 1
        return answered

    def clean_offline_brokers(self) -> None:
        """Forget addresses that no topic route lists any more (Java's cleanOfflineBroker)."""
        listed = {
            address
            for route in self.topic_route_table.values()
            for bd in route.broker_datas
            for address in bd.broker_addrs.values()
        }
        for broker_name, addrs in list(self.broker_addr_table.items()):
            kept = {i: a for i, a in addrs.items() if a in listed}
            if kept:
                self.broker_addr_table[broker_name] = kept
            else:
                del self.broker_addr_table[broker_name]
                log.info("broker offline, removed broker=%s", broker_name)

    # -- consumers ----------------------------------------------------------------------

    async def persist_all_consumer_offsets(self) -> None:
        """Persist every consumer's offsets; one failure does not stop the others."""
        for group, consumer in list(self.consumers.items()):
            try:
                await consumer.persist_consumer_offset()
            except MQClientError as exc:
                log.warning("persist consumer offset failed group=%s error=%s", group, exc)

    def _on_consumer_ids_changed(
        self, _conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand | None:
        """NOTIFY_CONSUMER_IDS_CHANGED from a broker: the group's consumers rebalance now."""
        header = NotifyConsumerIdsChangedRequestHeader.from_ext_fields(request.ext_fields)
        self.consumer_ids_changed_count += 1
        consumer = self.consumers.get(header.consumer_group)
        log.info("consumer ids changed group=%s known=%s", header.consumer_group, bool(consumer))
        if consumer is not None:
            consumer.on_consumer_ids_changed()
        if request.is_oneway:
            return None
        # A Java broker sends this oneway; answer a two-way request anyway so the
        # sender does not wait for its timeout.
        return request.response_to(0)

    # -- transactions -------------------------------------------------------------------

    def _on_check_transaction_state(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand | None:
        """CHECK_TRANSACTION_STATE from a broker (Java's ``ClientRemotingProcessor``).

        The body is the half message; its PGROUP picks the producer, which answers
        later with END_TRANSACTION to the broker that asked. A bad header raises
        ``HeaderFieldError`` (the connection answers it); nothing is answered to a
        oneway request, as Java.
        """
        header = CheckTransactionStateRequestHeader.from_ext_fields(request.ext_fields)
        try:
            msg = decode_record(request.body).to_message_ext(copy_body=True)
            msg.body = decompress_body(msg.body, msg.sys_flag)
        except ProtocolError as exc:
            log.warning("check transaction state: bad body from %s: %s", conn.remote_address, exc)
            return request.response_to(ResponseCode.SYSTEM_ERROR, f"decode message failed: {exc}")
        msg.transaction_id = msg.uniq_key or None
        group = msg.get_property(MessageConst.PROPERTY_PRODUCER_GROUP)
        check = getattr(self.producers.get(group or ""), "check_transaction_state", None)
        if check is None:
            log.warning("check transaction state: no transactional producer group=%s", group)
        else:
            check(conn.remote_address, msg, header)
        return None if request.is_oneway else request.response_to(ResponseCode.SUCCESS)

    # -- offset resets -------------------------------------------------------------------

    async def _on_reset_offset(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand | None:
        """RESET_CONSUMER_CLIENT_OFFSET (``mqadmin resetOffsetByTime`` through a broker):
        the group's push consumer drops the topic's queues, takes the new offsets,
        commits them and rebalances (Java's ``MQClientInstance.resetOffset``)."""
        header = ResetOffsetRequestHeader.from_ext_fields(request.ext_fields)
        try:
            table = ResetOffsetBody.decode(request.body).offset_table
        except ProtocolError as exc:
            log.warning("reset offset: bad body from %s: %s", conn.remote_address, exc)
            return (
                None
                if request.is_oneway
                else request.response_to(
                    ResponseCode.SYSTEM_ERROR, f"decode reset offset body failed: {exc}"
                )
            )
        reset = getattr(self.consumers.get(header.group), "reset_offset", None)
        if reset is None:
            log.warning("reset offset: no push consumer of group %s here", header.group)
        else:
            log.info("reset offset group=%s topic=%s queues=%d", header.group, header.topic,
                     len(table))  # fmt: skip
            await reset(header.topic, table)
        return None if request.is_oneway else request.response_to(ResponseCode.SUCCESS)

    # -- running info ---------------------------------------------------------------------

    async def _on_get_running_info(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        """GET_CONSUMER_RUNNING_INFO (relayed by a broker for ``mqadmin consumerStatus``)."""
        header = GetConsumerRunningInfoRequestHeader.from_ext_fields(request.ext_fields)
        running_info = getattr(self.consumers.get(header.consumer_group), "running_info", None)
        if running_info is None:
            return request.response_to(
                ResponseCode.SYSTEM_ERROR,
                f"The Consumer Group <{header.consumer_group}> not exist in this consumer",
            )
        info: ConsumerRunningInfo = await running_info()
        info.properties[PROP_NAMESERVER_ADDR] = self.config.namesrv_addr
        info.properties.setdefault(PROP_CONSUME_TYPE, "CONSUME_PASSIVELY")
        info.properties[PROP_CLIENT_VERSION] = MQVersion(CURRENT_VERSION).name
        if header.jstack_enable:
            info.jstack = stack_dump()
        return request.response_to(ResponseCode.SUCCESS, None, None, info.encode())


def _cap_queues(qd: QueueData, cap: int) -> QueueData:
    nums = min(cap, qd.read_queue_nums)
    return QueueData(qd.broker_name, nums, nums, qd.perm, qd.topic_sys_flag)


class ClientManager:
    """Shares one started ``ClientInstance`` per (name-server set, client id).

    Java keeps these in a process-wide singleton; here the owner of a manager decides
    what shares an instance (pass the same manager to producers and consumers).

    Args:
        factory: builds an instance (tests may pass a subclass).
    """

    def __init__(self, factory: Callable[[ClientConfig], ClientInstance] = ClientInstance) -> None:
        self._factory = factory
        self._instances: dict[tuple[tuple[str, ...], str], tuple[ClientInstance, int]] = {}

    @staticmethod
    def _key(config: ClientConfig) -> tuple[tuple[str, ...], str]:
        return (tuple(sorted(parse_namesrv_addr(config.namesrv_addr))), config.client_id())

    async def acquire(self, config: ClientConfig) -> ClientInstance:
        """The shared instance for ``config`` (started), one more user counted."""
        key = self._key(config)
        entry = self._instances.get(key)
        if entry is None:
            instance = self._factory(config)
            self._instances[key] = (instance, 1)
            await instance.start()
            return instance
        self._instances[key] = (entry[0], entry[1] + 1)
        await entry[0].start()
        return entry[0]

    async def release(self, instance: ClientInstance) -> None:
        """One user fewer; the last one shuts the instance down."""
        for key, (known, users) in list(self._instances.items()):
            if known is instance:
                if users > 1:
                    self._instances[key] = (known, users - 1)
                    return
                del self._instances[key]
                break
        await instance.shutdown()

    async def close(self) -> None:
        """Shut every instance down."""
        instances = [instance for instance, _ in self._instances.values()]
        self._instances.clear()
        for instance in instances:
            await instance.shutdown()
