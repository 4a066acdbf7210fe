"""MQAdmin: the typed async admin facade mqadmin's commands are built on.

Owns: ``MQAdmin``, the aiorocketmq counterpart of Java's ``DefaultMQAdminExtImpl``
4.9.8 for the operations issue 5 needs: topic routes, topic lists and cluster info
(through ``client.NamesrvAPI``, with its name-server failover), creating, updating
and deleting topics and subscription groups on brokers, broker runtime info, topic
stats, consume stats and client connections (through ``BrokerAdminAPI``), and the
``CommandUtil`` look-ups (masters of a cluster, brokerName of an address). It picks
brokers the way Java does (``BrokerData.selectBrokerAddr``: the master, else any
address) and merges per-broker answers the way Java does.

Must not: print or parse command lines (``cli/admin.py`` and ``admin/render.py``
do), or keep state beyond its two clients.

Errors: everything raised is an ``MQClientError``: ``MQAdminError`` for Java's
"not found" outcomes (an unknown cluster, no stats, a group not online), and the
client's own types for transport failures and error replies.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from types import TracebackType
from typing import Final

from aiorocketmq.admin.broker_api import DEFAULT_ADMIN_TIMEOUT_MS, BrokerAdminAPI
from aiorocketmq.client.errors import MQClientError, NoNameServerError
from aiorocketmq.client.namesrv_api import NamesrvAPI
from aiorocketmq.common.admin_bodies import ConsumeStats, TopicStatsTable
from aiorocketmq.common.constants import MASTER_ID, retry_topic
from aiorocketmq.common.protocol_bodies import ConsumerConnection, ProducerConnection
from aiorocketmq.common.route import BrokerData, ClusterInfo, TopicRouteData
from aiorocketmq.common.running_info import ConsumerRunningInfo
from aiorocketmq.common.subscription_group import SubscriptionGroupConfig
from aiorocketmq.common.topic_config import TopicConfig
from aiorocketmq.remoting.acl_sign import SessionCredentials
from aiorocketmq.remoting.client import RemotingClient
from aiorocketmq.remoting.codes import ResponseCode
from aiorocketmq.remoting.config import RemotingClientConfig

__all__ = ["CLUSTER_ERROR_MESSAGE", "NAMESPACE_ORDER_TOPIC_CONFIG", "MQAdmin", "MQAdminError"]

NAMESPACE_ORDER_TOPIC_CONFIG: Final = "ORDER_TOPIC_CONFIG"
"""``NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG``: KV namespace of ordered topics."""

CLUSTER_ERROR_MESSAGE: Final = (
    "Make sure the specified clusterName exists or the name server connected to is correct."
)
"""``CommandUtil.ERROR_MESSAGE``."""


class MQAdminError(MQClientError):
    """An admin operation found nothing to act on (Java's MQClientException).

    Args:
        message: what was not found.
        code: the RocketMQ response code Java attaches (e.g. CONSUMER_NOT_ONLINE), or -1.
    """

    def __init__(self, message: str, code: int = -1) -> None:
        super().__init__(message if code < 0 else f"CODE: {code} DESC: {message}")
        self.code = code


def select_broker_addr(broker: BrokerData, rng: random.Random | None = None) -> str | None:
    """``BrokerData.selectBrokerAddr``: the master's address, else any of them."""
    master = broker.broker_addrs.get(MASTER_ID)
    if master is not None:
        return master
    addresses = list(broker.broker_addrs.values())
    return (rng or random).choice(addresses) if addresses else None


class MQAdmin:
    """Admin operations against name servers and brokers.

    Args:
        namesrv_addr: ``"host:port;host:port"``; None when only broker-addressed
            operations will be used (the name-server ones then raise
            ``NoNameServerError``).
        timeout_ms: each request's timeout (Java's default 5 s).
        remoting: the transport to share; None creates one, closed by ``close``.
        rng: random source for Java's random broker choices (tests seed it).
        credentials: ACL credentials to sign requests with (ignored when
            ``remoting`` is given: that transport signs or not).
    """

    def __init__(
        self,
        namesrv_addr: str | Sequence[str] | None,
        *,
        timeout_ms: int = DEFAULT_ADMIN_TIMEOUT_MS,
        remoting: RemotingClient | None = None,
        rng: random.Random | None = None,
        credentials: SessionCredentials | None = None,
    ) -> None:
        self._owns_remoting = remoting is None
        self.remoting = remoting or RemotingClient(
            RemotingClientConfig(serialize_type="JSON"), credentials=credentials
        )
        self._rng = rng or random.Random()
        self._namesrv = (
            None
            if namesrv_addr is None
            else NamesrvAPI(namesrv_addr, self.remoting, timeout_ms=timeout_ms, rng=self._rng)
        )
        self.broker = BrokerAdminAPI(self.remoting, timeout_ms)

    @property
    def namesrv(self) -> NamesrvAPI:
        """The name-server API.

        Raises:
            NoNameServerError: no name-server address was given.
        """
        if self._namesrv is None:
            raise NoNameServerError("no name server address: pass -n host:port or set NAMESRV_ADDR")
        return self._namesrv

    async def close(self) -> None:
        """Close the transport if this object created it (idempotent)."""
        if self._owns_remoting:
            await self.remoting.close()

    async def __aenter__(self) -> MQAdmin:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- name server ------------------------------------------------------------------

    async def examine_topic_route(self, topic: str) -> TopicRouteData:
        """The topic's route (raises ``NoRouteError`` when it has none)."""
        return await self.namesrv.get_route(topic)

    async def examine_cluster_info(self) -> ClusterInfo:
        """Brokers by name and brokerNames by cluster."""
        return await self.namesrv.get_cluster_info()

    async def fetch_all_topic_list(self) -> list[str]:
        """Every topic the name server knows."""
        return (await self.namesrv.get_all_topic_list()).topic_list

    async def cluster_brokers(self, cluster: str) -> list[BrokerData]:
        """The cluster's brokers, by brokerName.

        Raises:
            MQAdminError: the name server knows no such cluster.
        """
        info = await self.examine_cluster_info()
        names = info.cluster_addr_table.get(cluster)
        if names is None:
            raise MQAdminError(f"cluster [{cluster}] not found. {CLUSTER_ERROR_MESSAGE}")
        return [info.broker_addr_table[n] for n in sorted(names) if n in info.broker_addr_table]

    async def master_addrs(self, cluster: str) -> list[str]:
        """``CommandUtil.fetchMasterAddrByClusterName`` (sorted)."""
        brokers = await self.cluster_brokers(cluster)
        return sorted(addr for b in brokers if (addr := b.broker_addrs.get(MASTER_ID)) is not None)

    async def master_and_slave_addrs(self, cluster: str) -> list[str]:
        """``CommandUtil.fetchMasterAndSlaveAddrByClusterName`` (sorted)."""
        brokers = await self.cluster_brokers(cluster)
        return sorted({addr for b in brokers for addr in b.broker_addrs.values()})

    async def broker_name_by_addr(self, address: str) -> str:
        """``CommandUtil.fetchBrokerNameByAddr``.

        Raises:
            MQAdminError: no broker of the cluster info has that address.
        """
        info = await self.examine_cluster_info()
        for name, data in info.broker_addr_table.items():
            if address in data.broker_addrs.values():
                return name
        raise MQAdminError(f"broker [{address}] not found. {CLUSTER_ERROR_MESSAGE}")

    async def find_topic_cluster(self, topic: str, info: ClusterInfo) -> str | None:
        """The cluster holding the topic's first broker (``findTopicBelongToWhichCluster``)."""
        route = await self.examine_topic_route(topic)
        if not route.broker_datas:
            return None
        broker_name = route.broker_datas[0].broker_name
        for cluster in sorted(info.cluster_addr_table):
            if broker_name in info.cluster_addr_table[cluster]:
                return cluster
        return None

    async def create_or_update_order_conf(self, topic: str, conf: str, is_cluster: bool) -> None:
        """Record an ordered topic's ``brokerName:queueNums`` list in the KV config.

        As Java: a cluster-wide conf replaces the value; a single broker's entry
        is merged into the existing list, replacing that broker's old entry.
        """
        if not is_cluster:
            old = await self.namesrv.get_kv_config(NAMESPACE_ORDER_TOPIC_CONFIG, topic)
            entries: dict[str, str] = {}
            for item in (old or "").split(";"):
                if item.strip():
                    entries[item.split(":", maxsplit=1)[0]] = item
            entries[conf.split(":", maxsplit=1)[0]] = conf
            conf = ";".join(entries.values())
        await self.namesrv.put_kv_config(NAMESPACE_ORDER_TOPIC_CONFIG, topic, conf)

    async def delete_topic_in_namesrv(self, topic: str, cluster: str | None) -> None:
        """DELETE_TOPIC_IN_NAMESRV on every configured name server."""
        await self.namesrv.delete_topic_in_namesrv(topic, cluster)

    # -- brokers ----------------------------------------------------------------------

    async def create_topic(
        self, address: str, config: TopicConfig, attributes: str | None = None
    ) -> None:
        """Create or update a topic on one broker (``attributes``: RocketMQ 5's
        modification text, ``+message.type=FIFO``)."""
        await self.broker.create_topic(address, config, attributes=attributes)

    async def delete_topic_in_brokers(self, addresses: Sequence[str], topic: str) -> None:
        """DELETE_TOPIC_IN_BROKER on each address, in order (the first failure stops)."""
        for address in addresses:
            await self.broker.delete_topic_in_broker(address, topic)

    async def delete_topic(self, topic: str, cluster: str) -> list[str]:
        """Delete a topic from every master of the cluster, then from the name servers.

        Returns:
            The broker addresses it was deleted from.
        """
        masters = await self.master_addrs(cluster)
        await self.delete_topic_in_brokers(masters, topic)
        await self.delete_topic_in_namesrv(topic, cluster)
        return masters

    async def create_subscription_group(
        self, address: str, config: SubscriptionGroupConfig
    ) -> None:
        """Create or update a subscription group on one broker."""
        await self.broker.create_subscription_group(address, config)

    async def delete_subscription_group(
        self, address: str, group: str, remove_offset: bool = False
    ) -> None:
        """Delete a subscription group on one broker."""
        await self.broker.delete_subscription_group(address, group, remove_offset)

    async def fetch_broker_runtime_stats(self, address: str) -> dict[str, str]:
        """The broker's runtime key/value table."""
        return await self.broker.get_broker_runtime_info(address)

    async def examine_topic_stats(self, topic: str) -> TopicStatsTable:
        """Offsets of every queue of the topic, over the brokers of its route.

        Raises:
            MQAdminError: no broker reported a queue ("Not found the topic stats info").
        """
        route = await self.examine_topic_route(topic)
        merged = TopicStatsTable()
        for broker in route.broker_datas:
            address = select_broker_addr(broker, self._rng)
            if address is not None:
                table = await self.broker.get_topic_stats_info(address, topic)
                merged.offset_table.update(table.offset_table)
        if not merged.offset_table:
            raise MQAdminError("Not found the topic stats info")
        return merged

    async def examine_consume_stats(self, group: str, topic: str | None = None) -> ConsumeStats:
        """A group's offsets over the brokers of its retry topic's route, TPS summed.

        Raises:
            NoRouteError: the group has no retry topic route (it never consumed).
            MQAdminError: every broker answered an empty table (CONSUMER_NOT_ONLINE).
        """
        route = await self.examine_topic_route(retry_topic(group))
        merged = ConsumeStats()
        for broker in route.broker_datas:
            address = select_broker_addr(broker, self._rng)
            if address is not None:
                stats = await self.broker.get_consume_stats(address, group, topic)
                merged.offset_table.update(stats.offset_table)
                merged.consume_tps += stats.consume_tps
        if not merged.offset_table:
            raise MQAdminError(
                "Not found the consumer group consume stats, because return offset table is "
                "empty, maybe the consumer not consume any message",
                ResponseCode.CONSUMER_NOT_ONLINE,
            )
        return merged

    async def _route_broker_addr(self, topic: str) -> str | None:
        brokers = (await self.examine_topic_route(topic)).broker_datas
        if not brokers:
            return None
        return select_broker_addr(self._rng.choice(brokers), self._rng)

    async def examine_consumer_connection_info(
        self, group: str, broker_addr: str | None = None
    ) -> ConsumerConnection:
        """A group's clients, from ``broker_addr`` or a broker of its retry topic.

        Raises:
            MQAdminError: no client of the group is connected (CONSUMER_NOT_ONLINE).
        """
        address = broker_addr or await self._route_broker_addr(retry_topic(group))
        result = ConsumerConnection()
        if address:
            result = await self.broker.get_consumer_connection_list(address, group)
        if not result.connections:
            raise MQAdminError(
                "Not found the consumer group connection", ResponseCode.CONSUMER_NOT_ONLINE
            )
        return result

    async def get_consumer_running_info(
        self, group: str, client_id: str, jstack: bool = False, broker_addr: str | None = None
    ) -> ConsumerRunningInfo:
        """One client's running info, asked through a broker of the group's retry topic.

        Raises:
            MQAdminError: no broker serves the group's retry topic.
            MQBrokerError: the client is not online there, or did not answer.
        """
        address = broker_addr or await self._route_broker_addr(retry_topic(group))
        if not address:
            raise MQAdminError(f"no broker serves the retry topic of {group}", -1)
        return await self.broker.get_consumer_running_info(address, group, client_id, jstack)

    async def examine_producer_connection_info(self, group: str, topic: str) -> ProducerConnection:
        """A producer group's clients, from one broker of the topic's route.

        Raises:
            MQAdminError: no producer of the group is connected there.
        """
        address = await self._route_broker_addr(topic)
        result = ProducerConnection()
        if address:
            result = await self.broker.get_producer_connection_list(address, group)
        if not result.connections:
            raise MQAdminError("Not found the producer group connection")
        return result

    async def query_topic_consume_by_who(self, topic: str) -> list[str]:
        """The groups consuming ``topic``, from the first broker of its route."""
        for broker in (await self.examine_topic_route(topic)).broker_datas:
            address = select_broker_addr(broker, self._rng)
            if address is not None:
                return await self.broker.query_topic_consume_by_who(address, topic)
        return []
