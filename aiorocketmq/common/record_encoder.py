"""Encoding CommitLog records (RocketMQ 4.9 "v1"): one, or a batch of one queue at once.

Owns: the write side of the record layout ``message_codec`` documents: the fixed
part's struct per host width (``RECORD_LAYOUTS``, shared with the decoder),
``encode_record``, ``encode_records`` (a whole batch into one buffer, byte for byte
what ``encode_record`` gives per entry, with the per-batch work done once: hosts,
topic, checks), ``patch_record`` (the append section's offsets and store time),
``calc_msg_length`` and the 8-byte BLANK record.

Must not: do I/O, or decode (``message_codec`` does); ``message_codec`` re-exports the
public names here, so callers keep importing the record format from there.
"""

from __future__ import annotations

import mmap
import struct
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final

from aiorocketmq.common.batch_codec import DEFAULT_MAX_BATCH_MESSAGES
from aiorocketmq.common.constants import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    PROPERTIES_MAX_LENGTH,
    TOPIC_MAX_LENGTH,
    MessageSysFlag,
)
from aiorocketmq.common.errors import LocalProtocolError
from aiorocketmq.common.kernels import load_kernel
from aiorocketmq.common.message import BytesLike
from aiorocketmq.common.msg_id import pack_ip

__all__ = [
    "BLANK_RECORD_SIZE",
    "HOST_V6_BITS",
    "MIN_RECORD_SIZE",
    "RECORD_LAYOUTS",
    "BatchPlacer",
    "RecordLayout",
    "batch_kernel_args",
    "batch_placer",
    "blank_record",
    "calc_msg_length",
    "encode_batch_args",
    "encode_record",
    "encode_records",
    "patch_record",
]

HOST_V6_BITS: Final = MessageSysFlag.BORNHOST_V6_FLAG | MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
_INT32_MAX: Final = 0x7FFFFFFF

MIN_RECORD_SIZE: Final = 91
"""Fixed part of a v1 record with IPv4 hosts: empty body, topic and properties."""

BLANK_RECORD_SIZE: Final = 8
"""Bytes actually written for a BLANK record: TOTALSIZE and MAGICCODE."""

_HEAD: Final = struct.Struct(">ii")  # TOTALSIZE, MAGICCODE
_INT: Final = struct.Struct(">i")
_LONG: Final = struct.Struct(">q")
_PROPS_LEN: Final = struct.Struct(">H")

_QUEUE_OFFSET_POS: Final = 20
_SYS_FLAG_POS: Final = 36
_BORN_HOST_POS: Final = 48

_TWO_LONGS: Final = struct.Struct(">qq")  # QUEUEOFFSET, PHYSICALOFFSET


@dataclass(frozen=True, slots=True)
class RecordLayout:
    """Positions that depend on the host widths (sysFlag & 0x30)."""

    fixed: struct.Struct  # TOTALSIZE .. BODY length, all in one unpack
    body_pos: int  # first body byte = fixed.size
    store_timestamp_pos: int


def _layout(born_ip_len: int, store_ip_len: int) -> RecordLayout:
    fixed = struct.Struct(f">iiiiiqqiq{born_ip_len}siq{store_ip_len}siiqi")
    return RecordLayout(fixed, fixed.size, _BORN_HOST_POS + born_ip_len + 4)


RECORD_LAYOUTS: Final = {
    0: _layout(4, 4),
    MessageSysFlag.BORNHOST_V6_FLAG: _layout(16, 4),
    MessageSysFlag.STOREHOSTADDRESS_V6_FLAG: _layout(4, 16),
    HOST_V6_BITS: _layout(16, 16),
}


def calc_msg_length(sys_flag: int, body_len: int, topic_len: int, properties_len: int) -> int:
    """Return TOTALSIZE of a v1 record (``CommitLog.calMsgLength``).

    Args:
        sys_flag: decides the host widths (bits 0x10 and 0x20).
        body_len: body bytes (negative counts as 0, as in Java).
        topic_len: topic bytes.
        properties_len: properties bytes (negative counts as 0, as in Java).
    """
    fixed = RECORD_LAYOUTS[sys_flag & HOST_V6_BITS].body_pos + 1 + 2
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
    born_raw, born_port, store_raw, store_port, sys_flag = _pack_hosts(
        born_host, store_host, sys_flag
    )
    if _KERNEL is not None and (body_crc is None or body_crc >= 0):
        try:
            record: bytearray | None = _KERNEL.encode_one_record(
                body, topic_raw, props_raw, queue_id, flag, queue_offset, physical_offset,
                sys_flag, born_timestamp, born_raw, born_port, store_timestamp, store_raw,
                store_port, reconsume_times, prepared_transaction_offset,
                -1 if body_crc is None else body_crc,
            )  # fmt: skip
        except (OverflowError, TypeError, BufferError):  # past a field's width: the reference's
            record = None
        if record is not None:
            return record
    body_len = body.nbytes if isinstance(body, memoryview) else len(body)
    layout = RECORD_LAYOUTS[sys_flag & HOST_V6_BITS]
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


