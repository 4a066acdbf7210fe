# cython: language_level=3, boundscheck=False, wraparound=False
"""C kernel of ``page_ops.resident``: libc's ``mincore`` over a range of a mapping.

Owns: ``resident``, the compiled twin of ``page_ops.py_resident`` (ctypes: a vector
made, the mapping exported, the call). ``page_ops`` binds it when built
(``common.kernels``) and the same tests run against both. Every pull asks twice (its
ConsumeQueue units and its records), and a single-record read once: 1.7 µs a call
through ctypes, a fraction of that here.

Must not: answer differently from the reference: True where it cannot be told (a
read-only mapping, a failing call), the buffer export held only during the call.
"""

from cpython.buffer cimport PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from libc.stdlib cimport free, malloc


cdef extern from "sys/mman.h" nogil:
    int mincore(void* addr, size_t length, unsigned char* vec)


cdef extern from "unistd.h" nogil:
    long sysconf(int name)
    int _SC_PAGESIZE


cdef Py_ssize_t _PAGE = sysconf(_SC_PAGESIZE)

DEF STACK_PAGES = 1024


def resident(object mm, Py_ssize_t start, Py_ssize_t end):
    """Whether every page of ``[start, end)`` of ``mm`` is in memory (``py_resident``)."""
    if end <= start:
        return True
    cdef Py_buffer buf
    try:
        PyObject_GetBuffer(mm, &buf, PyBUF_WRITABLE)
    except BufferError:  # a read-only mapping: ours are all writable
        return True
    cdef unsigned char stack[STACK_PAGES]
    cdef unsigned char* vec = stack
    cdef Py_ssize_t pages, i
    cdef int rc
    try:
        start -= start % _PAGE
        pages = (end - start + _PAGE - 1) // _PAGE
        if pages > STACK_PAGES:
            vec = <unsigned char*>malloc(pages)
            if vec == NULL:
                return True
        rc = mincore(<char*>buf.buf + start, <size_t>(end - start), vec)
        if rc != 0:
            return True
        for i in range(pages):
            if not (vec[i] & 1):
                return False
        return True
    finally:
        if vec != stack:
            free(vec)
        PyBuffer_Release(&buf)
