"""Typed headers of the broker requests and replies clients and admin tools send.

Owns: one slotted dataclass per RocketMQ 4.9 header class of the broker protocol
(``common/.../protocol/header/*.java``), each listing its fields explicitly in
``from_ext_fields`` / ``to_ext_fields``, with Java's required-field rules and the
parsing rules of ``remoting/headers.py`` (so C++ ``"0"``/``"1"`` booleans, C++
mixed string/number values and ali-ons native JSON types all read the same, the
frame decoder having turned every value into text). SEND_MESSAGE_V2 and
SEND_BATCH_MESSAGE use one-letter names (``a``..``n``) mapped onto the same
``SendMessageRequestHeader``; whether a send is a batch comes from its ``batch``
field (``m``), never from the request code.

Must not: know what a broker does with them, or use reflection.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from aiorocketmq.remoting.headers import (
    ext_bool,
    ext_int,
    ext_long,
    ext_opt_int,
    ext_opt_str,
    ext_str,
    to_ext_fields,
)

__all__ = [
    "SEND_FIELD_NAMES",
    "ConsumerSendMsgBackRequestHeader",
    "GetConsumerListByGroupRequestHeader",
    "GetEarliestMsgStoretimeRequestHeader",
    "GetEarliestMsgStoretimeResponseHeader",
    "GetMaxOffsetRequestHeader",
    "GetMinOffsetRequestHeader",
    "NotifyConsumerIdsChangedRequestHeader",
    "OffsetResponseHeader",
    "PullMessageRequestHeader",
    "PullMessageResponseHeader",
    "PullSysFlag",
    "QueryConsumerOffsetRequestHeader",
    "SearchOffsetRequestHeader",
    "SendMessageRequestHeader",
    "SendMessageResponseHeader",
    "TopicQueueRequestHeader",
    "UnregisterClientRequestHeader",
    "UpdateConsumerOffsetRequestHeader",
]

Fields = Mapping[str, str]

#: SEND_MESSAGE's long names and SEND_MESSAGE_V2's letters, in Java's order.
_SEND_V2_NAMES: dict[str, str] = {
    "producerGroup": "a",
    "topic": "b",
    "defaultTopic": "c",
    "defaultTopicQueueNums": "d",
    "queueId": "e",
    "sysFlag": "f",
    "bornTimestamp": "g",
    "flag": "h",
    "properties": "i",
    "reconsumeTimes": "j",
    "unitMode": "k",
    "maxReconsumeTimes": "l",
    "batch": "m",
    "brokerName": "n",
}
_SEND_LONG_NAMES: Final = {name: name for name in _SEND_V2_NAMES}
#: The same, as (long name, letter) pairs in Java's order.
SEND_FIELD_NAMES: Final = tuple(_SEND_V2_NAMES.items())


#: The booleans clients write (the C++ 1.2.x client: "1"/"0"), read as ``ext_bool``
#: does; other spellings go through it.
_BOOL_TEXT: Final = {"false": False, "true": True, "0": False, "1": True}


@dataclass(slots=True)
class SendMessageRequestHeader:
    """SEND_MESSAGE (10), and SEND_MESSAGE_V2 (310) / SEND_BATCH_MESSAGE (320) via ``v2``."""

    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_nums: int
    queue_id: int
    sys_flag: int
    born_timestamp: int
    flag: int
    properties: str | None = None
    reconsume_times: int | None = None
    unit_mode: bool = False
    batch: bool = False
    max_reconsume_times: int | None = None
    broker_name: str | None = None

    @classmethod
    def from_ext_fields(cls, f: Fields) -> SendMessageRequestHeader:
        """Parse the long-name form (SEND_MESSAGE, as the stock C++ client sends it)."""
        return cls._read(f, _SEND_LONG_NAMES)

    @classmethod
    def from_ext_fields_v2(cls, f: Fields) -> SendMessageRequestHeader:
        """Parse the one-letter form of SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE."""
        return cls._read(f, _SEND_V2_NAMES)

    @classmethod
    def _read(cls, f: Fields, n: Mapping[str, str]) -> SendMessageRequestHeader:
        # Every single send of every client comes through here: read the usual header
        # (plain digits, "true"/"false", the C++ client's "1"/"0") directly; anything
        # else takes the general path, which has Java's rules and error texts.
        try:
            queue_nums, queue_id = f[n["defaultTopicQueueNums"]], f[n["queueId"]]
            sys_flag, born, flag = f[n["sysFlag"]], f[n["bornTimestamp"]], f[n["flag"]]
            unit_mode = _BOOL_TEXT[f.get(n["unitMode"], "false")]
            batch = _BOOL_TEXT[f.get(n["batch"], "false")]
            reconsume = f.get(n["reconsumeTimes"])
            max_reconsume = f.get(n["maxReconsumeTimes"])
            times = "0" if reconsume is None else reconsume
            max_times = "0" if max_reconsume is None else max_reconsume
            # 1-9 ASCII digits each (an int32 that needs none of Java's other checks;
            # born: 1-18, a long), tested as one string.
            digits = queue_nums + queue_id + sys_flag + flag + times + max_times + born
            if (
                0 < len(queue_nums) < 10 and 0 < len(queue_id) < 10 and 0 < len(sys_flag) < 10
                and 0 < len(flag) < 10 and 0 < len(times) < 10 and 0 < len(max_times) < 10
                and 0 < len(born) < 19 and digits.isdigit() and digits.isascii()
            ):  # fmt: skip
                return cls(
                    f[n["producerGroup"]], f[n["topic"]], f[n["defaultTopic"]],
                    int(queue_nums), int(queue_id), int(sys_flag), int(born), int(flag),
                    f.get(n["properties"]),
                    None if reconsume is None else int(reconsume), unit_mode, batch,
                    None if max_reconsume is None else int(max_reconsume),
                    f.get(n["brokerName"]),
                )  # fmt: skip
        except KeyError:
            pass  # a required field is missing or a boolean is unusual: say which, below
        return cls._parse(f, n)

    @classmethod
    def _parse(cls, f: Fields, n: Mapping[str, str]) -> SendMessageRequestHeader:
        return cls(
            producer_group=ext_str(f, n["producerGroup"]),
            topic=ext_str(f, n["topic"]),
            default_topic=ext_str(f, n["defaultTopic"]),
            default_topic_queue_nums=ext_int(f, n["defaultTopicQueueNums"]),
            queue_id=ext_int(f, n["queueId"]),
            sys_flag=ext_int(f, n["sysFlag"]),
            born_timestamp=ext_long(f, n["bornTimestamp"]),
            flag=ext_int(f, n["flag"]),
            properties=ext_opt_str(f, n["properties"]),
            reconsume_times=ext_opt_int(f, n["reconsumeTimes"]),
            unit_mode=ext_bool(f, n["unitMode"], False),
            batch=ext_bool(f, n["batch"], False),
            max_reconsume_times=ext_opt_int(f, n["maxReconsumeTimes"]),
            broker_name=ext_opt_str(f, n["brokerName"]),
        )

    def _values(self) -> dict[str, object]:
        return {
            "producerGroup": self.producer_group,
            "topic": self.topic,
            "defaultTopic": self.default_topic,
            "defaultTopicQueueNums": self.default_topic_queue_nums,
            "queueId": self.queue_id,
            "sysFlag": self.sys_flag,
            "bornTimestamp": self.born_timestamp,
            "flag": self.flag,
            "properties": self.properties,
            "reconsumeTimes": self.reconsume_times,
            "unitMode": self.unit_mode,
            "maxReconsumeTimes": self.max_reconsume_times,
            "batch": self.batch,
            "brokerName": self.broker_name,
        }

    def to_ext_fields(self) -> dict[str, str]:
        """The long-name extFields strings."""
        return to_ext_fields(**self._values())

    def to_ext_fields_v2(self) -> dict[str, str]:
        """The one-letter extFields strings."""
        return to_ext_fields(**{_SEND_V2_NAMES[k]: v for k, v in self._values().items()})


@dataclass(slots=True)
class SendMessageResponseHeader:
    """The SEND_MESSAGE* reply: every field a string (C++ reads only JSON strings)."""

    msg_id: str
    queue_id: int
    queue_offset: int
    transaction_id: str | None = None
    msg_region: str | None = None
    trace_on: bool | None = None

    @staticmethod
    def stored_fields(msg_id: str, queue_id: int, queue_offset: int, region: str) -> dict[str, str]:
        """``to_ext_fields`` of a stored message's reply (no transaction id, trace on),
        built directly: every send's reply."""
        return {
            "msgId": msg_id,
            "queueId": str(queue_id),
            "queueOffset": str(queue_offset),
            "MSG_REGION": region,
            "TRACE_ON": "true",
        }

    @classmethod
    def from_ext_fields(cls, f: Fields) -> SendMessageResponseHeader:
        """Parse; ``MSG_REGION`` and ``TRACE_ON`` are optional."""
        # Every send's reply: the usual one (plain digits, "true"/"false") is read
        # directly; anything else goes the general way, with Java's rules and texts.
        try:
            queue_id, queue_offset = f["queueId"], f["queueOffset"]
            trace_text = f.get("TRACE_ON")
            trace_on = None if trace_text is None else _BOOL_TEXT[trace_text]
            if (
                0 < len(queue_id) < 10 and 0 < len(queue_offset) < 19
                and (queue_id + queue_offset).isdigit() and (queue_id + queue_offset).isascii()
            ):  # fmt: skip
                return cls(
                    f["msgId"], int(queue_id), int(queue_offset), f.get("transactionId"),
                    f.get("MSG_REGION"), trace_on,
                )  # fmt: skip
        except KeyError:
            pass  # a required field is missing or TRACE_ON is unusual: say which, below
        return cls._parse(f)

    @classmethod
    def _parse(cls, f: Fields) -> SendMessageResponseHeader:
        trace = ext_opt_str(f, "TRACE_ON")
        return cls(
            msg_id=ext_str(f, "msgId"),
            queue_id=ext_int(f, "queueId"),
            queue_offset=ext_long(f, "queueOffset"),
            transaction_id=ext_opt_str(f, "transactionId"),
            msg_region=ext_opt_str(f, "MSG_REGION"),
            trace_on=None if trace is None else ext_bool(f, "TRACE_ON"),
        )

    def to_ext_fields(self) -> dict[str, str]:
        """The extFields strings, in the order a Java broker writes them."""
        return to_ext_fields(
            msgId=self.msg_id,
            queueId=self.queue_id,
            queueOffset=self.queue_offset,
            transactionId=self.transaction_id,
            MSG_REGION=self.msg_region,
            TRACE_ON=self.trace_on,
        )


