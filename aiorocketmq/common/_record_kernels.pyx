# cython: language_level=3, boundscheck=False, wraparound=False
"""C kernel of ``common.pulled_message``: a PULL_MESSAGE body -> its ``PulledMessage``\\ s.

Owns: ``pulled_messages``, the compiled twin of ``py_pulled_messages``: the record
walk and the fixed fields read straight from the bytes, with no ``RecordView`` and no
struct tuple per record. ``pulled_message`` binds it when built (``common.kernels``)
and the same tests run against both.

Must not: answer anything the reference would answer differently. A first pass
checks that the body is whole, sound records exactly as ``decode_pull_body`` requires
(message magic v1 or v2, sizes that add up to TOTALSIZE and stay inside the body);
on anything else it returns None and the reference raises its own error. Only then
are messages built, so an error is always the reference's, whatever else is wrong.
Fields are read as the reference's struct reads them (all signed, big-endian);
topic and properties decode as UTF-8 with surrogateescape; a compressed body is
inflated by the ``decompress`` it is given (the reference's ``decompress_body``).
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_FromStringAndSize
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy
from cpython.ref cimport PyObject

from aiorocketmq.common._slots cimport PyMemberDescrObject, _member_offset, _put

from types import MemberDescriptorType


cdef extern from "Python.h":
    object PyUnicode_DecodeUTF8(const char* data, Py_ssize_t size, const char* errors)
    object PyUnicode_DecodeASCII(const char* data, Py_ssize_t size, const char* errors)


# The slots a pulled message gets, in the order _build fills them.
_FIELDS = (
    "topic", "body", "flag", "_properties_raw", "_offsets", "transaction_id", "queue_id",
    "store_size", "queue_offset", "sys_flag", "born_timestamp", "_born_raw",
    "store_timestamp", "_store_raw", "commit_log_offset", "body_crc", "reconsume_times",
    "prepared_transaction_offset",
)
cdef int _N_FIELDS = 18
_OFFSETS = {}  # class -> (tuple of its _FIELDS' slot offsets, unread slots' offsets)


cdef tuple _slot_offsets(cls, tuple names, tuple unread_slots):
    """Where each of ``names`` (``_member_offset``) and each unread slot (a member
    descriptor itself) lives in a ``cls`` object; anything else: ValueError."""
    member = MemberDescriptorType
    offsets = [_member_offset(cls, name, member) for name in names]
    unread = []
    for descr in unread_slots:
        if type(descr) is not member:
            raise ValueError(f"{descr!r} is not a slot")
        unread.append((<PyMemberDescrObject*><PyObject*>descr).d_member.offset)
    return tuple(offsets), tuple(unread)


cdef uint32_t _MAGIC_V1 = 0xDAA320A7
cdef uint32_t _MAGIC_V2 = 0xDAA320AB
cdef int _FIXED_V4 = 88  # the fixed part with IPv4 hosts: the smallest a record can be


cdef inline uint32_t _u32(const uint8_t* p) noexcept:
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3]


cdef inline int32_t _i32(const uint8_t* p) noexcept:
    return <int32_t>_u32(p)


cdef inline int64_t _i64(const uint8_t* p) noexcept:
    return <int64_t>((<uint64_t>_u32(p) << 32) | _u32(p + 4))


cdef struct _Layout:
    Py_ssize_t born_ip      # BORNHOST's ip; its port follows
    Py_ssize_t born_ip_len
    Py_ssize_t store_ts
    Py_ssize_t store_ip
    Py_ssize_t store_ip_len
    Py_ssize_t reconsume    # RECONSUMETIMES; then PREPARED OFFSET (8), BODY length (4)
    Py_ssize_t body         # first body byte


cdef inline _Layout _layout(int32_t sys_flag) noexcept:
    cdef _Layout l
    l.born_ip = 48
    l.born_ip_len = 16 if sys_flag & 0x10 else 4
    l.store_ts = l.born_ip + l.born_ip_len + 4
    l.store_ip = l.store_ts + 8
    l.store_ip_len = 16 if sys_flag & 0x20 else 4
    l.reconsume = l.store_ip + l.store_ip_len + 4
    l.body = l.reconsume + 4 + 8 + 4
    return l


cdef inline int32_t _topic_len(const uint8_t* p, Py_ssize_t pos, int size) noexcept:
    """TOPIC's length field at ``pos``: 1 byte (magic v1) or 2 (v2), signed as Java reads it."""
    if size == 1:
        return <signed char>p[pos]
    return <int16_t>((p[pos] << 8) | p[pos + 1])


