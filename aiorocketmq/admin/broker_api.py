"""The broker admin requests mqadmin sends, one method each, typed both ways.

Owns: ``BrokerAdminAPI``, the admin side of Java's ``MQClientAPIImpl`` 4.9.8
(createTopic, deleteTopicInBroker, getAllTopicConfig, createSubscriptionGroup,
deleteSubscriptionGroup, getAllSubscriptionGroup, getBrokerRuntimeInfo,
getTopicStatsInfo, getConsumeStats, getConsumerConnectionList,
getProducerConnectionList, queryTopicConsumeByWho) and our
GET_CONSUMER_OFFSET_HISTORY, plus the wire pieces this
package cannot import from ``broker`` (whose processors parse them):
QUERY_TOPIC_CONSUME_BY_WHO's header and its ``GroupList`` body,
INVOKE_BROKER_TO_RESET_OFFSET's header and its ``ResetOffsetBody`` reply.
Transport failures become ``MQRemotingError`` subclasses, error replies
``MQBrokerError(code, remark, address)``, unparsable replies a non-retriable
``MQBrokerError`` with SYSTEM_ERROR.

Must not: choose brokers (``mq_admin.MQAdmin`` does), retry, or print.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, TypeVar

from aiorocketmq.client.errors import MQBrokerError, from_remoting
from aiorocketmq.common import fastjson as fj
from aiorocketmq.common.admin_bodies import (
    ConsumeStats,
    SubscriptionGroupWrapper,
    TopicConfigSerializeWrapper,
    TopicStatsTable,
)
from aiorocketmq.common.errors import RemoteProtocolError
from aiorocketmq.common.offset_history import HistoryReply
from aiorocketmq.common.protocol_bodies import ConsumerConnection, ProducerConnection
from aiorocketmq.common.route import KVTable
from aiorocketmq.common.running_info import ConsumerRunningInfo
from aiorocketmq.common.subscription_group import SubscriptionGroupConfig
from aiorocketmq.common.topic_config import TopicConfig
from aiorocketmq.remoting.broker_admin_headers import (
    CreateTopicRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    DeleteTopicRequestHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumerOffsetHistoryRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumeStatsRequestHeader,
    GetProducerConnectionListRequestHeader,
    GetTopicStatsInfoRequestHeader,
)
from aiorocketmq.remoting.client import RemotingClient
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.errors import HeaderFieldError, RemotingError
from aiorocketmq.remoting.headers import ext_str, to_ext_fields

__all__ = [
    "AUTO_CREATE_TOPIC_KEY",
    "DEFAULT_ADMIN_TIMEOUT_MS",
    "BrokerAdminAPI",
    "GroupList",
    "QueryTopicConsumeByWhoRequestHeader",
]

_T = TypeVar("_T")

DEFAULT_ADMIN_TIMEOUT_MS: Final = 5_000
"""``DefaultMQAdminExt.timeoutMillis``: every admin request's timeout."""

AUTO_CREATE_TOPIC_KEY: Final = "TBW102"
"""``createTopicKey``: the ``defaultTopic`` field of UPDATE_AND_CREATE_TOPIC."""


@dataclass(slots=True, frozen=True)
class QueryTopicConsumeByWhoRequestHeader:
    """QUERY_TOPIC_CONSUME_BY_WHO (300)."""

    topic: str

    @classmethod
    def from_ext_fields(cls, fields: dict[str, str]) -> QueryTopicConsumeByWhoRequestHeader:
        """Parse; raises ``HeaderFieldError``."""
        return cls(ext_str(fields, "topic"))

    def to_ext_fields(self) -> dict[str, str]:
        """The extFields strings."""
        return to_ext_fields(topic=self.topic)


@dataclass(slots=True)
class GroupList:
    """QUERY_TOPIC_CONSUME_BY_WHO's reply body: ``{"groupList":[...]}``."""

    group_list: list[str] = field(default_factory=list)

    def encode(self) -> bytes:
        """The JSON body."""
        return fj.dumps_bytes({"groupList": list(self.group_list)})

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview | str) -> GroupList:
        """Parse a body. Raises ``RemoteProtocolError``."""
        d = fj.loads_object(data, "GroupList")
        return cls(fj.get_str_list(d.get("groupList") or [], "groupList"))


