"""Arrow columns of CommitLog records: vectorized for the common layout, exact for the rest.

Owns: the record table's Arrow schema (``record_schema``, the same columns as the Spark
schema in ``datasource``), ``decode_fast`` (numpy gathers of the fixed fields of
v1 records with IPv4 hosts, from record positions found by a header walk; the
properties map, tags, keys and uniqKey parsed on the bytes of the whole batch,
``properties_columns``) and ``decode_exact``
(the codec's ``RecordView`` for v2 records and IPv6 hosts, field by field).

Must not: do I/O (callers pass a buffer), judge where the data ends (``scan`` does), or
diverge from ``aiorocketmq.common``'s codec: ``decode_exact`` is the reference the
tests hold ``decode_fast`` to.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]

try:  # zlib-ng's SIMD CRC32 (the analytics extra): same values, about 3x zlib's speed
    from zlib_ng.zlib_ng import crc32 as _crc32  # type: ignore[import-not-found,unused-ignore]
except ImportError:  # pragma: no cover - without the extra
    from zlib import crc32 as _crc32

from aiorocketmq.common.message_codec import ReadableBuffer, RecordView
from aiorocketmq.common.msg_id import unpack_ip
from aiorocketmq.common.properties import MessageConst, string_to_properties

__all__ = ["FIXED_V4_SIZE", "decode_exact", "decode_fast", "record_schema"]

FIXED_V4_SIZE: Final = 88
"""Bytes before the body of a v1 record with IPv4 hosts (TOTALSIZE .. BODY length)."""

IntArray = npt.NDArray[np.int64]

_FIELDS: Final = {  # name -> (offset, width) in the IPv4 fixed part
    "totalSize": (0, 4), "bodyCrc": (8, 4), "queueId": (12, 4), "flag": (16, 4),
    "queueOffset": (20, 8), "physicalOffset": (28, 8), "sysFlag": (36, 4),
    "bornTimestamp": (40, 8), "bornIp": (48, 4), "bornPort": (52, 4),
    "storeTimestamp": (56, 8), "storeIp": (64, 4), "storePort": (68, 4),
    "reconsumeTimes": (72, 4), "bodySize": (84, 4),
}  # fmt: skip


PROPERTY_COLUMNS: Final = frozenset({"tags", "keys", "uniqKey", "properties"})
"""Columns that need the properties string parsed."""


def record_schema(include_body: bool, columns: frozenset[str] | None = None) -> pa.Schema:
    """The Arrow schema of the record table (``body`` only when asked; only ``columns``
    when given, in the table's order)."""
    fields = [
        ("broker", pa.string()), ("topic", pa.string()), ("queueId", pa.int32()),
        ("queueOffset", pa.int64()), ("physicalOffset", pa.int64()), ("sysFlag", pa.int32()),
        ("flag", pa.int32()), ("bornTimestamp", pa.int64()), ("bornHost", pa.string()),
        ("storeTimestamp", pa.int64()), ("storeHost", pa.string()),
        ("reconsumeTimes", pa.int32()), ("bodySize", pa.int32()), ("bodyCrcOk", pa.bool_()),
        ("tags", pa.string()), ("keys", pa.list_(pa.string())), ("uniqKey", pa.string()),
        ("properties", pa.map_(pa.string(), pa.string())),
    ]  # fmt: skip
    if include_body:
        fields.append(("body", pa.binary()))
    return pa.schema([f for f in fields if columns is None or f[0] in columns])


def _gather(u8: npt.NDArray[np.uint8], positions: IntArray, width: int) -> npt.NDArray[np.uint8]:
    """``width`` bytes at every position, as an (n, width) block."""
    sliced = _slices(u8, positions, np.full(len(positions), width, np.int64))
    data = sliced.buffers()[2]
    if data is None:  # no positions
        return np.zeros((0, width), np.uint8)
    return np.frombuffer(data, np.uint8, len(positions) * width).reshape(-1, width)


def _field(head: npt.NDArray[np.uint8], name: str) -> IntArray:
    off, width = _FIELDS[name]
    raw = np.ascontiguousarray(head[:, off : off + width])
    dtype = ">u4" if name.endswith("Ip") else f">i{width}"
    return raw.view(dtype).ravel().astype(np.int64)


def _hosts(ips: IntArray, ports: IntArray) -> pa.Array:
    # Few distinct hosts: format each once, then take by index.
    # A port is a non-negative int32 (0-65535 when written by the codec).
    keys = (ips << 32) | (ports & 0xFFFFFFFF)
    uniq, inverse = np.unique(keys, return_inverse=True)
    texts = [f"{unpack_ip((k >> 32).to_bytes(4, 'big'))}:{k & 0xFFFFFFFF}" for k in uniq.tolist()]
    return pa.array(texts, pa.string()).take(pa.array(inverse.ravel()))


def _slices(u8: npt.NDArray[np.uint8], starts: IntArray, lengths: IntArray) -> pa.Array:
    """A binary array of ``u8[start:start+length]`` per row.

    Slices in order and apart (fields of successive records, pieces of one text) are
    cut by Arrow itself: a binary array over ``u8`` whose entries alternate slice and
    gap, of which ``take`` copies every other one in C++. Others are gathered by numpy.
    """
    ends = starts + lengths
    n = len(starts)
    # Arrow does not bounds-check a hand-made array: every slice must lie inside u8.
    inside = n and int(starts[0]) >= 0 and int(ends[-1]) <= min(len(u8), (1 << 31) - 1)
    if inside and bool(np.all(starts[1:] >= ends[:-1])):
        bounds = np.empty(2 * n, np.int32)
        bounds[0::2], bounds[1::2] = starts, ends
        woven = pa.Array.from_buffers(
            pa.binary(), 2 * n - 1, [None, pa.py_buffer(bounds), pa.py_buffer(u8)]
        )
        return woven.take(pa.array(np.arange(0, 2 * n, 2, dtype=np.int64)))
    return _gathered(u8, starts, lengths)


def _gathered(u8: npt.NDArray[np.uint8], starts: IntArray, lengths: IntArray) -> pa.Array:
    """``_slices`` in one numpy pass: any starts, any order."""
    offsets = np.zeros(len(starts) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    total = int(offsets[-1])
    if total >= 1 << 31:  # int32 offsets: split rather than switch to large_binary
        half = len(starts) // 2
        return pa.concat_arrays([_gathered(u8, starts[:half], lengths[:half]),
                                 _gathered(u8, starts[half:], lengths[half:])])  # fmt: skip
    # Byte i of the output comes from u8[start of its row + (i - row's output offset)].
    index = np.repeat(starts - offsets[:-1], lengths) + np.arange(total, dtype=np.int64)
    data = u8[index]
    return pa.Array.from_buffers(
        pa.binary(), len(starts), [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)]
    )


def _bodies(buf: ReadableBuffer, starts: IntArray, lengths: IntArray) -> pa.Array:
    # Bodies are large: one copy each (an index array would cost 8 bytes per byte).
    view = memoryview(buf)
    try:
        pairs = zip(starts.tolist(), lengths.tolist(), strict=True)
        return pa.array([view[a : a + n].tobytes() for a, n in pairs], pa.binary())
    finally:
        view.release()


def _utf8(binary: pa.Array) -> pa.Array:
    try:
        text = binary.view(pa.string())
        text.validate(full=True)
        return text
    except pa.ArrowInvalid:  # the codec decodes any bytes; keep them, marked as replaced
        texts = [None if b is None else b.decode("utf-8", "replace") for b in binary.to_pylist()]
        return pa.array(texts, pa.string())


def _drop_empty_lists(lists: pa.ListArray, keep: npt.NDArray[np.bool_], n: int) -> pa.ListArray:
    # Rebuild a list array keeping only the flattened values where ``keep`` holds.
    parents = np.asarray(pc.list_parent_indices(lists))
    counts = np.bincount(parents[keep], minlength=n)
    offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), lists.flatten().filter(pa.array(keep)))


