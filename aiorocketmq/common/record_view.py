"""What decoding a CommitLog record gives: ``RecordView`` and the stop report of a walk.

Owns: ``RecordView`` (a decoded record that still points into its buffer), the reasons
a walk over records stops (``StopReason``, ``ScanStop``) and ``BlankRecordError``.
``message_codec`` builds these; everything else reads them.

Must not: parse bytes (``message_codec`` does, and fills a view's fields directly), do
I/O, or copy a body unless asked.

A view keeps a reference to the buffer it was decoded from (bytes, bytearray,
memoryview or mmap). ``body_view`` and ``raw`` are memoryviews into it; an mmap cannot
be closed while such a memoryview is alive, so release them (or copy with ``body``)
before closing a file.
"""

from __future__ import annotations

import enum
import mmap
from dataclasses import dataclass
from typing import Final, TypeAlias

from aiorocketmq.common.errors import RemoteProtocolError
from aiorocketmq.common.message import MessageExt
from aiorocketmq.common.msg_id import offset_msg_id_from_raw, unpack_ip
from aiorocketmq.common.properties import MessageConst, string_to_properties
from aiorocketmq.common.tag_hash import tags_code

ReadableBuffer: TypeAlias = bytes | bytearray | memoryview | mmap.mmap
"""Anything records can be decoded from without copying."""


class BlankRecordError(RemoteProtocolError):
    """``decode_record`` found the BLANK end-of-file record instead of a message.

    A subclass of ``RemoteProtocolError`` so that code expecting a message treats it
    as malformed; readers that walk files use ``RecordScanner``, which reports a
    BLANK record as a clean stop instead.

    Attributes:
        position: index of the BLANK record in the buffer.
        size: its TOTALSIZE (the rest of the file).
    """

    def __init__(self, position: int, size: int) -> None:
        super().__init__(f"BLANK (end-of-file) record of {size} bytes at {position}")
        self.position = position
        self.size = size


