# cython: language_level=3, boundscheck=False, wraparound=False
"""C kernel of a pull's scan over its ConsumeQueue units.

Owns: ``scan_units``, the compiled twin of ``get_runs.py_scan_cut`` (the tag test, the
``isTheBatchFull`` cut and what the one held run needs: the chosen records' offsets
and sizes, the run's ends, its back-to-back segments). ``get_runs`` binds it when
built (``common.kernels``) and the same tests run against both. The numpy steps cost a
32-unit pull about 25 µs whatever it held; one pass in C costs a few.

Must not: answer differently from the reference. The units are read as the
ConsumeQueue stores them (20 bytes each: offset int64, size int32, tagsCode int64,
big-endian); a size <= 0 anywhere in the slice gives None, as the reference's does.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t

DEF UNIT = 20


cdef inline int64_t _be64(const uint8_t* p) nogil:
    cdef uint64_t v = 0
    cdef int i
    for i in range(8):
        v = (v << 8) | p[i]
    return <int64_t>v


cdef inline int32_t _be32(const uint8_t* p) nogil:
    return <int32_t>((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3])


def scan_units(
    object units, int64_t first_queue_offset, object tag_codes, int64_t max_msgs,
    int64_t max_offset, int64_t memory_threshold, int64_t memory_bytes,
    int64_t memory_count, int64_t disk_bytes, int64_t disk_count,
):
    """``(cut, last_pulled, queue_offsets, starts, sizes, run_start, run_end, total,
    segments)`` of a pull over ``units`` (a contiguous ConsumeQueue slice), or None
    when a unit's size is <= 0 (``get_runs.py_scan_cut``'s contract).

    ``tag_codes`` is None (every unit matches) or a set of tagsCodes.
    """
    cdef Py_buffer buf
    PyObject_GetBuffer(units, &buf, PyBUF_SIMPLE)
    cdef const uint8_t* raw = <const uint8_t*>buf.buf
    cdef Py_ssize_t n = buf.len // UNIT
    cdef Py_ssize_t i, cut
    cdef int64_t offset, size, count = 0, total = 0, limit_bytes, limit_count
    cdef int64_t run_start = 0, run_end = 0, seg_begin = 0, seg_end = 0
    cdef bint on_disk, matched
    queue_offsets = []
    starts = []
    sizes = []
    segments = []
    try:
        if n == 0:
            return None
        for i in range(n):
            if _be32(raw + i * UNIT + 8) <= 0:
                return None
        cut = n
        for i in range(n):
            offset = _be64(raw + i * UNIT)
            size = _be32(raw + i * UNIT + 8)
            on_disk = (max_offset - offset) > memory_threshold
            limit_bytes = disk_bytes if on_disk else memory_bytes
            limit_count = disk_count if on_disk else memory_count
            if count > 0 and (
                count >= max_msgs or total + size > limit_bytes or count > limit_count - 1
            ):
                cut = i
                break
            if tag_codes is None:
                matched = True
            else:
                matched = _be64(raw + i * UNIT + 12) in tag_codes
            if not matched:
                continue
            if count == 0:
                run_start, run_end = offset, offset + size
                seg_begin, seg_end = offset, offset + size
            else:
                if offset < run_start:
                    run_start = offset
                if offset + size > run_end:
                    run_end = offset + size
                if offset != seg_end:
                    segments.append((seg_begin, seg_end))
                    seg_begin = offset
                seg_end = offset + size
            queue_offsets.append(first_queue_offset + i)
            starts.append(offset)
            sizes.append(size)
            count += 1
            total += size
        if count:
            segments.append((seg_begin, seg_end))
        last_pulled = _be64(raw + (cut if cut < n else n - 1) * UNIT)
        return (
            cut, last_pulled, queue_offsets, starts, sizes, run_start, run_end, total,
            segments,
        )
    finally:
        PyBuffer_Release(&buf)
