"""PulledMessage: a ``MessageExt`` decoded from a pull reply, its costly fields made on first read.

Owns: ``PulledMessage`` and ``pulled_messages``, the client's decode of a PULL_MESSAGE
body. A consumer reads a message's body and a property or two; parsing every
properties string, rendering two host addresses and a msgId for each of a thousand
records nobody inspects was most of the client's cost per consumed message. Here:

* the fixed fields and the body are set at decode (the body copied out of the reply,
  inflated when the record says it is compressed);
* ``properties`` is parsed on first read, and then is an ordinary dict (mutations
  stick, as on any ``MessageExt``); the reply's ``MIN_OFFSET``/``MAX_OFFSET``, shared by
  the whole batch, are added to it then;
* ``msg_id``, ``born_host`` and ``store_host`` are rendered on first read.

A ``PulledMessage`` is a ``MessageExt`` in every respect (``isinstance``, ``==``,
``repr``, ``dataclasses.replace``, pickling, setting any field).

The decode has a C twin (``_record_kernels.pyx``), used when built (``common.kernels``);
``py_pulled_messages`` is the reference, and the tests run against both.

Must not: keep a reference to the reply buffer (bodies are copied, so a held message
never pins a 2 MiB reply), or parse anything a reader did not ask for.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import fields
from typing import Any, Final

from aiorocketmq.common.compression import decompress_body
from aiorocketmq.common.kernels import load_kernel
from aiorocketmq.common.message import Message, MessageExt
from aiorocketmq.common.message_codec import ReadableBuffer, decode_pull_body
from aiorocketmq.common.msg_id import offset_msg_id_from_raw, unpack_ip
from aiorocketmq.common.properties import MessageConst, peek_property, string_to_properties

__all__ = ["PulledMessage", "pulled_messages"]

# The slots MessageExt stores these in; None there means "not made yet" (a sentinel
# test is far cheaper than the AttributeError an unset slot raises).
_PROPERTIES: Final[Any] = Message.__dict__["properties"]
_MSG_ID: Final[Any] = MessageExt.__dict__["msg_id"]
_BORN_HOST: Final[Any] = MessageExt.__dict__["born_host"]
_STORE_HOST: Final[Any] = MessageExt.__dict__["store_host"]
_PREPARED_MARK: Final = MessageConst.PROPERTY_TRANSACTION_PREPARED + "\x01"
_FIELDS: Final = tuple(f.name for f in fields(MessageExt))
#: Properties a message may get before its properties are parsed: the reply's offsets,
#: and the consume start the push consumer stamps on every message it hands over.
#: They wait in ``_offsets`` and go in at the parse; a peek at one parses.
_ADDED_NAMES: Final = frozenset(
    {
        MessageConst.PROPERTY_MIN_OFFSET,
        MessageConst.PROPERTY_MAX_OFFSET,
        MessageConst.PROPERTY_CONSUME_START_TIMESTAMP,
    }
)
_TAGS_SETTER: Final[Any] = Message.__dict__["tags"].fset
_KEYS_SETTER: Final[Any] = Message.__dict__["keys"].fset


class PulledMessage(MessageExt):
    """A pulled ``MessageExt`` whose properties, msgId and hosts are made on first read."""

    __slots__ = ("_born_raw", "_offsets", "_properties_raw", "_store_raw")

    _properties_raw: str
    _offsets: tuple[tuple[str, str], ...]  # (name, value) pairs put in at the parse
    _born_raw: tuple[bytes, int]
    _store_raw: tuple[bytes, int]

    @property
    def properties(self) -> dict[str, str]:
        """The message's properties (parsed on first read; then a plain dict)."""
        props: dict[str, str] | None = _PROPERTIES.__get__(self)
        if props is None:
            props = string_to_properties(self._properties_raw)
            props.update(self._offsets)
            _PROPERTIES.__set__(self, props)
        return props

    @properties.setter
    def properties(self, value: dict[str, str]) -> None:
        _PROPERTIES.__set__(self, value)

    @property
    def msg_id(self) -> str:
        """The offset message id (store host + physical offset), rendered on first read."""
        msg_id: str | None = _MSG_ID.__get__(self)
        if msg_id is None:
            ip, port = self._store_raw
            msg_id = offset_msg_id_from_raw(ip, port, self.commit_log_offset)
            _MSG_ID.__set__(self, msg_id)
        return msg_id

    @msg_id.setter
    def msg_id(self, value: str) -> None:
        _MSG_ID.__set__(self, value)

    @property
    def born_host(self) -> tuple[str, int]:
        """Producer address ``(ip, port)``, rendered on first read."""
        host: tuple[str, int] | None = _BORN_HOST.__get__(self)
        if host is None:
            ip, port = self._born_raw
            host = (unpack_ip(ip), port)
            _BORN_HOST.__set__(self, host)
        return host

    @born_host.setter
    def born_host(self, value: tuple[str, int]) -> None:
        _BORN_HOST.__set__(self, value)

    @property
    def store_host(self) -> tuple[str, int]:
        """Broker address ``(ip, port)``, rendered on first read."""
        host: tuple[str, int] | None = _STORE_HOST.__get__(self)
        if host is None:
            ip, port = self._store_raw
            host = (unpack_ip(ip), port)
            _STORE_HOST.__set__(self, host)
        return host

    @store_host.setter
    def store_host(self, value: tuple[str, int]) -> None:
        _STORE_HOST.__set__(self, value)

    def __eq__(self, other: object) -> bool:
        # Equal to a MessageExt with the same fields, as a MessageExt would be (the
        # dataclass's own __eq__ only compares objects of exactly the same class).
        if not isinstance(other, MessageExt):
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in _FIELDS)

    __hash__ = None  # type: ignore[assignment]  # mutable, as MessageExt

    def _peek(self, name: str) -> str | None:
        """Property ``name``, read from the raw text while the properties are unparsed.

        ``string_to_properties``'s rules, for one name: the last segment named
        ``name`` with a non-empty value. A reader after a key or a tag no longer
        builds the whole dict (most of the client's cost per consumed message).
        """
        props: dict[str, str] | None = _PROPERTIES.__get__(self)
        if props is None and name not in _ADDED_NAMES:
            value = peek_property(self._properties_raw, name)
            if value != "":  # "": only the whole parse can tell
                return value
        return self.properties.get(name)

    def get_property(self, name: str) -> str | None:
        """Return a property value, or None."""
        return self._peek(name)

    def put_property(self, name: str, value: str) -> None:
        """Set any property; one of ``_ADDED_NAMES`` on unparsed properties waits for
        the parse (a consume start stamped on every message parsed every message)."""
        if _PROPERTIES.__get__(self) is None and name in _ADDED_NAMES:
            self._offsets = (*self._offsets, (name, value))
        else:
            self.properties[name] = value

    @property
    def tags(self) -> str | None:
        """The ``TAGS`` property."""
        return self._peek(MessageConst.PROPERTY_TAGS)

    @tags.setter
    def tags(self, value: str | None) -> None:
        _TAGS_SETTER(self, value)

    @property
    def keys(self) -> list[str]:
        """The user keys: ``KEYS`` split on spaces, empty items dropped."""
        raw = self._peek(MessageConst.PROPERTY_KEYS)
        if not raw:
            return []
        return list(filter(None, raw.split(MessageConst.KEY_SEPARATOR)))

    @keys.setter
    def keys(self, value: str | Iterable[str]) -> None:
        _KEYS_SETTER(self, value)

    @property
    def is_prepared(self) -> bool:
        """Whether ``TRAN_MSG`` is ``true`` (checked on the raw text while unparsed)."""
        if _PREPARED_MARK not in self._properties_raw:
            return False
        value = self.properties.get(MessageConst.PROPERTY_TRANSACTION_PREPARED, "")
        return value.lower() == "true"


