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

import struct
import zlib
from collections.abc import Iterator
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
)
from aiorocketmq.common.errors import LocalProtocolError, RemoteProtocolError
from aiorocketmq.common.record_encoder import (
    BLANK_RECORD_SIZE,
    HOST_V6_BITS,
    MIN_RECORD_SIZE,
    RECORD_LAYOUTS,
    blank_record,
    calc_msg_length,
    encode_record,
    encode_records,
    patch_record,
)
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
    "decode_pull_body", "decode_record", "encode_batch", "encode_record", "encode_records",
    "is_blank_record", "iter_records", "merge_batch_properties", "patch_record",
    "scan_records",
]  # fmt: skip

_V4: Final = RECORD_LAYOUTS[0].fixed
_V4_FIXED_SIZE: Final = _V4.size  # 88
_HEAD: Final = struct.Struct(">ii")  # TOTALSIZE, MAGICCODE
_INT: Final = struct.Struct(">i")
_SHORT: Final = struct.Struct(">h")


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
    host_bits = fields[7] & HOST_V6_BITS
    layout = RECORD_LAYOUTS[host_bits]
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
