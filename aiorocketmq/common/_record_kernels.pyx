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

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_FromStringAndSize
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcmp


from cpython.ref cimport PyObject


cdef extern from "Python.h":
    object PyUnicode_DecodeUTF8(const char* data, Py_ssize_t size, const char* errors)
    ctypedef struct _DescrType "PyTypeObject":
        int (*tp_descr_set)(PyObject* descr, PyObject* obj, PyObject* value) except -1
    _DescrType* Py_TYPE(object o)


cdef inline void _set_slot(object descr, object obj, object value) except *:
    # A slot's member descriptor set directly: the class's properties of the same
    # names stand in front of these slots for ordinary attribute access.
    Py_TYPE(descr).tp_descr_set(<PyObject*>descr, <PyObject*>obj, <PyObject*>value)


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
    if topic_len_size == 1:
        topic_len = <signed char>p[topic_pos]
    else:
        topic_len = <int16_t>((p[topic_pos] << 8) | p[topic_pos + 1])
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
    cdef Py_ssize_t pos = 0, topic_pos, props_pos, total
    cdef const uint8_t* p
    cdef int32_t sys_flag, body_len, topic_len
    cdef int topic_len_size
    cdef _Layout l
    # A reply's records nearly always share their topic and both hosts: equal bytes
    # reuse the previous record's objects (immutable) instead of making new ones.
    cdef const uint8_t* topic_raw = NULL
    cdef const uint8_t* born_raw = NULL
    cdef const uint8_t* store_raw = NULL
    cdef Py_ssize_t topic_raw_len = -1, born_raw_len = -1, store_raw_len = -1
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
        if topic_len_size == 1:
            topic_len = <signed char>p[topic_pos]
        else:
            topic_len = <int16_t>((p[topic_pos] << 8) | p[topic_pos + 1])
        props_pos = topic_pos + topic_len_size + topic_len + 2
        msg = new(cls)
        if not _same(topic_raw, topic_raw_len, p + topic_pos + topic_len_size, topic_len):
            topic_raw, topic_raw_len = p + topic_pos + topic_len_size, topic_len
            topic = PyUnicode_DecodeUTF8(<const char*>topic_raw, topic_len, "surrogateescape")
        msg.topic = topic
        stored = PyBytes_FromStringAndSize(<const char*>(p + l.body), body_len)
        msg.body = decompress(stored, sys_flag) if sys_flag & 0x1 else stored
        msg.flag = _i32(p + 16)
        for slot in unread_slots:
            _set_slot(slot, msg, None)
        msg._properties_raw = PyUnicode_DecodeUTF8(
            <const char*>(p + props_pos), total - props_pos, "surrogateescape"
        )
        msg._offsets = offsets
        msg.transaction_id = None
        msg.queue_id = _i32(p + 12)
        msg.store_size = total
        msg.queue_offset = _i64(p + 20)
        msg.sys_flag = sys_flag
        msg.born_timestamp = _i64(p + 40)
        if not _same(born_raw, born_raw_len, p + l.born_ip, l.born_ip_len + 4):
            born_raw, born_raw_len = p + l.born_ip, l.born_ip_len + 4
            born = (
                PyBytes_FromStringAndSize(<const char*>born_raw, l.born_ip_len),
                _i32(born_raw + l.born_ip_len),
            )
        msg._born_raw = born
        msg.store_timestamp = _i64(p + l.store_ts)
        if not _same(store_raw, store_raw_len, p + l.store_ip, l.store_ip_len + 4):
            store_raw, store_raw_len = p + l.store_ip, l.store_ip_len + 4
            store = (
                PyBytes_FromStringAndSize(<const char*>store_raw, l.store_ip_len),
                _i32(store_raw + l.store_ip_len),
            )
        msg._store_raw = store
        msg.commit_log_offset = _i64(p + 28)
        msg.body_crc = _i32(p + 8)
        msg.reconsume_times = _i32(p + l.reconsume)
        msg.prepared_transaction_offset = _i64(p + l.reconsume + 4)
        out.append(msg)
        pos += total
    return out
