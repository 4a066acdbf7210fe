"""JSON bodies of the client-management protocol: heartbeats, consumer lists, locks.

Owns: ``HeartbeatData`` / ``ProducerData`` / ``ConsumerData`` / ``SubscriptionData``
read from both stock shapes (C++: enum ordinals, ``subVersion`` as text, a wrong
``codeSet``, absent sets, a trailing ``\\n``; ali-ons and Java: enum names, numbers),
``build_subscription_data`` (``FilterAPI.buildSubscriptionData``), ``ConsumerListBody``
and the ``LockBatchRequestBody`` / ``LockBatchResponseBody`` / ``UnlockBatchRequestBody``
bodies (C++ spells the id ``clientId`` there, ``clientID`` in heartbeats), the admin
``ProducerConnection`` / ``ConsumerConnection`` bodies, plus the
``ConsumeType`` / ``MessageModel`` / ``ConsumeFromWhere`` enums. Writers emit the
fastjson shape a Java broker sends (enum names, sorted keys).

Must not: do I/O, or trust a client's ``codeSet``: the tag hash codes are ALWAYS
recomputed from ``tagsSet`` (or the subscription expression) with Java's
``String.hashCode`` (``tests/vectors/README.md`` quirks 7-9).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from aiorocketmq.common import fastjson as fj
from aiorocketmq.common.errors import RemoteProtocolError
from aiorocketmq.common.message import MessageQueue
from aiorocketmq.common.tag_hash import java_string_hash

__all__ = [
    "EXPRESSION_TYPE_TAG",
    "SUB_ALL",
    "Connection",
    "ConsumeFromWhere",
    "ConsumeType",
    "ConsumerConnection",
    "ConsumerData",
    "ConsumerListBody",
    "HeartbeatData",
    "LockBatchRequestBody",
    "LockBatchResponseBody",
    "MessageModel",
    "ProducerConnection",
    "ProducerData",
    "SubscriptionData",
    "UnlockBatchRequestBody",
    "build_subscription_data",
    "parse_tags",
]

#: ``SubscriptionData.SUB_ALL``: every tag.
SUB_ALL = "*"
#: ``ExpressionType.TAG``, the default filter type.
EXPRESSION_TYPE_TAG = "TAG"


E = TypeVar("E", bound=enum.IntEnum)


class ConsumeType(enum.IntEnum):
    """``ConsumeType``: values are Java's ordinals (what C++ sends)."""

    CONSUME_ACTIVELY = 0
    CONSUME_PASSIVELY = 1


class MessageModel(enum.IntEnum):
    """``MessageModel``: values are Java's ordinals."""

    BROADCASTING = 0
    CLUSTERING = 1


class ConsumeFromWhere(enum.IntEnum):
    """``ConsumeFromWhere``: values are Java's ordinals (4.9.8 order)."""

    CONSUME_FROM_LAST_OFFSET = 0
    CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST = 1
    CONSUME_FROM_MIN_OFFSET = 2
    CONSUME_FROM_MAX_OFFSET = 3
    CONSUME_FROM_FIRST_OFFSET = 4
    CONSUME_FROM_TIMESTAMP = 5


def _enum(kind: type[E], value: object, default: E) -> E:
    """An enum from its name (Java, ali-ons) or ordinal (C++, as number or text)."""
    if value is None:
        return default
    try:
        if isinstance(value, str) and not value.strip().lstrip("-").isdigit():
            return kind[value.strip()]
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise TypeError(value)
        return kind(int(value))
    except (KeyError, ValueError, TypeError):
        raise RemoteProtocolError(f"{kind.__name__}: unknown value {value!r}") from None


def _java_trim(text: str) -> str:
    """``String.trim``: strips characters <= U+0020 only."""
    start, end = 0, len(text)
    while start < end and text[start] <= " ":
        start += 1
    while end > start and text[end - 1] <= " ":
        end -= 1
    return text[start:end]


def parse_tags(expression: str | None) -> tuple[str, ...]:
    """The tags of a subscription expression: split on ``||``, trimmed, no empties.

    ``None``, ``""`` and ``"*"`` give ``()``, meaning every tag.
    """
    if expression is None or expression == SUB_ALL or not expression:
        return ()
    out: dict[str, None] = {}
    for part in expression.split("||"):
        tag = _java_trim(part)
        if tag:
            out[tag] = None
    return tuple(out)