_UNREAD: Final = (_PROPERTIES, _MSG_ID, _BORN_HOST, _STORE_HOST)


def _set_unread(msg: PulledMessage, value: None) -> None:
    for slot in _UNREAD:
        slot.__set__(msg, value)


def pulled_messages(
    body: ReadableBuffer, *, min_offset: int | None = None, max_offset: int | None = None
) -> list[PulledMessage]:
    """Decode a PULL_MESSAGE body into messages with inflated bodies.

    Args:
        body: the reply body (whole records).
        min_offset: the reply's queue min offset, added as ``MIN_OFFSET`` when given.
        max_offset: the reply's queue max offset, added as ``MAX_OFFSET`` when given.

    Raises:
        RemoteProtocolError: the body is not whole records, or a body does not inflate.
    """
    offsets: tuple[tuple[str, str], ...] = ()
    if min_offset is not None:
        offsets += ((MessageConst.PROPERTY_MIN_OFFSET, str(min_offset)),)
    if max_offset is not None:
        offsets += ((MessageConst.PROPERTY_MAX_OFFSET, str(max_offset)),)
    if _KERNEL is not None:
        built: list[PulledMessage] | None = _KERNEL.pulled_messages(
            body, PulledMessage, offsets, _UNREAD, decompress_body
        )
        if built is not None:  # sound records; anything else is the reference's to judge
            return built
    return py_pulled_messages(body, offsets)


def py_pulled_messages(
    body: ReadableBuffer, offsets: tuple[tuple[str, str], ...]
) -> list[PulledMessage]:
    """``pulled_messages`` in Python (``offsets``: the pairs added to the properties)."""
    out: list[PulledMessage] = []
    append = out.append
    set_unread = _set_unread
    new = object.__new__
    for view in decode_pull_body(body):
        msg = new(PulledMessage)
        msg.topic = view.topic
        msg.body = decompress_body(view.body, view.sys_flag)
        msg.flag = view.flag
        set_unread(msg, None)  # properties, msg_id and the hosts: made on first read
        msg._properties_raw = view.properties_raw
        msg._offsets = offsets
        msg.transaction_id = None
        msg.queue_id = view.queue_id
        msg.store_size = view.total_size
        msg.queue_offset = view.queue_offset
        msg.sys_flag = view.sys_flag
        msg.born_timestamp = view.born_timestamp
        msg._born_raw = (view.born_ip_raw, view.born_port)
        msg.store_timestamp = view.store_timestamp
        msg._store_raw = (view.store_ip_raw, view.store_port)
        msg.commit_log_offset = view.physical_offset
        msg.body_crc = view.body_crc
        msg.reconsume_times = view.reconsume_times
        msg.prepared_transaction_offset = view.prepared_transaction_offset
        append(msg)
    return out


#: The C decode (``_record_kernels.pyx``) when built and not turned off.
_KERNEL = load_kernel("aiorocketmq.common._record_kernels")
