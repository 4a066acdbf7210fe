"""A stored message put again: retry and DLQ copies, delayed and timed deliveries,
committed half messages, POP redeliveries.

Owns: ``join_properties`` (Java's ``messageProperties2String`` without the codec's
checks) and ``inner_from_stored``, the one place a ``MessageExt`` read back from the
store becomes a ``MessageExtBrokerInner`` with a new destination: its body, flags,
born fields and tagsCode carried over, each caller deciding topic, queue, properties
and, where RocketMQ differs, the stored string, the store host and the reconsume count.

Must not: decide what a copy's properties are (each caller does, as its Java
counterpart does) or put it (the callers await the store).
"""

from __future__ import annotations

from aiorocketmq.common.message import MessageExt
from aiorocketmq.common.properties import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, MessageConst
from aiorocketmq.common.tag_hash import tags_code
from aiorocketmq.store.inner_message import MessageExtBrokerInner

__all__ = ["inner_from_stored", "join_properties", "sent_to_stored"]


def join_properties(props: dict[str, str]) -> str:
    """Java's ``messageProperties2String`` in the 4.9.1+ form, without the codec's checks.

    Parsed pairs always have a name and a value; a value may hold ``\\x01`` (the name
    ends at the first one), which reads back the same, so it is stored as sent
    instead of failing the put.
    """
    return PROPERTY_SEPARATOR.join(f"{k}{NAME_VALUE_SEPARATOR}{v}" for k, v in props.items())


def sent_to_stored(text: str, props: dict[str, str], cluster: str) -> str:
    """A sent message's stored properties: ``props`` (parsed from ``text``) gains
    ``CLUSTER`` (in place), and the stored string drops ``WAIT`` (as Java's
    ``asyncSendMessage``).

    The string is ``join_properties`` of that map. When ``text`` is already its joined
    form (every segment a pair, no name twice, at most a trailing separator, no
    ``CLUSTER`` yet: what every client sends) it is edited instead: one segment cut,
    one appended, no join.
    """
    sent = len(props)
    fresh = MessageConst.PROPERTY_CLUSTER not in props
    props[MessageConst.PROPERTY_CLUSTER] = cluster
    trailing = text.endswith(PROPERTY_SEPARATOR)
    # Each segment gives at most one pair, and a name seen twice one pair in all: as
    # many pairs as segments means every segment is a pair with a name of its own.
    if not fresh or not text or sent != text.count(PROPERTY_SEPARATOR) + (not trailing):
        wait = MessageConst.PROPERTY_WAIT_STORE_MSG_OK
        return join_properties({k: v for k, v in props.items() if k != wait})
    base = text[:-1] if trailing else text
    wait_value = props.get(MessageConst.PROPERTY_WAIT_STORE_MSG_OK)
    if wait_value is not None:
        segment = f"{MessageConst.PROPERTY_WAIT_STORE_MSG_OK}{NAME_VALUE_SEPARATOR}{wait_value}"
        if base.startswith(segment) and base[len(segment) : len(segment) + 1] in (
            "",
            PROPERTY_SEPARATOR,
        ):
            base = base[len(segment) + 1 :]
        else:  # the one segment named WAIT (values hold no separator): cut it out
            base = base.replace(f"{PROPERTY_SEPARATOR}{segment}", "", 1)
    cluster_pair = f"{MessageConst.PROPERTY_CLUSTER}{NAME_VALUE_SEPARATOR}{cluster}"
    return f"{base}{PROPERTY_SEPARATOR}{cluster_pair}" if base else cluster_pair


def inner_from_stored(
    msg: MessageExt,
    *,
    topic: str,
    queue_id: int,
    properties: dict[str, str],
    properties_string: str | None = None,
    store_host: tuple[str, int] | None = None,
    reconsume_times: int | None = None,
) -> MessageExtBrokerInner:
    """``msg`` to be stored again at ``topic``/``queue_id`` with ``properties``.

    Args:
        properties_string: what is stored; None joins ``properties`` (callers that
            serialise before removing a key, as Java does, pass their own).
        store_host: None keeps the stored message's.
        reconsume_times: None keeps the stored message's.
    """
    return MessageExtBrokerInner(
        topic=topic,
        queue_id=queue_id,
        body=msg.body,
        properties=properties,
        properties_string=(
            join_properties(properties) if properties_string is None else properties_string
        ),
        flag=msg.flag,
        sys_flag=msg.sys_flag,
        born_timestamp=msg.born_timestamp,
        born_host=msg.born_host,
        store_host=msg.store_host if store_host is None else store_host,
        reconsume_times=msg.reconsume_times if reconsume_times is None else reconsume_times,
        tags_code=tags_code(properties.get(MessageConst.PROPERTY_TAGS)),
    )