@dataclass(slots=True)
class SubscriptionData:
    """One topic's subscription. ``code_set`` is derived, never taken from the wire.

    An empty ``tags_set`` with ``sub_string`` ``"*"`` matches every message.
    """

    topic: str
    sub_string: str = SUB_ALL
    tags_set: tuple[str, ...] = ()
    sub_version: int = 0
    expression_type: str = EXPRESSION_TYPE_TAG
    class_filter_mode: bool = False
    code_set: frozenset[int] = field(init=False)

    def __post_init__(self) -> None:
        self.code_set = frozenset(java_string_hash(tag) for tag in self.tags_set)

    @property
    def matches_all(self) -> bool:
        """The subscription takes every tag (``*`` or no tags)."""
        return self.sub_string == SUB_ALL or not self.tags_set

    def matches_tags_code(self, tags_code: int) -> bool:
        """``ExpressionMessageFilter.isMatchedByConsumeQueue`` for TAG subscriptions."""
        return self.matches_all or tags_code in self.code_set

    def same_filter(self, other: SubscriptionData) -> bool:
        """Whether two subscriptions select the same messages (ignores ``sub_version``)."""
        return (
            self.topic == other.topic
            and self.matches_all == other.matches_all
            and self.code_set == other.code_set
            and set(self.tags_set) == set(other.tags_set)
            and self.expression_type == other.expression_type
            and self.class_filter_mode == other.class_filter_mode
        )

    @classmethod
    def from_json_dict(cls, data: object) -> SubscriptionData:
        """Read either client's shape; the code set is recomputed from the tags."""
        d = fj.as_dict(data, "SubscriptionData")
        sub_string = fj.get_str(d, "subString", SUB_ALL) or SUB_ALL
        tags = tuple(t for t in fj.get_str_list(d.get("tagsSet"), "tagsSet") if t)
        if sub_string != SUB_ALL and not tags:
            tags = parse_tags(sub_string)
        return cls(
            topic=fj.get_str(d, "topic"),
            sub_string=sub_string,
            tags_set=tags,
            sub_version=fj.get_int(d, "subVersion", 0),
            expression_type=fj.get_str(d, "expressionType", EXPRESSION_TYPE_TAG),
            class_filter_mode=fj.get_bool(d, "classFilterMode", False),
        )

    def to_json_dict(self) -> dict[str, Any]:
        """fastjson's shape (sorted keys)."""
        return {
            "classFilterMode": self.class_filter_mode,
            "codeSet": sorted(self.code_set),
            "expressionType": self.expression_type,
            "subString": self.sub_string,
            "subVersion": self.sub_version,
            "tagsSet": list(self.tags_set),
            "topic": self.topic,
        }


def build_subscription_data(
    topic: str, sub_string: str | None, sub_version: int = 0
) -> SubscriptionData:
    """``FilterAPI.buildSubscriptionData``: ``None``/empty/``*`` means every tag."""
    if not sub_string or sub_string == SUB_ALL:
        return SubscriptionData(topic, SUB_ALL, (), sub_version)
    return SubscriptionData(topic, sub_string, parse_tags(sub_string), sub_version)


@dataclass(slots=True, frozen=True)
class ProducerData:
    """A producer group a client belongs to."""

    group_name: str

    @classmethod
    def from_json_dict(cls, data: object) -> ProducerData:
        """Read ``{"groupName": ...}``."""
        return cls(fj.get_str(fj.as_dict(data, "ProducerData"), "groupName"))

    def to_json_dict(self) -> dict[str, Any]:
        """fastjson's shape."""
        return {"groupName": self.group_name}


