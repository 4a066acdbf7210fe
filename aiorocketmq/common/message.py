"""Message value objects: ``Message``, ``MessageExt`` and ``MessageQueue``.

Owns: the in-memory shape of a message as a producer builds it (``Message``), as the
store and consumers see it with every stored field (``MessageExt``), and the
``(topic, brokerName, queueId)`` triple naming one queue (``MessageQueue``), with the
convenience accessors RocketMQ's ``Message`` has over well-known properties.

Must not: encode or decode bytes (``properties`` and ``message_codec`` do), do I/O,
or validate topics (``validators`` does; a message may be built before it is checked).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from aiorocketmq.common.errors import LocalProtocolError, RemoteProtocolError
from aiorocketmq.common.properties import SYSTEM_PROPERTY_NAMES, MessageConst

BytesLike: TypeAlias = bytes | bytearray | memoryview
"""A message body: ``bytes``, or a zero-copy view when a caller asked for one."""

_C = MessageConst

# Java's Integer.parseInt: optional sign, ASCII digits, nothing else. Python's int()
# would also take spaces, underscores and non-ASCII digits.
_JAVA_INT_RE = re.compile(r"[+-]?[0-9]+")


def _parse_java_int(text: str) -> int | None:
    if _JAVA_INT_RE.fullmatch(text) is None:
        return None
    # int() raises ValueError past 4,300 digits (leading zeros count); Java takes any
    # number of leading zeros, and no Java int has 11 significant digits.
    digits = text.lstrip("+-").lstrip("0") or "0"
    if len(digits) > 10:
        return None
    return -int(digits) if text[:1] == "-" else int(digits)


@dataclass(slots=True, init=False)
class Message:
    """A message as a producer sends it.

    ``Message(topic, body, tags="TagA", keys=["order-1"])`` reads as Java's
    ``new Message(topic, tags, keys, body)``; the positional order
    (topic, body, flag, properties, transaction_id) is unchanged.

    Attributes:
        topic: destination topic.
        body: payload bytes (compressed only on the wire/disk, never here by default).
        flag: the user's int flag, stored as is.
        properties: name -> value; system names are in ``MessageConst``.
        transaction_id: set for transactional messages (from UNIQ_KEY), else None.
    """

    topic: str
    body: BytesLike = b""
    flag: int = 0
    properties: dict[str, str] = field(default_factory=dict)
    transaction_id: str | None = None

    def __init__(
        self,
        topic: str,
        body: BytesLike = b"",
        flag: int = 0,
        properties: dict[str, str] | None = None,
        transaction_id: str | None = None,
        *,
        tags: str | None = None,
        keys: str | Iterable[str] | None = None,
    ) -> None:
        """Build a message.

        Args:
            topic: destination topic (checked when sent, not here).
            body: the payload: ``bytes``, ``bytearray`` or ``memoryview``.
            flag: the user's int flag.
            properties: used as given (not copied) unless ``tags`` or ``keys`` are
                set too: then a copy gets them, so one dict shared by many
                messages is never changed behind their backs.
            transaction_id: transactional messages only.
            tags: the ``TAGS`` property (one tag).
            keys: the ``KEYS`` property: one string (space-separated keys, as
                Java's) or an iterable of keys.

        Raises:
            TypeError: ``body`` is not bytes-like (a ``str`` must be encoded
                first), or ``tags`` is not a string.
        """
        if not isinstance(body, bytes | bytearray | memoryview):
            raise TypeError(
                f"Message body must be bytes, bytearray or memoryview, not "
                f"{type(body).__name__} (encode a str first, e.g. text.encode())"
            )
        if properties is None:
            properties = {}
        elif tags is not None or keys is not None:
            properties = dict(properties)
        self.topic = topic
        self.body = body
        self.flag = flag
        self.properties = properties
        self.transaction_id = transaction_id
        if tags is not None:
            if not isinstance(tags, str):
                raise TypeError(f"tags must be a str, not {type(tags).__name__}")
            self._set_or_clear(_C.PROPERTY_TAGS, tags)
        if keys is not None:
            self.keys = keys

    def get_property(self, name: str) -> str | None:
        """Return a property value, or None."""
        return self.properties.get(name)

    def put_property(self, name: str, value: str) -> None:
        """Set any property, system names included (Java's package-private putProperty)."""
        self.properties[name] = value

    def clear_property(self, name: str) -> None:
        """Remove a property if present."""
        self.properties.pop(name, None)

    def put_user_property(self, name: str, value: str) -> None:
        """Set a user property, as Java's ``Message.putUserProperty``.

        Raises:
            LocalProtocolError: ``name`` is reserved for the system, or the name or
                value is blank.
        """
        if name in SYSTEM_PROPERTY_NAMES:
            raise LocalProtocolError(
                f"The Property<{name}> is used by system, input another please"
            )
        if not value or value.isspace() or not name or name.isspace():
            raise LocalProtocolError(
                "The name or value of property can not be null or blank string!"
            )
        self.properties[name] = value

    @property
    def tags(self) -> str | None:
        """The ``TAGS`` property (one tag; ``||`` only appears in subscriptions)."""
        return self.properties.get(_C.PROPERTY_TAGS)

    @tags.setter
    def tags(self, value: str | None) -> None:
        self._set_or_clear(_C.PROPERTY_TAGS, value)

    @property
    def keys(self) -> list[str]:
        """The user keys: ``KEYS`` split on spaces, empty items dropped."""
        raw = self.properties.get(_C.PROPERTY_KEYS)
        if not raw:
            return []
        return list(filter(None, raw.split(_C.KEY_SEPARATOR)))

    @keys.setter
    def keys(self, value: str | Iterable[str]) -> None:
        text = value if isinstance(value, str) else _C.KEY_SEPARATOR.join(value)
        self._set_or_clear(_C.PROPERTY_KEYS, text)

    @property
    def delay_time_level(self) -> int:
        """The ``DELAY`` level, 0 when absent.

        Raises:
            RemoteProtocolError: the property is not an integer (Java throws
                NumberFormatException; properties normally come from a peer).
        """
        raw = self.properties.get(_C.PROPERTY_DELAY_TIME_LEVEL)
        if raw is None:
            return 0
        level = _parse_java_int(raw)
        if level is None:
            raise RemoteProtocolError(f"DELAY property is not an integer: {raw!r}")
        return level

    @delay_time_level.setter
    def delay_time_level(self, level: int) -> None:
        self.properties[_C.PROPERTY_DELAY_TIME_LEVEL] = str(level)

    @property
    def wait_store_msg_ok(self) -> bool:
        """``WAIT``: whether the sender waits for the store; true when absent, as Java."""
        raw = self.properties.get(_C.PROPERTY_WAIT_STORE_MSG_OK)
        # Java's Boolean.parseBoolean: only "true", in any case, is true.
        return raw is None or raw.lower() == "true"

    @wait_store_msg_ok.setter
    def wait_store_msg_ok(self, value: bool) -> None:
        self.properties[_C.PROPERTY_WAIT_STORE_MSG_OK] = "true" if value else "false"

    @property
    def buyer_id(self) -> str | None:
        """The ``BUYER_ID`` property."""
        return self.properties.get(_C.PROPERTY_BUYER_ID)

    @buyer_id.setter
    def buyer_id(self, value: str | None) -> None:
        self._set_or_clear(_C.PROPERTY_BUYER_ID, value)

    @property
    def uniq_key(self) -> str | None:
        """The client-made id (``UNIQ_KEY``), or None."""
        return self.properties.get(_C.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)

    def _set_or_clear(self, name: str, value: str | None) -> None:
        if value:
            self.properties[name] = value
        else:
            self.properties.pop(name, None)


@dataclass(slots=True)
class MessageExt(Message):
    """A stored message with every CommitLog field (see ``message_codec``).

    Attributes:
        queue_id: queue within the topic.
        store_size: TOTALSIZE of the record in bytes.
        queue_offset: index of the message in its ConsumeQueue.
        sys_flag: ``MessageSysFlag`` bits as stored.
        born_timestamp: producer clock, ms since the epoch.
        born_host: producer address ``(ip, port)``.
        store_timestamp: broker clock, ms since the epoch.
        store_host: broker address ``(ip, port)``.
        msg_id: the offset message id (``offsetMsgId``) built from store host + offset.
        commit_log_offset: physical offset of the record in the CommitLog.
        body_crc: ``crc32(body) & 0x7FFFFFFF`` over the stored body.
        reconsume_times: retry count.
        prepared_transaction_offset: half-message offset for transaction commits, else 0.
    """

    queue_id: int = 0
    store_size: int = 0
    queue_offset: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: tuple[str, int] = ("0.0.0.0", 0)
    store_timestamp: int = 0
    store_host: tuple[str, int] = ("0.0.0.0", 0)
    msg_id: str = ""
    commit_log_offset: int = 0
    body_crc: int = 0
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0


@dataclass(frozen=True, slots=True, order=True)
class MessageQueue:
    """One queue of a topic on one broker; ordered by (topic, broker_name, queue_id).

    Java compares names by UTF-16 units and we by code points; names are ASCII by the
    topic rules, so the orders agree.
    """

    topic: str
    broker_name: str
    queue_id: int

    def to_json_dict(self) -> dict[str, Any]:
        """Return the JSON shape RocketMQ bodies use (lock/unlock, offsets, ...)."""
        return {"topic": self.topic, "brokerName": self.broker_name, "queueId": self.queue_id}

    @classmethod
    def from_json_dict(cls, data: Mapping[str, Any]) -> MessageQueue:
        """Build from ``{"topic", "brokerName", "queueId"}``.

        ``queueId`` may be a JSON number or a decimal string (clients differ).

        Raises:
            RemoteProtocolError: a key is missing or has the wrong type.
        """
        try:
            topic = data["topic"]
            broker_name = data["brokerName"]
            raw_queue_id = data["queueId"]
        except (KeyError, TypeError) as exc:
            raise RemoteProtocolError(f"MessageQueue JSON lacks {exc}") from None
        if not isinstance(topic, str) or not isinstance(broker_name, str):
            raise RemoteProtocolError("MessageQueue topic and brokerName must be strings")
        queue_id: int | None = None
        if isinstance(raw_queue_id, int) and not isinstance(raw_queue_id, bool):
            queue_id = raw_queue_id
        elif isinstance(raw_queue_id, str):
            queue_id = _parse_java_int(raw_queue_id)
        if queue_id is None:
            raise RemoteProtocolError(f"MessageQueue queueId is not an integer: {raw_queue_id!r}")
        return cls(topic, broker_name, queue_id)
