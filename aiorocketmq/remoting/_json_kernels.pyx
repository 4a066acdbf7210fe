# cython: language_level=3, boundscheck=False, wraparound=False
"""C kernels of ``remoting.frame``: the JSON header every stock client speaks.

Owns: ``decode_json_header`` and ``encode_json_head``, the compiled twins of the JSON
paths in ``frame.py`` for the usual header: one object with int32 ``code``,
``opaque``, ``flag`` and ``version``, a string ``language`` and ``remark``, and an
``extFields`` object of strings, ints, booleans and nulls; and ``split_json``, which
turns a run of whole JSON frames of that shape into commands, as ``FrameDecoder``
does one frame at a time. A stock client's request is one of these (a C++ client's
SEND_MESSAGE header took ~11 µs to decode in Python, its reply ~3.5 µs to encode).

Must not: decide anything the reference would decide differently. Each kernel
answers only the usual shape and returns None for anything else (a float, a nested
value, a duplicate key, an escaped surrogate, a raw control character, bad UTF-8, an
int out of range, trailing bytes...), and the pure-Python path then gives the answer,
or the error, with its own words. Encoding is byte for byte
``frame.encode_json_header``, which the tests check.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.stdint cimport int64_t, uint8_t, uint64_t
from libc.string cimport strlen

from aiorocketmq.remoting._kernel_io cimport (
    PyUnicode_AsUTF8AndSize, PyUnicode_DecodeUTF8, _close_head, _in_int32, _int32, _open_head,
    _command_offsets, _new_command, _put, _Reader, _usual_text, _whole_frame, _Writer,
)

_COMMAND_OFFSETS = {}  # class -> where its fields live (``_command_offsets``)


# ------------------------------------------------------------------------ JSON decode


cdef inline void _skip_ws(_Reader* r) noexcept:
    cdef uint8_t c
    while r.pos < r.end:
        c = r.data[r.pos]
        if c != 0x20 and c != 0x0A and c != 0x0D and c != 0x09:
            return
        r.pos += 1


cdef inline int _peek(_Reader* r) noexcept:
    """The next byte after whitespace (not taken), or -1 at the end."""
    _skip_ws(r)
    return r.data[r.pos] if r.pos < r.end else -1


cdef inline int _hex4(const uint8_t* p) noexcept:
    cdef int value = 0, i, c
    for i in range(4):
        c = p[i]
        if 0x30 <= c <= 0x39:
            value = value * 16 + c - 0x30
        elif 0x61 <= c <= 0x66:
            value = value * 16 + c - 0x57
        elif 0x41 <= c <= 0x46:
            value = value * 16 + c - 0x37
        else:
            return -1
    return value


cdef object _json_str(_Reader* r):
    """The string whose opening quote is at ``pos``, or None with ``bad`` set.

    Declined: a raw control character (the reference refuses it), a lone escaped
    surrogate (the reference keeps it), an unknown escape, bad UTF-8.
    """
    cdef Py_ssize_t start = r.pos + 1, i = start, j, n
    cdef bint escaped = False
    cdef uint8_t c
    cdef int e, cp, low
    cdef char* out
    while i < r.end:
        c = r.data[i]
        if c == 0x22:
            break
        if c == 0x5C:
            escaped = True
            i += 2
        elif c < 0x20:
            r.bad = True
            return None
        else:
            i += 1
    if i >= r.end:
        r.bad = True
        return None
    r.pos = i + 1
    try:
        if not escaped:
            return PyUnicode_DecodeUTF8(<const char*>(r.data + start), i - start, NULL)
        out = <char*>PyMem_Malloc(i - start)  # escapes only shrink
        if out == NULL:
            raise MemoryError()
        try:
            j, n = start, 0
            while j < i:
                c = r.data[j]
                if c != 0x5C:
                    out[n] = <char>c
                    n += 1
                    j += 1
                    continue
                e = r.data[j + 1]
                j += 2
                if e == 0x22 or e == 0x5C or e == 0x2F:
                    out[n] = <char>e
                elif e == 0x62:
                    out[n] = 8
                elif e == 0x66:
                    out[n] = 12
                elif e == 0x6E:
                    out[n] = 10
                elif e == 0x72:
                    out[n] = 13
                elif e == 0x74:
                    out[n] = 9
                elif e == 0x75 and j + 4 <= i:
                    cp = _hex4(r.data + j)
                    j += 4
                    if 0xD800 <= cp <= 0xDBFF and j + 6 <= i and r.data[j] == 0x5C \
                            and r.data[j + 1] == 0x75:
                        low = _hex4(r.data + j + 2)
                        if 0xDC00 <= low <= 0xDFFF:  # a pair: one code point, as the reference
                            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00)
                            j += 6
                    if cp < 0 or 0xD800 <= cp <= 0xDFFF:
                        r.bad = True
                        return None
                    if cp >= 0x10000:
                        out[n] = <char>(0xF0 | (cp >> 18))
                        out[n + 1] = <char>(0x80 | ((cp >> 12) & 0x3F))
                        out[n + 2] = <char>(0x80 | ((cp >> 6) & 0x3F))
                        out[n + 3] = <char>(0x80 | (cp & 0x3F))
                        n += 3
                    elif cp < 0x80:
                        out[n] = <char>cp
                    elif cp < 0x800:
                        out[n] = <char>(0xC0 | (cp >> 6))
                        out[n + 1] = <char>(0x80 | (cp & 0x3F))
                        n += 1
                    else:
                        out[n] = <char>(0xE0 | (cp >> 12))
                        out[n + 1] = <char>(0x80 | ((cp >> 6) & 0x3F))
                        out[n + 2] = <char>(0x80 | (cp & 0x3F))
                        n += 2
                else:
                    r.bad = True
                    return None
                n += 1
            return PyUnicode_DecodeUTF8(out, n, NULL)
        finally:
            PyMem_Free(out)
    except UnicodeDecodeError:
        r.bad = True
        return None


cdef Py_ssize_t _json_int(_Reader* r, int64_t* value) noexcept:
    """Read ``-?(0|[1-9][0-9]*)`` of at most 18 digits; its start, or -1 (declined:
    a float, an exponent, a longer number, not a number)."""
    cdef Py_ssize_t start = r.pos, digits = 0
    cdef bint negative = False
    cdef int64_t v = 0
    if r.pos < r.end and r.data[r.pos] == 0x2D:
        negative = True
        r.pos += 1
    if r.pos < r.end and r.data[r.pos] == 0x30:
        r.pos += 1
    else:
        while r.pos < r.end and 0x30 <= r.data[r.pos] <= 0x39 and digits < 19:
            v = v * 10 + (r.data[r.pos] - 0x30)
            r.pos += 1
            digits += 1
        if digits == 0 or digits > 18:
            r.bad = True
            return -1
    if r.pos < r.end and r.data[r.pos] in (0x2E, 0x65, 0x45):
        r.bad = True
        return -1
    value[0] = -v if negative else v
    return start


cdef inline bint _literal(_Reader* r, const char* word, Py_ssize_t n) noexcept:
    cdef Py_ssize_t i
    if r.end - r.pos < n:
        return False
    for i in range(n):
        if r.data[r.pos + i] != <uint8_t>word[i]:
            return False
    r.pos += n
    return True


cdef object _json_ext_value(_Reader* r):
    """An extFields value as the string Java sees; None for null; ``bad`` otherwise."""
    cdef int c = _peek(r)
    cdef int64_t number
    if c == 0x22:
        return _json_str(r)
    if c == 0x74 and _literal(r, "true", 4):
        return "true"
    if c == 0x66 and _literal(r, "false", 5):
        return "false"
    if c == 0x6E and _literal(r, "null", 4):
        return None
    if c == 0x2D or 0x30 <= c <= 0x39:
        if _json_int(r, &number) >= 0:
            return str(number)
    r.bad = True
    return None


cdef dict _json_ext(_Reader* r):
    """The extFields object (after its ``{``); a null drops its key, as the reference."""
    cdef dict ext = {}
    cdef set nulls = None
    if _peek(r) == 0x7D:
        r.pos += 1
        return ext
    while True:
        if _peek(r) != 0x22:
            r.bad = True
            return None
        key = _json_str(r)
        if r.bad or _peek(r) != 0x3A:
            r.bad = True
            return None
        r.pos += 1
        value = _json_ext_value(r)
        if r.bad or key in ext or (nulls is not None and key in nulls):
            r.bad = True  # a duplicate key: its order and value are the reference's call
            return None
        if value is None:
            if nulls is None:
                nulls = set()
            nulls.add(key)
        else:
            ext[key] = value
        c = _peek(r)
        r.pos += 1
        if c == 0x7D:
            return ext
        if c != 0x2C:
            r.bad = True
            return None


# The top-level keys the reference reads, as bits (a second one is declined).
cdef enum:
    _K_CODE = 1
    _K_OPAQUE = 2
    _K_FLAG = 4
    _K_LANGUAGE = 8
    _K_VERSION = 16
    _K_REMARK = 32
    _K_EXT = 64


cdef int _json_key_bit(str key) noexcept:
    if key == "code":
        return _K_CODE
    if key == "opaque":
        return _K_OPAQUE
    if key == "flag":
        return _K_FLAG
    if key == "language":
        return _K_LANGUAGE
    if key == "version":
        return _K_VERSION
    if key == "remark":
        return _K_REMARK
    if key == "extFields":
        return _K_EXT
    return 0


cdef object _decode_json(const uint8_t* data, Py_ssize_t size, dict values, dict names,
                         other_language, java_language):
    cdef _Reader r
    cdef int seen = 0, bit, c
    cdef int64_t number
    cdef int64_t ints[4]  # code, opaque, flag, version
    r.data, r.pos, r.end, r.bad = data, 0, size, False
    ints[0] = ints[1] = ints[2] = ints[3] = 0
    language = java_language
    remark = None
    ext = {}
    if _peek(&r) != 0x7B:
        return None
    r.pos += 1
    if _peek(&r) == 0x7D:
        return None  # no code: the reference says so
    while True:
        if _peek(&r) != 0x22:
            return None
        key = _json_str(&r)
        if r.bad or _peek(&r) != 0x3A:
            return None
        r.pos += 1
        bit = _json_key_bit(key)
        if bit & seen:
            return None
        seen |= bit
        c = _peek(&r)
        if bit == _K_EXT:
            if c == 0x7B:
                r.pos += 1
                ext = _json_ext(&r)
            elif not (c == 0x6E and _literal(&r, "null", 4)):
                return None
        elif bit == _K_REMARK or bit == _K_LANGUAGE or bit == 0:
            if c == 0x22:
                text = _json_str(&r)
                if bit == _K_REMARK:
                    remark = text
                elif bit == _K_LANGUAGE:
                    language = names.get(text, other_language)
            elif c == 0x6E and _literal(&r, "null", 4):
                pass  # a null remark or language is absent (language JAVA)
            elif bit == _K_REMARK:
                return None  # a number as remark: the reference writes it as text
            elif c == 0x2D or 0x30 <= c <= 0x39:
                _json_int(&r, &number)
                if bit == _K_LANGUAGE:
                    language = values.get(number, other_language)
            elif bit == 0 and (_literal(&r, "true", 4) or _literal(&r, "false", 5)):
                pass
            else:
                return None
        else:
            if _json_int(&r, &number) < 0 or not _in_int32(number):
                return None
            ints[0 if bit == _K_CODE else 1 if bit == _K_OPAQUE else
                 2 if bit == _K_FLAG else 3] = number
        if r.bad:
            return None
        c = _peek(&r)
        r.pos += 1
        if c == 0x7D:
            break
        if c != 0x2C:
            return None
    _skip_ws(&r)
    if r.pos != r.end or not (seen & _K_CODE):
        return None
    return ints[0], ints[1], ints[2], language, ints[3], remark, ext


def decode_json_header(data, dict values, dict names, other_language, java_language):
    """``(code, opaque, flag, language, version, remark, ext)`` or None (see above);
    the language is looked up in ``names`` (a string) or ``values`` (a number),
    ``other_language`` when unknown, ``java_language`` when absent."""
    cdef Py_buffer buf
    PyObject_GetBuffer(data, &buf, PyBUF_SIMPLE)
    try:
        return _decode_json(<const uint8_t*>buf.buf, buf.len, values, names, other_language,
                            java_language)
    finally:
        PyBuffer_Release(&buf)


# ------------------------------------------------------------------------ frames


cdef int _JSON = 0  # SerializeType.JSON, the header-info word's high byte


def split_json(buf, Py_ssize_t pos, Py_ssize_t max_frame_length, cls, dict languages,
               dict language_names, other_language, java_language, serialize_type):
    """``_frame_kernels.split_msgpack`` for JSON frames: ``(commands, pos)`` for the run
    of whole JSON frames from ``pos`` whose headers ``decode_json_header`` takes (with
    the same language arguments), and where the run stopped."""
    cdef Py_buffer view
    cdef list commands = []
    cdef const uint8_t* data
    cdef int64_t length
    cdef Py_ssize_t header_len, head
    cdef tuple at = _command_offsets(cls, _COMMAND_OFFSETS)
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        data = <const uint8_t*>view.buf
        while True:
            length = _whole_frame(data, view.len, pos, max_frame_length, _JSON, &header_len)
            if length < 0:
                break
            head = pos + 8
            fields = _decode_json(data + head, header_len, languages, language_names,
                                  other_language, java_language)
            if fields is None:
                break
            code, opaque, flag, language, version, remark, ext = <tuple>fields
            body = PyBytes_FromStringAndSize(
                <const char*>(data + head + header_len), length - 4 - header_len
            )
            commands.append(_new_command(
                at, cls, code, opaque, flag, language, version, remark, ext, body,
                serialize_type,
            ))
            pos += 4 + length
        return commands, pos
    finally:
        PyBuffer_Release(&view)


# ------------------------------------------------------------------------ encode


cdef inline int _lit(_Writer* w, const char* text) except -1:
    return _put(w, text, strlen(text))


cdef int _put_int(_Writer* w, int64_t x) except -1:
    cdef char digits[24]
    cdef int n = 24
    cdef bint negative = x < 0
    cdef uint64_t u = <uint64_t>(-x if negative else x)
    while True:
        n -= 1
        digits[n] = <char>(0x30 + u % 10)
        u //= 10
        if u == 0:
            break
    if negative:
        n -= 1
        digits[n] = 0x2D
    return _put(w, digits + n, 24 - n)


cdef const char* _HEX = "0123456789abcdef"


cdef int _put_json_str(_Writer* w, str text) except -1:
    """``json.encoder.encode_basestring``'s text (quotes, escapes; non-ASCII as is)."""
    cdef Py_ssize_t n, i, run = 0
    cdef const char* raw = PyUnicode_AsUTF8AndSize(text, &n)
    cdef uint8_t c
    cdef char esc[6]
    _lit(w, "\"")
    for i in range(n):
        c = <uint8_t>raw[i]
        if c >= 0x20 and c != 0x22 and c != 0x5C:
            continue
        _put(w, raw + run, i - run)
        run = i + 1
        esc[0] = 0x5C
        if c == 0x22 or c == 0x5C:
            esc[1] = <char>c
        elif c == 8:
            esc[1] = 0x62
        elif c == 12:
            esc[1] = 0x66
        elif c == 10:
            esc[1] = 0x6E
        elif c == 13:
            esc[1] = 0x72
        elif c == 9:
            esc[1] = 0x74
        else:
            esc[1], esc[2], esc[3] = 0x75, 0x30, 0x30
            esc[4], esc[5] = _HEX[c >> 4], _HEX[c & 15]
            _put(w, esc, 6)
            continue
        _put(w, esc, 2)
    _put(w, raw + run, n - run)
    return _lit(w, "\"")


def encode_json_head(code, str language_name, version, opaque, flag, remark, dict ext,
                     Py_ssize_t body_length, Py_ssize_t max_frame_length):
    """Length prefix + header info + JSON header of one frame, or None (see above)."""
    cdef _Writer w
    cdef bint first = True
    if not (_int32(code) and _int32(version) and _int32(opaque) and _int32(flag)):
        return None
    if not _usual_text(remark, ext):
        return None
    _open_head(&w, 512)
    try:
        _lit(&w, "{\"code\":")
        _put_int(&w, code)
        if ext:
            _lit(&w, ",\"extFields\":{")
            for key, value in ext.items():
                if not first:
                    _lit(&w, ",")
                first = False
                _put_json_str(&w, key)
                _lit(&w, ":")
                _put_json_str(&w, value)
            _lit(&w, "}")
        _lit(&w, ",\"flag\":")
        _put_int(&w, flag)
        _lit(&w, ",\"language\":")
        _put_json_str(&w, language_name)
        _lit(&w, ",\"opaque\":")
        _put_int(&w, opaque)
        if remark is not None:
            _lit(&w, ",\"remark\":")
            _put_json_str(&w, remark)
        _lit(&w, ",\"serializeTypeCurrentRPC\":\"JSON\",\"version\":")
        _put_int(&w, version)
        _lit(&w, "}")
    except UnicodeEncodeError:  # a lone surrogate: the reference says so in its words
        PyMem_Free(w.out)
        return None
    except BaseException:
        PyMem_Free(w.out)
        raise
    return _close_head(&w, 0, body_length, max_frame_length)  # serialize type JSON is 0