@dataclass(slots=True)
class ConsumerData:
    """A consumer group a client belongs to, with its subscriptions."""

    group_name: str
    consume_type: ConsumeType = ConsumeType.CONSUME_PASSIVELY
    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    subscriptions: list[SubscriptionData] = field(default_factory=list)
    unit_mode: bool = False

    @classmethod
    def from_json_dict(cls, data: object) -> ConsumerData:
        """Read enum names or ordinals; absent sets read as empty."""
        d = fj.as_dict(data, "ConsumerData")
        subs = fj.as_list(d.get("subscriptionDataSet"), "subscriptionDataSet")
        return cls(
            group_name=fj.get_str(d, "groupName"),
            consume_type=_enum(ConsumeType, d.get("consumeType"), ConsumeType.CONSUME_PASSIVELY),
            message_model=_enum(MessageModel, d.get("messageModel"), MessageModel.CLUSTERING),
            consume_from_where=_enum(
                ConsumeFromWhere,
                d.get("consumeFromWhere"),
                ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
            ),
            subscriptions=[SubscriptionData.from_json_dict(s) for s in subs],
            unit_mode=fj.get_bool(d, "unitMode", False),
        )

    def to_json_dict(self) -> dict[str, Any]:
        """fastjson's shape: enum names, sorted keys."""
        return {
            "consumeFromWhere": self.consume_from_where.name,
            "consumeType": self.consume_type.name,
            "groupName": self.group_name,
            "messageModel": self.message_model.name,
            "subscriptionDataSet": [s.to_json_dict() for s in self.subscriptions],
            "unitMode": self.unit_mode,
        }


@dataclass(slots=True)
class HeartbeatData:
    """HEART_BEAT's body."""

    client_id: str
    producers: list[ProducerData] = field(default_factory=list)
    consumers: list[ConsumerData] = field(default_factory=list)

    @classmethod
    def decode(cls, body: bytes | bytearray | memoryview) -> HeartbeatData:
        """Parse a body (C++'s trailing newline is fine). Raises ``RemoteProtocolError``."""
        d = fj.loads_object(body, "HeartbeatData")
        return cls(
            client_id=fj.get_str(d, "clientID"),
            producers=[
                ProducerData.from_json_dict(p)
                for p in fj.as_list(d.get("producerDataSet"), "producerDataSet")
            ],
            consumers=[
                ConsumerData.from_json_dict(c)
                for c in fj.as_list(d.get("consumerDataSet"), "consumerDataSet")
            ],
        )

    def encode(self) -> bytes:
        """The body bytes (fastjson's shape)."""
        return fj.dumps_bytes(
            {
                "clientID": self.client_id,
                "consumerDataSet": [c.to_json_dict() for c in self.consumers],
                "producerDataSet": [p.to_json_dict() for p in self.producers],
            }
        )


@dataclass(slots=True)
class ConsumerListBody:
    """GET_CONSUMER_LIST_BY_GROUP's reply body."""

    consumer_id_list: list[str] = field(default_factory=list)

    @classmethod
    def decode(cls, body: bytes | bytearray | memoryview) -> ConsumerListBody:
        """Parse a body. Raises ``RemoteProtocolError``."""
        d = fj.loads_object(body, "ConsumerListBody")
        return cls(fj.get_str_list(d.get("consumerIdList"), "consumerIdList"))

    def encode(self) -> bytes:
        """The body bytes."""
        return fj.dumps_bytes({"consumerIdList": list(self.consumer_id_list)})


def _mq_set(value: object, what: str) -> list[MessageQueue]:
    out: dict[MessageQueue, None] = {}
    for item in fj.as_list(value, what):
        out[MessageQueue.from_json_dict(fj.as_dict(item, what))] = None
    return list(out)


def _mq_json(mqs: Iterable[MessageQueue]) -> list[dict[str, Any]]:
    return [{"brokerName": mq.broker_name, "queueId": mq.queue_id, "topic": mq.topic} for mq in mqs]


@dataclass(slots=True)
class LockBatchRequestBody:
    """LOCK_BATCH_MQ's body (``clientId``; ``clientID`` accepted too)."""

    consumer_group: str
    client_id: str
    mq_set: list[MessageQueue] = field(default_factory=list)

    @classmethod
    def decode(cls, body: bytes | bytearray | memoryview) -> LockBatchRequestBody:
        """Parse a body. Raises ``RemoteProtocolError``."""
        d = fj.loads_object(body, cls.__name__)
        client_id = fj.get_opt_str(d, "clientId") or fj.get_str(d, "clientID")
        return cls(fj.get_str(d, "consumerGroup"), client_id, _mq_set(d.get("mqSet"), "mqSet"))

    def encode(self) -> bytes:
        """The body bytes (sorted keys)."""
        return fj.dumps_bytes(
            {
                "clientId": self.client_id,
                "consumerGroup": self.consumer_group,
                "mqSet": _mq_json(self.mq_set),
            }
        )


