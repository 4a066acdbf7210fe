"""Typed headers of the broker's query, transaction and topic-admin requests.

Owns: VIEW_MESSAGE_BY_ID, QUERY_MESSAGE (request and reply), END_TRANSACTION,
CHECK_TRANSACTION_STATE (broker to producer),
UPDATE_AND_CREATE_TOPIC, DELETE_TOPIC_IN_BROKER, DELETE_SUBSCRIPTIONGROUP,
GET_TOPIC_STATS_INFO, GET_CONSUME_STATS and GET_CONSUMER/PRODUCER_CONNECTION_LIST
headers, each a slotted dataclass listing its fields explicitly, parsed with
``remoting/headers.py``'s Java rules. The client-facing send/pull/offset headers
are in ``broker_headers``.

Must not: know what a broker does with them, or use reflection.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from aiorocketmq.remoting.headers import (
    ext_bool,
    ext_int,
    ext_long,
    ext_opt_int,
    ext_opt_long,
    ext_opt_str,
    ext_str,
    to_ext_fields,
)

__all__ = [
    "CheckTransactionStateRequestHeader",
    "CreateTopicRequestHeader",
    "DeleteSubscriptionGroupRequestHeader",
    "DeleteTopicRequestHeader",
    "EndTransactionRequestHeader",
    "GetConsumeStatsRequestHeader",
    "GetConsumerConnectionListRequestHeader",
    "GetConsumerOffsetHistoryRequestHeader",
    "GetConsumerRunningInfoRequestHeader",
    "GetProducerConnectionListRequestHeader",
    "GetTopicStatsInfoRequestHeader",
    "QueryMessageRequestHeader",
    "QueryMessageResponseHeader",
    "ResetOffsetRequestHeader",
    "ViewMessageRequestHeader",
]

Fields = Mapping[str, str]


@dataclass(slots=True, frozen=True)
class ViewMessageRequestHeader:
    """VIEW_MESSAGE_BY_ID (33): the commit-log offset decoded from the msgId."""

    offset: int

    @classmethod
    def from_ext_fields(cls, f: Fields) -> ViewMessageRequestHeader:
        """Parse; raises ``HeaderFieldError``."""
        return cls(ext_long(f, "offset"))

    def to_ext_fields(self) -> dict[str, str]:
        """The extFields strings."""
        return to_ext_fields(offset=self.offset)


@dataclass(slots=True, frozen=True)
class QueryMessageRequestHeader:
    """QUERY_MESSAGE (12): by key over a time range."""

    topic: str
    key: str
    max_num: int
    begin_timestamp: int
    end_timestamp: int

    @classmethod
    def from_ext_fields(cls, f: Fields) -> QueryMessageRequestHeader:
        """Parse; raises ``HeaderFieldError``."""
        return cls(
            topic=ext_str(f, "topic"),
            key=ext_str(f, "key"),
            max_num=ext_int(f, "maxNum"),
            begin_timestamp=ext_long(f, "beginTimestamp"),
            end_timestamp=ext_long(f, "endTimestamp"),
        )

    def to_ext_fields(self) -> dict[str, str]:
        """The extFields strings."""
        return to_ext_fields(
            topic=self.topic,
            key=self.key,
            maxNum=self.max_num,
            beginTimestamp=self.begin_timestamp,
            endTimestamp=self.end_timestamp,
        )


@dataclass(slots=True, frozen=True)
class QueryMessageResponseHeader:
    """QUERY_MESSAGE's reply."""

    index_last_update_timestamp: int
    index_last_update_phyoffset: int

    @classmethod
    def from_ext_fields(cls, f: Fields) -> QueryMessageResponseHeader:
        """Parse; raises ``HeaderFieldError``."""
        return cls(ext_long(f, "indexLastUpdateTimestamp"), ext_long(f, "indexLastUpdatePhyoffset"))

    def to_ext_fields(self) -> dict[str, str]:
        """The extFields strings."""
        return to_ext_fields(
            indexLastUpdateTimestamp=self.index_last_update_timestamp,
            indexLastUpdatePhyoffset=self.index_last_update_phyoffset,
        )


@dataclass(slots=True, frozen=True)
class EndTransactionRequestHeader:
    """END_TRANSACTION (37)."""

    producer_group: str
    tran_state_table_offset: int
    commit_log_offset: int
    commit_or_rollback: int
    msg_id: str
    from_transaction_check: bool = False
    transaction_id: str | None = None

    @classmethod
    def from_ext_fields(cls, f: Fields) -> EndTransactionRequestHeader:
        """Parse; raises ``HeaderFieldError``."""
        return cls(
            producer_group=ext_str(f, "producerGroup"),
            tran_state_table_offset=ext_long(f, "tranStateTableOffset"),
            commit_log_offset=ext_long(f, "commitLogOffset"),
            commit_or_rollback=ext_int(f, "commitOrRollback"),
            msg_id=ext_str(f, "msgId"),
            from_transaction_check=ext_bool(f, "fromTransactionCheck", False),
            transaction_id=ext_opt_str(f, "transactionId"),
        )

    def to_ext_fields(self) -> dict[str, str]:
        """The extFields strings."""
        return to_ext_fields(
            producerGroup=self.producer_group,
            tranStateTableOffset=self.tran_state_table_offset,
            commitLogOffset=self.commit_log_offset,
            commitOrRollback=self.commit_or_rollback,
            fromTransactionCheck=self.from_transaction_check,
            msgId=self.msg_id,
            transactionId=self.transaction_id,
        )


