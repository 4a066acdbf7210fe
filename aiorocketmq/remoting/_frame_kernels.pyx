# cython: language_level=3, boundscheck=False, wraparound=False
"""C kernels of ``remoting.frame``: the MSGPACK header of the usual command.

Owns: ``decode_msgpack_header`` and ``encode_msgpack_head``, the compiled twins of
the MSGPACK paths in ``frame.py`` for the shape every command of ours has: an array
``[code, language, version, opaque, flag, remark|nil, {str: str}]`` with int32 ints;
and ``split_msgpack``, which turns a run of whole MSGPACK frames of that shape into
commands, as ``FrameDecoder`` does one frame at a time.

Must not: decide anything the reference would decide differently. Each kernel
answers only the usual shape and returns None for anything else (an odd type, an
int out of range, a string that is not UTF-8, trailing bytes...), and the
pure-Python path then gives the answer, or the error, with its own words. Encoding
is byte for byte what ``msgpack.packb(..., use_bin_type=True)`` writes (the
smallest form of each int, string, map and array), which the tests check against
msgpack itself.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.mem cimport PyMem_Free
from libc.stdint cimport int64_t, uint8_t, uint32_t
from libc.string cimport memcpy

from aiorocketmq.remoting._kernel_io cimport (
    PyUnicode_AsUTF8AndSize, PyUnicode_DecodeUTF8, _close_head, _in_int32, _int32, _open_head,
    _command_offsets, _new_command, _Reader, _reserve, _usual_text, _whole_frame, _Writer,
)

_COMMAND_OFFSETS = {}  # class -> where its fields live (``_command_offsets``)


# ------------------------------------------------------------------------ decode


cdef inline uint32_t _be(_Reader* r, int width) noexcept:
    cdef uint32_t value = 0
    cdef int i
    if r.end - r.pos < width:
        r.bad = True
        return 0
    for i in range(width):
        value = (value << 8) | r.data[r.pos + i]
    r.pos += width
    return value


cdef inline int _byte(_Reader* r) noexcept:
    if r.pos >= r.end:
        r.bad = True
        return -1
    r.pos += 1
    return r.data[r.pos - 1]


cdef int64_t _read_int(_Reader* r) noexcept:
    """An int of any msgpack form, within int32; else ``bad``."""
    cdef int b = _byte(r)
    cdef int64_t value
    if b < 0:
        return 0
    if b <= 0x7F:
        return b
    if b >= 0xE0:
        return b - 0x100
    if b == 0xCC:
        return _be(r, 1)
    if b == 0xCD:
        return _be(r, 2)
    if b == 0xCE:
        value = _be(r, 4)
    elif b == 0xD0:
        value = <signed char>_be(r, 1)
    elif b == 0xD1:
        value = <short>_be(r, 2)
    elif b == 0xD2:
        value = <int>_be(r, 4)
    else:  # 64-bit forms, floats, anything else: the reference decides
        r.bad = True
        return 0
    if not _in_int32(value):
        r.bad = True
    return value


cdef object _read_str(_Reader* r):
    """A str, or None with ``bad`` set (not a str, truncated, not UTF-8)."""
    cdef int b = _byte(r)
    cdef Py_ssize_t n
    if 0xA0 <= b <= 0xBF:
        n = b - 0xA0
    elif b == 0xD9:
        n = _be(r, 1)
    elif b == 0xDA:
        n = _be(r, 2)
    elif b == 0xDB:
        n = _be(r, 4)
    else:
        r.bad = True
        return None
    if r.bad or r.end - r.pos < n:
        r.bad = True
        return None
    try:
        text = PyUnicode_DecodeUTF8(<const char*>(r.data + r.pos), n, NULL)
    except UnicodeDecodeError:
        r.bad = True
        return None
    r.pos += n
    return text


def decode_msgpack_header(data):
    """``(code, opaque, flag, language value, version, remark, ext)``, or None (see above)."""
    cdef Py_buffer buf
    PyObject_GetBuffer(data, &buf, PyBUF_SIMPLE)
    try:
        return _decode(<const uint8_t*>buf.buf, buf.len)
    finally:
        PyBuffer_Release(&buf)


cdef object _decode(const uint8_t* data, Py_ssize_t size):
    cdef _Reader r
    cdef int b
    cdef Py_ssize_t n, i
    cdef int64_t code, language, version, opaque, flag
    r.data, r.pos, r.end, r.bad = data, 0, size, False
    if _byte(&r) != 0x97:
        return None
    code = _read_int(&r)
    language = _read_int(&r)
    version = _read_int(&r)
    opaque = _read_int(&r)
    flag = _read_int(&r)
    if r.bad:
        return None
    remark = None
    if r.pos < r.end and r.data[r.pos] == 0xC0:
        r.pos += 1
    else:
        remark = _read_str(&r)
        if r.bad:
            return None
    b = _byte(&r)
    if 0x80 <= b <= 0x8F:
        n = b - 0x80
    elif b == 0xDE:
        n = _be(&r, 2)
    elif b == 0xDF:
        n = _be(&r, 4)
    else:
        return None
    ext = {}
    for i in range(n):
        key = _read_str(&r)
        if r.bad:
            return None
        value = _read_str(&r)
        if r.bad:
            return None
        ext[key] = value
    if r.bad or r.pos != r.end:
        return None
    return code, opaque, flag, language, version, remark, ext


# ------------------------------------------------------------------------ frames


cdef int _MSGPACK = 2  # SerializeType.MSGPACK, the header-info word's high byte


def split_msgpack(buf, Py_ssize_t pos, Py_ssize_t max_frame_length, cls, dict languages,
                  other_language, serialize_type):
    """``(commands, pos)``: the commands of the whole frames of ``buf`` from ``pos`` on,
    while each is a MSGPACK frame whose header has the usual shape, and the position of
    the first frame not taken.

    It stops at a frame that is cut short, or that the reference must judge: a length
    outside [4, max_frame_length - 4], another serialize type, a header longer than its
    frame, or a header ``decode_msgpack_header`` declines. A command is
    ``cls(code, opaque, flag, language, version, remark, ext, body, serialize_type)``
    with the language looked up in ``languages`` (``other_language`` when unknown) and
    the body copied into ``bytes``: what ``decode_frame_payload`` gives.
    """
    cdef Py_buffer view
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        return _split(<const uint8_t*>view.buf, view.len, pos, max_frame_length, cls,
                      languages, other_language, serialize_type)
    finally:
        PyBuffer_Release(&view)


cdef tuple _split(const uint8_t* data, Py_ssize_t size, Py_ssize_t pos,
                  Py_ssize_t max_frame_length, cls, dict languages, other_language,
                  serialize_type):
    cdef list commands = []
    cdef int64_t length
    cdef Py_ssize_t header_len, head
    cdef tuple at = _command_offsets(cls, _COMMAND_OFFSETS)
    while True:
        length = _whole_frame(data, size, pos, max_frame_length, _MSGPACK, &header_len)
        if length < 0:
            break
        head = pos + 8
        fields = _decode(data + head, header_len)
        if fields is None:
            break
        code, opaque, flag, language, version, remark, ext = <tuple>fields
        body = PyBytes_FromStringAndSize(
            <const char*>(data + head + header_len), length - 4 - header_len
        )
        commands.append(_new_command(
            at, cls, code, opaque, flag, languages.get(language, other_language), version,
            remark, ext, body, serialize_type,
        ))
        pos += 4 + length
    return commands, pos


# ------------------------------------------------------------------------ encode


cdef inline int _put_be(_Writer* w, int tag, uint32_t value, int width) except -1:
    cdef int i
    _reserve(w, 1 + width)
    w.out[w.size] = <char>tag
    for i in range(width):
        w.out[w.size + 1 + i] = <char>((value >> (8 * (width - 1 - i))) & 0xFF)
    w.size += 1 + width
    return 0


cdef inline int _put_byte(_Writer* w, int b) except -1:
    _reserve(w, 1)
    w.out[w.size] = <char>b
    w.size += 1
    return 0


cdef int _put_int(_Writer* w, int64_t x) except -1:
    if 0 <= x < 0x80:
        return _put_byte(w, <int>x)
    if x >= 0:
        if x < 0x100:
            return _put_be(w, 0xCC, <uint32_t>x, 1)
        if x < 0x10000:
            return _put_be(w, 0xCD, <uint32_t>x, 2)
        return _put_be(w, 0xCE, <uint32_t>x, 4)
    if x >= -32:
        return _put_byte(w, <int>(x + 0x100))
    if x >= -128:
        return _put_be(w, 0xD0, <uint32_t>(x & 0xFF), 1)
    if x >= -32768:
        return _put_be(w, 0xD1, <uint32_t>(x & 0xFFFF), 2)
    return _put_be(w, 0xD2, <uint32_t>(x & 0xFFFFFFFF), 4)


cdef int _put_str(_Writer* w, str text) except -1:
    cdef Py_ssize_t n
    cdef const char* raw = PyUnicode_AsUTF8AndSize(text, &n)
    if n < 32:
        _put_byte(w, 0xA0 | <int>n)
    elif n < 0x100:
        _put_be(w, 0xD9, <uint32_t>n, 1)
    elif n < 0x10000:
        _put_be(w, 0xDA, <uint32_t>n, 2)
    else:
        _put_be(w, 0xDB, <uint32_t>n, 4)
    _reserve(w, n)
    memcpy(w.out + w.size, raw, n)
    w.size += n
    return 0


def encode_msgpack_head(int serialize_type, code, language, version, opaque, flag, remark,
                        dict ext, Py_ssize_t body_length, Py_ssize_t max_frame_length):
    """Length prefix + header info + MSGPACK header of one frame, or None (see above)."""
    cdef _Writer w
    if not (_int32(code) and _int32(language) and _int32(version) and _int32(opaque)
            and _int32(flag)):
        return None
    if not _usual_text(remark, ext):
        return None
    _open_head(&w, 256)
    try:
        _put_byte(&w, 0x97)
        _put_int(&w, code)
        _put_int(&w, language)
        _put_int(&w, version)
        _put_int(&w, opaque)
        _put_int(&w, flag)
        if remark is None:
            _put_byte(&w, 0xC0)
        else:
            _put_str(&w, remark)
        if len(ext) < 16:
            _put_byte(&w, 0x80 | <int>len(ext))
        elif len(ext) < 0x10000:
            _put_be(&w, 0xDE, <uint32_t>len(ext), 2)
        else:
            _put_be(&w, 0xDF, <uint32_t>len(ext), 4)
        for key, value in ext.items():
            _put_str(&w, key)
            _put_str(&w, value)
    except UnicodeEncodeError:  # a lone surrogate: the reference says so in its words
        PyMem_Free(w.out)
        return None
    except BaseException:
        PyMem_Free(w.out)
        raise
    return _close_head(&w, <uint32_t>serialize_type, body_length, max_frame_length)


# ------------------------------------------------------------------------ a request

def new_command(cls, code, opaque, flag, language, version, remark, ext, body,
                serialize_type):
    """``cls(code, opaque, flag, language, version, remark, ext, body, serialize_type)``
    built in place, ``body_parts`` None: every request our clients send, with no
    dataclass ``__init__`` (a Python frame of ten stores)."""
    return _new_command(
        _command_offsets(cls, _COMMAND_OFFSETS), cls, code, opaque, flag, language, version,
        remark, ext, body, serialize_type,
    )