class UnlockBatchRequestBody(LockBatchRequestBody):
    """UNLOCK_BATCH_MQ's body: the same fields as the lock request."""

    __slots__ = ()


@dataclass(slots=True)
class LockBatchResponseBody:
    """LOCK_BATCH_MQ's reply body: the queues now locked by the requester."""

    lock_ok_mq_set: list[MessageQueue] = field(default_factory=list)

    @classmethod
    def decode(cls, body: bytes | bytearray | memoryview) -> LockBatchResponseBody:
        """Parse a body. Raises ``RemoteProtocolError``."""
        d = fj.loads_object(body, "LockBatchResponseBody")
        return cls(_mq_set(d.get("lockOKMQSet"), "lockOKMQSet"))

    def encode(self) -> bytes:
        """The body bytes."""
        return fj.dumps_bytes({"lockOKMQSet": _mq_json(self.lock_ok_mq_set)})


@dataclass(slots=True, frozen=True)
class Connection:
    """One client connection in admin listings (``Connection``)."""

    client_id: str
    client_addr: str
    #: ``LanguageCode`` name, e.g. ``"CPP"``.
    language: str
    version: int

    @classmethod
    def from_json_dict(cls, data: object) -> Connection:
        """Read fastjson's shape."""
        d = fj.as_dict(data, "Connection")
        return cls(
            fj.get_str(d, "clientId"),
            fj.get_str(d, "clientAddr"),
            fj.get_str(d, "language", "JAVA"),
            fj.get_int(d, "version", 0),
        )

    def to_json_dict(self) -> dict[str, Any]:
        """fastjson's shape (sorted keys)."""
        return {
            "clientAddr": self.client_addr,
            "clientId": self.client_id,
            "language": self.language,
            "version": self.version,
        }


@dataclass(slots=True)
class ProducerConnection:
    """GET_PRODUCER_CONNECTION_LIST's reply body."""

    connections: list[Connection] = field(default_factory=list)

    @classmethod
    def decode(cls, body: bytes | bytearray | memoryview) -> ProducerConnection:
        """Parse a body. Raises ``RemoteProtocolError``."""
        d = fj.loads_object(body, "ProducerConnection")
        items = fj.as_list(d.get("connectionSet"), "connectionSet")
        return cls([Connection.from_json_dict(c) for c in items])

    def encode(self) -> bytes:
        """The body bytes."""
        return fj.dumps_bytes({"connectionSet": [c.to_json_dict() for c in self.connections]})


@dataclass(slots=True)
class ConsumerConnection:
    """GET_CONSUMER_CONNECTION_LIST's reply body."""

    connections: list[Connection] = field(default_factory=list)
    subscriptions: dict[str, SubscriptionData] = field(default_factory=dict)
    consume_type: ConsumeType = ConsumeType.CONSUME_PASSIVELY
    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET

    @classmethod
    def decode(cls, body: bytes | bytearray | memoryview) -> ConsumerConnection:
        """Parse a body. Raises ``RemoteProtocolError``."""
        d = fj.loads_object(body, "ConsumerConnection")
        table = fj.as_dict(d.get("subscriptionTable") or {}, "subscriptionTable")
        return cls(
            [
                Connection.from_json_dict(c)
                for c in fj.as_list(d.get("connectionSet"), "connectionSet")
            ],
            {topic: SubscriptionData.from_json_dict(s) for topic, s in table.items()},
            _enum(ConsumeType, d.get("consumeType"), ConsumeType.CONSUME_PASSIVELY),
            _enum(MessageModel, d.get("messageModel"), MessageModel.CLUSTERING),
            _enum(
                ConsumeFromWhere,
                d.get("consumeFromWhere"),
                ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
            ),
        )

    def encode(self) -> bytes:
        """The body bytes: fastjson's shape, enum names."""
        return fj.dumps_bytes(
            {
                "connectionSet": [c.to_json_dict() for c in self.connections],
                "consumeFromWhere": self.consume_from_where.name,
                "consumeType": self.consume_type.name,
                "messageModel": self.message_model.name,
                "subscriptionTable": {t: s.to_json_dict() for t, s in self.subscriptions.items()},
            }
        )