cdef Py_ssize_t _record_size(const uint8_t* p, Py_ssize_t avail) noexcept:
    """TOTALSIZE of the sound record at ``p``, or -1 (see the module docstring)."""
    cdef int32_t total, body_len, topic_len, props_len
    cdef uint32_t magic
    cdef int topic_len_size
    cdef Py_ssize_t min_total, topic_pos, props_len_pos
    cdef _Layout l
    if avail < _FIXED_V4:
        return -1
    total = _i32(p)
    magic = _u32(p + 4)
    if magic != _MAGIC_V1 and magic != _MAGIC_V2:
        return -1
    l = _layout(_i32(p + 36))
    topic_len_size = 1 if magic == _MAGIC_V1 else 2
    min_total = l.body + topic_len_size + 2
    if total > avail or total < min_total:
        return -1
    body_len = _i32(p + l.body - 4)
    if body_len < 0 or body_len > total - min_total:
        return -1
    topic_pos = l.body + body_len
    topic_len = _topic_len(p, topic_pos, topic_len_size)
    props_len_pos = topic_pos + topic_len_size + topic_len
    if topic_len < 0 or props_len_pos + 2 > total:
        return -1
    props_len = <int16_t>((p[props_len_pos] << 8) | p[props_len_pos + 1])
    if props_len < 0 or props_len_pos + 2 + props_len != total:
        return -1
    return total


def pulled_messages(body, cls, tuple offsets, tuple unread_slots, decompress):
    """The messages of ``body`` as ``cls`` objects, or None (see the module docstring).

    ``unread_slots`` are the member descriptors set to None (made on first read).
    """
    cdef Py_buffer buf
    PyObject_GetBuffer(body, &buf, PyBUF_SIMPLE)
    try:
        if not _sound(<const uint8_t*>buf.buf, buf.len):
            return None
        return _build(<const uint8_t*>buf.buf, buf.len, cls, offsets, unread_slots, decompress)
    finally:
        PyBuffer_Release(&buf)


cdef inline bint _same(
    const uint8_t* last, Py_ssize_t last_len, const uint8_t* now, Py_ssize_t now_len
) noexcept:
    return last != NULL and last_len == now_len and memcmp(last, now, now_len) == 0


cdef bint _sound(const uint8_t* data, Py_ssize_t size) noexcept:
    cdef Py_ssize_t pos = 0, total
    while pos < size:
        total = _record_size(data + pos, size - pos)
        if total < 0:
            return False
        pos += total
    return True


cdef list _build(
    const uint8_t* data, Py_ssize_t size, cls, tuple offsets, tuple unread_slots, decompress
):
    cdef list out = []
    cdef Py_ssize_t pos = 0, topic_pos, props_pos, total, i
    cdef const uint8_t* p
    cdef int32_t sys_flag, body_len, topic_len
    cdef int topic_len_size
    cdef _Layout l
    cdef Py_ssize_t at[18]
    # A reply's records nearly always share their topic and both hosts: equal bytes
    # reuse the previous record's objects (immutable) instead of making new ones.
    cdef const uint8_t* topic_raw = NULL
    cdef const uint8_t* born_raw = NULL
    cdef const uint8_t* store_raw = NULL
    cdef Py_ssize_t topic_raw_len = -1, born_raw_len = -1, store_raw_len = -1
    key = (cls, unread_slots)
    found = _OFFSETS.get(key)
    if found is None:
        found = _OFFSETS[key] = _slot_offsets(cls, _FIELDS, unread_slots)
    fields, unread = found
    for i in range(_N_FIELDS):
        at[i] = fields[i]
    topic = born = store = None
    new = object.__new__
    while pos < size:
        p = data + pos
        total = _i32(p)
        sys_flag = _i32(p + 36)
        l = _layout(sys_flag)
        body_len = _i32(p + l.body - 4)
        topic_len_size = 1 if _u32(p + 4) == _MAGIC_V1 else 2
        topic_pos = l.body + body_len
        topic_len = _topic_len(p, topic_pos, topic_len_size)
        props_pos = topic_pos + topic_len_size + topic_len + 2
        msg = new(cls)
        if not _same(topic_raw, topic_raw_len, p + topic_pos + topic_len_size, topic_len):
            topic_raw, topic_raw_len = p + topic_pos + topic_len_size, topic_len
            topic = PyUnicode_DecodeUTF8(<const char*>topic_raw, topic_len, "surrogateescape")
        _put(msg, at[0], topic)
        stored = PyBytes_FromStringAndSize(<const char*>(p + l.body), body_len)
        _put(msg, at[1], decompress(stored, sys_flag) if sys_flag & 0x1 else stored)
        _put(msg, at[2], _i32(p + 16))
        for offset in unread:
            _put(msg, offset, None)
        _put(msg, at[3], PyUnicode_DecodeUTF8(
            <const char*>(p + props_pos), total - props_pos, "surrogateescape"
        ))
        _put(msg, at[4], offsets)
        _put(msg, at[5], None)
        _put(msg, at[6], _i32(p + 12))
        _put(msg, at[7], total)
        _put(msg, at[8], _i64(p + 20))
        _put(msg, at[9], sys_flag)
        _put(msg, at[10], _i64(p + 40))
        if not _same(born_raw, born_raw_len, p + l.born_ip, l.born_ip_len + 4):
            born_raw, born_raw_len = p + l.born_ip, l.born_ip_len + 4
            born = (
                PyBytes_FromStringAndSize(<const char*>born_raw, l.born_ip_len),
                _i32(born_raw + l.born_ip_len),
            )
        _put(msg, at[11], born)
        _put(msg, at[12], _i64(p + l.store_ts))
        if not _same(store_raw, store_raw_len, p + l.store_ip, l.store_ip_len + 4):
            store_raw, store_raw_len = p + l.store_ip, l.store_ip_len + 4
            store = (
                PyBytes_FromStringAndSize(<const char*>store_raw, l.store_ip_len),
                _i32(store_raw + l.store_ip_len),
            )
        _put(msg, at[13], store)
        _put(msg, at[14], _i64(p + 28))
        _put(msg, at[15], _i32(p + 8))
        _put(msg, at[16], _i32(p + l.reconsume))
        _put(msg, at[17], _i64(p + l.reconsume + 4))
        out.append(msg)
        pos += total
    return out


