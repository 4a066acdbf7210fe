# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""C kernels of ``common.tag_hash``: Java's ``String.hashCode`` over a str's characters.

Owns: the compiled twins of ``java_string_hash``, ``index_key_hash`` and
``index_key_hashes``. ``tag_hash`` chooses them when they are built (see
``common.kernels``); the pure-Python functions there stay the reference, and the
same tests run against both.

Must not: differ from the reference in any bit. Java hashes UTF-16 code units: a
character outside the BMP counts as its two surrogates, a lone surrogate (which a
Python str may hold) as itself. Unsigned 32-bit arithmetic wraps exactly as Java's
``int`` does; the cast at the end gives the signed value.
"""

from libc.stdint cimport int32_t, int64_t, uint32_t


cdef extern from "Python.h":
    Py_ssize_t PyUnicode_GET_LENGTH(object text)
    int PyUnicode_KIND(object text)
    void* PyUnicode_DATA(object text)
    Py_UCS4 PyUnicode_READ(int kind, void* data, Py_ssize_t index) nogil


cdef inline int32_t _java_hash(str text):
    cdef uint32_t h = 0
    cdef Py_ssize_t i, n = PyUnicode_GET_LENGTH(text)
    cdef int kind = PyUnicode_KIND(text)
    cdef void* data = PyUnicode_DATA(text)
    cdef uint32_t c  # a code point as a number (Cython's Py_UCS4 is a character)
    for i in range(n):
        c = <uint32_t>PyUnicode_READ(kind, data, i)
        if c >= 0x10000:
            c -= 0x10000
            h = h * 31 + (0xD800 + (c >> 10))
            h = h * 31 + (0xDC00 + (c & 0x3FF))
        else:
            h = h * 31 + c
    return <int32_t>h


cdef inline int64_t _index_hash(str key):
    cdef int64_t h = _java_hash(key)
    # Math.abs, and abs(Integer.MIN_VALUE) (still negative in Java) taken as 0.
    if h == -0x80000000:
        return 0
    return -h if h < 0 else h


def java_string_hash(str text):
    return _java_hash(text)


def index_key_hash(str key):
    return _index_hash(key)


def fill_index_key_hashes(list keys, int64_t[::1] out):
    cdef Py_ssize_t i
    for i in range(len(keys)):
        out[i] = _index_hash(keys[i])
