"""Message properties: well-known names and the ``\\x01``/``\\x02`` string form.

Owns: ``MessageConst`` (property names, as in RocketMQ 4.9.x ``MessageConst``), the set
of names reserved for the system, and the conversion between a property dict and the
string stored in records and sent in ``SEND_MESSAGE``'s ``properties`` header field.

Must not: do I/O, log, or know about records (``message_codec`` carries the string).

Format::

    name \\x01 value \\x02 name \\x01 value ...       (NAME_VALUE_SEPARATOR = chr(1),
                                                     PROPERTY_SEPARATOR   = chr(2))

RocketMQ 4.9.0 and the stock clients end the string with a trailing ``\\x02``; 4.9.1+
does not. We write the 4.9.1+ form and read both. Key order carries no meaning.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

from aiorocketmq.common.errors import LocalProtocolError
from aiorocketmq.common.kernels import load_kernel

NAME_VALUE_SEPARATOR: Final = "\x01"
PROPERTY_SEPARATOR: Final = "\x02"


class MessageConst:
    """Property names (``org.apache.rocketmq.common.message.MessageConst``)."""

    PROPERTY_KEYS: Final = "KEYS"
    PROPERTY_TAGS: Final = "TAGS"
    PROPERTY_WAIT_STORE_MSG_OK: Final = "WAIT"
    PROPERTY_DELAY_TIME_LEVEL: Final = "DELAY"
    PROPERTY_RETRY_TOPIC: Final = "RETRY_TOPIC"
    PROPERTY_REAL_TOPIC: Final = "REAL_TOPIC"
    PROPERTY_REAL_QUEUE_ID: Final = "REAL_QID"
    PROPERTY_TRANSACTION_PREPARED: Final = "TRAN_MSG"
    PROPERTY_PRODUCER_GROUP: Final = "PGROUP"
    PROPERTY_MIN_OFFSET: Final = "MIN_OFFSET"
    PROPERTY_MAX_OFFSET: Final = "MAX_OFFSET"
    PROPERTY_BUYER_ID: Final = "BUYER_ID"
    PROPERTY_ORIGIN_MESSAGE_ID: Final = "ORIGIN_MESSAGE_ID"
    PROPERTY_TRANSFER_FLAG: Final = "TRANSFER_FLAG"
    PROPERTY_CORRECTION_FLAG: Final = "CORRECTION_FLAG"
    PROPERTY_MQ2_FLAG: Final = "MQ2_FLAG"
    PROPERTY_RECONSUME_TIME: Final = "RECONSUME_TIME"
    PROPERTY_MSG_REGION: Final = "MSG_REGION"
    PROPERTY_TRACE_SWITCH: Final = "TRACE_ON"
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: Final = "UNIQ_KEY"
    PROPERTY_MAX_RECONSUME_TIMES: Final = "MAX_RECONSUME_TIMES"
    PROPERTY_CONSUME_START_TIMESTAMP: Final = "CONSUME_START_TIME"
    PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET: Final = "TRAN_PREPARED_QUEUE_OFFSET"
    PROPERTY_TRANSACTION_CHECK_TIMES: Final = "TRANSACTION_CHECK_TIMES"
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS: Final = "CHECK_IMMUNITY_TIME_IN_SECONDS"
    PROPERTY_INSTANCE_ID: Final = "INSTANCE_ID"
    PROPERTY_CORRELATION_ID: Final = "CORRELATION_ID"
    PROPERTY_MESSAGE_REPLY_TO_CLIENT: Final = "REPLY_TO_CLIENT"
    PROPERTY_MESSAGE_TTL: Final = "TTL"
    PROPERTY_REPLY_MESSAGE_ARRIVE_TIME: Final = "ARRIVE_TIME"
    PROPERTY_PUSH_REPLY_TIME: Final = "PUSH_REPLY_TIME"
    PROPERTY_CLUSTER: Final = "CLUSTER"
    PROPERTY_MESSAGE_TYPE: Final = "MSG_TYPE"
    PROPERTY_INNER_MULTI_DISPATCH: Final = "INNER_MULTI_DISPATCH"
    PROPERTY_INNER_MULTI_QUEUE_OFFSET: Final = "INNER_MULTI_QUEUE_OFFSET"

    KEY_SEPARATOR: Final = " "
    """Separator of the user keys inside ``KEYS``."""


_C = MessageConst

SYSTEM_PROPERTY_NAMES: Final = frozenset(
    {
        _C.PROPERTY_TRACE_SWITCH,
        _C.PROPERTY_MSG_REGION,
        _C.PROPERTY_KEYS,
        _C.PROPERTY_TAGS,
        _C.PROPERTY_WAIT_STORE_MSG_OK,
        _C.PROPERTY_DELAY_TIME_LEVEL,
        _C.PROPERTY_RETRY_TOPIC,
        _C.PROPERTY_REAL_TOPIC,
        _C.PROPERTY_REAL_QUEUE_ID,
        _C.PROPERTY_TRANSACTION_PREPARED,
        _C.PROPERTY_PRODUCER_GROUP,
        _C.PROPERTY_MIN_OFFSET,
        _C.PROPERTY_MAX_OFFSET,
        _C.PROPERTY_BUYER_ID,
        _C.PROPERTY_ORIGIN_MESSAGE_ID,
        _C.PROPERTY_TRANSFER_FLAG,
        _C.PROPERTY_CORRECTION_FLAG,
        _C.PROPERTY_MQ2_FLAG,
        _C.PROPERTY_RECONSUME_TIME,
        _C.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
        _C.PROPERTY_MAX_RECONSUME_TIMES,
        _C.PROPERTY_CONSUME_START_TIMESTAMP,
        _C.PROPERTY_INSTANCE_ID,
        _C.PROPERTY_CORRELATION_ID,
        _C.PROPERTY_MESSAGE_REPLY_TO_CLIENT,
        _C.PROPERTY_MESSAGE_TTL,
        _C.PROPERTY_REPLY_MESSAGE_ARRIVE_TIME,
        _C.PROPERTY_PUSH_REPLY_TIME,
        _C.PROPERTY_CLUSTER,
        _C.PROPERTY_MESSAGE_TYPE,
        _C.PROPERTY_INNER_MULTI_QUEUE_OFFSET,
        # Deliberately absent, as in 4.9.x: INNER_MULTI_DISPATCH (LMQ users set it with
        # putUserProperty, per RocketMQ's LMQ guide), TRAN_PREPARED_QUEUE_OFFSET,
        # TRANSACTION_CHECK_TIMES and CHECK_IMMUNITY_TIME_IN_SECONDS.
    }
)
"""Names a user may not set with ``put_user_property`` (Java ``STRING_HASH_SET``)."""


def py_properties_to_string(properties: Mapping[str, str]) -> str:
    """Serialise properties in the RocketMQ 4.9.1+ form (no trailing separator).

    Args:
        properties: names to values. Order is kept but carries no meaning.

    Returns:
        ``name\\x01value\\x02name\\x01value``; ``""`` for no properties.

    Raises:
        LocalProtocolError: a name or value is empty (the reader would drop the pair),
            or contains ``\\x01`` or ``\\x02`` (the reader would split it wrongly).
    """
    parts: list[str] = []
    for name, value in properties.items():
        if not name or not value:
            raise LocalProtocolError(f"property {name!r} has an empty name or value")
        parts.append(f"{name}{NAME_VALUE_SEPARATOR}{value}")
    text = PROPERTY_SEPARATOR.join(parts)
    # One count per separator over the whole string is cheaper than scanning every
    # name and value: any separator inside a pair makes a count exceed its expected value.
    if parts and (
        text.count(NAME_VALUE_SEPARATOR) != len(parts)
        or text.count(PROPERTY_SEPARATOR) != len(parts) - 1
    ):
        _raise_separator_error(properties)
    return text


def _raise_separator_error(properties: Mapping[str, str]) -> None:
    for name, value in properties.items():
        for text in (name, value):
            if NAME_VALUE_SEPARATOR in text or PROPERTY_SEPARATOR in text:
                raise LocalProtocolError(
                    f"property {name!r} contains a reserved separator character (\\x01 or \\x02)"
                )
    raise AssertionError("unreachable: separator counts disagreed but no pair holds one")


def py_string_to_properties(text: str) -> dict[str, str]:
    """Parse a properties string with RocketMQ 4.9.8's ``string2messageProperties`` rules.

    Split on ``\\x02``; a segment counts only if it holds a ``\\x01`` with a non-empty
    name before it and a non-empty value after it (so segments shorter than 3 chars
    never count). The name ends at the first ``\\x01``; later ones belong to the value.
    A later duplicate name wins. A trailing ``\\x02`` (4.9.0, stock clients) is fine.

    Args:
        text: the properties string; may be empty.

    Returns:
        A new dict of the pairs that count. Never raises for any input string.
    """
    result: dict[str, str] = {}
    if not text:
        return result
    for segment in text.split(PROPERTY_SEPARATOR):
        if len(segment) < 3:
            continue
        name, sep, value = segment.partition(NAME_VALUE_SEPARATOR)
        if sep and name and value:
            result[name] = value
    return result


def py_peek_property(text: str, name: str) -> str | None:
    """``py_string_to_properties(text).get(name)`` without the map, or ``""`` when only
    the whole parse can tell (the last segment named ``name`` has an empty value, which
    does not count, so an earlier one may; or ``name`` holds a separator).

    A reader after one property of a pulled message (its keys, its tag) needs no dict.
    """
    if not name:
        return None
    if NAME_VALUE_SEPARATOR in name or PROPERTY_SEPARATOR in name:
        return ""
    at = text.rfind(f"{PROPERTY_SEPARATOR}{name}{NAME_VALUE_SEPARATOR}")
    if at >= 0:
        start = at + len(name) + 2
    elif text.startswith(f"{name}{NAME_VALUE_SEPARATOR}"):
        start = len(name) + 1
    else:
        return None
    end = text.find(PROPERTY_SEPARATOR, start)
    return text[start:] if end < 0 else text[start:end]


def py_select_properties(text: str, names: tuple[str, ...]) -> tuple[str | None, ...]:
    """``py_string_to_properties(text).get(name)`` for each of ``names`` (at most 8).

    The dispatcher needs three values of every stored record (TAGS, KEYS, UNIQ_KEY),
    not its map; the C twin finds them in one pass without building one.
    """
    if len(names) > 8:
        raise ValueError("at most 8 names")
    props = py_string_to_properties(text)
    return tuple(props.get(name) for name in names)


_KERNEL = load_kernel("aiorocketmq.common._props_kernels")
#: ``py_string_to_properties``, in C when built (``_props_kernels.pyx``): every send
#: parses its properties on the broker, and every consumed message's keys need them.
string_to_properties: Callable[[str], dict[str, str]] = (
    _KERNEL.string_to_properties if _KERNEL is not None else py_string_to_properties
)
#: ``py_select_properties``, in C when built.
select_properties: Callable[[str, tuple[str, ...]], tuple[str | None, ...]] = (
    _KERNEL.select_properties if _KERNEL is not None else py_select_properties
)


def properties_to_string(properties: Mapping[str, str]) -> str:
    """``py_properties_to_string``: in C for a dict of usual strings when built (every
    send serialises its message's properties); the reference otherwise, which also
    words every refusal.

    Raises:
        LocalProtocolError: as ``py_properties_to_string``.
    """
    if _KERNEL is not None:
        text: str | None = _KERNEL.properties_to_string(properties)
        if text is not None:
            return text
    return py_properties_to_string(properties)


#: ``py_peek_property``, in C when built.
peek_property: Callable[[str, str], str | None] = (
    _KERNEL.peek_property if _KERNEL is not None else py_peek_property
)