class BrokerAdminAPI:
    """Admin requests to brokers over a shared ``RemotingClient``.

    Args:
        remoting: the client every request goes through (not closed here).
        timeout_ms: each request's timeout (consume stats get three times this,
            as Java's ``examineConsumeStats``).
    """

    def __init__(self, remoting: RemotingClient, timeout_ms: int = DEFAULT_ADMIN_TIMEOUT_MS):
        self.remoting = remoting
        self.timeout_ms = timeout_ms

    async def invoke(
        self,
        address: str,
        code: int,
        fields: dict[str, str] | None = None,
        body: bytes = b"",
        timeout_ms: int | None = None,
    ) -> RemotingCommand:
        """Send one request and return the reply, whatever its code.

        Raises:
            MQRemotingError: the request failed at the transport level.
        """
        request = RemotingCommand.request(code, dict(fields or {}), body)
        timeout = self.timeout_ms if timeout_ms is None else timeout_ms
        try:
            return await self.remoting.invoke(address, request, timeout)
        except RemotingError as exc:
            raise from_remoting(exc) from exc

    async def _ok(
        self,
        address: str,
        code: int,
        fields: dict[str, str] | None = None,
        body: bytes = b"",
        timeout_ms: int | None = None,
    ) -> RemotingCommand:
        reply = await self.invoke(address, code, fields, body, timeout_ms)
        if reply.code != ResponseCode.SUCCESS:
            raise MQBrokerError(reply.code, reply.remark, address=address)
        return reply

    async def _decoded(
        self,
        address: str,
        code: int,
        decode: Callable[[bytes], _T],
        fields: dict[str, str] | None = None,
        timeout_ms: int | None = None,
    ) -> _T:
        reply = await self._ok(address, code, fields, timeout_ms=timeout_ms)
        try:
            return decode(reply.body_bytes())
        except (RemoteProtocolError, HeaderFieldError, ValueError) as exc:
            raise MQBrokerError(
                ResponseCode.SYSTEM_ERROR,
                f"malformed reply body of request code {code}: {exc}",
                address=address,
                retriable=False,
            ) from exc

    # -- topics -------------------------------------------------------------------------

    async def create_topic(
        self,
        address: str,
        config: TopicConfig,
        default_topic: str = AUTO_CREATE_TOPIC_KEY,
        attributes: str | None = None,
    ) -> None:
        """UPDATE_AND_CREATE_TOPIC: create or update ``config`` on one broker;
        ``attributes`` is RocketMQ 5's modification text (``+message.type=FIFO``)."""
        header = CreateTopicRequestHeader(
            topic=config.topic_name,
            default_topic=default_topic,
            read_queue_nums=config.read_queue_nums,
            write_queue_nums=config.write_queue_nums,
            perm=config.perm,
            topic_filter_type=config.topic_filter_type,
            topic_sys_flag=config.topic_sys_flag,
            order=config.order,
            attributes=attributes,
        )
        await self._ok(address, RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext_fields())

    async def delete_topic_in_broker(self, address: str, topic: str) -> None:
        """DELETE_TOPIC_IN_BROKER: drop the topic's config and queues on one broker."""
        fields = DeleteTopicRequestHeader(topic).to_ext_fields()
        await self._ok(address, RequestCode.DELETE_TOPIC_IN_BROKER, fields)

    async def get_all_topic_config(self, address: str) -> TopicConfigSerializeWrapper:
        """GET_ALL_TOPIC_CONFIG: the broker's whole topic table."""
        return await self._decoded(
            address, RequestCode.GET_ALL_TOPIC_CONFIG, TopicConfigSerializeWrapper.decode
        )

    async def get_topic_stats_info(self, address: str, topic: str) -> TopicStatsTable:
        """GET_TOPIC_STATS_INFO: min/max offset and last store time per write queue."""
        fields = GetTopicStatsInfoRequestHeader(topic).to_ext_fields()
        return await self._decoded(
            address, RequestCode.GET_TOPIC_STATS_INFO, TopicStatsTable.decode, fields
        )

    async def query_topic_consume_by_who(self, address: str, topic: str) -> list[str]:
        """QUERY_TOPIC_CONSUME_BY_WHO: the groups that consume ``topic`` on the broker."""
        fields = QueryTopicConsumeByWhoRequestHeader(topic).to_ext_fields()
        body = await self._decoded(
            address, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, GroupList.decode, fields
        )
        return body.group_list

    # -- subscription groups ------------------------------------------------------------

    async def create_subscription_group(
        self, address: str, config: SubscriptionGroupConfig
    ) -> None:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: the config travels as the JSON body."""
        await self._ok(
            address, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=config.encode()
        )

    async def delete_subscription_group(
        self, address: str, group: str, remove_offset: bool = False
    ) -> None:
        """DELETE_SUBSCRIPTIONGROUP (``removeOffset`` also drops its offsets)."""
        fields = DeleteSubscriptionGroupRequestHeader(group, remove_offset).to_ext_fields()
        await self._ok(address, RequestCode.DELETE_SUBSCRIPTIONGROUP, fields)

    async def get_all_subscription_group(self, address: str) -> SubscriptionGroupWrapper:
        """GET_ALL_SUBSCRIPTIONGROUP_CONFIG: the broker's whole group table."""
        return await self._decoded(
            address,
            RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
            SubscriptionGroupWrapper.decode,
        )

    # -- runtime and consumption ----------------------------------------------------------

    async def get_broker_runtime_info(self, address: str) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO: the broker's key/value runtime table."""
        table = await self._decoded(address, RequestCode.GET_BROKER_RUNTIME_INFO, KVTable.decode)
        return table.table

    async def get_consume_stats(
        self, address: str, group: str, topic: str | None = None
    ) -> ConsumeStats:
        """GET_CONSUME_STATS: a group's offsets per queue (every topic when None)."""
        fields = GetConsumeStatsRequestHeader(group, topic).to_ext_fields()
        return await self._decoded(
            address,
            RequestCode.GET_CONSUME_STATS,
            ConsumeStats.decode,
            fields,
            timeout_ms=self.timeout_ms * 3,
        )

    async def get_consumer_connection_list(self, address: str, group: str) -> ConsumerConnection:
        """GET_CONSUMER_CONNECTION_LIST: a group's live clients and subscriptions."""
        fields = GetConsumerConnectionListRequestHeader(group).to_ext_fields()
        return await self._decoded(
            address, RequestCode.GET_CONSUMER_CONNECTION_LIST, ConsumerConnection.decode, fields
        )

    async def get_consumer_running_info(
        self, address: str, group: str, client_id: str, jstack: bool = False
    ) -> ConsumerRunningInfo:
        """GET_CONSUMER_RUNNING_INFO: the broker asks the client (Java waits 3x its timeout)."""
        header = GetConsumerRunningInfoRequestHeader(group, client_id, jstack)
        return await self._decoded(
            address,
            RequestCode.GET_CONSUMER_RUNNING_INFO,
            ConsumerRunningInfo.decode,
            header.to_ext_fields(),
            timeout_ms=self.timeout_ms * 3,
        )

    async def get_producer_connection_list(self, address: str, group: str) -> ProducerConnection:
        """GET_PRODUCER_CONNECTION_LIST: a producer group's live clients."""
        fields = GetProducerConnectionListRequestHeader(group).to_ext_fields()
        return await self._decoded(
            address, RequestCode.GET_PRODUCER_CONNECTION_LIST, ProducerConnection.decode, fields
        )

    async def get_consumer_offset_history(
        self, address: str, header: GetConsumerOffsetHistoryRequestHeader
    ) -> HistoryReply:
        """GET_CONSUMER_OFFSET_HISTORY (ours): the broker's lag series of a group.

        A RocketMQ broker answers REQUEST_CODE_NOT_SUPPORTED (an ``MQBrokerError``).
        """
        return await self._decoded(
            address,
            RequestCode.GET_CONSUMER_OFFSET_HISTORY,
            HistoryReply.decode,
            header.to_ext_fields(),
        )
