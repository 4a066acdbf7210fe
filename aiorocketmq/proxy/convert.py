"""v2 messages <-> stored 4.x records (RocketMQ 5's ``GrpcConverter`` and
``SendMessageActivity.buildMessageProperty``; specs/grpc-v5.md §5).

Owns: the send-side checks of one v2 ``Message`` with their codes, in Java's order,
the property mapping into ``MessageExtBrokerInner``, and the receive-side build of
a v2 ``Message`` from a stored ``MessageExt`` (MD5 body digest in upper-case hex,
bodies inflated and sent as IDENTITY, delivery attempt = reconsume times + 1,
retry copies shown under their original topic).

Must not: choose queues or touch the store.
"""

from __future__ import annotations

import hashlib
from typing import Final

from google.protobuf.timestamp_pb2 import Timestamp

from aiorocketmq.broker.stored_copy import join_properties
from aiorocketmq.common.compression import decompress_body
from aiorocketmq.common.constants import MessageSysFlag, is_compressed
from aiorocketmq.common.message import MessageExt
from aiorocketmq.common.properties import SYSTEM_PROPERTY_NAMES, MessageConst
from aiorocketmq.common.tag_hash import tags_code
from aiorocketmq.common.validators import validate_topic
from aiorocketmq.proxy.status import ProxyError
from aiorocketmq.proxy.v2 import definition_pb2 as pb
from aiorocketmq.store.inner_message import MessageExtBrokerInner

__all__ = [
    "PROPERTY_BORN_HOST",
    "PROPERTY_SHARDING_KEY",
    "PROPERTY_TIMER_DELIVER_MS",
    "message_type_of",
    "sent_message_type",
    "to_stored",
    "to_v2",
]

_C = MessageConst
PROPERTY_SHARDING_KEY: Final = "__SHARDINGKEY"
PROPERTY_BORN_HOST: Final = "__BORNHOST"
PROPERTY_TIMER_DELIVER_MS: Final = "TIMER_DELIVER_MS"
PROPERTY_TIMER_DELAY_SEC: Final = "TIMER_DELAY_SEC"
PROPERTY_TIMER_DELAY_MS: Final = "TIMER_DELAY_MS"
PROPERTY_TRACE_CONTEXT: Final = "TRACE_CONTEXT"
PROPERTY_BORN_TIMESTAMP: Final = "BORN_TIMESTAMP"
PROPERTY_DLQ_ORIGIN_TOPIC: Final = "DLQ_ORIGIN_TOPIC"
PROPERTY_DLQ_ORIGIN_MESSAGE_ID: Final = "DLQ_ORIGIN_MESSAGE_ID"
RESERVED_PROPERTIES: Final = SYSTEM_PROPERTY_NAMES | {
    PROPERTY_SHARDING_KEY,
    PROPERTY_BORN_HOST,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_TIMER_DELAY_SEC,
    PROPERTY_TIMER_DELAY_MS,
    PROPERTY_TRACE_CONTEXT,
    PROPERTY_BORN_TIMESTAMP,
    PROPERTY_DLQ_ORIGIN_TOPIC,
    PROPERTY_DLQ_ORIGIN_MESSAGE_ID,
    "TIMER_OUT_MS",
    "TIMER_ENQUEUE_MS",
    "TIMER_DEQUEUE_MS",
    "TIMER_ROLL_TIMES",
    "POP_CK",
    "1ST_POP_TIME",
    "__RMQ.TRANSIENT.TIMER_REAL_TOPIC",
}
"""Names a client may not use as user properties (the broker's own, and RocketMQ 5's)."""
_MAX_USER_PROPERTIES: Final = 128
_MAX_PROPERTIES_BYTES: Final = 16 * 1024
_MAX_GROUP_BYTES: Final = 64
_MAX_DELAY_AHEAD_MS: Final = 24 * 3600 * 1000
_MAX_RECOVERY_SECONDS: Final = 3600


def _has_control(text: str) -> bool:
    return any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in text)


def _ms(ts: Timestamp) -> int:
    return ts.seconds * 1000 + ts.nanos // 1_000_000


