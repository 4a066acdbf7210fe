"""THE CommitLog message record (RocketMQ 4.9 "v1"): encode, patch, decode, iterate.

Owns: the byte layout of a stored message, byte-compatible with RocketMQ 4.9
(``CommitLog.MessageExtEncoder``, ``checkMessageAndReturnSize``, ``MessageDecoder``).
The same bytes are a CommitLog entry, an HA transfer, and a PULL_MESSAGE reply body
(records back to back), so the store, the broker, the client and analytics all use
this module. Also the 8-byte BLANK end-of-file record.

Must not: do I/O, log, allocate body copies unless asked, or raise anything but
``LocalProtocolError`` (we were asked to encode something the format cannot carry)
and ``RemoteProtocolError`` (bytes that do not parse) for bad input.

Layout (big-endian; offsets for IPv4 born host and IPv4 store host)::

    off  size  field                        notes
      0    4   TOTALSIZE                    whole record, = 91 + B + T + P
      4    4   MAGICCODE                    0xDAA320A7 (v1); 0xCBD43194 = BLANK
      8    4   BODYCRC                      crc32(body as stored) & 0x7FFFFFFF
     12    4   QUEUEID
     16    4   FLAG                         producer's int flag
     20    8   QUEUEOFFSET                  ConsumeQueue index; 0 until patched
     28    8   PHYSICALOFFSET               CommitLog offset of byte 0; 0 until patched
     36    4   SYSFLAG                      MessageSysFlag bits (0x10/0x20: v6 hosts)
     40    8   BORNTIMESTAMP                producer clock, ms
     48    8   BORNHOST                     ip 4 + port int32  (0x10 set: ip 16, +12)
     56    8   STORETIMESTAMP               broker clock, ms; patched in the append
     64    8   STOREHOSTADDRESS             ip 4 + port int32  (0x20 set: ip 16, +12)
     72    4   RECONSUMETIMES
     76    8   PREPARED TRANSACTION OFFSET
     84    4   BODY length B                then B bytes (the CRC covers exactly these)
  88+B     1   TOPIC length T               signed byte (<= 127), then T UTF-8 bytes
  89+B+T   2   PROPERTIES length P          signed short (<= 32767), then P UTF-8 bytes

With BORNHOST_V6 every field from STORETIMESTAMP on moves by +12 (store timestamp at
68); with STOREHOSTADDRESS_V6 every field from RECONSUMETIMES on moves by a further +12.
RocketMQ >= 5.1 may write magic 0xDAA320AB ("v2"): identical but with a 2-byte TOPIC
length. We read v2 and write only v1, as a 4.9 broker must.

BLANK record: ``TOTALSIZE = bytes left in the file, MAGICCODE = BLANK``; only those
8 bytes are written, the rest of the file is left as it was.

Decoding is strict about structure and lenient about values (as Java): sizes must add
up exactly to TOTALSIZE and lie inside the buffer, lengths must not be negative (Java
would treat a negative body length as 0), but field values are not judged. Topic and
properties are decoded as UTF-8 with ``surrogateescape``, so any bytes decode and
re-encode to themselves.

Decoding returns ``RecordView`` objects (``record_view``), which point into the
buffer; walks report where and why they stopped with a ``ScanStop``. The batch body
codec lives in ``batch_codec`` and is re-exported here with the view types, so callers
import every record-format name from this module.
"""

from __future__ import annotations

import mmap
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

from aiorocketmq.common.batch_codec import (
    BatchEntry,
    decode_batch,
    decode_batch_entries,
    encode_batch,
    merge_batch_properties,
)
from aiorocketmq.common.constants import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    PROPERTIES_MAX_LENGTH,
    TOPIC_MAX_LENGTH,
    MessageSysFlag,
)
from aiorocketmq.common.errors import LocalProtocolError, RemoteProtocolError
from aiorocketmq.common.message import BytesLike
from aiorocketmq.common.msg_id import pack_ip
from aiorocketmq.common.record_view import (
    BlankRecordError,
    ReadableBuffer,
    RecordView,
    ScanStop,
    StopReason,
)