# ------------------------------------------------------------- batch -> records


cdef extern from "_crc32.h":
    # zlib's crc32, its bulk folded by PCLMULQDQ where the CPU has it (see the header).
    uint32_t aiorocketmq_crc32(uint32_t crc, const uint8_t* p, size_t n) nogil


cdef int _ENTRY_MIN = 22  # a batch entry with an empty body and no properties
cdef int32_t _INT32_MAX = 2147483647
cdef int32_t _PROPERTIES_MAX = 32767


cdef inline void _put32(uint8_t* p, uint32_t v) noexcept:
    p[0] = (v >> 24) & 0xFF
    p[1] = (v >> 16) & 0xFF
    p[2] = (v >> 8) & 0xFF
    p[3] = v & 0xFF


cdef inline void _put64(uint8_t* p, uint64_t v) noexcept:
    _put32(p, <uint32_t>(v >> 32))
    _put32(p + 4, <uint32_t>(v & 0xFFFFFFFF))


def encode_batch_records(
    body, bytes batch_raw, bytes topic_raw, int32_t queue_id, int32_t sys_flag,
    int64_t born_timestamp, bytes born_raw, int32_t born_port, bytes store_raw,
    int32_t store_port, int32_t reconsume_times, Py_ssize_t max_messages,
):
    """The records of a batch body, or None: see ``record_encoder.encode_batch_args``."""
    cdef Py_buffer buf
    PyObject_GetBuffer(body, &buf, PyBUF_SIMPLE)
    try:
        return _encode_batch(
            <const uint8_t*>buf.buf, buf.len, batch_raw, topic_raw, queue_id, sys_flag,
            born_timestamp, born_raw, born_port, store_raw, store_port, reconsume_times,
            max_messages,
        )
    finally:
        PyBuffer_Release(&buf)


cdef Py_ssize_t _batch_size(
    const uint8_t* data, Py_ssize_t size, Py_ssize_t batch_len, Py_ssize_t overhead,
    Py_ssize_t max_messages,
) noexcept:
    """Pass 1: the records' total size, or -1 unless every entry is sound exactly as
    decode_batch_entries requires and every record encodable (then the reference
    decides, and words the refusal)."""
    cdef Py_ssize_t pos = 0, count = 0, out_size = 0, left, props_len_pos, merged, total
    cdef int32_t entry_total, body_len, props_len
    while pos < size:
        if count >= max_messages:
            return -1
        left = size - pos
        if left < _ENTRY_MIN:
            return -1
        entry_total = _i32(data + pos)
        body_len = _i32(data + pos + 16)
        if body_len < 0 or body_len > left - _ENTRY_MIN:
            return -1
        props_len_pos = pos + 20 + body_len
        props_len = <int16_t>((data[props_len_pos] << 8) | data[props_len_pos + 1])
        if props_len < 0 or props_len_pos + 2 + props_len > size:
            return -1
        if entry_total != _ENTRY_MIN + body_len + props_len:
            return -1
        merged = props_len + batch_len + _separator(data + props_len_pos + 2, props_len, batch_len)
        total = overhead + body_len + merged
        if merged > _PROPERTIES_MAX or total > _INT32_MAX:
            return -1
        out_size += total
        count += 1
        pos += entry_total
    return out_size if count else -1


cdef struct _Placed:
    # Where pass 2 writes and what it patches in: all zero for records the append
    # patches later (``encode_batch_records``), final for records encoded in place.
    int64_t base              # the first record's CommitLog offset
    int64_t first_queue_offset
    int64_t store_timestamp
    bint final


