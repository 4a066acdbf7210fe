"""What the broker hands the store to put: one message, or one batch of one queue.

Owns: ``MessageExtBrokerInner`` (a message the send processor has fully decided:
topic, queue, properties string, hosts, flags) and ``MessageExtBatch`` (a
SEND_BATCH_MESSAGE body for one queue plus the batch-level properties), with the
two property readings the put path needs (``WAIT`` and ``DELAY``).

Must not: encode records (``common.message_codec`` does, in the put path), validate
sizes (the put path answers MESSAGE_ILLEGAL), or read clocks: the store sets the
store timestamp itself, when it appends.

Two property forms. ``properties`` is the map, ``properties_string`` what is
stored. They may differ on purpose: from 4.9.1 the broker strips ``WAIT`` from the
stored string of ordinary sends but keeps it in the map, and a delayed message's
string is re-serialised from the map (so it carries ``WAIT`` again), exactly as
RocketMQ does (specs/store.md §3.5, §3.8).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from aiorocketmq.common.message import BytesLike
from aiorocketmq.common.properties import MessageConst, properties_to_string

__all__ = ["MessageExtBatch", "MessageExtBrokerInner", "parse_delay_level", "wait_store_msg_ok"]

_LOCAL = ("127.0.0.1", 0)


def wait_store_msg_ok(properties: dict[str, str]) -> bool:
    """``WAIT``: true when absent; only "true" (any case) is true, as Java's parseBoolean."""
    raw = properties.get(MessageConst.PROPERTY_WAIT_STORE_MSG_OK)
    return raw is None or raw.lower() == "true"


def parse_delay_level(properties: dict[str, str]) -> int | None:
    """``DELAY`` as an int: 0 when absent, None when it is not a Java int."""
    raw = properties.get(MessageConst.PROPERTY_DELAY_TIME_LEVEL)
    if raw is None:
        return 0
    text = raw[1:] if raw[:1] in "+-" else raw
    # int() raises ValueError past 4,300 digits (leading zeros count); Java takes any
    # number of leading zeros, and no Java int has 11 significant digits.
    digits = text.lstrip("0") or "0"
    if not (text.isascii() and text.isdigit()) or len(digits) > 10:
        return None
    return -int(digits) if raw[:1] == "-" else int(digits)


@dataclass(slots=True)
class MessageExtBrokerInner:
    """One message to store (``MessageExtBrokerInner``).

    Attributes:
        topic: destination topic (a delayed message is redirected by the store).
        queue_id: destination queue.
        body: the body as stored (already compressed if ``sys_flag & 1``).
        properties: the property map (``WAIT`` and ``DELAY`` are read from it).
        properties_string: the stored properties; None serialises ``properties``.
        flag: the producer's int flag.
        sys_flag: ``MessageSysFlag`` bits (transaction type; host widths are set
            from the addresses when encoding).
        born_timestamp: producer clock (ms).
        born_host: producer ``(ip, port)``.
        store_host: this broker's ``(brokerIP1, listenPort)``; goes into msgIds.
        reconsume_times: retry count.
        prepared_transaction_offset: half-message offset of a transaction commit.
        tags_code: the broker's tagsCode (kept for parity; the dispatcher recomputes
            it from the stored record, so slaves and recovery agree).
    """

    topic: str
    queue_id: int
    body: BytesLike = b""
    properties: dict[str, str] = field(default_factory=dict)
    properties_string: str | None = None
    flag: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: tuple[str, int] = _LOCAL
    store_host: tuple[str, int] = _LOCAL
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    tags_code: int = 0

    def stored_properties(self) -> str:
        """The properties string to store (``properties_string`` or the map's).

        Raises:
            LocalProtocolError: the map holds an empty or separator-bearing pair.
        """
        if self.properties_string is not None:
            return self.properties_string
        return properties_to_string(self.properties)

    @property
    def wait_store_msg_ok(self) -> bool:
        """Whether the sender waits for the flush/replication its mode promises."""
        return wait_store_msg_ok(self.properties)


@dataclass(slots=True)
class MessageExtBatch:
    """Several messages of one queue sent as one batch (``MessageExtBatch``).

    Attributes:
        topic: destination topic.
        queue_id: destination queue.
        body: the SEND_BATCH_MESSAGE body (``common.batch_codec`` entries).
        properties: batch-level properties (``WAIT``, ``CLUSTER``...); serialised
            and appended to every entry's own properties when stored.
        sys_flag: must carry no transaction type (MESSAGE_ILLEGAL otherwise).
        born_timestamp: producer clock (ms), for every message.
        born_host: producer ``(ip, port)``.
        store_host: this broker's address.
        reconsume_times: written into every record.
    """

    topic: str
    queue_id: int
    body: BytesLike = b""
    properties: dict[str, str] = field(default_factory=dict)
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: tuple[str, int] = _LOCAL
    store_host: tuple[str, int] = _LOCAL
    reconsume_times: int = 0

    @property
    def wait_store_msg_ok(self) -> bool:
        """Whether the sender waits for the flush/replication its mode promises."""
        return wait_store_msg_ok(self.properties)