__all__ = [  # the record format's whole public surface, batch body included
    "BLANK_RECORD_SIZE", "MIN_RECORD_SIZE", "BatchEntry", "BlankRecordError",
    "ReadableBuffer", "RecordScanner", "RecordView", "ScanStop", "StopReason",
    "blank_record", "calc_msg_length", "decode_batch", "decode_batch_entries",
    "decode_pull_body", "decode_record", "encode_batch", "encode_record",
    "is_blank_record", "iter_records", "merge_batch_properties", "patch_record",
    "scan_records",
]  # fmt: skip

_HOST_V6_BITS: Final = MessageSysFlag.BORNHOST_V6_FLAG | MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
_INT32_MAX: Final = 0x7FFFFFFF

MIN_RECORD_SIZE: Final = 91
"""Fixed part of a v1 record with IPv4 hosts: empty body, topic and properties."""

BLANK_RECORD_SIZE: Final = 8
"""Bytes actually written for a BLANK record: TOTALSIZE and MAGICCODE."""

_QUEUE_OFFSET_POS: Final = 20
_SYS_FLAG_POS: Final = 36
_BORN_HOST_POS: Final = 48

_HEAD: Final = struct.Struct(">ii")  # TOTALSIZE, MAGICCODE
_INT: Final = struct.Struct(">i")
_SHORT: Final = struct.Struct(">h")
_LONG: Final = struct.Struct(">q")
_TWO_LONGS: Final = struct.Struct(">qq")  # QUEUEOFFSET, PHYSICALOFFSET


@dataclass(frozen=True, slots=True)
class _Layout:
    """Positions that depend on the host widths (sysFlag & 0x30)."""

    fixed: struct.Struct  # TOTALSIZE .. BODY length, all in one unpack
    body_pos: int  # first body byte = fixed.size
    store_timestamp_pos: int


def _layout(born_ip_len: int, store_ip_len: int) -> _Layout:
    fixed = struct.Struct(f">iiiiiqqiq{born_ip_len}siq{store_ip_len}siiqi")
    return _Layout(fixed, fixed.size, _BORN_HOST_POS + born_ip_len + 4)


_LAYOUTS: Final = {
    0: _layout(4, 4),
    MessageSysFlag.BORNHOST_V6_FLAG: _layout(16, 4),
    MessageSysFlag.STOREHOSTADDRESS_V6_FLAG: _layout(4, 16),
    _HOST_V6_BITS: _layout(16, 16),
}
_V4: Final = _LAYOUTS[0].fixed
_V4_FIXED_SIZE: Final = _V4.size  # 88


def calc_msg_length(sys_flag: int, body_len: int, topic_len: int, properties_len: int) -> int:
    """Return TOTALSIZE of a v1 record (``CommitLog.calMsgLength``).

    Args:
        sys_flag: decides the host widths (bits 0x10 and 0x20).
        body_len: body bytes (negative counts as 0, as in Java).
        topic_len: topic bytes.
        properties_len: properties bytes (negative counts as 0, as in Java).
    """
    fixed = _LAYOUTS[sys_flag & _HOST_V6_BITS].body_pos + 1 + 2
    return fixed + max(body_len, 0) + topic_len + max(properties_len, 0)


