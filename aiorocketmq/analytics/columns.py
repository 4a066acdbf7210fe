"""Arrow columns of CommitLog records: vectorized for the common layout, exact for the rest.

Owns: the record table's Arrow schema (``record_schema``, the same columns as the Spark
schema in ``datasource``), ``decode_fast`` (numpy gathers of the fixed fields of
v1 records with IPv4 hosts, from record positions found by a header walk, plus
pyarrow compute for the properties map, tags, keys and uniqKey) and ``decode_exact``
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
    # One fancy-index copy of ``width`` bytes at every position: an (n, width) block.
    block: npt.NDArray[np.uint8] = u8[positions[:, None] + np.arange(width, dtype=np.int64)]
    return block


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
    """A binary array of ``u8[start:start+length]`` per row, gathered in one numpy pass."""
    offsets = np.zeros(len(starts) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    total = int(offsets[-1])
    if total >= 1 << 31:  # int32 offsets: split rather than switch to large_binary
        half = len(starts) // 2
        return pa.concat_arrays([_slices(u8, starts[:half], lengths[:half]),
                                 _slices(u8, starts[half:], lengths[half:])])  # fmt: skip
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


def properties_columns(props: pa.Array) -> dict[str, pa.Array]:
    """Map, tags, keys and uniqKey from properties strings (``string_to_properties`` rules).

    A pair counts when it has a non-empty name before its first ``\\x01`` and a
    non-empty value after it; lookups take the last duplicate, as Java's HashMap.
    """
    n = len(props)
    pairs = pc.split_pattern(props, "\x02")
    parents = np.asarray(pc.list_parent_indices(pairs))
    kv = pc.split_pattern(pairs.flatten(), "\x01", max_splits=1)
    two = np.asarray(pc.fill_null(pc.equal(pc.list_value_length(kv), 2), False))
    kv = kv.filter(pa.array(two))
    names, values = pc.list_element(kv, 0), pc.list_element(kv, 1)
    good = np.asarray(pc.and_(pc.greater(pc.utf8_length(names), 0),
                              pc.greater(pc.utf8_length(values), 0)))  # fmt: skip
    names, values = names.filter(pa.array(good)), values.filter(pa.array(good))
    counts = np.bincount(parents[two][good], minlength=n)
    offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int32)
    mapping = pa.MapArray.from_arrays(pa.array(offsets), names, values)
    keys_raw = pc.map_lookup(mapping, MessageConst.PROPERTY_KEYS, "last")
    keys = pc.split_pattern(keys_raw, MessageConst.KEY_SEPARATOR)
    nonempty = np.asarray(pc.fill_null(pc.greater(pc.utf8_length(keys.flatten()), 0), False))
    keys = _drop_empty_lists(keys, nonempty, n)
    # A message without KEYS has an empty key list, never null.
    return {
        "tags": pc.map_lookup(mapping, MessageConst.PROPERTY_TAGS, "last"),
        "keys": keys,
        "uniqKey": pc.map_lookup(
            mapping, MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, "last"
        ),
        "properties": mapping,
    }


def _crc_ok(buf: ReadableBuffer, starts: IntArray, sizes: IntArray, stored: IntArray) -> pa.Array:
    # One C call per body, collected straight into numpy; the comparison is vectorized.
    view = memoryview(buf)
    try:
        pairs = zip(starts.tolist(), sizes.tolist(), strict=True)
        crcs = np.fromiter((_crc32(view[a : a + n]) for a, n in pairs), np.int64, len(starts))
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
