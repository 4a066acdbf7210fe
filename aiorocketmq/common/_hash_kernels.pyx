# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""C kernels of ``common.tag_hash``: Java's ``String.hashCode`` over a str's characters.

Owns: the compiled twins of ``java_string_hash``, ``index_key_hash`` and
``index_key_hashes``. ``tag_hash`` chooses them when they are built (see
``common.kernels``); the pure-Python functions there stay the reference, and the
same tests run against both. Also ``index_key_table``, the twin of the key
gathering in ``store.index_service`` (a dispatched chunk's keys hashed in one loop,
no ``topic#key`` string built), which reads the requests' attributes by name.

Must not: differ from the reference in any bit. Java hashes UTF-16 code units: a
character outside the BMP counts as its two surrogates, a lone surrogate (which a
Python str may hold) as itself. Unsigned 32-bit arithmetic wraps exactly as Java's
``int`` does; the cast at the end gives the signed value.
"""

from libc.stdint cimport int32_t, int64_t, uint32_t

import numpy as np


cdef extern from "Python.h":
    Py_ssize_t PyUnicode_GET_LENGTH(object text)
    int PyUnicode_KIND(object text)
    void* PyUnicode_DATA(object text)
    Py_UCS4 PyUnicode_READ(int kind, void* data, Py_ssize_t index) nogil


cdef inline uint32_t _hash_more(uint32_t h, str text, Py_ssize_t start, Py_ssize_t end):
    """Java's hashCode loop over ``text[start:end]``, going on from ``h``."""
    cdef int kind = PyUnicode_KIND(text)
    cdef void* data = PyUnicode_DATA(text)
    cdef uint32_t c  # a code point as a number (Cython's Py_UCS4 is a character)
    cdef Py_ssize_t i
    for i in range(start, end):
        c = <uint32_t>PyUnicode_READ(kind, data, i)
        if c >= 0x10000:
            c -= 0x10000
            h = h * 31 + (0xD800 + (c >> 10))
            h = h * 31 + (0xDC00 + (c & 0x3FF))
        else:
            h = h * 31 + c
    return h


cdef inline int32_t _java_hash(str text):
    return <int32_t>_hash_more(0, text, 0, PyUnicode_GET_LENGTH(text))


cdef inline int64_t _abs_hash(uint32_t h):
    # Math.abs, and abs(Integer.MIN_VALUE) (still negative in Java) taken as 0.
    cdef int64_t signed = <int32_t>h
    if signed == -0x80000000:
        return 0
    return -signed if signed < 0 else signed


cdef inline int64_t _index_hash(str key):
    return _abs_hash(_hash_more(0, key, 0, PyUnicode_GET_LENGTH(key)))


def java_string_hash(str text):
    return _java_hash(text)


def index_key_hash(str key):
    return _index_hash(key)


def fill_index_key_hashes(list keys, int64_t[::1] out):
    cdef Py_ssize_t i
    for i in range(len(keys)):
        out[i] = _index_hash(keys[i])


cdef class _KeySink:
    """Where the keys of requests go, one ``add`` per key."""

    cdef void add(self, uint32_t h, int64_t owner, int64_t offset, int64_t stamp) except *:
        pass


cdef class _KeyTable(_KeySink):
    """Growable per-key columns: hash, owner (request position), offset, store time."""

    cdef int64_t[:, ::1] rows
    cdef Py_ssize_t size

    def __cinit__(self, Py_ssize_t capacity):
        self.rows = np.empty((max(capacity, 16), 4), dtype=np.int64)
        self.size = 0

    cdef void add(self, uint32_t h, int64_t owner, int64_t offset, int64_t stamp) except *:
        if self.size == self.rows.shape[0]:
            grown = np.empty((self.size * 2, 4), dtype=np.int64)
            grown[: self.size] = self.rows
            self.rows = grown
        row = self.size
        self.rows[row, 0] = _abs_hash(h)
        self.rows[row, 1] = owner
        self.rows[row, 2] = offset
        self.rows[row, 3] = stamp
        self.size += 1


cdef class _HashList(_KeySink):
    """The keys' hashes only, as a list."""

    cdef list hashes

    def __cinit__(self):
        self.hashes = []

    cdef void add(self, uint32_t h, int64_t owner, int64_t offset, int64_t stamp) except *:
        self.hashes.append(_abs_hash(h))


cdef inline uint32_t _topic_prefix(str topic):
    return _hash_more(0, topic, 0, PyUnicode_GET_LENGTH(topic)) * 31 + 35  # "#"


cdef void _add_keys(
    _KeySink sink, uint32_t prefix, object uniq, object keys, Py_ssize_t skip,
    int64_t owner, int64_t offset, int64_t stamp,
) except *:
    """``topic#UNIQ_KEY`` if any, then ``topic#word`` per non-empty word of ``keys``
    split at spaces, the first ``skip`` of them left out (``prefix``: the topic's)."""
    cdef Py_ssize_t n, start, i
    cdef str text
    cdef int kind
    cdef void* data
    if uniq is not None:
        text = uniq
        if skip:
            skip -= 1
        else:
            sink.add(_hash_more(prefix, text, 0, PyUnicode_GET_LENGTH(text)), owner, offset, stamp)
    if keys is None:
        return
    text = keys
    n = PyUnicode_GET_LENGTH(text)
    kind = PyUnicode_KIND(text)
    data = PyUnicode_DATA(text)
    start = 0
    for i in range(n + 1):
        if i < n and PyUnicode_READ(kind, data, i) != 32:  # the key separator, " "
            continue
        if i > start:
            if skip:
                skip -= 1
            else:
                sink.add(_hash_more(prefix, text, start, i), owner, offset, stamp)
        start = i + 1


def request_key_hashes(str topic, object uniq, object keys, Py_ssize_t skip):
    """The index key hashes of one request (``index_key_table``'s keys, hashes only)."""
    cdef _HashList out = _HashList()
    _add_keys(out, _topic_prefix(topic), uniq, keys, skip, 0, 0, 0)
    return out.hashes


def index_key_table(
    list requests, int64_t end_phy, int64_t resume_offset, Py_ssize_t resume_done,
    int64_t rollback,
):
    """Every index key of ``requests`` as columns, as ``index_service`` gathers them.

    Per request (``topic``, ``uniq_key``, ``keys``, ``commit_log_offset``,
    ``store_timestamp``, ``sys_flag`` attributes), skipped when its offset is below
    ``end_phy`` or ``sys_flag & rollback == rollback``: ``topic#UNIQ_KEY`` if any,
    then ``topic#word`` per non-empty word of ``keys`` split at spaces; the first
    ``resume_done`` of them dropped for the request at ``resume_offset``.

    Returns:
        ``(hashes, owners, offsets, stamps)``: int64 arrays, one entry per key.
    """
    cdef _KeyTable table = _KeyTable(2 * len(requests))
    cdef Py_ssize_t position
    cdef int64_t offset
    cdef uint32_t prefix = 0
    cdef str topic
    cdef object last_topic = None
    for position in range(len(requests)):
        request = requests[position]
        offset = request.commit_log_offset
        if offset < end_phy or (request.sys_flag & rollback) == rollback:
            continue
        topic = request.topic
        if topic is not last_topic:
            prefix = _topic_prefix(topic)
            last_topic = topic
        _add_keys(
            table, prefix, request.uniq_key, request.keys,
            resume_done if offset == resume_offset else 0,
            position, offset, request.store_timestamp,
        )
    columns = np.asarray(table.rows)[: table.size]
    return tuple(np.ascontiguousarray(columns[:, k]) for k in range(4))