def _string_parts(text: pa.Array) -> tuple[npt.NDArray[np.uint8], IntArray]:
    """A string array's UTF-8 bytes and its ``len + 1`` row offsets into them."""
    _validity, offsets_buf, data_buf = text.buffers()
    offsets = np.frombuffer(offsets_buf, np.int32)[text.offset : text.offset + len(text) + 1]
    data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    # A slice's buffers hold the rows around it too: keep only its own bytes.
    return data[offsets[0] : offsets[-1]], (offsets - offsets[0]).astype(np.int64)


def _segments(
    data: npt.NDArray[np.uint8], offsets: IntArray
) -> tuple[IntArray, IntArray, IntArray]:
    """``text.split("\\x02")`` of every row at once: (start, end, row) of each segment.

    A segment ends at a ``\\x02`` (the next one starts after it) or at its row's end
    (the next row's first segment starts there); sorting those ends puts a row's end
    before a ``\\x02`` at the same byte, which is the next row's.
    """
    seps = np.flatnonzero(data == 2)
    ends_of_rows = offsets[1:]
    ends = np.concatenate((seps, ends_of_rows))
    order = np.argsort(np.concatenate((seps * 2 + 1, ends_of_rows * 2)), kind="stable")
    ends = ends[order]
    is_sep = order < len(seps)
    next_start = ends + is_sep
    starts = np.concatenate((offsets[:1], next_start[:-1]))[: len(ends)]
    # A separator's row is the last row starting at or before it; a row end's, its own.
    sep_rows = np.searchsorted(offsets, seps, side="right") - 1
    rows = np.concatenate((sep_rows, np.arange(len(ends_of_rows), dtype=np.int64)))[order]
    return starts, ends, rows


