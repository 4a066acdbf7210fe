# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=False
"""C kernel of ``store.index_file``: many keys' items written into an IndexFile at once.

Owns: ``put_hashes``, the compiled twin of ``IndexFile.put_hashes``: the ``putKey``
loop over a chunk's hashes in C, writing items into the mapping and slots and header
into ``head`` (the mapping itself, or the file's shadow copy of its first
``40 + slots*4`` bytes, whose touched 4 KiB pages it marks in ``dirty``).
``index_file`` binds it when built (``common.kernels``); the property test
that holds ``put_hashes`` to ``put_key`` one key at a time runs against both.

Must not: write anything ``put_key`` one by one would not, in any bit. Per key, as
``IndexFile._put_hash``: the slot's head counts only within ``[1, count]``; timeDiff
is ``(store time - beginTimestamp) // 1000`` against the begin values *before* this
key (0 without a begin), clamped to ``[0, 2**31 - 1]``; the first items (count <= 1)
set the begin values; an empty head counts a new slot. The header's counters and end
values are written once at the end, holding what the last key left (nothing reads
the mapping in between: the loop does not yield).
"""

from cpython.buffer cimport PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t


cdef int64_t _INT_MAX = 0x7FFFFFFF


cdef inline int32_t _get32(const uint8_t* p) noexcept:
    return <int32_t>((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3])


cdef inline void _put32(uint8_t* p, uint32_t v) noexcept:
    p[0] = (v >> 24) & 0xFF
    p[1] = (v >> 16) & 0xFF
    p[2] = (v >> 8) & 0xFF
    p[3] = v & 0xFF


cdef inline void _put64(uint8_t* p, uint64_t v) noexcept:
    _put32(p, <uint32_t>(v >> 32))
    _put32(p + 4, <uint32_t>(v & 0xFFFFFFFF))


cdef inline int64_t _floordiv1000(int64_t x) noexcept:
    # Python's floor division (C's truncates towards zero for negative values).
    cdef int64_t q = x // 1000
    return q


def put_hashes(
    buf, head, dirty, Py_ssize_t items_base, int64_t slot_num, int64_t index_num, int64_t count,
    int64_t slot_count, int64_t begin_ts, int64_t begin_phy,
    const int64_t[::1] hashes, const int64_t[::1] phys, const int64_t[::1] tss,
):
    """``(done, count, slot_count, begin_ts, begin_phy)`` after writing ``done`` items."""
    cdef Py_ssize_t n = hashes.shape[0]
    if phys.shape[0] < n or tss.shape[0] < n:
        raise ValueError("fewer offsets or times than hashes")
    if n == 0:
        return 0, count, slot_count, begin_ts, begin_phy
    return _put_all(
        buf, head, dirty, items_base, slot_num, index_num, count, slot_count, begin_ts,
        begin_phy, &hashes[0], &phys[0], &tss[0], n,
    )


def put_hash_list(
    buf, head, dirty, Py_ssize_t items_base, int64_t slot_num, int64_t index_num, int64_t count,
    int64_t slot_count, int64_t begin_ts, int64_t begin_phy, list hashes, list phys, list tss,
):
    """``put_hashes`` for a few keys given as lists (a single send's), no arrays made."""
    cdef int64_t h[16]
    cdef int64_t p[16]
    cdef int64_t t[16]
    cdef Py_ssize_t n = len(hashes), i
    if n > 16 or len(phys) < n or len(tss) < n:
        raise ValueError("at most 16 keys, each with its offset and time")
    for i in range(n):
        h[i], p[i], t[i] = hashes[i], phys[i], tss[i]
    return _put_all(
        buf, head, dirty, items_base, slot_num, index_num, count, slot_count, begin_ts,
        begin_phy, h, p, t, n,
    )


cdef tuple _put_all(
    buf, head, dirty, Py_ssize_t items_base, int64_t slot_num, int64_t index_num,
    int64_t count, int64_t slot_count, int64_t begin_ts, int64_t begin_phy,
    const int64_t* hashes, const int64_t* phys, const int64_t* tss, Py_ssize_t n,
):
    cdef Py_buffer view, head_view, dirty_view
    cdef uint8_t* base
    cdef uint8_t* hbase
    cdef uint8_t* marks = NULL
    cdef Py_ssize_t i, done = 0
    cdef int64_t h, phy, ts, prev, diff, slot_pos
    cdef uint8_t* item
    PyObject_GetBuffer(buf, &view, PyBUF_WRITABLE)
    try:
        PyObject_GetBuffer(head, &head_view, PyBUF_WRITABLE)
        try:
            if dirty is not None:
                PyObject_GetBuffer(dirty, &dirty_view, PyBUF_WRITABLE)
                marks = <uint8_t*>dirty_view.buf
            try:
                if items_base + index_num * 20 > view.len or items_base > head_view.len:
                    raise ValueError("index buffer too small")
                if marks != NULL and dirty_view.len <= (items_base - 1) >> 12:
                    raise ValueError("dirty marks too few for the slot table")
                base = <uint8_t*>view.buf
                hbase = <uint8_t*>head_view.buf
                for i in range(n):
                    if count >= index_num:
                        break
                    h, phy, ts = hashes[i], phys[i], tss[i]
                    slot_pos = 40 + (h % slot_num) * 4
                    prev = _get32(hbase + slot_pos)
                    if prev <= 0 or prev > count:
                        prev = 0
                    if begin_ts > 0:
                        diff = _floordiv1000(ts - begin_ts)
                        if diff < 0:
                            diff = 0
                        elif diff > _INT_MAX:
                            diff = _INT_MAX
                    else:
                        diff = 0
                    item = base + items_base + count * 20
                    _put32(item, <uint32_t>h)
                    _put64(item + 4, <uint64_t>phy)
                    _put32(item + 12, <uint32_t>diff)
                    _put32(item + 16, <uint32_t>prev)
                    _put32(hbase + slot_pos, <uint32_t>count)
                    if marks != NULL:
                        marks[slot_pos >> 12] = 1
                    if count <= 1:
                        begin_phy, begin_ts = phy, ts
                        _put64(hbase + 16, <uint64_t>phy)
                        _put64(hbase, <uint64_t>ts)
                    if prev == 0:
                        slot_count += 1
                    count += 1
                    done += 1
                if done:
                    _put32(hbase + 32, <uint32_t>slot_count)
                    _put32(hbase + 36, <uint32_t>count)
                    _put64(hbase + 24, <uint64_t>phys[done - 1])
                    _put64(hbase + 8, <uint64_t>tss[done - 1])
                    if marks != NULL:
                        marks[0] = 1
            finally:
                if marks != NULL:
                    PyBuffer_Release(&dirty_view)
        finally:
            PyBuffer_Release(&head_view)
    finally:
        PyBuffer_Release(&view)
    return done, count, slot_count, begin_ts, begin_phy