def encode_record(
    *,
    topic: str | bytes,
    body: BytesLike,
    properties: str | bytes,
    queue_id: int,
    flag: int = 0,
    queue_offset: int = 0,
    physical_offset: int = 0,
    sys_flag: int = 0,
    born_timestamp: int,
    born_host: tuple[str, int],
    store_timestamp: int,
    store_host: tuple[str, int],
    reconsume_times: int = 0,
    prepared_transaction_offset: int = 0,
    body_crc: int | None = None,
) -> bytearray:
    """Encode one v1 record into a new bytearray of exactly TOTALSIZE bytes.

    Args:
        topic: topic name, or its UTF-8 bytes (cacheable by the caller).
        body: the body as stored (already compressed if flagged).
        properties: the properties string (``properties_to_string``) or its bytes.
        sys_flag: MessageSysFlag bits; the two host-width bits are set from the hosts.
        born_host, store_host: ``(ip, port)``; an IPv6 ip makes a 16-byte field.
        body_crc: defaults to ``zlib.crc32(body) & 0x7FFFFFFF``.
        others: fields of the layout table (timestamps in ms). The store passes 0 for
            both offsets outside its append section and fills them with ``patch_record``.

    Raises:
        LocalProtocolError: topic over 127 bytes, properties over 32767, bad IP, port
            not 0-65535, negative or too-wide ints, or a record over 2**31 - 1 bytes.
    """
    topic_raw, props_raw = _encode_texts(topic, properties)
    body_len = body.nbytes if isinstance(body, memoryview) else len(body)
    born_raw, born_port, store_raw, store_port, sys_flag = _pack_hosts(
        born_host, store_host, sys_flag
    )
    layout = _LAYOUTS[sys_flag & _HOST_V6_BITS]
    total = layout.body_pos + body_len + 3 + len(topic_raw) + len(props_raw)
    if total > _INT32_MAX:
        raise LocalProtocolError(f"record of {total} bytes exceeds TOTALSIZE's int32")
    if body_crc is None:
        body_crc = zlib.crc32(body) & 0x7FFFFFFF
    _check_encode_ints(
        (queue_id, queue_offset, physical_offset, sys_flag, born_timestamp, store_timestamp,
         reconsume_times, prepared_transaction_offset, body_crc), born_port, store_port,
    )  # fmt: skip
    out = bytearray(total)
    try:
        layout.fixed.pack_into(
            out, 0, total, MESSAGE_MAGIC_CODE, body_crc, queue_id, flag, queue_offset,
            physical_offset, sys_flag, born_timestamp, born_raw, born_port, store_timestamp,
            store_raw, store_port, reconsume_times, prepared_transaction_offset, body_len,
        )  # fmt: skip
    except struct.error as exc:
        raise LocalProtocolError(f"a record field does not fit its width: {exc}") from exc
    _write_variable_part(out, layout.body_pos, body, topic_raw, props_raw)
    return out


def _pack_hosts(
    born_host: tuple[str, int], store_host: tuple[str, int], sys_flag: int
) -> tuple[bytes, int, bytes, int, int]:
    born_raw = pack_ip(born_host[0])
    store_raw = pack_ip(store_host[0])
    # The host widths are a fact of the addresses, never of the caller's flags.
    sys_flag &= ~_HOST_V6_BITS
    if len(born_raw) == 16:
        sys_flag |= MessageSysFlag.BORNHOST_V6_FLAG
    if len(store_raw) == 16:
        sys_flag |= MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
    return born_raw, born_host[1], store_raw, store_host[1], sys_flag


def _encode_texts(topic: str | bytes, properties: str | bytes) -> tuple[bytes, bytes]:
    # surrogateescape: a topic or properties string decoded from a record re-encodes
    # to exactly the bytes it came from, even if those were not valid UTF-8.
    try:
        topic_raw = topic.encode("utf-8", "surrogateescape") if isinstance(topic, str) else topic
        props_raw = (
            properties.encode("utf-8", "surrogateescape")
            if isinstance(properties, str)
            else properties
        )
    except UnicodeEncodeError as exc:
        raise LocalProtocolError(f"topic or properties cannot be encoded as UTF-8: {exc}") from exc
    if len(topic_raw) > TOPIC_MAX_LENGTH:
        raise LocalProtocolError(
            f"topic is {len(topic_raw)} bytes, the record allows {TOPIC_MAX_LENGTH}"
        )
    if len(props_raw) > PROPERTIES_MAX_LENGTH:
        raise LocalProtocolError(
            f"properties are {len(props_raw)} bytes, the record allows {PROPERTIES_MAX_LENGTH}"
        )
    return topic_raw, props_raw


