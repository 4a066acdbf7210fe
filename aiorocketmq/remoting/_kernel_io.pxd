# cython: language_level=3
"""What the remoting kernels share (``_frame_kernels.pyx``, ``_json_kernels.pyx``):
a reader over a header's bytes, a growing writer for a frame's head, and the checks
and byte orders of the frame's words. Inline, so each kernel compiles its own copy."""

from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from libc.stdint cimport int64_t, uint8_t, uint32_t
from libc.string cimport memcpy

from aiorocketmq.common._slots cimport _cached_offsets, _put as _put_slot


cdef extern from "Python.h":
    object PyUnicode_DecodeUTF8(const char* data, Py_ssize_t size, const char* errors)
    const char* PyUnicode_AsUTF8AndSize(object text, Py_ssize_t* size) except NULL


cdef struct _Reader:
    const uint8_t* data
    Py_ssize_t pos
    Py_ssize_t end
    bint bad


cdef struct _Writer:
    char* out
    Py_ssize_t size
    Py_ssize_t cap


cdef inline bint _in_int32(int64_t x) noexcept:
    return -2147483648 <= x <= 2147483647


cdef inline bint _int32(object x):
    # IntEnum codes count (both codecs write them as ints); bool is an int to Python only.
    return isinstance(x, int) and type(x) is not bool and -2147483648 <= x <= 2147483647


cdef inline uint32_t _word(const uint8_t* p) noexcept:
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3]


cdef inline void _be_into(char* out, uint32_t value) noexcept:
    out[0] = <char>(value >> 24)
    out[1] = <char>((value >> 16) & 0xFF)
    out[2] = <char>((value >> 8) & 0xFF)
    out[3] = <char>(value & 0xFF)


cdef inline int _open_head(_Writer* w, Py_ssize_t cap) except -1:
    """Start a frame's head: room for the 8-byte prefix, written by ``_close_head``."""
    w.cap, w.size = cap, 8
    w.out = <char*>PyMem_Malloc(cap)
    if w.out == NULL:
        raise MemoryError()
    return 0


cdef inline object _close_head(_Writer* w, uint32_t serialize_type, Py_ssize_t body_length,
                               Py_ssize_t max_frame_length):
    """The head as bytes (prefix written), or None when the frame would be too long for
    the reference to write (it then says so). Frees the writer either way."""
    cdef Py_ssize_t header_len = w.size - 8
    cdef Py_ssize_t length = 4 + header_len + body_length
    try:
        if header_len > 0xFFFFFF or length + 4 > max_frame_length:
            return None
        _be_into(w.out, <uint32_t>length)
        _be_into(w.out + 4, (serialize_type << 24) | <uint32_t>header_len)
        return PyBytes_FromStringAndSize(w.out, w.size)
    finally:
        PyMem_Free(w.out)
        w.out = NULL


cdef inline int _reserve(_Writer* w, Py_ssize_t more) except -1:
    cdef Py_ssize_t cap = w.cap
    cdef char* grown
    if w.size + more <= cap:
        return 0
    while cap < w.size + more:
        cap *= 2
    grown = <char*>PyMem_Realloc(w.out, cap)
    if grown == NULL:
        raise MemoryError()
    w.out, w.cap = grown, cap
    return 0


cdef inline int _put(_Writer* w, const char* raw, Py_ssize_t n) except -1:
    _reserve(w, n)
    memcpy(w.out + w.size, raw, n)
    w.size += n
    return 0


cdef inline bint _usual_text(remark, dict ext):
    """A remark that is None or a str, and extFields of str -> str: what both codecs'
    kernels write; anything else is the reference's to write or refuse."""
    if remark is not None and type(remark) is not str:
        return False
    for key, value in ext.items():
        if type(key) is not str or type(value) is not str:
            return False
    return True


cdef inline int64_t _whole_frame(const uint8_t* data, Py_ssize_t size, Py_ssize_t pos,
                                 Py_ssize_t max_frame_length, uint32_t serialize_type,
                                 Py_ssize_t* header_len) noexcept:
    """The length word of the whole frame of ``serialize_type`` at ``pos`` (its header's
    length in ``header_len``), or -1: cut short, a length outside [4, max - 4], another
    type, or a header longer than its frame (the reference judges those)."""
    cdef int64_t length
    cdef uint32_t info
    if size - pos < 8:
        return -1
    length = <int>_word(data + pos)  # a signed int32, as the reference reads it
    if length < 4 or length + 4 > max_frame_length or pos + 4 + length > size:
        return -1
    info = _word(data + pos + 4)
    header_len[0] = info & 0xFFFFFF
    if (info >> 24) != serialize_type or 4 + header_len[0] > length:
        return -1
    return length


# ------------------------------------------------------------------ a new command

# A decoded frame's command is built in place: its slots written at their member
# descriptors' offsets (``common/_slots.pxd``), not through the dataclass's
# ``__init__`` (a Python frame per command, ~0.15 µs, on every frame either way).
cdef inline tuple _command_offsets(cls, dict cache):
    """Where ``cls``'s ten fields live (cached in ``cache``); ValueError if one is not
    a slot."""
    return _cached_offsets(cls, (
        "code", "opaque", "flag", "language", "version", "remark", "ext_fields", "body",
        "serialize_type", "body_parts",
    ), cache)


cdef inline object _new_command(tuple at, cls, code, opaque, flag, language, version,
                                remark, ext, body, serialize_type):
    """``cls(code, opaque, flag, language, version, remark, ext, body, serialize_type)``
    with ``body_parts`` None, ``at`` being ``_command_offsets(cls)``."""
    command = object.__new__(cls)
    _put_slot(command, <Py_ssize_t>at[0], code)
    _put_slot(command, <Py_ssize_t>at[1], opaque)
    _put_slot(command, <Py_ssize_t>at[2], flag)
    _put_slot(command, <Py_ssize_t>at[3], language)
    _put_slot(command, <Py_ssize_t>at[4], version)
    _put_slot(command, <Py_ssize_t>at[5], remark)
    _put_slot(command, <Py_ssize_t>at[6], ext)
    _put_slot(command, <Py_ssize_t>at[7], body)
    _put_slot(command, <Py_ssize_t>at[8], serialize_type)
    _put_slot(command, <Py_ssize_t>at[9], None)
    return command