def _repeats(rows: IntArray, codes: IntArray, key: IntArray) -> bool:
    """Whether a row names a property twice (rare; Java's clients never do)."""
    if len(codes) == 0:
        return False
    if int(codes.max()) < 64:  # the usual case: one bit per name, OR-ed per row
        firsts = np.flatnonzero(np.diff(rows, prepend=-1))
        seen = np.bitwise_or.reduceat(np.left_shift(np.uint64(1), codes.astype(np.uint64)), firsts)
        pairs = np.diff(np.append(firsts, len(rows)))
        return bool((np.bitwise_count(seen) != pairs).any())
    ordered = np.sort(key)
    return bool((ordered[1:] == ordered[:-1]).any())


def _last_wins(rows: IntArray, codes: IntArray) -> tuple[IntArray, IntArray]:
    """Java's ``HashMap.put`` over each row's pairs in order: which pairs stay (a name's
    first place) and which pair's value each keeps (its last)."""
    key = rows * (int(codes.max(initial=0)) + 1) + codes
    if not _repeats(rows, codes, key):
        everything = np.arange(len(key), dtype=np.int64)
        return everything, everything
    _, first = np.unique(key, return_index=True)
    _, last_rev = np.unique(key[::-1], return_index=True)  # same keys, same order
    last = len(key) - 1 - last_rev
    order = np.argsort(first)
    return first[order].astype(np.int64), last[order].astype(np.int64)