class PullSysFlag:
    """PULL_MESSAGE ``sysFlag`` bits (``PullSysFlag.java``)."""

    COMMIT_OFFSET = 0x1
    SUSPEND = 0x2
    SUBSCRIPTION = 0x4
    CLASS_FILTER = 0x8
    LITE_PULL = 0x10

    @staticmethod
    def clear_commit_offset(sys_flag: int) -> int:
        """``sysFlag`` without the commit-offset bit."""
        return sys_flag & ~PullSysFlag.COMMIT_OFFSET


@dataclass(slots=True)
class PullMessageRequestHeader:
    """PULL_MESSAGE (11)."""

    consumer_group: str
    topic: str
    queue_id: int
    queue_offset: int
    max_msg_nums: int
    sys_flag: int
    commit_offset: int
    suspend_timeout_millis: int
    sub_version: int
    subscription: str | None = None
    expression_type: str | None = None

    @classmethod
    def from_ext_fields(cls, f: Fields) -> PullMessageRequestHeader:
        """Parse; raises ``HeaderFieldError``."""
        return cls(
            consumer_group=ext_str(f, "consumerGroup"),
            topic=ext_str(f, "topic"),
            queue_id=ext_int(f, "queueId"),
            queue_offset=ext_long(f, "queueOffset"),
            max_msg_nums=ext_int(f, "maxMsgNums"),
            sys_flag=ext_int(f, "sysFlag"),
            commit_offset=ext_long(f, "commitOffset"),
            suspend_timeout_millis=ext_long(f, "suspendTimeoutMillis"),
            sub_version=ext_long(f, "subVersion"),
            subscription=ext_opt_str(f, "subscription"),
            expression_type=ext_opt_str(f, "expressionType"),
        )

    def to_ext_fields(self) -> dict[str, str]:
        """The extFields strings."""
        return to_ext_fields(
            consumerGroup=self.consumer_group,
            topic=self.topic,
            queueId=self.queue_id,
            queueOffset=self.queue_offset,
            maxMsgNums=self.max_msg_nums,
            sysFlag=self.sys_flag,
            commitOffset=self.commit_offset,
            suspendTimeoutMillis=self.suspend_timeout_millis,
            subscription=self.subscription,
            subVersion=self.sub_version,
            expressionType=self.expression_type,
        )

    @property
    def has_commit_offset(self) -> bool:
        """The consumer piggybacks an offset commit (bit 0x1)."""
        return bool(self.sys_flag & PullSysFlag.COMMIT_OFFSET)

    @property
    def has_suspend(self) -> bool:
        """The consumer allows long polling (bit 0x2)."""
        return bool(self.sys_flag & PullSysFlag.SUSPEND)

    @property
    def has_subscription(self) -> bool:
        """The request carries its subscription expression (bit 0x4)."""
        return bool(self.sys_flag & PullSysFlag.SUBSCRIPTION)

    @property
    def has_class_filter(self) -> bool:
        """Class filter mode (bit 0x8)."""
        return bool(self.sys_flag & PullSysFlag.CLASS_FILTER)


