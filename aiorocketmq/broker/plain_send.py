"""A plain single send's stored values, read from its SEND_MESSAGE_V2 header (or its
SEND_MESSAGE header: the same fields by their long names, as the stock clients send).

Owns: ``py_plain_send_fields``, the reference: what the send processor's general path
makes of a header (``SendMessageRequestHeader.from_ext_fields_v2``, the properties
size limit, ``string_to_properties``, ``sent_to_stored``) when the send is plain, and
``fields_reader``, which hands out its C twin (``_send_kernels.pyx``) when that is
built and not turned off. The same tests run against both, and hold the twin to the
reference.

Plain: not a batch, and properties that name none of ``TRAN_MSG``, ``DELAY``,
``CLUSTER`` or a ``TIMER_`` property, so neither a transaction, a delay, a timer
nor a sender's own cluster is in play. Everything else is the general path's.

Must not: check the topic, the queue or the broker's permissions (the processor does,
with its own state), or store anything.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

from aiorocketmq.broker.stored_copy import sent_to_stored
from aiorocketmq.common.kernels import load_kernel
from aiorocketmq.common.properties import MessageConst, string_to_properties
from aiorocketmq.remoting.broker_headers import SEND_FIELD_NAMES, SendMessageRequestHeader
from aiorocketmq.remoting.errors import ProcessorError

__all__ = [
    "LONG_NAMES",
    "V2_NAMES",
    "PlainSend",
    "PlainSendReader",
    "fields_reader",
    "py_plain_send_fields",
]

PlainSend = tuple[str, int, int, int, int, int, dict[str, str], str]
"""``(topic, queue_id, sys_flag, born_timestamp, flag, reconsume_times, properties,
stored_properties)``: the properties map with ``CLUSTER`` added, and the string
stored (``WAIT`` cut, ``CLUSTER`` appended), as the general path has them."""

PlainSendReader = Callable[[dict[str, str], str, int, tuple[str, ...]], PlainSend | None]

#: The header fields a reader reads, in Java's order (producerGroup ... batch; not
#: brokerName): the letters of SEND_MESSAGE_V2, or the long names of SEND_MESSAGE.
V2_NAMES: Final = tuple(letter for _, letter in SEND_FIELD_NAMES[:13])
LONG_NAMES: Final = tuple(name for name, _ in SEND_FIELD_NAMES[:13])

#: Names whose presence sends a message the general way.
_NOT_PLAIN: Final = frozenset(
    (
        MessageConst.PROPERTY_TRANSACTION_PREPARED,
        MessageConst.PROPERTY_DELAY_TIME_LEVEL,
        MessageConst.PROPERTY_CLUSTER,
    )
)
_TIMER: Final = "TIMER_"


def py_plain_send_fields(
    fields: Mapping[str, str], cluster: str, max_properties_size: int, names: tuple[str, ...]
) -> PlainSend | None:
    """The values of a plain single send, or None when it is not one (or its header is
    not readable: the general path then says why).

    Args:
        fields: the request's extFields (one-letter names).
        cluster: this broker's ``brokerClusterName``.
        max_properties_size: ``maxPropertiesSize``; properties that may pass it (more
            than a quarter of it in characters) are left to the general path's check.
        names: ``V2_NAMES`` or ``LONG_NAMES``, the request's kind of header.
    """
    read = (
        SendMessageRequestHeader.from_ext_fields
        if names == LONG_NAMES
        else SendMessageRequestHeader.from_ext_fields_v2
    )
    try:
        header = read(fields)
    except (ProcessorError, TypeError, ValueError):
        return None
    text = header.properties or ""
    if header.batch or len(text) * 4 > max_properties_size:
        return None
    props = string_to_properties(text)
    if not _NOT_PLAIN.isdisjoint(props) or any(name.startswith(_TIMER) for name in props):
        return None
    stored = sent_to_stored(text, props, cluster)
    return (
        header.topic, header.queue_id, header.sys_flag, header.born_timestamp, header.flag,
        header.reconsume_times or 0, props, stored,
    )  # fmt: skip


def fields_reader() -> PlainSendReader:
    """``plain_send_fields`` in C when built and not turned off, else the reference.

    The C twin may also decline a send the reference takes, when its header or
    properties are not in their usual form (see ``_send_kernels.pyx``).
    """
    if _KERNEL is not None:
        reader: PlainSendReader = _KERNEL.plain_send_fields
        return reader
    return py_plain_send_fields


_KERNEL = load_kernel("aiorocketmq.broker._send_kernels")