@dataclass(slots=True, frozen=True)
class CheckTransactionStateRequestHeader:
    """CHECK_TRANSACTION_STATE (39), broker to producer: which half message to decide."""

    tran_state_table_offset: int
    commit_log_offset: int
    msg_id: str | None = None
    transaction_id: str | None = None
    offset_msg_id: str | None = None

    @classmethod
    def from_ext_fields(cls, f: Fields) -> CheckTransactionStateRequestHeader:
        """Parse; raises ``HeaderFieldError``."""
        return cls(
            tran_state_table_offset=ext_long(f, "tranStateTableOffset"),
            commit_log_offset=ext_long(f, "commitLogOffset"),
            msg_id=ext_opt_str(f, "msgId"),
            transaction_id=ext_opt_str(f, "transactionId"),
            offset_msg_id=ext_opt_str(f, "offsetMsgId"),
        )

    def to_ext_fields(self) -> dict[str, str]:
        """The extFields strings."""
        return to_ext_fields(
            tranStateTableOffset=self.tran_state_table_offset,
            commitLogOffset=self.commit_log_offset,
            msgId=self.msg_id,
            transactionId=self.transaction_id,
            offsetMsgId=self.offset_msg_id,
        )


@dataclass(slots=True, frozen=True)
class CreateTopicRequestHeader:
    """UPDATE_AND_CREATE_TOPIC (17)."""

    topic: str
    default_topic: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_filter_type: str
    topic_sys_flag: int | None = None
    order: bool = False
    #: RocketMQ 5's attribute modification (``+message.type=FIFO``); None from 4.x.
    attributes: str | None = None

    @classmethod
    def from_ext_fields(cls, f: Fields) -> CreateTopicRequestHeader:
        """Parse; raises ``HeaderFieldError``."""
        return cls(
            topic=ext_str(f, "topic"),
            default_topic=ext_str(f, "defaultTopic"),
            read_queue_nums=ext_int(f, "readQueueNums"),
            write_queue_nums=ext_int(f, "writeQueueNums"),
            perm=ext_int(f, "perm"),
            topic_filter_type=ext_str(f, "topicFilterType"),
            topic_sys_flag=ext_opt_int(f, "topicSysFlag"),
            order=ext_bool(f, "order", False),
            attributes=ext_opt_str(f, "attributes"),
        )

    def to_ext_fields(self) -> dict[str, str]:
        """The extFields strings."""
        return to_ext_fields(
            attributes=self.attributes,
            topic=self.topic,
            defaultTopic=self.default_topic,
            readQueueNums=self.read_queue_nums,
            writeQueueNums=self.write_queue_nums,
            perm=self.perm,
            topicFilterType=self.topic_filter_type,
            topicSysFlag=self.topic_sys_flag,
            order=self.order,
        )


@dataclass(slots=True, frozen=True)
class DeleteTopicRequestHeader:
    """DELETE_TOPIC_IN_BROKER (215)."""

    topic: str

    @classmethod
    def from_ext_fields(cls, f: Fields) -> DeleteTopicRequestHeader:
        """Parse; raises ``HeaderFieldError``."""
        return cls(ext_str(f, "topic"))

    def to_ext_fields(self) -> dict[str, str]:
        """The extFields strings."""
        return to_ext_fields(topic=self.topic)


@dataclass(slots=True, frozen=True)
class GetConsumerRunningInfoRequestHeader:
    """GET_CONSUMER_RUNNING_INFO (307): admin -> broker, relayed as is to the client."""

    consumer_group: str
    client_id: str
    jstack_enable: bool = False

    @classmethod
    def from_ext_fields(cls, f: Fields) -> GetConsumerRunningInfoRequestHeader:
        """Parse; raises ``HeaderFieldError``."""
        return cls(
            ext_str(f, "consumerGroup"),
            ext_str(f, "clientId"),
            ext_bool(f, "jstackEnable", False),
        )

    def to_ext_fields(self) -> dict[str, str]:
        """The extFields strings."""
        return to_ext_fields(
            consumerGroup=self.consumer_group,
            clientId=self.client_id,
            jstackEnable=self.jstack_enable,
        )