cdef list _write_batch(
    uint8_t* o, const uint8_t* data, Py_ssize_t size, bytes batch_raw, bytes topic_raw,
    int32_t queue_id, int32_t sys_flag, int64_t born_timestamp, bytes born_raw,
    int32_t born_port, bytes store_raw, int32_t store_port, int32_t reconsume_times,
    _Placed* at,
):
    """Pass 2: the records at ``o``; with ``at.final``, their offsets."""
    cdef _Layout l = _layout(sys_flag)
    cdef Py_ssize_t batch_len = len(batch_raw), topic_len = len(topic_raw)
    cdef Py_ssize_t pos = 0, index = 0, sep, merged, total, written = 0
    cdef int32_t entry_total, body_len, props_len
    cdef uint8_t* r
    cdef const uint8_t* entry_body
    cdef const uint8_t* props
    cdef list offsets = [] if at.final else None
    while pos < size:
        entry_total = _i32(data + pos)
        body_len = _i32(data + pos + 16)
        entry_body = data + pos + 20
        props_len = <int16_t>((entry_body[body_len] << 8) | entry_body[body_len + 1])
        props = entry_body + body_len + 2
        sep = _separator(props, props_len, batch_len)
        merged = props_len + sep + batch_len
        total = l.body + 3 + topic_len + body_len + merged
        r = o
        _put32(r, <uint32_t>total)
        _put32(r + 4, _MAGIC_V1)
        _put32(r + 8, aiorocketmq_crc32(0, entry_body, body_len) & 0x7FFFFFFF)
        _put32(r + 12, <uint32_t>queue_id)
        _put32(r + 16, <uint32_t>_i32(data + pos + 12))  # the entry's flag
        if at.final:  # QUEUEOFFSET, PHYSICALOFFSET, STORETIMESTAMP: else patched later
            offsets.append(at.base + written)
            _put64(r + 20, <uint64_t>(at.first_queue_offset + index))
            _put64(r + 28, <uint64_t>(at.base + written))
            _put64(r + l.store_ts, <uint64_t>at.store_timestamp)
        else:
            _put64(r + 20, 0)
            _put64(r + 28, 0)
            _put64(r + l.store_ts, 0)
        _put32(r + 36, <uint32_t>sys_flag)
        _put64(r + 40, <uint64_t>born_timestamp)
        memcpy(r + l.born_ip, <const char*>born_raw, l.born_ip_len)
        _put32(r + l.born_ip + l.born_ip_len, <uint32_t>born_port)
        memcpy(r + l.store_ip, <const char*>store_raw, l.store_ip_len)
        _put32(r + l.store_ip + l.store_ip_len, <uint32_t>store_port)
        _put32(r + l.reconsume, <uint32_t>reconsume_times)
        _put64(r + l.reconsume + 4, 0)
        _put32(r + l.body - 4, <uint32_t>body_len)
        r += l.body
        memcpy(r, entry_body, body_len)
        r += body_len
        r[0] = <uint8_t>topic_len
        memcpy(r + 1, <const char*>topic_raw, topic_len)
        r += 1 + topic_len
        r[0] = (merged >> 8) & 0xFF
        r[1] = merged & 0xFF
        r += 2
        memcpy(r, props, props_len)
        r += props_len
        if sep:
            r[0] = 2
            r += 1
        memcpy(r, <const char*>batch_raw, batch_len)
        o += total
        written += total
        pos += entry_total
        index += 1
    return offsets


cdef object _encode_batch(
    const uint8_t* data, Py_ssize_t size, bytes batch_raw, bytes topic_raw, int32_t queue_id,
    int32_t sys_flag, int64_t born_timestamp, bytes born_raw, int32_t born_port,
    bytes store_raw, int32_t store_port, int32_t reconsume_times, Py_ssize_t max_messages,
):
    cdef _Layout l = _layout(sys_flag)
    cdef Py_ssize_t out_size = _batch_size(
        data, size, len(batch_raw), l.body + 3 + len(topic_raw), max_messages
    )
    if out_size < 0:
        return None
    out = bytearray(out_size)
    cdef _Placed zero
    zero.base = zero.first_queue_offset = zero.store_timestamp = 0
    zero.final = False
    _write_batch(
        out, data, size, batch_raw, topic_raw, queue_id, sys_flag, born_timestamp, born_raw,
        born_port, store_raw, store_port, reconsume_times, &zero,
    )
    return out


def place_batch_records(
    buffer, Py_ssize_t pos, Py_ssize_t room, body, bytes batch_raw, bytes topic_raw,
    int32_t queue_id, int32_t sys_flag, int64_t born_timestamp, bytes born_raw,
    int32_t born_port, bytes store_raw, int32_t store_port, int32_t reconsume_times,
    Py_ssize_t max_messages, int64_t base, int64_t first_queue_offset, int64_t store_timestamp,
):
    """``encode_batch_records`` written at ``pos`` of ``buffer`` with the final
    QUEUEOFFSET, PHYSICALOFFSET (``base`` onwards) and STORETIMESTAMP, as the append
    would have patched them: ``(size, offsets)``. The size alone (an int, nothing
    written) when the records take more than ``room`` bytes; None when the kernel
    declines, as ``encode_batch_records``."""
    cdef Py_buffer src, dst
    cdef Py_ssize_t out_size
    cdef _Layout l = _layout(sys_flag)
    cdef _Placed at
    PyObject_GetBuffer(body, &src, PyBUF_SIMPLE)
    try:
        out_size = _batch_size(
            <const uint8_t*>src.buf, src.len, len(batch_raw), l.body + 3 + len(topic_raw),
            max_messages,
        )
        if out_size < 0:
            return None
        if out_size > room:
            return out_size
        PyObject_GetBuffer(buffer, &dst, PyBUF_WRITABLE)
        try:
            if pos < 0 or pos + out_size > dst.len:
                raise ValueError(f"{out_size} bytes do not fit at {pos} of {dst.len}")
            at.base, at.first_queue_offset, at.store_timestamp = base, first_queue_offset, store_timestamp
            at.final = True
            offsets = _write_batch(
                <uint8_t*>dst.buf + pos, <const uint8_t*>src.buf, src.len, batch_raw,
                topic_raw, queue_id, sys_flag, born_timestamp, born_raw, born_port, store_raw,
                store_port, reconsume_times, &at,
            )
        finally:
            PyBuffer_Release(&dst)
    finally:
        PyBuffer_Release(&src)
    return out_size, offsets