@dataclass(slots=True, frozen=True)
class PullMessageResponseHeader:
    """The PULL_MESSAGE reply: all four fields always present, as strings."""

    suggest_which_broker_id: int
    next_begin_offset: int
    min_offset: int
    max_offset: int

    @classmethod
    def from_ext_fields(cls, f: Fields) -> PullMessageResponseHeader:
        """Parse; raises ``HeaderFieldError``."""
        return cls(
            suggest_which_broker_id=ext_long(f, "suggestWhichBrokerId"),
            next_begin_offset=ext_long(f, "nextBeginOffset"),
            min_offset=ext_long(f, "minOffset"),
            max_offset=ext_long(f, "maxOffset"),
        )

    def to_ext_fields(self) -> dict[str, str]:
        """The extFields strings, in the order a Java broker writes them."""
        return to_ext_fields(
            suggestWhichBrokerId=self.suggest_which_broker_id,
            minOffset=self.min_offset,
            maxOffset=self.max_offset,
            nextBeginOffset=self.next_begin_offset,
        )


@dataclass(slots=True, frozen=True)
class QueryConsumerOffsetRequestHeader:
    """QUERY_CONSUMER_OFFSET (14)."""

    consumer_group: str
    topic: str
    queue_id: int

    @classmethod
    def from_ext_fields(cls, f: Fields) -> QueryConsumerOffsetRequestHeader:
        """Parse; raises ``HeaderFieldError``."""
        return cls(ext_str(f, "consumerGroup"), ext_str(f, "topic"), ext_int(f, "queueId"))

    def to_ext_fields(self) -> dict[str, str]:
        """The extFields strings."""
        return to_ext_fields(
            consumerGroup=self.consumer_group, topic=self.topic, queueId=self.queue_id
        )