def _timestamp(ms: int) -> Timestamp:
    return Timestamp(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


def _check_properties(msg: pb.Message) -> None:
    """Java's user-property, tag, key, id and group checks, in its order."""
    sysp = msg.system_properties
    user = msg.user_properties
    size = sum(len(k.encode()) + len(v.encode()) for k, v in user.items())
    size += len(sysp.tag.encode()) + sum(len(k.encode()) for k in sysp.keys)
    if len(user) > _MAX_USER_PROPERTIES or size > _MAX_PROPERTIES_BYTES:
        raise ProxyError(pb.Code.MESSAGE_PROPERTIES_TOO_LARGE, "message properties too large")
    for key, value in user.items():
        if key in RESERVED_PROPERTIES or not key or _has_control(key) or _has_control(value):
            raise ProxyError(pb.Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"illegal property key {key!r}")
    if sysp.HasField("tag") and (not sysp.tag.strip() or "|" in sysp.tag or _has_control(sysp.tag)):
        raise ProxyError(pb.Code.ILLEGAL_MESSAGE_TAG, f"illegal tag {sysp.tag!r}")
    for key in sysp.keys:
        if not key.strip() or _has_control(key):
            raise ProxyError(pb.Code.ILLEGAL_MESSAGE_KEY, f"illegal key {key!r}")
    if not sysp.message_id:
        raise ProxyError(pb.Code.ILLEGAL_MESSAGE_ID, "message id is empty")
    if sysp.HasField("message_group"):
        group = sysp.message_group
        if not group.strip() or len(group.encode()) >= _MAX_GROUP_BYTES or _has_control(group):
            raise ProxyError(pb.Code.ILLEGAL_MESSAGE_GROUP, f"illegal message group {group!r}")


def check_message(msg: pb.Message, max_body: int, now_ms: int) -> None:
    """Every check of specs/grpc-v5.md §3.3 on one message; ``ProxyError`` on the first
    that fails."""
    remark = validate_topic(msg.topic.name)
    if remark is not None:
        raise ProxyError(pb.Code.ILLEGAL_TOPIC, remark)
    if not msg.body:
        raise ProxyError(pb.Code.MESSAGE_BODY_EMPTY, "message body is empty")
    if len(msg.body) > max_body:
        raise ProxyError(
            pb.Code.MESSAGE_BODY_TOO_LARGE, f"message body {len(msg.body)} > {max_body} bytes"
        )
    _check_properties(msg)
    sysp = msg.system_properties
    if (
        sysp.HasField("delivery_timestamp")
        and _ms(sysp.delivery_timestamp) - now_ms > _MAX_DELAY_AHEAD_MS
    ):
        raise ProxyError(pb.Code.ILLEGAL_DELIVERY_TIME, "delivery time is more than 1 day ahead")
    recovery = sysp.orphaned_transaction_recovery_duration
    if sysp.HasField("orphaned_transaction_recovery_duration") and (
        recovery.seconds > _MAX_RECOVERY_SECONDS
    ):
        raise ProxyError(pb.Code.BAD_REQUEST, "transaction recovery duration is over 1 hour")


def to_stored(
    msg: pb.Message,
    queue_id: int,
    *,
    cluster: str,
    peer_host: tuple[str, int],
    store_host: tuple[str, int],
    now_ms: int,
) -> MessageExtBrokerInner:
    """The record to put for a checked v2 message (§5.2's table)."""
    sysp = msg.system_properties
    props: dict[str, str] = dict(msg.user_properties)
    props[_C.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = sysp.message_id
    if sysp.HasField("tag"):
        props[_C.PROPERTY_TAGS] = sysp.tag
    if sysp.keys:
        props[_C.PROPERTY_KEYS] = _C.KEY_SEPARATOR.join(sysp.keys)
    if sysp.HasField("message_group"):
        props[PROPERTY_SHARDING_KEY] = sysp.message_group
    if sysp.HasField("delivery_timestamp"):
        props[PROPERTY_TIMER_DELIVER_MS] = str(_ms(sysp.delivery_timestamp))
    if sysp.HasField("trace_context"):
        props[PROPERTY_TRACE_CONTEXT] = sysp.trace_context
    props[_C.PROPERTY_PRODUCER_GROUP] = msg.topic.name  # the topic doubles as producer group
    born_ms = _ms(sysp.born_timestamp) if sysp.HasField("born_timestamp") else now_ms
    props[PROPERTY_BORN_TIMESTAMP] = str(born_ms)
    props[PROPERTY_BORN_HOST] = sysp.born_host or peer_host[0]
    props[_C.PROPERTY_CLUSTER] = cluster
    sys_flag = 0
    if sysp.message_type == pb.MessageType.TRANSACTION:
        props[_C.PROPERTY_TRANSACTION_PREPARED] = "true"
        sys_flag |= MessageSysFlag.TRANSACTION_PREPARED_TYPE
        if sysp.HasField("orphaned_transaction_recovery_duration"):
            seconds = sysp.orphaned_transaction_recovery_duration.seconds
            props[_C.PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS] = str(seconds)
    if sysp.body_encoding == pb.Encoding.GZIP:
        sys_flag |= MessageSysFlag.COMPRESSED_FLAG
    return MessageExtBrokerInner(
        topic=msg.topic.name,
        queue_id=queue_id,
        body=msg.body,
        properties=props,
        properties_string=join_properties(props),
        sys_flag=sys_flag,
        born_timestamp=born_ms,
        born_host=peer_host,
        store_host=store_host,
        reconsume_times=0,
        tags_code=tags_code(props.get(_C.PROPERTY_TAGS)),
    )


def message_type_of(props: dict[str, str]) -> pb.MessageType:
    """RocketMQ 5's ``TopicMessageType.parseFromMessageProperty``."""
    if props.get(_C.PROPERTY_TRANSACTION_PREPARED, "").lower() == "true":
        return pb.MessageType.TRANSACTION
    if (
        _C.PROPERTY_DELAY_TIME_LEVEL in props
        or PROPERTY_TIMER_DELIVER_MS in props
        or PROPERTY_TIMER_DELAY_SEC in props
        or PROPERTY_TIMER_DELAY_MS in props
    ):
        return pb.MessageType.DELAY
    if PROPERTY_SHARDING_KEY in props:
        return pb.MessageType.FIFO
    return pb.MessageType.NORMAL


def sent_message_type(msg: pb.Message) -> pb.MessageType:
    """``message_type_of`` the record ``to_stored`` makes of a checked ``msg`` (its
    user properties hold no reserved name, so only these fields decide)."""
    sysp = msg.system_properties
    if sysp.message_type == pb.MessageType.TRANSACTION:
        return pb.MessageType.TRANSACTION
    if sysp.HasField("delivery_timestamp"):
        return pb.MessageType.DELAY
    if sysp.HasField("message_group"):
        return pb.MessageType.FIFO
    return pb.MessageType.NORMAL


def to_v2(
    stored: MessageExt, *, receipt_handle: str, delivery_attempt: int, max_body: int
) -> pb.Message:
    """A received message as the SDKs read it (§5.3).

    Raises:
        RemoteProtocolError: the stored body cannot be inflated.
    """
    props = stored.properties
    body = decompress_body(stored.body, stored.sys_flag, max_size=max(max_body, 1))
    sysp = pb.SystemProperties(
        keys=[k for k in props.get(_C.PROPERTY_KEYS, "").split(_C.KEY_SEPARATOR) if k],
        message_id=props.get(_C.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or stored.msg_id,
        body_digest=pb.Digest(
            type=pb.DigestType.MD5, checksum=hashlib.md5(body).hexdigest().upper()
        ),
        body_encoding=pb.Encoding.IDENTITY,
        message_type=message_type_of(props),
        born_timestamp=_timestamp(stored.born_timestamp),
        born_host=props.get(PROPERTY_BORN_HOST) or stored.born_host[0],
        store_timestamp=_timestamp(stored.store_timestamp),
        store_host=f"{stored.store_host[0]}:{stored.store_host[1]}",
        receipt_handle=receipt_handle,
        queue_id=stored.queue_id,
        queue_offset=stored.queue_offset,
        delivery_attempt=delivery_attempt,
    )
    if _C.PROPERTY_TAGS in props:
        sysp.tag = props[_C.PROPERTY_TAGS]
    if PROPERTY_SHARDING_KEY in props:
        sysp.message_group = props[PROPERTY_SHARDING_KEY]
    deliver = props.get(PROPERTY_TIMER_DELIVER_MS, "")
    if deliver.isdigit():
        sysp.delivery_timestamp.CopyFrom(_timestamp(int(deliver)))
    if PROPERTY_TRACE_CONTEXT in props:
        sysp.trace_context = props[PROPERTY_TRACE_CONTEXT]
    topic = props.get(_C.PROPERTY_RETRY_TOPIC) or stored.topic
    user = {k: v for k, v in props.items() if k not in RESERVED_PROPERTIES}
    return pb.Message(
        topic=pb.Resource(name=topic), user_properties=user, system_properties=sysp, body=body
    )


def is_stored_compressed(sys_flag: int) -> bool:
    """Whether a stored body is compressed (re-exported for the pop path's size checks)."""
    return is_compressed(sys_flag)