cdef struct _One:
    # One record's fields, as ``encode_one_record`` takes them (texts and hosts packed).
    const uint8_t* body
    Py_ssize_t body_len
    const char* topic
    Py_ssize_t topic_len
    const char* props
    Py_ssize_t props_len
    int32_t queue_id
    int32_t flag
    int64_t queue_offset
    int64_t physical_offset
    int32_t sys_flag
    int64_t born_timestamp
    const char* born_ip
    int32_t born_port
    int64_t store_timestamp
    const char* store_ip
    int32_t store_port
    int32_t reconsume_times
    int64_t prepared_transaction_offset
    int64_t body_crc


cdef Py_ssize_t _one_size(_One* f, _Layout* l, Py_ssize_t born_ip_len,
                          Py_ssize_t store_ip_len) noexcept:
    """The record's TOTALSIZE, or -1 for whatever the reference refuses (a negative
    field, a port past 65535, a record past 2**31 - 1 bytes, hosts that do not match
    the flag's widths)."""
    cdef Py_ssize_t total
    if (f.queue_id < 0 or f.queue_offset < 0 or f.physical_offset < 0 or f.sys_flag < 0
            or f.born_timestamp < 0 or f.store_timestamp < 0 or f.reconsume_times < 0
            or f.prepared_transaction_offset < 0 or f.body_crc < -1
            or f.body_crc > _INT32_MAX or not 0 <= f.born_port <= 0xFFFF
            or not 0 <= f.store_port <= 0xFFFF or born_ip_len != l.born_ip_len
            or store_ip_len != l.store_ip_len or f.topic_len > 127
            or f.props_len > _PROPERTIES_MAX):
        return -1
    total = l.body + f.body_len + 1 + f.topic_len + 2 + f.props_len
    return -1 if total > _INT32_MAX else total


cdef void _write_one(uint8_t* r, _One* f, _Layout* l, Py_ssize_t total) noexcept:
    """Write the record ``_one_size`` accepted at ``r`` (``total`` bytes)."""
    cdef int64_t body_crc = f.body_crc
    if body_crc == -1:
        body_crc = aiorocketmq_crc32(0, f.body, f.body_len) & 0x7FFFFFFF
    _put32(r, <uint32_t>total)
    _put32(r + 4, _MAGIC_V1)
    _put32(r + 8, <uint32_t>body_crc)
    _put32(r + 12, <uint32_t>f.queue_id)
    _put32(r + 16, <uint32_t>f.flag)
    _put64(r + 20, <uint64_t>f.queue_offset)
    _put64(r + 28, <uint64_t>f.physical_offset)
    _put32(r + 36, <uint32_t>f.sys_flag)
    _put64(r + 40, <uint64_t>f.born_timestamp)
    memcpy(r + l.born_ip, f.born_ip, l.born_ip_len)
    _put32(r + l.born_ip + l.born_ip_len, <uint32_t>f.born_port)
    _put64(r + l.store_ts, <uint64_t>f.store_timestamp)
    memcpy(r + l.store_ip, f.store_ip, l.store_ip_len)
    _put32(r + l.store_ip + l.store_ip_len, <uint32_t>f.store_port)
    _put32(r + l.reconsume, <uint32_t>f.reconsume_times)
    _put64(r + l.reconsume + 4, <uint64_t>f.prepared_transaction_offset)
    _put32(r + l.body - 4, <uint32_t>f.body_len)
    r += l.body
    memcpy(r, f.body, f.body_len)
    r += f.body_len
    r[0] = <uint8_t>f.topic_len
    memcpy(r + 1, f.topic, f.topic_len)
    r += 1 + f.topic_len
    r[0] = (f.props_len >> 8) & 0xFF
    r[1] = f.props_len & 0xFF
    memcpy(r + 2, f.props, f.props_len)


def encode_one_record(
    body, bytes topic_raw, bytes props_raw, int32_t queue_id, int32_t flag,
    int64_t queue_offset, int64_t physical_offset, int32_t sys_flag, int64_t born_timestamp,
    bytes born_raw, int32_t born_port, int64_t store_timestamp, bytes store_raw,
    int32_t store_port, int32_t reconsume_times, int64_t prepared_transaction_offset,
    int64_t body_crc,
):
    """One record, byte for byte ``record_encoder.encode_record``'s, or None.

    The texts and hosts come encoded and packed (the reference's own steps, which word
    their refusals), ``sys_flag`` with its host-width bits already set from them, and a
    ``body_crc`` of -1 asks for the body's. None for whatever the reference refuses (a
    negative field, a port past 65535, a record past 2**31 - 1 bytes, hosts that do not
    match the flag's widths): the caller then runs the reference, which says why.
    """
    return _encode_one(
        None, 0, body, topic_raw, props_raw, queue_id, flag, queue_offset, physical_offset,
        sys_flag, born_timestamp, born_raw, born_port, store_timestamp, store_raw,
        store_port, reconsume_times, prepared_transaction_offset, body_crc,
    )


