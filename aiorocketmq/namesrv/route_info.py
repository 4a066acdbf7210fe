"""RouteInfoManager: the name server's route tables and every rule that changes them.

Owns five tables (RocketMQ's names) and the generation counter of what they show:

=====================  ===============================================================
``topic_queue_table``  topic -> brokerName -> QueueData (queues of a topic per broker)
``broker_addr_table``  brokerName -> BrokerData (cluster, addresses by brokerId)
``cluster_addr_table`` clusterName -> {brokerName}
``broker_live_table``  brokerAddr -> BrokerLiveInfo (last registration, DataVersion,
                       the connection it came on, HA address)
``filter_server_table`` brokerAddr -> [filter server address]
=====================  ===============================================================

The semantics are RocketMQ 4.9.8's ``RouteInfoManager``: registration (with the
slave-to-master switch, and queue data taken from masters only and only when their
DataVersion changed or on first registration), unregistration, expiry of brokers
silent for ``broker_channel_expired_ms``, removal when the connection a broker
registered on closes, route assembly, cluster info, topic lists, topic deletion and
the write-permission switches.

Must not: await, do I/O or read the clock other than through the injected ``Clock``.
Every method is a plain ``def``: on one event loop a mutation cannot be interleaved
with a read, which is what Java's read-write lock was for. Connections are opaque
tokens here (compared by identity); closing one is the caller's job.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from aiorocketmq.common.clock import Clock
from aiorocketmq.common.constants import MASTER_ID, PERM_READ, PERM_WRITE
from aiorocketmq.common.route import (
    BrokerData,
    ClusterInfo,
    DataVersion,
    QueueData,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicList,
    TopicRouteData,
)

__all__ = ["BrokerLiveInfo", "RegisterBrokerResult", "RouteInfoManager"]

log = logging.getLogger(__name__)

BROKER_CHANNEL_EXPIRED_MS = 120_000
"""``RouteInfoManager.BROKER_CHANNEL_EXPIRED_TIME``: a broker silent this long is dropped."""

# TopicSysFlag bits (common/.../sysflag/TopicSysFlag.java).
FLAG_UNIT = 0x1
FLAG_UNIT_SUB = 0x2


@dataclass(slots=True)
class BrokerLiveInfo:
    """What the name server knows about one registered broker address.

    Attributes:
        last_update_ms: Monotonic time of the last registration (or unchanged
            QUERY_DATA_VERSION).
        data_version: The DataVersion of the topic table it last sent.
        channel: The connection it registered on (closing it evicts the broker).
        ha_server_addr: Where its slaves connect for replication.
    """

    last_update_ms: int
    data_version: DataVersion
    channel: object
    ha_server_addr: str


@dataclass(slots=True, frozen=True)
class RegisterBrokerResult:
    """REGISTER_BROKER's answer: set only for a slave whose master is registered."""

    ha_server_addr: str | None = None
    master_addr: str | None = None