def encode_records(
    entries: Iterable[tuple[int, BytesLike, str]],
    *,
    topic: str | bytes,
    queue_id: int,
    sys_flag: int = 0,
    born_timestamp: int,
    born_host: tuple[str, int],
    store_host: tuple[str, int],
    reconsume_times: int = 0,
) -> bytearray:
    """Encode a batch of one queue into one buffer: each entry's record, back to back.

    Byte for byte ``encode_record`` of each ``(flag, body, properties)`` with the shared
    fields (offsets, store time and prepared offset 0, for the append to patch); the
    hosts, the topic and the shared checks are done once for the whole batch.

    Raises:
        LocalProtocolError: as ``encode_record``, for the first entry that cannot be
            encoded (nothing is returned then).
    """
    topic_raw, _ = _encode_texts(topic, "")
    born_raw, born_port, store_raw, store_port, sys_flag = _pack_hosts(
        born_host, store_host, sys_flag
    )
    _check_encode_ints(
        (queue_id, 0, 0, sys_flag, born_timestamp, 0, reconsume_times, 0, 0), born_port, store_port
    )
    layout = RECORD_LAYOUTS[sys_flag & HOST_V6_BITS]
    pack = layout.fixed.pack
    topic_part = bytes((len(topic_raw),)) + topic_raw
    overhead = layout.body_pos + 3 + len(topic_raw)
    out = bytearray()
    for flag, body, properties in entries:
        try:
            props_raw = properties.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError as exc:
            raise LocalProtocolError(f"properties cannot be encoded as UTF-8: {exc}") from exc
        if len(props_raw) > PROPERTIES_MAX_LENGTH:
            raise LocalProtocolError(
                f"properties are {len(props_raw)} bytes, the record allows {PROPERTIES_MAX_LENGTH}"
            )
        body_len = body.nbytes if isinstance(body, memoryview) else len(body)
        total = overhead + body_len + len(props_raw)
        if total > _INT32_MAX:
            raise LocalProtocolError(f"record of {total} bytes exceeds TOTALSIZE's int32")
        try:
            out += pack(
                total, MESSAGE_MAGIC_CODE, zlib.crc32(body) & 0x7FFFFFFF, queue_id, flag, 0, 0,
                sys_flag, born_timestamp, born_raw, born_port, 0, store_raw, store_port,
                reconsume_times, 0, body_len,
            )  # fmt: skip
        except struct.error as exc:
            raise LocalProtocolError(f"a record field does not fit its width: {exc}") from exc
        out += body
        out += topic_part
        out += _PROPS_LEN.pack(len(props_raw))
        out += props_raw
    return out


def encode_batch_args(args: tuple[Any, ...]) -> bytearray | None:
    """A client batch body's records in one C pass, or None: then use the reference.

    ``args`` come from ``batch_kernel_args``. Byte for byte ``encode_records`` of
    ``decode_batch_entries(body)``, each entry's properties merged with the batch's
    (``merge_batch_properties``). None when the kernel is not built, or for anything
    the reference would refuse or word (a bad entry, too many, properties too long, an
    empty body...): the caller then runs the reference, which gives the refusal its
    exact text.
    """
    if _KERNEL is None:
        return None
    try:
        records: bytearray | None = _KERNEL.encode_batch_records(*args)
    except OverflowError:  # an int past its field: the reference's
        return None
    return records


#: ``place(buffer, pos, room, base, first_queue_offset, store_timestamp)`` of
#: ``batch_placer``: ``(size, offsets)``, the size alone when it does not fit, or None.
BatchPlacer = Callable[[Any, int, int, int, int, int], "tuple[int, list[int]] | int | None"]


def batch_placer(args: tuple[Any, ...]) -> BatchPlacer | None:
    """``encode_batch_args`` of ``args`` as a function that writes the records where
    the CommitLog says, with their final QUEUEOFFSET, PHYSICALOFFSET and
    STORETIMESTAMP (``CommitLog.append_batch_in_place``): the bytes the append would
    have patched into ``encode_batch_args``'s. None without the kernel."""
    if _KERNEL is None:
        return None
    place = _KERNEL.place_batch_records

    def placer(  # noqa: PLR0917 - BatchPlacer's positional call on the put path
        buffer: Any, pos: int, room: int, base: int, first_queue_offset: int, stamp: int
    ) -> tuple[int, list[int]] | int | None:
        try:
            placed: tuple[int, list[int]] | int | None = place(
                buffer, pos, room, *args, base, first_queue_offset, stamp
            )
        except OverflowError:  # an offset or stamp past its field: the reference's
            return None
        return placed

    return placer


def batch_kernel_args(
    body: BytesLike,
    batch_properties: str,
    *,
    topic: str,
    queue_id: int,
    sys_flag: int,
    born_timestamp: int,
    born_host: tuple[str, int],
    store_host: tuple[str, int],
    reconsume_times: int = 0,
    max_messages: int = DEFAULT_MAX_BATCH_MESSAGES,
) -> tuple[Any, ...] | None:
    """The batch kernels' arguments, texts encoded and hosts packed; None without the
    kernel, or for anything the reference would word (a text that does not encode, an
    int past its field)."""
    if _KERNEL is None:
        return None
    try:
        topic_raw, batch_raw = _encode_texts(topic, batch_properties)
        born_raw, born_port, store_raw, store_port, sys_flag = _pack_hosts(
            born_host, store_host, sys_flag
        )
        _check_encode_ints(
            (queue_id, 0, 0, sys_flag, born_timestamp, 0, reconsume_times, 0, 0),
            born_port,
            store_port,
        )
    except LocalProtocolError:
        return None
    return (
        body, batch_raw, topic_raw, queue_id, sys_flag, born_timestamp, born_raw, born_port,
        store_raw, store_port, reconsume_times, max_messages,
    )  # fmt: skip


def _pack_hosts(
    born_host: tuple[str, int], store_host: tuple[str, int], sys_flag: int
) -> tuple[bytes, int, bytes, int, int]:
    born_raw = pack_ip(born_host[0])
    store_raw = pack_ip(store_host[0])
    # The host widths are a fact of the addresses, never of the caller's flags.
    sys_flag &= ~HOST_V6_BITS
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
        layout = RECORD_LAYOUTS[sys_flag & HOST_V6_BITS]
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


#: The C record encoders (``_record_kernels.pyx``) when built and not turned off.
_KERNEL = load_kernel("aiorocketmq.common._record_kernels")