class RecordView:
    """A decoded record that still points into its buffer.

    Fixed fields are plain attributes (decoded with one ``unpack_from``); topic and
    properties string are decoded eagerly (they are small and validate the record);
    the properties dict, hosts as text and the msgId are computed on demand; the body
    is never copied unless ``body`` or ``to_message_ext(copy_body=True)`` is used.
    Do not build one directly: use ``decode_record``, ``iter_records`` or
    ``RecordScanner``.
    """

    __slots__ = (
        "_buf",
        "_properties",
        "body_crc",
        "body_len",
        "body_offset",
        "born_ip_raw",
        "born_port",
        "born_timestamp",
        "flag",
        "magic",
        "physical_offset",
        "position",
        "prepared_transaction_offset",
        "properties_raw",
        "queue_id",
        "queue_offset",
        "reconsume_times",
        "store_ip_raw",
        "store_port",
        "store_timestamp",
        "sys_flag",
        "topic",
        "total_size",
    )

    _buf: ReadableBuffer
    _properties: dict[str, str] | None
    position: int  # index of the record's first byte in the buffer
    total_size: int
    magic: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    physical_offset: int
    sys_flag: int
    born_timestamp: int
    born_ip_raw: bytes
    born_port: int
    store_timestamp: int
    store_ip_raw: bytes
    store_port: int
    reconsume_times: int
    prepared_transaction_offset: int
    body_len: int
    body_offset: int  # index of the first body byte in the buffer
    topic: str
    properties_raw: str

    @property
    def buffer(self) -> ReadableBuffer:
        """The buffer this record was decoded from."""
        return self._buf

    @property
    def end(self) -> int:
        """Index just past the record (where the next one starts)."""
        return self.position + self.total_size

    @property
    def born_host(self) -> tuple[str, int]:
        """Producer address ``(ip, port)``."""
        return unpack_ip(self.born_ip_raw), self.born_port

    @property
    def store_host(self) -> tuple[str, int]:
        """Broker address ``(ip, port)``."""
        return unpack_ip(self.store_ip_raw), self.store_port

    @property
    def msg_id(self) -> str:
        """The offset message id: store host + physical offset, upper-case hex."""
        return offset_msg_id_from_raw(self.store_ip_raw, self.store_port, self.physical_offset)

    @property
    def properties(self) -> dict[str, str]:
        """Parsed properties (4.9.8 rules), parsed once; do not mutate the result."""
        props = self._properties
        if props is None:
            props = self._properties = string_to_properties(self.properties_raw)
        return props

    @property
    def tags(self) -> str | None:
        """The ``TAGS`` property."""
        return self.properties.get(MessageConst.PROPERTY_TAGS)

    @property
    def keys(self) -> list[str]:
        """The ``KEYS`` property split on spaces (empty items dropped)."""
        raw = self.properties.get(MessageConst.PROPERTY_KEYS)
        return [key for key in raw.split(MessageConst.KEY_SEPARATOR) if key] if raw else []

    @property
    def uniq_key(self) -> str | None:
        """The client-made ``UNIQ_KEY``."""
        return self.properties.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)

    @property
    def tags_code(self) -> int:
        """``hashCode(TAGS)``, 0 without tags (delay-topic records use a time instead)."""
        return tags_code(self.tags)

    @property
    def body_view(self) -> memoryview:
        """The stored body as a read-only view into the buffer (no copy)."""
        start = self.body_offset
        return memoryview(self._buf)[start : start + self.body_len].toreadonly()

    @property
    def body(self) -> bytes:
        """A copy of the stored body (still compressed if ``sys_flag & 1``)."""
        start = self.body_offset
        return bytes(self._buf[start : start + self.body_len])

    @property
    def raw(self) -> memoryview:
        """The whole record as a read-only view into the buffer (no copy)."""
        return memoryview(self._buf)[self.position : self.end].toreadonly()

    def to_message_ext(self, copy_body: bool = True) -> MessageExt:
        """Build a ``MessageExt`` (body as stored: not inflated).

        Args:
            copy_body: copy the body into ``bytes`` (default), or keep ``body_view``.
        """
        return MessageExt(
            topic=self.topic,
            body=self.body if copy_body else self.body_view,
            flag=self.flag,
            properties=dict(self.properties),
            queue_id=self.queue_id,
            store_size=self.total_size,
            queue_offset=self.queue_offset,
            sys_flag=self.sys_flag,
            born_timestamp=self.born_timestamp,
            born_host=self.born_host,
            store_timestamp=self.store_timestamp,
            store_host=self.store_host,
            msg_id=self.msg_id,
            commit_log_offset=self.physical_offset,
            body_crc=self.body_crc,
            reconsume_times=self.reconsume_times,
            prepared_transaction_offset=self.prepared_transaction_offset,
        )

    def __repr__(self) -> str:
        return (
            f"RecordView(position={self.position}, total_size={self.total_size}, "
            f"topic={self.topic!r}, queue_id={self.queue_id}, queue_offset={self.queue_offset}, "
            f"physical_offset={self.physical_offset})"
        )


class StopReason(enum.Enum):
    """Why a walk over records stopped."""

    END = "end"  # the buffer (or the requested range) ends exactly after a record
    BLANK = "blank"  # a BLANK end-of-file record: the rest of the file is filler
    ZERO = "zero"  # TOTALSIZE 0: the written end of a preallocated (zeroed) file
    TRUNCATED = "truncated"  # a record is cut short by the end of the range (torn write)
    CORRUPT = "corrupt"  # bytes that are not a valid record


_CLEAN_STOPS: Final = frozenset({StopReason.END, StopReason.BLANK, StopReason.ZERO})


@dataclass(frozen=True, slots=True)
class ScanStop:
    """Where and why a walk over records stopped.

    Attributes:
        reason: the ``StopReason``.
        offset: index in the buffer of the first byte that is not a valid record.
        message: human-readable detail (empty for END).
        blank_size: TOTALSIZE of the BLANK record for ``StopReason.BLANK``, else 0.
    """

    reason: StopReason
    offset: int
    message: str = ""
    blank_size: int = 0

    @property
    def clean(self) -> bool:
        """True for END, BLANK and ZERO: the data ended as the format intends."""
        return self.reason in _CLEAN_STOPS