@dataclass(slots=True, frozen=True)
class UpdateConsumerOffsetRequestHeader:
    """UPDATE_CONSUMER_OFFSET (15). A negative ``commit_offset`` is to be ignored."""

    consumer_group: str
    topic: str
    queue_id: int
    commit_offset: int

    @classmethod
    def from_ext_fields(cls, f: Fields) -> UpdateConsumerOffsetRequestHeader:
        """Parse; raises ``HeaderFieldError``."""
        return cls(
            ext_str(f, "consumerGroup"),
            ext_str(f, "topic"),
            ext_int(f, "queueId"),
            ext_long(f, "commitOffset"),
        )

    def to_ext_fields(self) -> dict[str, str]:
        """The extFields strings."""
        return to_ext_fields(
            consumerGroup=self.consumer_group,
            topic=self.topic,
            queueId=self.queue_id,
            commitOffset=self.commit_offset,
        )


@dataclass(slots=True, frozen=True)
class OffsetResponseHeader:
    """``offset`` replies: QUERY_CONSUMER_OFFSET, GET_MAX/MIN_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP."""

    offset: int

    @classmethod
    def from_ext_fields(cls, f: Fields) -> OffsetResponseHeader:
        """Parse; raises ``HeaderFieldError``."""
        return cls(ext_long(f, "offset"))

    def to_ext_fields(self) -> dict[str, str]:
        """The extFields strings."""
        return to_ext_fields(offset=self.offset)


@dataclass(slots=True, frozen=True)
class TopicQueueRequestHeader:
    """GET_MAX_OFFSET (30), GET_MIN_OFFSET (31), GET_EARLIEST_MSG_STORETIME (32)."""

    topic: str
    queue_id: int

    @classmethod
    def from_ext_fields(cls, f: Fields) -> TopicQueueRequestHeader:
        """Parse; raises ``HeaderFieldError``."""
        return cls(ext_str(f, "topic"), ext_int(f, "queueId"))

    def to_ext_fields(self) -> dict[str, str]:
        """The extFields strings."""
        return to_ext_fields(topic=self.topic, queueId=self.queue_id)


#: Java has one class per code with the same two fields.
GetMaxOffsetRequestHeader = TopicQueueRequestHeader
GetMinOffsetRequestHeader = TopicQueueRequestHeader
GetEarliestMsgStoretimeRequestHeader = TopicQueueRequestHeader


