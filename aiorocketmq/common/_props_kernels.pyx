# cython: language_level=3, boundscheck=False, wraparound=False
"""C kernel of ``common.properties``: a properties string -> its map, and back.

Owns: ``string_to_properties``, the compiled twin of ``py_string_to_properties``
(RocketMQ 4.9.8's ``string2messageProperties``), and ``peek_property``, the twin of
``py_peek_property`` (one name's value by the same rules, without the map), and
``select_properties``, the twin of ``py_select_properties`` (a few names' values in
one pass, without the map); and ``properties_to_string``, the twin of
``py_properties_to_string`` for the usual map (the reference takes the rest);
``properties`` binds them when built (``common.kernels``) and the same tests run
against both.

Must not: differ from the reference for any string. Segments end at ``\\x02``; one
counts when a ``\\x01`` splits it into a non-empty name (before the first ``\\x01``)
and a non-empty value (the rest, later ``\\x01`` included); a later name wins.
"""


from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM


cdef extern from "Python.h":
    Py_ssize_t PyUnicode_GET_LENGTH(object text)
    int PyUnicode_KIND(object text)
    void* PyUnicode_DATA(object text)
    Py_UCS4 PyUnicode_READ(int kind, void* data, Py_ssize_t index) nogil
    object PyUnicode_Substring(object text, Py_ssize_t start, Py_ssize_t end)


cdef inline Py_ssize_t _segment_end(
    int kind, void* data, Py_ssize_t n, Py_ssize_t start, Py_ssize_t* sep
) noexcept:
    """Where the segment at ``start`` ends (its ``\\x02``, or ``n``); ``sep[0]`` is
    its first ``\\x01``, or -1."""
    cdef Py_ssize_t end = start
    cdef unsigned int c
    sep[0] = -1
    while end < n:
        c = <unsigned int>PyUnicode_READ(kind, data, end)
        if c == 2:
            break
        if c == 1 and sep[0] < 0:
            sep[0] = end
        end += 1
    return end


def string_to_properties(str text):
    cdef dict result = {}
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text)
    cdef int kind = PyUnicode_KIND(text)
    cdef void* data = PyUnicode_DATA(text)
    cdef Py_ssize_t start = 0, end, sep
    while start < n:
        end = _segment_end(kind, data, n, start, &sep)
        if start < sep < end - 1:
            result[PyUnicode_Substring(text, start, sep)] = PyUnicode_Substring(
                text, sep + 1, end
            )
        start = end + 1
    return result


def peek_property(str text, str name):
    """The value ``string_to_properties(text).get(name)`` would give, or "" when only
    the whole parse can tell (the last segment of that name has an empty value)."""
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text)
    cdef Py_ssize_t m = PyUnicode_GET_LENGTH(name)
    cdef int kind = PyUnicode_KIND(text)
    cdef void* data = PyUnicode_DATA(text)
    cdef int nkind = PyUnicode_KIND(name)
    cdef void* ndata = PyUnicode_DATA(name)
    cdef Py_ssize_t end = n, start, i, value_end
    cdef bint same
    if m == 0:
        return None
    for i in range(m):
        if PyUnicode_READ(nkind, ndata, i) == 1 or PyUnicode_READ(nkind, ndata, i) == 2:
            return ""  # a name no segment can have (\\x01, \\x02): the parse says
    # Segments from the last: the first whose name matches decides.
    while end >= 0:
        start = end - 1
        while start >= 0 and PyUnicode_READ(kind, data, start) != 2:
            start -= 1
        start += 1  # the segment is [start, end)
        if end - start > m and PyUnicode_READ(kind, data, start + m) == 1:
            same = True
            for i in range(m):
                if PyUnicode_READ(kind, data, start + i) != PyUnicode_READ(nkind, ndata, i):
                    same = False
                    break
            if same:
                value_end = end
                return PyUnicode_Substring(text, start + m + 1, value_end)
        end = start - 1
    return None


def select_properties(str text, tuple names):
    """``tuple(string_to_properties(text).get(name) for name in names)``, one pass."""
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text)
    cdef int kind = PyUnicode_KIND(text)
    cdef void* data = PyUnicode_DATA(text)
    cdef Py_ssize_t count = len(names), k, i, m
    cdef Py_ssize_t start = 0, end, sep
    cdef Py_ssize_t[8] value_start
    cdef Py_ssize_t[8] value_end
    cdef str name
    cdef bint same
    if count > 8:
        raise ValueError("at most 8 names")
    for k in range(count):
        value_start[k] = -1
    while start < n:
        end = _segment_end(kind, data, n, start, &sep)
        if start < sep < end - 1:  # a pair that counts: is its name one of ours?
            for k in range(count):
                name = names[k]
                m = PyUnicode_GET_LENGTH(name)
                if m != sep - start:
                    continue
                same = True
                for i in range(m):
                    if PyUnicode_READ(kind, data, start + i) != PyUnicode_READ(
                        PyUnicode_KIND(name), PyUnicode_DATA(name), i
                    ):
                        same = False
                        break
                if same:  # a later pair wins; a name given twice gets it twice
                    value_start[k], value_end[k] = sep + 1, end
        start = end + 1
    # Filled in place: a generator expression here cost more than the scan itself.
    cdef tuple result = PyTuple_New(count)
    for k in range(count):
        value = (
            PyUnicode_Substring(text, value_start[k], value_end[k]) if value_start[k] >= 0 else None
        )
        Py_INCREF(value)
        PyTuple_SET_ITEM(result, k, value)
    return result


cdef extern from "Python.h":
    Py_ssize_t PyUnicode_FindChar(object text, Py_UCS4 ch, Py_ssize_t start, Py_ssize_t end,
                                  int direction) except -2


cdef inline bint _clean(object text):
    """A non-empty str with neither separator in it."""
    cdef Py_ssize_t n
    if type(text) is not str:
        return False
    n = PyUnicode_GET_LENGTH(text)
    return (n > 0 and PyUnicode_FindChar(text, 1, 0, n, 1) == -1
            and PyUnicode_FindChar(text, 2, 0, n, 1) == -1)


def properties_to_string(properties):
    """``py_properties_to_string`` of a dict of clean strs, or None: for anything else
    (an empty or separator-bearing name or value, a value that is not a str, a mapping
    that is not a dict) the reference answers, or raises with its words."""
    if type(properties) is not dict:
        return None
    cdef list pieces = []
    for name, value in (<dict>properties).items():
        if not _clean(name) or not _clean(value):
            return None
        if pieces:
            pieces.append("\x02")
        pieces.append(name)
        pieces.append("\x01")
        pieces.append(value)
    return "".join(pieces)