def encode_one_record_into(
    target, Py_ssize_t pos, body, bytes topic_raw, bytes props_raw, int32_t queue_id,
    int32_t flag, int64_t queue_offset, int64_t physical_offset, int32_t sys_flag,
    int64_t born_timestamp, bytes born_raw, int32_t born_port, int64_t store_timestamp,
    bytes store_raw, int32_t store_port, int32_t reconsume_times,
):
    """``encode_one_record`` written straight into ``target`` at ``pos`` (a mapped file:
    no record object, no second copy); no transaction offset, the body's own CRC.

    Returns:
        The bytes written; -1 and nothing written where ``encode_one_record`` gives
        None, or where the record does not fit in ``target`` from ``pos``.
    """
    if target is None:
        return -1
    return _encode_one(
        target, pos, body, topic_raw, props_raw, queue_id, flag, queue_offset,
        physical_offset, sys_flag, born_timestamp, born_raw, born_port, store_timestamp,
        store_raw, store_port, reconsume_times, 0, -1,
    )


cdef object _encode_one(
    target, Py_ssize_t pos, body, bytes topic_raw, bytes props_raw, int32_t queue_id,
    int32_t flag, int64_t queue_offset, int64_t physical_offset, int32_t sys_flag,
    int64_t born_timestamp, bytes born_raw, int32_t born_port, int64_t store_timestamp,
    bytes store_raw, int32_t store_port, int32_t reconsume_times,
    int64_t prepared_transaction_offset, int64_t body_crc,
):
    """Both kernels: into ``target`` at ``pos`` (the size, or -1), or with ``target``
    None into a new bytearray (or None)."""
    cdef _Layout l = _layout(sys_flag)
    cdef Py_buffer buf, out
    cdef _One f
    cdef Py_ssize_t total
    PyObject_GetBuffer(body, &buf, PyBUF_SIMPLE)
    try:
        total = _fill_one(&f, &l, &buf, topic_raw, props_raw, queue_id, flag, queue_offset,
                          physical_offset, sys_flag, born_timestamp, born_raw, born_port,
                          store_timestamp, store_raw, store_port, reconsume_times,
                          prepared_transaction_offset, body_crc)
        if target is None:
            if total < 0:
                return None
            record = bytearray(total)
            _write_one(record, &f, &l, total)
            return record
        if total < 0 or pos < 0:
            return -1
        PyObject_GetBuffer(target, &out, PyBUF_WRITABLE)
        try:
            if total > out.len - pos:
                return -1
            _write_one(<uint8_t*>out.buf + pos, &f, &l, total)
        finally:
            PyBuffer_Release(&out)
        return total
    finally:
        PyBuffer_Release(&buf)


cdef inline Py_ssize_t _fill_one(
    _One* f, _Layout* l, Py_buffer* body, bytes topic_raw, bytes props_raw, int32_t queue_id,
    int32_t flag, int64_t queue_offset, int64_t physical_offset, int32_t sys_flag,
    int64_t born_timestamp, bytes born_raw, int32_t born_port, int64_t store_timestamp,
    bytes store_raw, int32_t store_port, int32_t reconsume_times,
    int64_t prepared_transaction_offset, int64_t body_crc,
):
    """Fill ``f`` from the kernels' arguments; the record's size, or -1 (``_one_size``)."""
    f.body = <const uint8_t*>body.buf
    f.body_len = body.len
    f.topic = <const char*>topic_raw
    f.topic_len = len(topic_raw)
    f.props = <const char*>props_raw
    f.props_len = len(props_raw)
    f.queue_id = queue_id
    f.flag = flag
    f.queue_offset = queue_offset
    f.physical_offset = physical_offset
    f.sys_flag = sys_flag
    f.born_timestamp = born_timestamp
    f.born_ip = <const char*>born_raw
    f.born_port = born_port
    f.store_timestamp = store_timestamp
    f.store_ip = <const char*>store_raw
    f.store_port = store_port
    f.reconsume_times = reconsume_times
    f.prepared_transaction_offset = prepared_transaction_offset
    f.body_crc = body_crc
    return _one_size(f, l, len(born_raw), len(store_raw))


cdef inline Py_ssize_t _separator(
    const uint8_t* props, Py_ssize_t props_len, Py_ssize_t batch_len
) noexcept:
    # RocketMQ 4.9 puts a \x02 between an entry's properties and the batch's only when
    # both are non-empty and the entry's do not already end with one.
    return 1 if props_len > 0 and batch_len > 0 and props[props_len - 1] != 2 else 0


# ------------------------------------------------------------- the append's patch


def frame_records(records, Py_ssize_t min_size):
    """TOTALSIZE of each record back to back, or None if they do not fill ``records``
    (``commit_log_batch.frame_batch``)."""
    cdef Py_buffer buf
    cdef Py_ssize_t pos = 0, end
    cdef int32_t total
    cdef list sizes = []
    PyObject_GetBuffer(records, &buf, PyBUF_SIMPLE)
    try:
        end = buf.len
        while pos < end:
            if end - pos < min_size:
                return None
            total = _i32(<const uint8_t*>buf.buf + pos)
            if total < min_size or pos + total > end:
                return None
            sizes.append(total)
            pos += total
    finally:
        PyBuffer_Release(&buf)
    return sizes or None


