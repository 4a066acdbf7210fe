"""Half and op messages in the store (``TransactionalMessageBridge`` + ``...ServiceImpl``).

Owns: RocketMQ 4.9.8's storage side of transactions:

* ``to_half_message`` / ``put_half_message``: a prepared message keeps its real
  topic and queue in ``REAL_TOPIC`` / ``REAL_QID`` and goes to
  ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0 with its transaction bits cleared, so no
  consumer of the real topic sees it;
* ``TransactionalMessageBridge``: reading half and op messages back (as a
  ``PullResult``-like ``StorePull``), the system group ``CID_RMQ_SYS_TRANS``'s
  consume offsets in the consumer offset manager, finding a half message by its
  CommitLog offset (END_TRANSACTION), re-putting a half message (the check), and
  the op message (tag ``d``, body = the half message's queue offset as text) that
  marks a half message as committed or rolled back.

Must not: decide anything about transaction states (``processors/end_transaction``
and ``check_service`` do) or touch sockets.

Stored bytes follow Java, quirks included, so files and consumers see what a Java
broker writes: the committed message keeps ``REAL_TOPIC``/``REAL_QID``/``TRAN_MSG``
in its stored properties (Java clears them from the map after serialising it), and
an op message's stored properties say ``WAIT=true`` while it is put without
waiting (Java sets ``WAIT=false`` on the map after serialising it).
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass
from typing import Final

from aiorocketmq.broker.context import BrokerContext
from aiorocketmq.broker.stored_copy import join_properties
from aiorocketmq.common.constants import (
    PERM_READ,
    PERM_WRITE,
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
    MessageSysFlag,
    reset_transaction_value,
)
from aiorocketmq.common.errors import RemoteProtocolError
from aiorocketmq.common.message import MessageExt
from aiorocketmq.common.message_codec import decode_record
from aiorocketmq.common.properties import MessageConst
from aiorocketmq.common.tag_hash import tags_code
from aiorocketmq.store.inner_message import MessageExtBrokerInner
from aiorocketmq.store.message_store import MessageStore
from aiorocketmq.store.results import GetMessageStatus, PutMessageResult, PutMessageStatus

__all__ = [
    "CID_SYS_RMQ_TRANS",
    "HALF_QUEUE_ID",
    "REMOVE_TAG",
    "PullStatus",
    "StorePull",
    "TransactionalMessageBridge",
    "put_half_message",
    "to_half_message",
]

log = logging.getLogger(__name__)

CID_SYS_RMQ_TRANS: Final = "CID_RMQ_SYS_TRANS"
"""The system group whose offsets say how far the check has read (``MixAll``)."""
REMOVE_TAG: Final = "d"
"""Tag of an op message: the half message is done (``TransactionalMessageUtil``)."""
HALF_QUEUE_ID: Final = 0
"""Every half message goes to queue 0 of the half topic."""

_C = MessageConst


def to_half_message(msg: MessageExtBrokerInner) -> MessageExtBrokerInner:
    """``parseHalfMessageInner``: redirect ``msg`` (in place) into the half topic.

    The stored string is re-serialised from the map, so it carries ``WAIT`` again
    (as Java's does: the send path put it back into the map).
    """
    msg.properties[_C.PROPERTY_REAL_TOPIC] = msg.topic
    msg.properties[_C.PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
    msg.sys_flag = reset_transaction_value(msg.sys_flag, MessageSysFlag.TRANSACTION_NOT_TYPE)
    msg.topic = RMQ_SYS_TRANS_HALF_TOPIC
    msg.queue_id = HALF_QUEUE_ID
    msg.properties_string = join_properties(msg.properties)
    return msg


async def put_half_message(store: MessageStore, msg: MessageExtBrokerInner) -> PutMessageResult:
    """Store a prepared message as a half message (``asyncPrepareMessage``)."""
    return await store.put_message(to_half_message(msg))


class PullStatus(enum.Enum):
    """Java's ``PullStatus``, as ``TransactionalMessageBridge.getMessage`` maps it."""

    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


_PULL_STATUS: Final = {
    GetMessageStatus.FOUND: PullStatus.FOUND,
    GetMessageStatus.NO_MATCHED_MESSAGE: PullStatus.NO_MATCHED_MSG,
    GetMessageStatus.NO_MESSAGE_IN_QUEUE: PullStatus.NO_NEW_MSG,
    GetMessageStatus.OFFSET_OVERFLOW_ONE: PullStatus.NO_NEW_MSG,
    GetMessageStatus.MESSAGE_WAS_REMOVING: PullStatus.OFFSET_ILLEGAL,
    GetMessageStatus.NO_MATCHED_LOGIC_QUEUE: PullStatus.OFFSET_ILLEGAL,
    GetMessageStatus.OFFSET_FOUND_NULL: PullStatus.OFFSET_ILLEGAL,
    GetMessageStatus.OFFSET_OVERFLOW_BADLY: PullStatus.OFFSET_ILLEGAL,
    GetMessageStatus.OFFSET_TOO_SMALL: PullStatus.OFFSET_ILLEGAL,
}


@dataclass(slots=True)
class StorePull:
    """What a read of a half or op queue found (Java's ``PullResult``).

    Attributes:
        status: see ``PullStatus``.
        next_begin_offset: where the next read starts.
        messages: the decoded messages; None unless FOUND with at least one.
    """

    status: PullStatus
    next_begin_offset: int
    messages: list[MessageExt] | None = None


class TransactionalMessageBridge:
    """The broker parts transactions use (``TransactionalMessageBridge``).

    Args:
        ctx: the broker's parts (store, topics, consumer offsets, clock, store host).
    """

    def __init__(self, ctx: BrokerContext) -> None:
        self._ctx = ctx

    @property
    def ctx(self) -> BrokerContext:
        """The broker's parts."""
        return self._ctx

    # -- the system group's offsets ----------------------------------------------------

    def fetch_consume_offset(self, topic: str, queue_id: int) -> int:
        """The check's committed offset in a half/op queue, else the queue's min offset."""
        offset = self._ctx.offsets.query_offset(CID_SYS_RMQ_TRANS, topic, queue_id)
        if offset == -1:
            offset = self._ctx.store.get_min_offset_in_queue(topic, queue_id)
        return offset

    def update_consume_offset(self, topic: str, queue_id: int, offset: int) -> None:
        """Commit the check's offset in a half/op queue (under ``CID_RMQ_SYS_TRANS``)."""
        host, port = self._ctx.store_host
        self._ctx.offsets.commit_offset(
            f"{host}:{port}", CID_SYS_RMQ_TRANS, topic, queue_id, offset
        )

    def fetch_queue_ids(self, topic: str) -> list[int]:
        """Queue ids of ``topic`` by its read queue count; the topic is created if missing."""
        topics = self._ctx.topics
        config = topics.select_topic_config(topic)
        if config is None:
            config = topics.create_topic_in_send_message_back_method(
                topic, 1, PERM_WRITE | PERM_READ, 0
            )
        return list(range(config.read_queue_nums))

    # -- reads -------------------------------------------------------------------------

    def get_half_message(self, queue_id: int, offset: int, nums: int) -> StorePull | None:
        """Up to ``nums`` half messages from ``offset``; None when the store is not serving."""
        return self._get(RMQ_SYS_TRANS_HALF_TOPIC, queue_id, offset, nums)

    def get_op_message(self, queue_id: int, offset: int, nums: int) -> StorePull | None:
        """Up to ``nums`` op messages from ``offset``; None when the store is not serving."""
        return self._get(RMQ_SYS_TRANS_OP_HALF_TOPIC, queue_id, offset, nums)

    def _get(self, topic: str, queue_id: int, offset: int, nums: int) -> StorePull | None:
        result = self._ctx.store.get_message(CID_SYS_RMQ_TRANS, topic, queue_id, offset, nums)
        if result is None:
            log.error("get message from store returned None topic=%s offset=%d", topic, offset)
            return None
        with result:
            status = _PULL_STATUS[result.status]
            messages: list[MessageExt] = []
            for view in result.messages:
                try:
                    messages.append(decode_record(view).to_message_ext(copy_body=True))
                except RemoteProtocolError as exc:  # Java's decoder skips what it cannot read
                    log.warning("undecodable record in %s/%d: %s", topic, queue_id, exc)
        if status is not PullStatus.FOUND:
            log.debug("%s/%d at %d: %s", topic, queue_id, offset, result.status.value)
        found = messages if status is PullStatus.FOUND and messages else None
        return StorePull(status, result.next_begin_offset, found)

    async def look_half_message(self, commit_log_offset: int) -> MessageExt | None:
        """The half message stored at ``commit_log_offset``, or None.

        Java accepts any message there and then fails on a missing ``REAL_TOPIC``;
        we answer "not found" for anything that is not a readable half message.
        """
        if commit_log_offset < 0:
            return None
        # A check's answer may come for a half message long out of memory.
        msg = await self._ctx.store.read_ahead.read_message(commit_log_offset)
        if msg is None or msg.topic != RMQ_SYS_TRANS_HALF_TOPIC:
            return None
        real_qid = msg.properties.get(_C.PROPERTY_REAL_QUEUE_ID, "")
        if not msg.properties.get(_C.PROPERTY_REAL_TOPIC) or not _is_java_int(real_qid):
            return None
        return msg

    # -- writes ------------------------------------------------------------------------

    async def put_message(self, msg: MessageExtBrokerInner) -> PutMessageResult:
        """Put a message built here (re-put half, final or discarded message)."""
        return await self._ctx.store.put_message(msg)

    def renew_half_message_inner(self, msg: MessageExt) -> MessageExtBrokerInner:
        """``renewHalfMessageInner``: the same half message, to be stored again.

        Java leaves out the producer's ``flag`` and ``reconsumeTimes`` here, so a
        message committed after a check loses them; we keep both.
        """
        props = dict(msg.properties)
        return MessageExtBrokerInner(
            topic=msg.topic,
            queue_id=msg.queue_id,
            body=msg.body,
            properties=props | {_C.PROPERTY_WAIT_STORE_MSG_OK: "false"},
            properties_string=join_properties(props),
            flag=msg.flag,
            sys_flag=msg.sys_flag,
            born_timestamp=msg.born_timestamp,
            born_host=msg.born_host,
            store_host=msg.store_host,
            reconsume_times=msg.reconsume_times,
            tags_code=tags_code(msg.tags),
        )

    def renew_immunity_half_message_inner(self, msg: MessageExt) -> MessageExtBrokerInner:
        """``renewImmunityHalfMessageInner``: also remember the first queue offset."""
        inner = self.renew_half_message_inner(msg)
        key = _C.PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET
        first = msg.properties.get(key)
        inner.properties[key] = first if first is not None else str(msg.queue_offset)
        # Java re-serialises the map here, after it set WAIT=false on it: kept.
        inner.properties_string = join_properties(inner.properties)
        return inner

    async def put_op_message(self, half: MessageExt) -> bool:
        """Write the ``d`` op message of ``half`` to the op queue of its half queue.

        Returns True when stored; Java logs a failure and answers the client anyway.
        """
        ctx = self._ctx
        now = ctx.clock.now_ms()
        op = MessageExtBrokerInner(
            topic=RMQ_SYS_TRANS_OP_HALF_TOPIC,
            queue_id=half.queue_id,
            body=str(half.queue_offset).encode(),
            properties={_C.PROPERTY_TAGS: REMOVE_TAG, _C.PROPERTY_WAIT_STORE_MSG_OK: "false"},
            properties_string=join_properties(
                {_C.PROPERTY_TAGS: REMOVE_TAG, _C.PROPERTY_WAIT_STORE_MSG_OK: "true"}
            ),
            born_timestamp=now,
            born_host=ctx.store_host,
            store_host=ctx.store_host,
            tags_code=tags_code(REMOVE_TAG),
        )
        result = await ctx.store.put_message(op)
        if result.status is not PutMessageStatus.PUT_OK:
            log.error(
                "transaction op message not stored status=%s half_offset=%d queue_id=%d",
                result.status.value, half.queue_offset, half.queue_id,
            )  # fmt: skip
            return False
        return True


def _is_java_int(text: str) -> bool:
    body = text[1:] if text[:1] in "+-" else text
    digits = body.lstrip("0") or "0"
    if not (body.isascii() and body.isdigit()) or len(digits) > 10:
        return False  # also keeps int() below Python's 4,300-digit limit
    value = -int(digits) if text[:1] == "-" else int(digits)
    return -(2**31) <= value < 2**31