def _write_variable_part(
    out: bytearray, pos: int, body: BytesLike, topic_raw: bytes, props_raw: bytes
) -> None:
    # BODY bytes, TOPIC length + bytes, PROPERTIES length + bytes; ``pos`` is the first
    # body byte. The body length itself is part of the fixed struct.
    body_end = pos + (body.nbytes if isinstance(body, memoryview) else len(body))
    out[pos:body_end] = body
    topic_len = len(topic_raw)
    out[body_end] = topic_len
    props_pos = body_end + 1 + topic_len
    out[body_end + 1 : props_pos] = topic_raw
    props_len = len(props_raw)
    out[props_pos] = props_len >> 8
    out[props_pos + 1] = props_len & 0xFF
    out[props_pos + 2 :] = props_raw


_NON_NEGATIVE_FIELDS: Final = (
    "queue_id", "queue_offset", "physical_offset", "sys_flag", "born_timestamp",
    "store_timestamp", "reconsume_times", "prepared_transaction_offset", "body_crc",
)  # fmt: skip


def _check_encode_ints(values: tuple[int, ...], born_port: int, store_port: int) -> None:
    # ``values`` follow _NON_NEGATIVE_FIELDS. One min() on the hot path; the search
    # for the culprit only runs when it fails. Widths are checked by struct.pack_into.
    try:
        any_negative = min(values) < 0
        ports_ok = 0 <= born_port <= 0xFFFF and 0 <= store_port <= 0xFFFF
    except TypeError as exc:
        raise LocalProtocolError(f"record fields must be ints: {exc}") from exc
    if any_negative:
        bad = [f"{n}={v}" for n, v in zip(_NON_NEGATIVE_FIELDS, values, strict=True) if v < 0]
        raise LocalProtocolError(f"record fields must not be negative: {', '.join(bad)}")
    if not ports_ok:
        raise LocalProtocolError(f"ports must be 0-65535: born {born_port}, store {store_port}")


def patch_record(
    buf: bytearray | memoryview | mmap.mmap,
    pos: int,
    *,
    queue_offset: int,
    physical_offset: int,
    store_timestamp: int,
) -> None:
    """Fill the placeholders of an encoded record in place, as the append section does.

    Args:
        buf: writable buffer holding the record at ``pos``.
        pos: index of the record's first byte.
        queue_offset: ConsumeQueue index assigned under the append section.
        physical_offset: CommitLog offset of the record's first byte.
        store_timestamp: the broker's clock at append time, ms.

    Raises:
        LocalProtocolError: the record is not inside ``buf`` or a value does not fit.
    """
    try:
        _TWO_LONGS.pack_into(buf, pos + _QUEUE_OFFSET_POS, queue_offset, physical_offset)
        sys_flag = _INT.unpack_from(buf, pos + _SYS_FLAG_POS)[0]
        # A 16-byte born host moves the store timestamp from 56 to 68.
        layout = _LAYOUTS[sys_flag & _HOST_V6_BITS]
        _LONG.pack_into(buf, pos + layout.store_timestamp_pos, store_timestamp)
    except (struct.error, TypeError) as exc:
        raise LocalProtocolError(f"cannot patch record at {pos}: {exc}") from exc


def blank_record(size: int) -> bytes:
    """Return the 8 bytes of a BLANK end-of-file record declaring ``size`` bytes.

    Args:
        size: bytes left in the file from the BLANK record's start (``maxBlank``).

    Raises:
        LocalProtocolError: ``size`` is below 8 or above 2**31 - 1.
    """
    if not BLANK_RECORD_SIZE <= size <= _INT32_MAX:
        raise LocalProtocolError(f"a BLANK record spans 8..2**31-1 bytes, not {size}")
    return _HEAD.pack(size, BLANK_MAGIC_CODE)