def patch_records(records, list sizes, int64_t base, int64_t first_queue_offset,
                  int64_t store_timestamp):
    """``commit_log_batch.patch_batch``: QUEUEOFFSET, PHYSICALOFFSET and STORETIMESTAMP of
    each framed record (the store time at 56, or 68 after a 16-byte born host); the
    records' physical offsets."""
    cdef Py_buffer buf
    cdef Py_ssize_t pos = 0, index, count = len(sizes)
    cdef uint8_t* p
    cdef list offsets = []
    PyObject_GetBuffer(records, &buf, PyBUF_WRITABLE)
    try:
        for index in range(count):
            p = <uint8_t*>buf.buf + pos
            offsets.append(base + pos)
            _put64(p + 20, <uint64_t>(first_queue_offset + index))
            _put64(p + 28, <uint64_t>(base + pos))
            _put64(p + (68 if _i32(p + 36) & 0x10 else 56), <uint64_t>store_timestamp)
            pos += <Py_ssize_t>sizes[index]
    finally:
        PyBuffer_Release(&buf)
    return offsets


# ------------------------------------------------------------- dispatch requests


_DISPATCH_FIELDS = (
    "topic", "queue_id", "commit_log_offset", "msg_size", "tags_code", "store_timestamp",
    "consume_queue_offset", "keys", "uniq_key", "sys_flag", "prepared_transaction_offset",
    "properties_raw", "properties",
)
"""``DispatchRequest``'s slots, in the order ``dispatch_requests`` writes them."""


cdef struct _Picked:
    Py_ssize_t start[3]
    Py_ssize_t end[3]


cdef void _pick(
    const uint8_t* p, Py_ssize_t n, const char** names, Py_ssize_t* lens, _Picked* out
) noexcept:
    """``select_properties`` of three ASCII names over the properties' UTF-8 bytes: where
    each value starts and ends (start -1: absent). The same answer as over the decoded
    text: the separators are single bytes that no multi-byte sequence contains, an
    ASCII name matches its bytes only, and decoding with surrogateescape is one to
    one, so a value's bytes decode to the text's substring."""
    cdef Py_ssize_t start = 0, end, sep
    cdef int k
    for k in range(3):
        out.start[k] = -1
    while start < n:
        end, sep = start, -1
        while end < n and p[end] != 2:
            if p[end] == 1 and sep < 0:
                sep = end
            end += 1
        if start < sep < end - 1:  # a later pair wins, as in the map
            for k in range(3):
                if sep - start == lens[k] and memcmp(p + start, names[k], lens[k]) == 0:
                    out.start[k], out.end[k] = sep + 1, end
        start = end + 1


cdef inline bint _same_value(
    const uint8_t* last, Py_ssize_t last_len, const uint8_t* p, _Picked* picked
) noexcept:
    """Whether the first picked value (TAGS) is the one before (``last_len`` -1: absent
    both times; -2: no value before)."""
    if picked.start[0] < 0:
        return last_len == -1
    return last_len == picked.end[0] - picked.start[0] and memcmp(
        last, p + picked.start[0], last_len
    ) == 0


cdef inline object _picked(const uint8_t* p, _Picked* picked, int k):
    if picked.start[k] < 0:
        return None
    return PyUnicode_DecodeUTF8(
        <const char*>(p + picked.start[k]), picked.end[k] - picked.start[k], "surrogateescape"
    )