@dataclass(slots=True, frozen=True)
class DeleteSubscriptionGroupRequestHeader:
    """DELETE_SUBSCRIPTIONGROUP (207); ``removeOffset`` absent reads as false (a primitive)."""

    group_name: str
    remove_offset: bool = False

    @classmethod
    def from_ext_fields(cls, f: Fields) -> DeleteSubscriptionGroupRequestHeader:
        """Parse; raises ``HeaderFieldError``."""
        return cls(ext_str(f, "groupName"), ext_bool(f, "removeOffset", False))

    def to_ext_fields(self) -> dict[str, str]:
        """The extFields strings."""
        return to_ext_fields(groupName=self.group_name, removeOffset=self.remove_offset)


@dataclass(slots=True, frozen=True)
class GetTopicStatsInfoRequestHeader:
    """GET_TOPIC_STATS_INFO (202)."""

    topic: str

    @classmethod
    def from_ext_fields(cls, f: Fields) -> GetTopicStatsInfoRequestHeader:
        """Parse; raises ``HeaderFieldError``."""
        return cls(ext_str(f, "topic"))

    def to_ext_fields(self) -> dict[str, str]:
        """The extFields strings."""
        return to_ext_fields(topic=self.topic)


@dataclass(slots=True, frozen=True)
class GetConsumeStatsRequestHeader:
    """GET_CONSUME_STATS (208); no ``topic`` (or a blank one) means every topic."""

    consumer_group: str
    topic: str | None = None

    @classmethod
    def from_ext_fields(cls, f: Fields) -> GetConsumeStatsRequestHeader:
        """Parse; raises ``HeaderFieldError``."""
        return cls(ext_str(f, "consumerGroup"), ext_opt_str(f, "topic"))

    def to_ext_fields(self) -> dict[str, str]:
        """The extFields strings."""
        return to_ext_fields(consumerGroup=self.consumer_group, topic=self.topic)


@dataclass(slots=True, frozen=True)
class GetConsumerOffsetHistoryRequestHeader:
    """GET_CONSUMER_OFFSET_HISTORY (7001, ours): a group's lag over a time range.

    No ``topic`` means every topic of the group; ``maxPoints`` keeps the newest
    snapshots (0: the broker's cap).
    """

    consumer_group: str
    topic: str | None = None
    begin_timestamp: int = 0
    end_timestamp: int | None = None
    max_points: int = 0

    @classmethod
    def from_ext_fields(cls, f: Fields) -> GetConsumerOffsetHistoryRequestHeader:
        """Parse; raises ``HeaderFieldError``."""
        return cls(
            ext_str(f, "consumerGroup"),
            ext_opt_str(f, "topic"),
            ext_long(f, "beginTimestamp", 0),
            ext_opt_long(f, "endTimestamp"),
            ext_int(f, "maxPoints", 0),
        )

    def to_ext_fields(self) -> dict[str, str]:
        """The extFields strings."""
        return to_ext_fields(
            consumerGroup=self.consumer_group,
            topic=self.topic,
            beginTimestamp=self.begin_timestamp,
            endTimestamp=self.end_timestamp,
            maxPoints=self.max_points,
        )


@dataclass(slots=True, frozen=True)
class GetConsumerConnectionListRequestHeader:
    """GET_CONSUMER_CONNECTION_LIST (203)."""

    consumer_group: str

    @classmethod
    def from_ext_fields(cls, f: Fields) -> GetConsumerConnectionListRequestHeader:
        """Parse; raises ``HeaderFieldError``."""
        return cls(ext_str(f, "consumerGroup"))

    def to_ext_fields(self) -> dict[str, str]:
        """The extFields strings."""
        return to_ext_fields(consumerGroup=self.consumer_group)


@dataclass(slots=True, frozen=True)
class GetProducerConnectionListRequestHeader:
    """GET_PRODUCER_CONNECTION_LIST (204)."""

    producer_group: str

    @classmethod
    def from_ext_fields(cls, f: Fields) -> GetProducerConnectionListRequestHeader:
        """Parse; raises ``HeaderFieldError``."""
        return cls(ext_str(f, "producerGroup"))

    def to_ext_fields(self) -> dict[str, str]:
        """The extFields strings."""
        return to_ext_fields(producerGroup=self.producer_group)


@dataclass(slots=True, frozen=True)
class ResetOffsetRequestHeader:
    """INVOKE_BROKER_TO_RESET_OFFSET (222) and RESET_CONSUMER_CLIENT_OFFSET (220).

    ``timestamp`` -1 means each queue's max offset (``skipAccumulated``).
    """

    topic: str
    group: str
    timestamp: int
    is_force: bool = True

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> ResetOffsetRequestHeader:
        """Parse; raises ``HeaderFieldError`` (``isForce`` may be absent: false)."""
        return cls(
            ext_str(fields, "topic"),
            ext_str(fields, "group"),
            ext_long(fields, "timestamp"),
            ext_bool(fields, "isForce", False),
        )

    def to_ext_fields(self) -> dict[str, str]:
        """The extFields strings (Java's field names)."""
        return to_ext_fields(
            topic=self.topic, group=self.group, timestamp=self.timestamp, isForce=self.is_force
        )