def properties_columns(props: pa.Array) -> dict[str, pa.Array]:
    """Map, tags, keys and uniqKey from properties strings (``string_to_properties`` rules).

    A pair counts when it has a non-empty name before its first ``\\x01`` and a
    non-empty value after it; a repeated name keeps its first place and its last value,
    as Java's HashMap. Parsed on the UTF-8 bytes of all rows at once (both separators
    are ASCII, so a byte split is a character split).
    """
    n = len(props)
    data, offsets = _string_parts(props)
    starts, ends, rows = _segments(data, offsets)
    ones = np.flatnonzero(data == 1)
    at = np.searchsorted(ones, starts)
    first_one = np.append(ones, np.iinfo(np.int64).max)[at]
    good = (first_one < ends) & (first_one > starts) & (ends - first_one > 1)
    starts, ends, rows, first_one = starts[good], ends[good], rows[good], first_one[good]
    names = _slices(data, starts, first_one - starts).view(pa.string())
    values = _slices(data, first_one + 1, ends - first_one - 1).view(pa.string())
    encoded = names.dictionary_encode()
    codes = np.asarray(encoded.indices, np.int64)
    keep, value_at = _last_wins(rows, codes)
    if len(keep) != len(rows):
        names, codes, rows = names.take(pa.array(keep)), codes[keep], rows[keep]
        values = values.take(pa.array(value_at))
    counts = np.bincount(rows, minlength=n)
    map_offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int32)
    mapping = pa.MapArray.from_arrays(pa.array(map_offsets), names, values)
    known = {name: i for i, name in enumerate(encoded.dictionary.to_pylist())}

    def lookup(name: str) -> pa.Array:
        code = known.get(name)
        where = np.full(n, -1, np.int64)
        if code is not None:
            hit = np.flatnonzero(codes == code)
            where[rows[hit]] = hit  # at most one per row once duplicates are gone
        return values.take(pa.array(where, mask=where < 0))

    keys = pc.split_pattern(lookup(MessageConst.PROPERTY_KEYS), MessageConst.KEY_SEPARATOR)
    nonempty = np.asarray(pc.fill_null(pc.greater(pc.utf8_length(keys.flatten()), 0), False))
    # A message without KEYS has an empty key list, never null.
    return {
        "tags": lookup(MessageConst.PROPERTY_TAGS),
        "keys": _drop_empty_lists(keys, nonempty, n),
        "uniqKey": lookup(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
        "properties": mapping,
    }


def _crc_ok(buf: ReadableBuffer, starts: IntArray, sizes: IntArray, stored: IntArray) -> pa.Array:
    # One C call per body, chained with map() so no Python bytecode runs per record:
    # slice objects -> memoryview slices (no copy) -> CRC32 -> numpy.
    view = memoryview(buf)
    try:
        bounds = map(slice, starts.tolist(), (starts + sizes).tolist())
        crcs = np.fromiter(map(_crc32, map(view.__getitem__, bounds)), np.int64, len(starts))
    finally:
        view.release()
    return pa.array(((crcs & 0x7FFFFFFF) == stored) | (sizes == 0))


def fast_layout(
    u8: npt.NDArray[np.uint8], positions: IntArray
) -> tuple[npt.NDArray[np.uint8], IntArray, IntArray, IntArray, npt.NDArray[np.bool_]]:
    """Gather the fixed parts and check each record's lengths add up to TOTALSIZE.

    Returns:
        The (n, 88) fixed parts, topic lengths, properties lengths and properties
        starts, and a mask of records whose layout is sound (all True when intact).
    """
    head = _gather(u8, positions, FIXED_V4_SIZE)
    total, body = _field(head, "totalSize"), _field(head, "bodySize")
    tl_pos = positions + FIXED_V4_SIZE + body
    limit = len(u8) - 3
    inside = (body >= 0) & (tl_pos <= limit)
    topic_len = u8[np.where(inside, tl_pos, 0)].astype(np.int64)
    pl_pos = tl_pos + 1 + topic_len
    inside &= (topic_len <= 127) & (pl_pos + 2 <= len(u8))
    safe = np.where(inside, pl_pos, 0)
    props_len = (u8[safe].astype(np.int64) << 8) | u8[safe + 1]
    ok = inside & (props_len <= 32767) & (FIXED_V4_SIZE + body + 3 + topic_len + props_len == total)
    return head, topic_len, props_len, pl_pos + 2, ok


def decode_fast(
    buf: ReadableBuffer,
    u8: npt.NDArray[np.uint8],
    positions: IntArray,
    layout: tuple[npt.NDArray[np.uint8], IntArray, IntArray, IntArray],
    *,
    broker: str,
    include_body: bool,
    check_crc: bool,
    columns: frozenset[str] | None = None,
) -> pa.RecordBatch:
    """Decode v1 IPv4 records at ``positions`` whose layout ``fast_layout`` found sound.

    Args:
        buf: the buffer ``u8`` views (slices are taken from it).
        u8: the buffer as a numpy uint8 array.
        positions: record starts, in order.
        layout: ``fast_layout``'s first four results for exactly these positions.
        broker: value of the ``broker`` column.
        include_body: add the ``body`` column.
        check_crc: compute ``bodyCrcOk`` (else null).
        columns: only these columns (None: all); the others are not computed.
    """
    schema = record_schema(include_body, columns)
    want = set(schema.names)
    head, topic_len, props_len, props_pos = layout
    n = len(positions)
    body_size = _field(head, "bodySize")
    body_pos = positions + FIXED_V4_SIZE
    cols: dict[str, Any] = {
        "broker": pa.array([broker], pa.string()).take(pa.array(np.zeros(n, np.int64)))
    }
    if "topic" in want:
        cols["topic"] = _utf8(_slices(u8, body_pos + body_size + 1, topic_len))
    for name in ("queueId", "sysFlag", "flag", "reconsumeTimes", "bodySize"):
        cols[name] = pa.array(_field(head, name).astype(np.int32))
    for name in ("queueOffset", "physicalOffset", "bornTimestamp", "storeTimestamp"):
        cols[name] = pa.array(_field(head, name))
    if "bornHost" in want:
        cols["bornHost"] = _hosts(_field(head, "bornIp"), _field(head, "bornPort"))
    if "storeHost" in want:
        cols["storeHost"] = _hosts(_field(head, "storeIp"), _field(head, "storePort"))
    if "bodyCrcOk" in want:
        cols["bodyCrcOk"] = (
            _crc_ok(buf, body_pos, body_size, _field(head, "bodyCrc"))
            if check_crc
            else pa.nulls(n, pa.bool_())
        )
    if want & PROPERTY_COLUMNS:
        cols.update(properties_columns(_utf8(_slices(u8, props_pos, props_len))))
    if "body" in want:
        cols["body"] = _bodies(buf, body_pos, body_size)
    return pa.RecordBatch.from_arrays([cols[f.name] for f in schema], schema=schema)


def decode_exact(
    views: Sequence[RecordView],
    *,
    broker: str,
    include_body: bool,
    check_crc: bool,
    columns: frozenset[str] | None = None,
) -> pa.RecordBatch:
    """Decode records through the codec's views (any layout, any magic)."""
    rows: dict[str, list[Any]] = {f.name: [] for f in record_schema(include_body)}
    for v in views:
        props = string_to_properties(v.properties_raw)
        born, store = v.born_host, v.store_host
        values: dict[str, Any] = {
            "broker": broker, "topic": v.topic, "queueId": v.queue_id,
            "queueOffset": v.queue_offset, "physicalOffset": v.physical_offset,
            "sysFlag": v.sys_flag, "flag": v.flag, "bornTimestamp": v.born_timestamp,
            "bornHost": f"{born[0]}:{born[1]}", "storeTimestamp": v.store_timestamp,
            "storeHost": f"{store[0]}:{store[1]}", "reconsumeTimes": v.reconsume_times,
            "bodySize": v.body_len, "tags": v.tags, "keys": v.keys, "uniqKey": v.uniq_key,
            "properties": list(props.items()),
            "bodyCrcOk": (v.body_len == 0 or zlib.crc32(v.body_view) & 0x7FFFFFFF == v.body_crc)
            if check_crc else None,
        }  # fmt: skip
        if include_body:
            values["body"] = v.body
        for name, column in rows.items():
            column.append(values[name])
    schema = record_schema(include_body, columns)
    return pa.RecordBatch.from_arrays(
        [pa.array(rows[f.name], f.type) for f in schema], schema=schema
    )