def _corrupt(pos: int, what: str) -> ScanStop:
    return ScanStop(StopReason.CORRUPT, pos, f"record at {pos}: {what}")


def _truncated(pos: int, total: int, avail: int) -> ScanStop:
    return ScanStop(StopReason.TRUNCATED, pos, f"record at {pos}: TOTALSIZE {total}, {avail} left")


def _non_message_stop(pos: int, total: int, magic: int) -> ScanStop:
    # Classifies a header whose magic is not a message magic.
    if magic == BLANK_MAGIC_CODE:
        return ScanStop(StopReason.BLANK, pos, f"BLANK record of {total} bytes at {pos}", total)
    if total == 0 and magic == 0:
        return ScanStop(StopReason.ZERO, pos, f"zero TOTALSIZE at {pos} (written end)")
    return ScanStop(
        StopReason.CORRUPT, pos, f"illegal magic code {magic & 0xFFFFFFFF:#010x} at {pos}"
    )


def _parse_short(buf: ReadableBuffer, pos: int, avail: int) -> ScanStop:
    # Fewer bytes left than the fixed part of the smallest record: there can only be
    # the end, a BLANK or zero header, or a cut-off record.
    if avail <= 0:
        return ScanStop(StopReason.END, pos)
    if avail < 8:
        if not any(buf[pos : pos + avail]):
            return ScanStop(StopReason.ZERO, pos, f"zero TOTALSIZE at {pos} (written end)")
        return ScanStop(StopReason.TRUNCATED, pos, f"only {avail} bytes at {pos}, no record header")
    total, magic = _HEAD.unpack_from(buf, pos)
    if magic in (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2):
        if total > avail:
            return _truncated(pos, total, avail)
        return _corrupt(pos, f"TOTALSIZE {total} too small")
    return _non_message_stop(pos, total, magic)


def _parse_at(buf: ReadableBuffer, pos: int, limit: int, check_crc: bool) -> RecordView | ScanStop:
    """Decode the record at ``pos`` (bytes up to ``limit``) or say why there is none."""
    avail = limit - pos
    if avail < _V4_FIXED_SIZE:
        return _parse_short(buf, pos, avail)
    # One unpack of the IPv4/IPv4 fixed part serves the common case whole; the other
    # layouts only move fields, so their tuples line up with this one.
    fields: tuple[Any, ...] = _V4.unpack_from(buf, pos)
    total, magic = fields[0], fields[1]
    if magic != MESSAGE_MAGIC_CODE and magic != MESSAGE_MAGIC_CODE_V2:  # noqa: PLR1714
        return _non_message_stop(pos, total, magic)
    host_bits = fields[7] & _HOST_V6_BITS
    layout = _LAYOUTS[host_bits]
    topic_len_size = 1 if magic == MESSAGE_MAGIC_CODE else 2
    min_total = layout.body_pos + topic_len_size + 2
    if total > avail:
        return _truncated(pos, total, avail)
    if total < min_total:
        return _corrupt(pos, f"TOTALSIZE {total} below minimum {min_total}")
    if host_bits:
        fields = layout.fixed.unpack_from(buf, pos)
    body_len = fields[16]
    if body_len < 0 or body_len > total - min_total:
        return _corrupt(pos, f"body length {body_len} out of bounds")
    return _parse_variable(buf, pos, fields, pos + layout.body_pos, check_crc)