class RouteInfoManager:
    """The route tables (see the module docstring).

    Args:
        clock: Time source; only ``monotonic_ms`` is used (expiry must not jump
            with the wall clock).
        broker_channel_expired_ms: Silence after which ``scan_not_active_broker``
            drops a broker.

    Attributes:
        generation: Bumped whenever anything a route, cluster-info or topic-list
            reader could see changes; callers cache encoded answers against it.
    """

    def __init__(
        self, clock: Clock, broker_channel_expired_ms: int = BROKER_CHANNEL_EXPIRED_MS
    ) -> None:
        self.clock = clock
        self.broker_channel_expired_ms = broker_channel_expired_ms
        self.topic_queue_table: dict[str, dict[str, QueueData]] = {}
        self.broker_addr_table: dict[str, BrokerData] = {}
        self.cluster_addr_table: dict[str, set[str]] = {}
        self.broker_live_table: dict[str, BrokerLiveInfo] = {}
        self.filter_server_table: dict[str, list[str]] = {}
        self.generation = 0

    # -- registration --------------------------------------------------------------

    def register_broker(
        self,
        *,
        cluster_name: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str,
        topic_config_wrapper: TopicConfigSerializeWrapper,
        filter_server_list: list[str] | None,
        channel: object,
    ) -> RegisterBrokerResult:
        """Record a broker's (re-)registration; Java's ``registerBroker``.

        Args:
            cluster_name: The broker's cluster.
            broker_addr: ``ip:port`` clients use.
            broker_name: Shared by a master and its slaves.
            broker_id: 0 for the master, > 0 for slaves.
            ha_server_addr: ``ip:haPort`` for the broker's slaves.
            topic_config_wrapper: Its topic table and DataVersion.
            filter_server_list: None leaves the filter servers alone; empty clears.
            channel: The connection the request came on.

        Returns:
            For a slave whose master is registered: the master's address and HA
            address; otherwise an empty result.
        """
        names = self.cluster_addr_table.setdefault(cluster_name, set())
        changed = broker_name not in names
        names.add(broker_name)
        broker_data = self.broker_addr_table.get(broker_name)
        register_first = broker_data is None
        if broker_data is None:
            broker_data = BrokerData(cluster_name, broker_name, {})
            self.broker_addr_table[broker_name] = broker_data
        addrs = broker_data.broker_addrs
        # Slave-to-master switch: one address holds one id, so drop <1, addr> before
        # adding <0, addr>.
        for stale_id in [bid for bid, a in addrs.items() if a == broker_addr and bid != broker_id]:
            del addrs[stale_id]
            changed = True
        old_addr = addrs.get(broker_id)
        addrs[broker_id] = broker_addr
        if old_addr != broker_addr:
            changed = True
            log.info(
                "broker address registered cluster=%s broker_name=%s broker_id=%s old=%s new=%s",
                cluster_name, broker_name, broker_id, old_addr, broker_addr,
            )  # fmt: skip
        register_first = register_first or old_addr is None
        version = topic_config_wrapper.data_version
        # Only a master's topics make queues, and only when its table changed.
        if broker_id == MASTER_ID and (
            register_first or self.is_broker_topic_config_changed(broker_addr, version)
        ):
            for tc in topic_config_wrapper.topic_config_table.values():
                changed |= self._create_and_update_queue_data(broker_name, tc)
        now_ms = self.clock.monotonic_ms()
        previous = self.broker_live_table.get(broker_addr)
        self.broker_live_table[broker_addr] = BrokerLiveInfo(
            now_ms, version, channel, ha_server_addr
        )
        if previous is None:
            log.info("new broker registered addr=%s ha=%s", broker_addr, ha_server_addr)
        if filter_server_list is not None:
            changed |= self._set_filter_servers(broker_addr, filter_server_list)
        if changed:
            self.generation += 1
        return self._master_of(broker_id, addrs)

    def _set_filter_servers(self, broker_addr: str, servers: list[str]) -> bool:
        before = self.filter_server_table.get(broker_addr)
        if servers:
            self.filter_server_table[broker_addr] = list(servers)
        else:
            self.filter_server_table.pop(broker_addr, None)
        return before != self.filter_server_table.get(broker_addr)

    def _master_of(self, broker_id: int, addrs: dict[int, str]) -> RegisterBrokerResult:
        if broker_id == MASTER_ID:
            return RegisterBrokerResult()
        master_addr = addrs.get(MASTER_ID)
        master = self.broker_live_table.get(master_addr) if master_addr else None
        if master is None:
            return RegisterBrokerResult()
        return RegisterBrokerResult(master.ha_server_addr, master_addr)

    def _create_and_update_queue_data(self, broker_name: str, tc: TopicConfig) -> bool:
        """Put ``tc``'s queues for ``broker_name``; True when that changed the table."""
        queue_data = QueueData.from_topic_config(broker_name, tc)
        queues = self.topic_queue_table.setdefault(tc.topic_name, {})
        old = queues.get(broker_name)
        queues[broker_name] = queue_data
        if old is None and len(queues) == 1:
            log.info("new topic registered topic=%s broker_name=%s", tc.topic_name, broker_name)
        elif old is not None and old != queue_data:
            log.info("topic changed topic=%s old=%s new=%s", tc.topic_name, old, queue_data)
        return old != queue_data

    def is_broker_topic_config_changed(self, broker_addr: str, version: DataVersion) -> bool:
        """True unless ``broker_addr`` is registered with exactly ``version``."""
        previous = self.query_broker_topic_config(broker_addr)
        return previous is None or previous != version

    def query_broker_topic_config(self, broker_addr: str) -> DataVersion | None:
        """The DataVersion ``broker_addr`` last registered with, if it is live."""
        info = self.broker_live_table.get(broker_addr)
        return None if info is None else info.data_version

    def update_broker_info_update_timestamp(self, broker_addr: str) -> None:
        """Count an unchanged QUERY_DATA_VERSION as a sign of life."""
        info = self.broker_live_table.get(broker_addr)
        if info is not None:
            info.last_update_ms = self.clock.monotonic_ms()

    def register_topic(self, topic: str, queue_datas: Iterable[QueueData]) -> bool:
        """RocketMQ 5's ``registerTopic``: add a topic that is not known yet.

        Every QueueData must name a registered brokerName, else nothing is added.

        Returns:
            True if the topic was added.
        """
        queues = {qd.broker_name: qd for qd in queue_datas}
        if not queues or topic in self.topic_queue_table:
            return False
        unknown = [name for name in queues if name not in self.broker_addr_table]
        if unknown:
            log.warning("register topic names unknown brokers topic=%s brokers=%s", topic, unknown)
            return False
        self.topic_queue_table[topic] = queues
        self.generation += 1
        return True

    # -- removal -------------------------------------------------------------------

    def unregister_broker(
        self, cluster_name: str, broker_addr: str, broker_name: str, broker_id: int
    ) -> None:
        """A broker says goodbye (UNREGISTER_BROKER); Java's ``unregisterBroker``."""
        removed_live = self.broker_live_table.pop(broker_addr, None) is not None
        self.filter_server_table.pop(broker_addr, None)
        broker_data = self.broker_addr_table.get(broker_name)
        remove_name = False
        if broker_data is not None:
            broker_data.broker_addrs.pop(broker_id, None)
            if not broker_data.broker_addrs:
                del self.broker_addr_table[broker_name]
                remove_name = True
        log.info(
            "unregister broker addr=%s broker_name=%s live_entry_removed=%s name_removed=%s",
            broker_addr, broker_name, removed_live, remove_name,
        )  # fmt: skip
        if remove_name:
            names = self.cluster_addr_table.get(cluster_name)
            if names is not None:
                names.discard(broker_name)
                if not names:
                    del self.cluster_addr_table[cluster_name]
            self._remove_topics_of(broker_name)
        self.generation += 1

    def scan_not_active_broker(self) -> list[object]:
        """Drop every broker silent for longer than the expiry; Java's scan.

        Returns:
            The connections of the dropped brokers, for the caller to close.
        """
        deadline_ms = self.clock.monotonic_ms() - self.broker_channel_expired_ms
        expired = [
            (addr, info)
            for addr, info in self.broker_live_table.items()
            if info.last_update_ms < deadline_ms
        ]
        for addr, info in expired:
            del self.broker_live_table[addr]
            log.warning(
                "broker expired addr=%s silent_ms=%s",
                addr, self.clock.monotonic_ms() - info.last_update_ms,
            )  # fmt: skip
            self.on_channel_destroy(addr, info.channel)
        return [info.channel for _, info in expired]

    def on_channel_destroy(self, remote_addr: str, channel: object | None) -> None:
        """A connection closed: drop the broker that registered on it, at once.

        Args:
            remote_addr: Used as the broker address when no live broker
                registered on ``channel`` (Java's fallback; after an expiry scan
                it is the expired broker's address).
            channel: The closed connection, or None.
        """
        found = None
        if channel is not None:
            found = next(
                (a for a, info in self.broker_live_table.items() if info.channel is channel), None
            )
        if found is None:
            found = remote_addr
        else:
            log.info("broker connection closed, removing it at once addr=%s", found)
        if not found:
            return
        self.broker_live_table.pop(found, None)
        self.filter_server_table.pop(found, None)
        broker_name = self._remove_address(found)
        if broker_name is None:
            return
        self.generation += 1
        if broker_name not in self.broker_addr_table:
            for cluster, names in list(self.cluster_addr_table.items()):
                if broker_name in names:
                    names.discard(broker_name)
                    if not names:
                        del self.cluster_addr_table[cluster]
                    break
            self._remove_topics_of(broker_name)

    def _remove_address(self, broker_addr: str) -> str | None:
        """Remove ``broker_addr`` from its BrokerData (and an emptied BrokerData).

        Returns:
            The brokerName it belonged to, or None if no broker had it.
        """
        for name, broker_data in self.broker_addr_table.items():
            ids = [bid for bid, a in broker_data.broker_addrs.items() if a == broker_addr]
            if not ids:
                continue
            del broker_data.broker_addrs[ids[0]]
            log.info("broker address removed broker_name=%s broker_id=%s", name, ids[0])
            if not broker_data.broker_addrs:
                del self.broker_addr_table[name]
                log.info("broker name removed broker_name=%s", name)
            return name
        return None

    def _remove_topics_of(self, broker_name: str) -> None:
        """Drop ``broker_name``'s queues; a topic left with none disappears."""
        for topic in list(self.topic_queue_table):
            queues = self.topic_queue_table[topic]
            if queues.pop(broker_name, None) is not None:
                log.info("topic queues removed topic=%s broker_name=%s", topic, broker_name)
            if not queues:
                del self.topic_queue_table[topic]

    def delete_topic(self, topic: str, cluster_name: str | None = None) -> None:
        """DELETE_TOPIC_IN_NAMESRV: everywhere, or only on ``cluster_name``'s brokers."""
        if not cluster_name:
            if self.topic_queue_table.pop(topic, None) is not None:
                self.generation += 1
            return
        queues = self.topic_queue_table.get(topic)
        names = self.cluster_addr_table.get(cluster_name)
        if queues is None or not names:
            return
        for broker_name in names:
            if queues.pop(broker_name, None) is not None:
                log.info("topic deleted on broker topic=%s broker_name=%s", topic, broker_name)
        if not queues:
            del self.topic_queue_table[topic]
        self.generation += 1

    # -- write permission ----------------------------------------------------------

    def wipe_write_perm_of_broker(self, broker_name: str) -> int:
        """Clear the write bit of every queue of ``broker_name``; returns the topic count."""
        return self._set_perm(broker_name, lambda perm: perm & ~PERM_WRITE)

    def add_write_perm_of_broker(self, broker_name: str) -> int:
        """Set read|write on every queue of ``broker_name``; returns the topic count."""
        return self._set_perm(broker_name, lambda _perm: PERM_READ | PERM_WRITE)

    def _set_perm(self, broker_name: str, new_perm: Callable[[int], int]) -> int:
        count = 0
        for queues in self.topic_queue_table.values():
            qd = queues.get(broker_name)
            if qd is not None:
                queues[broker_name] = QueueData(
                    qd.broker_name,
                    qd.read_queue_nums,
                    qd.write_queue_nums,
                    new_perm(qd.perm),
                    qd.topic_sys_flag,
                )
                count += 1
        if count:
            self.generation += 1
        return count

    # -- reads ---------------------------------------------------------------------

    def pickup_topic_route_data(self, topic: str) -> TopicRouteData | None:
        """The route of ``topic``, or None unless both queue and broker data exist.

        Lists are sorted by brokerName (Java's order is a HashSet's; ali-ons sorts
        and C++ does not care). Broker data are copies.
        """
        queues = self.topic_queue_table.get(topic)
        if not queues:
            return None
        broker_datas = [
            self.broker_addr_table[name].copy()
            for name in sorted(queues)
            if name in self.broker_addr_table
        ]
        if not broker_datas:
            return None
        filter_servers: dict[str, list[str]] = {}
        if self.filter_server_table:
            for bd in broker_datas:
                for addr in bd.broker_addrs.values():
                    servers = self.filter_server_table.get(addr)
                    if servers is not None:
                        filter_servers[addr] = list(servers)
        return TopicRouteData(
            queue_datas=[queues[name] for name in sorted(queues)],
            broker_datas=broker_datas,
            filter_server_table=filter_servers,
        )

    def get_all_cluster_info(self) -> ClusterInfo:
        """A snapshot of the broker and cluster tables."""
        return ClusterInfo(
            {name: bd.copy() for name, bd in self.broker_addr_table.items()},
            {cluster: set(names) for cluster, names in self.cluster_addr_table.items()},
        )

    def get_all_topic_list(self) -> TopicList:
        """Every topic that has queues."""
        return TopicList(sorted(self.topic_queue_table))

    def get_topics_by_cluster(self, cluster: str) -> TopicList:
        """Topics with queues on any brokerName of ``cluster`` (empty if unknown)."""
        names = self.cluster_addr_table.get(cluster, set())
        topics = self.topic_queue_table.items()
        return TopicList(sorted(t for t, queues in topics if not names.isdisjoint(queues)))

    def get_system_topic_list(self) -> TopicList:
        """Java's ``getSystemTopicList``: cluster names and brokerNames, plus one address.

        A broker treats a topic named after its cluster or brokerName as a system
        topic; the address tells admin tools which broker to ask for the rest.
        """
        topics: set[str] = set()
        for cluster, names in self.cluster_addr_table.items():
            topics.add(cluster)
            topics |= names
        broker_addr = None
        for bd in self.broker_addr_table.values():
            if bd.broker_addrs:
                broker_addr = bd.broker_addrs[min(bd.broker_addrs)]
                break
        return TopicList(sorted(topics), broker_addr)

    def get_unit_topics(self) -> TopicList:
        """Topics whose (first) queue data has the unit flag."""
        return self._topics_where(lambda flag: bool(flag & FLAG_UNIT))

    def get_has_unit_sub_topic_list(self) -> TopicList:
        """Topics whose (first) queue data has the unit-subscription flag."""
        return self._topics_where(lambda flag: bool(flag & FLAG_UNIT_SUB))

    def get_has_unit_sub_un_unit_topic_list(self) -> TopicList:
        """Topics with the unit-subscription flag but not the unit flag."""
        return self._topics_where(lambda flag: not flag & FLAG_UNIT and bool(flag & FLAG_UNIT_SUB))

    def _topics_where(self, pick: Callable[[int], bool]) -> TopicList:
        # Java looks at one QueueData per topic ("we need only one queue data here").
        return TopicList(
            sorted(
                topic
                for topic, queues in self.topic_queue_table.items()
                if queues and pick(next(iter(queues.values())).topic_sys_flag)
            )
        )