@dataclass(slots=True, frozen=True)
class GetEarliestMsgStoretimeResponseHeader:
    """GET_EARLIEST_MSG_STORETIME's reply."""

    timestamp: int

    @classmethod
    def from_ext_fields(cls, f: Fields) -> GetEarliestMsgStoretimeResponseHeader:
        """Parse; raises ``HeaderFieldError``."""
        return cls(ext_long(f, "timestamp"))

    def to_ext_fields(self) -> dict[str, str]:
        """The extFields strings."""
        return to_ext_fields(timestamp=self.timestamp)


@dataclass(slots=True, frozen=True)
class SearchOffsetRequestHeader:
    """SEARCH_OFFSET_BY_TIMESTAMP (29)."""

    topic: str
    queue_id: int
    timestamp: int

    @classmethod
    def from_ext_fields(cls, f: Fields) -> SearchOffsetRequestHeader:
        """Parse; raises ``HeaderFieldError``."""
        return cls(ext_str(f, "topic"), ext_int(f, "queueId"), ext_long(f, "timestamp"))

    def to_ext_fields(self) -> dict[str, str]:
        """The extFields strings."""
        return to_ext_fields(topic=self.topic, queueId=self.queue_id, timestamp=self.timestamp)


@dataclass(slots=True, frozen=True)
class ConsumerSendMsgBackRequestHeader:
    """CONSUMER_SEND_MSG_BACK (36). C++ sends only group, offset and delayLevel."""

    offset: int
    group: str
    delay_level: int
    origin_msg_id: str | None = None
    origin_topic: str | None = None
    unit_mode: bool = False
    max_reconsume_times: int | None = None

    @classmethod
    def from_ext_fields(cls, f: Fields) -> ConsumerSendMsgBackRequestHeader:
        """Parse; raises ``HeaderFieldError``."""
        return cls(
            offset=ext_long(f, "offset"),
            group=ext_str(f, "group"),
            delay_level=ext_int(f, "delayLevel"),
            origin_msg_id=ext_opt_str(f, "originMsgId"),
            origin_topic=ext_opt_str(f, "originTopic"),
            unit_mode=ext_bool(f, "unitMode", False),
            max_reconsume_times=ext_opt_int(f, "maxReconsumeTimes"),
        )

    def to_ext_fields(self) -> dict[str, str]:
        """The extFields strings."""
        return to_ext_fields(
            offset=self.offset,
            group=self.group,
            delayLevel=self.delay_level,
            originMsgId=self.origin_msg_id,
            originTopic=self.origin_topic,
            unitMode=self.unit_mode,
            maxReconsumeTimes=self.max_reconsume_times,
        )


@dataclass(slots=True, frozen=True)
class UnregisterClientRequestHeader:
    """UNREGISTER_CLIENT (35): ``clientID`` (that spelling) and one of the groups."""

    client_id: str
    producer_group: str | None = None
    consumer_group: str | None = None

    @classmethod
    def from_ext_fields(cls, f: Fields) -> UnregisterClientRequestHeader:
        """Parse; an empty group (C++ sends ``consumerGroup: ""``) reads as absent."""
        return cls(
            client_id=ext_str(f, "clientID"),
            producer_group=ext_opt_str(f, "producerGroup") or None,
            consumer_group=ext_opt_str(f, "consumerGroup") or None,
        )

    def to_ext_fields(self) -> dict[str, str]:
        """The extFields strings."""
        return to_ext_fields(
            clientID=self.client_id,
            producerGroup=self.producer_group,
            consumerGroup=self.consumer_group,
        )


@dataclass(slots=True, frozen=True)
class GetConsumerListByGroupRequestHeader:
    """GET_CONSUMER_LIST_BY_GROUP (38)."""

    consumer_group: str

    @classmethod
    def from_ext_fields(cls, f: Fields) -> GetConsumerListByGroupRequestHeader:
        """Parse; raises ``HeaderFieldError``."""
        return cls(ext_str(f, "consumerGroup"))

    def to_ext_fields(self) -> dict[str, str]:
        """The extFields strings."""
        return to_ext_fields(consumerGroup=self.consumer_group)


@dataclass(slots=True, frozen=True)
class NotifyConsumerIdsChangedRequestHeader:
    """NOTIFY_CONSUMER_IDS_CHANGED (40), broker to client, oneway."""

    consumer_group: str

    @classmethod
    def from_ext_fields(cls, f: Fields) -> NotifyConsumerIdsChangedRequestHeader:
        """Parse; raises ``HeaderFieldError``."""
        return cls(ext_str(f, "consumerGroup"))

    def to_ext_fields(self) -> dict[str, str]:
        """The extFields strings."""
        return to_ext_fields(consumerGroup=self.consumer_group)