def _parse_variable(
    buf: ReadableBuffer, pos: int, fields: tuple[Any, ...], body_pos: int, check_crc: bool
) -> RecordView | ScanStop:
    # The fixed part is sound and the body fits; check topic and properties lengths
    # against TOTALSIZE (exact equality, as checkMessageAndReturnSize), then the CRC.
    total, body_len = fields[0], fields[16]
    topic_len_size = 1 if fields[1] == MESSAGE_MAGIC_CODE else 2
    end = pos + total
    topic_pos = body_pos + body_len
    if topic_len_size == 1:
        topic_len = buf[topic_pos]
        topic_len = topic_len - 256 if topic_len > 127 else topic_len  # a signed byte
    else:
        topic_len = _SHORT.unpack_from(buf, topic_pos)[0]
    props_len_pos = topic_pos + topic_len_size + topic_len
    if topic_len < 0 or props_len_pos + 2 > end:
        return _corrupt(pos, f"topic length {topic_len} out of bounds")
    props_len = _SHORT.unpack_from(buf, props_len_pos)[0]
    if props_len < 0 or props_len_pos + 2 + props_len != end:
        return _corrupt(
            pos,
            f"TOTALSIZE {total} does not match its fields (body {body_len},"
            f" topic {topic_len}, properties {props_len})",
        )
    if check_crc and body_len > 0:  # as Java's recovery, an empty body is not checked
        crc = zlib.crc32(memoryview(buf)[body_pos : body_pos + body_len]) & 0x7FFFFFFF
        if crc != fields[2]:
            return _corrupt(pos, f"body CRC {crc} != stored {fields[2]}")
    view = RecordView.__new__(RecordView)
    (
        view.total_size, view.magic, view.body_crc, view.queue_id, view.flag, view.queue_offset,
        view.physical_offset, view.sys_flag, view.born_timestamp, view.born_ip_raw,
        view.born_port, view.store_timestamp, view.store_ip_raw, view.store_port,
        view.reconsume_times, view.prepared_transaction_offset, view.body_len,
    ) = fields  # fmt: skip
    view._buf = buf
    view._properties = None
    view.position = pos
    view.body_offset = body_pos
    topic_start = topic_pos + topic_len_size
    view.topic = str(buf[topic_start : topic_start + topic_len], "utf-8", "surrogateescape")
    view.properties_raw = str(buf[props_len_pos + 2 : end], "utf-8", "surrogateescape")
    return view


def _prepare(buf: ReadableBuffer, start: int, end: int | None) -> tuple[ReadableBuffer, int]:
    # Returns the buffer as bytes-indexable (a memoryview of another format is cast to
    # unsigned bytes) and the validated end of the readable range.
    if isinstance(buf, memoryview) and (buf.format != "B" or buf.ndim != 1):
        buf = buf.cast("B")
    size = buf.nbytes if isinstance(buf, memoryview) else len(buf)
    limit = size if end is None else end
    if not 0 <= start <= limit <= size:
        raise LocalProtocolError(f"bad range [{start}, {end}) for a buffer of {size} bytes")
    return buf, limit


def decode_record(
    buf: ReadableBuffer, pos: int = 0, *, end: int | None = None, check_crc: bool = False
) -> RecordView:
    """Decode the record starting at ``pos``.

    Args:
        buf: bytes, bytearray, 1-D byte memoryview or mmap.
        pos: index of the record's first byte.
        end: index where readable data ends (default: the end of ``buf``).
        check_crc: also verify BODYCRC (recovery does; dispatch does not).

    Returns:
        A ``RecordView`` into ``buf``.

    Raises:
        BlankRecordError: a BLANK end-of-file record is at ``pos``.
        RemoteProtocolError: no valid record at ``pos`` (end of data, zero TOTALSIZE,
            illegal magic, sizes out of bounds or inconsistent, CRC mismatch).
        LocalProtocolError: ``pos``/``end`` outside ``buf``.
    """
    buf, limit = _prepare(buf, pos, end)
    result = _parse_at(buf, pos, limit, check_crc)
    if isinstance(result, RecordView):
        return result
    if result.reason is StopReason.BLANK:
        raise BlankRecordError(pos, result.blank_size)
    if result.reason is StopReason.END:
        raise RemoteProtocolError(f"no record at {pos}: the data ends there")
    raise RemoteProtocolError(result.message)