def dispatch_requests(
    view, Py_ssize_t pos, Py_ssize_t max_count, cls, select_properties, tuple names,
    tags_code, bytes stop_topic,
):
    """``(requests, ends, next_pos)``: up to ``max_count`` sound records from ``pos`` of
    ``view`` as ``cls`` (``DispatchRequest``) objects, built as the dispatcher's
    ``from_record`` builds them but with the properties kept as text (the values of
    ``names``, TAGS, KEYS and UNIQ_KEY, come from ``select_properties``), and each
    one's end. It stops before anything else (not a sound record, or a record of
    ``stop_topic``, whose tagsCode has other rules); ``next_pos`` is where the
    scanner takes over."""
    cdef Py_buffer buf
    cdef list requests = [], ends = []
    cdef Py_ssize_t size, total, count = 0, topic_pos, props_pos
    cdef const uint8_t* p
    cdef int32_t body_len, topic_len
    cdef int topic_len_size
    cdef _Layout l
    cdef const uint8_t* topic_raw = NULL
    cdef Py_ssize_t topic_raw_len = -1
    cdef Py_ssize_t stop_len = len(stop_topic)
    cdef Py_ssize_t at[13]
    cdef int i
    found = _OFFSETS.get(cls)
    if found is None:
        found = _OFFSETS[cls] = _slot_offsets(cls, _DISPATCH_FIELDS, ())
    for i in range(13):
        at[i] = found[0][i]
    topic = last_tags = None
    code = 0
    new = object.__new__
    # Three ASCII names (TAGS, KEYS, UNIQ_KEY) are picked from the bytes, and a tag is
    # compared as bytes with the one before (the text's values are those bytes decoded).
    raw_names = [name.encode() for name in names if name.isascii()]
    cdef bint by_bytes = len(names) == 3 and len(raw_names) == 3
    cdef const char* name_at[3]
    cdef Py_ssize_t name_len[3]
    cdef _Picked picked
    cdef const uint8_t* props
    cdef const uint8_t* tags_at = NULL
    cdef Py_ssize_t tags_len = -2, props_len
    for i in range(3 if by_bytes else 0):
        name_at[i], name_len[i] = <const char*>raw_names[i], len(raw_names[i])
    PyObject_GetBuffer(view, &buf, PyBUF_SIMPLE)
    try:
        size = buf.len
        while count < max_count and pos < size:
            p = <const uint8_t*>buf.buf + pos
            total = _record_size(p, size - pos)
            if total < 0:
                break
            l = _layout(_i32(p + 36))
            body_len = _i32(p + l.body - 4)
            topic_len_size = 1 if _u32(p + 4) == _MAGIC_V1 else 2
            topic_pos = l.body + body_len
            topic_len = _topic_len(p, topic_pos, topic_len_size)
            if topic_len == stop_len and memcmp(p + topic_pos + topic_len_size, <const char*>stop_topic, stop_len) == 0:
                break
            if not _same(topic_raw, topic_raw_len, p + topic_pos + topic_len_size, topic_len):
                topic_raw, topic_raw_len = p + topic_pos + topic_len_size, topic_len
                topic = PyUnicode_DecodeUTF8(<const char*>topic_raw, topic_len, "surrogateescape")
            props_pos = topic_pos + topic_len_size + topic_len + 2
            props, props_len = p + props_pos, total - props_pos
            text = PyUnicode_DecodeUTF8(<const char*>props, props_len, "surrogateescape")
            if by_bytes:
                _pick(props, props_len, name_at, name_len, &picked)
                if not _same_value(tags_at, tags_len, props, &picked):  # a run's records
                    code = tags_code(_picked(props, &picked, 0))  # mostly share a tag
                    tags_at = props + picked.start[0]
                    tags_len = picked.end[0] - picked.start[0] if picked.start[0] >= 0 else -1
                keys, uniq = _picked(props, &picked, 1), _picked(props, &picked, 2)
            else:
                tags, keys, uniq = select_properties(text, names)  # TAGS, KEYS, UNIQ_KEY
                if count == 0 or tags != last_tags:
                    code, last_tags = tags_code(tags), tags
            # Each slot written in place (the order of _DISPATCH_FIELDS): a generic
            # setattr per field cost more than all the rest of a record.
            request = new(cls)
            _put(request, at[0], topic)
            _put(request, at[1], _i32(p + 12))
            _put(request, at[2], _i64(p + 28))
            _put(request, at[3], total)
            _put(request, at[4], code)
            _put(request, at[5], _i64(p + l.store_ts))
            _put(request, at[6], _i64(p + 20))
            _put(request, at[7], keys)
            _put(request, at[8], uniq)
            _put(request, at[9], _i32(p + 36))
            _put(request, at[10], _i64(p + l.reconsume + 4))
            _put(request, at[11], text)
            _put(request, at[12], None)  # properties: parsed when asked (an arrival notice)
            requests.append(request)
            pos += total
            ends.append(pos)
            count += 1
    finally:
        PyBuffer_Release(&buf)
    return requests, ends, pos


def count_batch_entries(body, Py_ssize_t stop_after):
    """``batch_codec.py_count_batch_entries``: entries of a batch body by their
    TOTALSIZE fields alone, at most ``stop_after + 1``."""
    cdef Py_buffer buf
    cdef Py_ssize_t pos = 0, count = 0
    cdef int32_t total
    PyObject_GetBuffer(body, &buf, PyBUF_SIMPLE)
    try:
        while pos + 4 <= buf.len and count <= stop_after:
            total = _i32(<const uint8_t*>buf.buf + pos)
            if total <= 0:
                break
            pos += total
            count += 1
    finally:
        PyBuffer_Release(&buf)
    return count


cdef char* _HEX = b"0123456789ABCDEF"


def offset_msg_ids(str prefix, list offsets):
    """``msg_id.py_offset_msg_ids``: ``prefix`` (ASCII) and each offset's 16 upper-case
    hex digits; OverflowError for an offset outside 0..2**63-1 (the reference answers)."""
    cdef bytes head = prefix.encode("ascii")
    cdef Py_ssize_t n = len(head), i
    cdef list out = []
    cdef int64_t offset
    cdef char[80] text
    if n > 64:
        raise OverflowError("a prefix longer than an IPv6 host's")
    memcpy(text, <const char*>head, n)
    for value in offsets:
        offset = value
        if offset < 0:
            raise OverflowError("a negative offset")
        for i in range(16):
            text[n + i] = _HEX[(offset >> (60 - 4 * i)) & 0xF]
        out.append(PyUnicode_DecodeASCII(text, n + 16, NULL))
    return out


def body_crc32(data):
    """zlib's ``crc32(data)`` by ``aiorocketmq_crc32`` (for its tests)."""
    cdef Py_buffer buf
    PyObject_GetBuffer(data, &buf, PyBUF_SIMPLE)
    try:
        return aiorocketmq_crc32(0, <const uint8_t*>buf.buf, buf.len)
    finally:
        PyBuffer_Release(&buf)