def is_blank_record(buf: ReadableBuffer, pos: int = 0) -> bool:
    """Whether a BLANK end-of-file record starts at ``pos``."""
    size = buf.nbytes if isinstance(buf, memoryview) else len(buf)
    if pos < 0 or size - pos < BLANK_RECORD_SIZE:
        return False
    return bool(_INT.unpack_from(buf, pos + 4)[0] == BLANK_MAGIC_CODE)


class RecordScanner:
    """Iterates records back to back and remembers why it stopped; never raises.

    For recovery, dispatch and analytics: after the loop, ``stop`` tells whether the
    data ended cleanly (END, BLANK, ZERO) or not (TRUNCATED, CORRUPT), and where.

    Args:
        buf: the buffer to walk.
        start: index of the first record.
        end: index where readable data ends (default: the end of ``buf``).
        check_crc: verify every body CRC.

    Raises:
        LocalProtocolError: ``start``/``end`` outside ``buf`` (from the constructor).
    """

    __slots__ = ("_buf", "_check_crc", "_limit", "_pos", "stop")

    def __init__(
        self,
        buf: ReadableBuffer,
        start: int = 0,
        end: int | None = None,
        *,
        check_crc: bool = False,
    ) -> None:
        self._buf, self._limit = _prepare(buf, start, end)
        self._pos = start
        self._check_crc = check_crc
        self.stop: ScanStop | None = None

    @property
    def position(self) -> int:
        """Index of the next record to read (the stop offset once stopped)."""
        return self._pos

    def __iter__(self) -> RecordScanner:
        return self

    def __next__(self) -> RecordView:
        if self.stop is not None:
            raise StopIteration
        result = _parse_at(self._buf, self._pos, self._limit, self._check_crc)
        if isinstance(result, RecordView):
            self._pos += result.total_size
            return result
        self.stop = result
        raise StopIteration


def scan_records(
    buf: ReadableBuffer, start: int = 0, end: int | None = None, *, check_crc: bool = False
) -> tuple[list[RecordView], ScanStop]:
    """Decode every record from ``start`` and report the stop; never raises on bad data.

    Returns:
        The records, and the ``ScanStop`` after the last one.
    """
    scanner = RecordScanner(buf, start, end, check_crc=check_crc)
    records = list(scanner)
    assert scanner.stop is not None  # an exhausted scanner always knows why
    return records, scanner.stop


def iter_records(
    buf: ReadableBuffer, start: int = 0, end: int | None = None, *, check_crc: bool = False
) -> Iterator[RecordView]:
    """Yield records back to back from ``start``.

    Stops cleanly at the end of the range, at a BLANK record, or at a zero TOTALSIZE.

    Raises:
        RemoteProtocolError: (while iterating) a truncated or corrupt record.
        LocalProtocolError: ``start``/``end`` outside ``buf``.
    """
    scanner = RecordScanner(buf, start, end, check_crc=check_crc)
    return _iter_strict(scanner)


def _iter_strict(scanner: RecordScanner) -> Iterator[RecordView]:
    yield from scanner
    stop = scanner.stop
    if stop is not None and not stop.clean:
        raise RemoteProtocolError(stop.message)


def decode_pull_body(body: ReadableBuffer, *, check_crc: bool = False) -> list[RecordView]:
    """Decode a PULL_MESSAGE (code 0) reply body: whole records filling it exactly.

    Args:
        body: the reply body.
        check_crc: verify body CRCs (clients do not by default).

    Returns:
        The records in order (empty for an empty body).

    Raises:
        RemoteProtocolError: anything but whole records, including a BLANK record or
            zero padding, which a broker never sends.
    """
    records, stop = scan_records(body, check_crc=check_crc)
    if stop.reason is not StopReason.END:
        raise RemoteProtocolError(f"pull body: {stop.message}")
    return records
