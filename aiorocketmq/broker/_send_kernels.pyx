# cython: language_level=3, boundscheck=False, wraparound=False
"""C kernel of ``broker.plain_send``: a plain single send's header and properties.

Owns: ``plain_send_fields``, the compiled twin of ``py_plain_send_fields``: from a
SEND_MESSAGE_V2 header's extFields (or SEND_MESSAGE's, by their long names), the values a plain single send stores, in one
pass over the header and one over the properties text, with no header object and no
join of the properties.

Must not: accept what the reference refuses, or return other values than it does.
It may decline (None) whatever the reference accepts but is not its usual form: a
header field that is not plain digits or a usual boolean, properties that are not
one distinct pair per segment; the caller's general path then decides.
"""

from cpython.dict cimport PyDict_GetItem
from cpython.object cimport PyObject


cdef extern from "Python.h":  # (len() and slices of a typed str compile to C calls)
    int PyUnicode_KIND(object text)
    void* PyUnicode_DATA(object text)
    Py_UCS4 PyUnicode_READ(int kind, void* data, Py_ssize_t index) nogil


cdef str _WAIT = "WAIT"
cdef str _CLUSTER = "CLUSTER"
cdef frozenset _REFUSED = frozenset(("TRAN_MSG", "DELAY", "CLUSTER"))
cdef str _TIMER = "TIMER_"


cdef inline object _field(dict fields, str key):
    cdef PyObject* value = PyDict_GetItem(fields, key)
    return None if value == NULL else <object>value


cdef long long _digits(object value, Py_ssize_t limit):
    """The value of 1 to ``limit - 1`` ASCII digits; -1 for anything else."""
    if type(value) is not str:
        return -1
    cdef str text = value
    cdef Py_ssize_t n = len(text), i
    if n == 0 or n >= limit:
        return -1
    cdef int kind = PyUnicode_KIND(text)
    cdef void* data = PyUnicode_DATA(text)
    cdef long long result = 0
    cdef unsigned int c
    for i in range(n):
        c = <unsigned int>PyUnicode_READ(kind, data, i)
        if c < 48 or c > 57:
            return -1
        result = result * 10 + (c - 48)
    return result


cdef int _boolean(object value):
    """An absent or usual boolean text: 0 or 1; -1 for any other."""
    if value is None:
        return 0
    if type(value) is not str:
        return -1
    if value == "false" or value == "0":
        return 0
    if value == "true" or value == "1":
        return 1
    return -1


cdef object _stored(str text, str cluster):
    """``(props, stored)`` as ``sent_to_stored`` gives them, or None (see the module)."""
    cdef Py_ssize_t n = len(text)
    cdef int kind = PyUnicode_KIND(text)
    cdef void* data = PyUnicode_DATA(text)
    cdef Py_ssize_t start = 0, end, sep, wait_start = -1, wait_end = -1, base_end
    cdef dict props = {}
    cdef str name, base
    cdef unsigned int c
    while start < n:
        end, sep = start, -1
        while end < n:
            c = <unsigned int>PyUnicode_READ(kind, data, end)
            if c == 2:
                break
            if c == 1 and sep < 0:
                sep = end
            end += 1
        if not start < sep < end - 1:
            return None  # a segment that is no pair
        name = text[start:sep]
        if name in props or name in _REFUSED or name.startswith(_TIMER):
            return None
        props[name] = text[sep + 1 : end]
        if name == _WAIT:
            wait_start, wait_end = start, end
        start = end + 1
    base_end = n - 1 if n and PyUnicode_READ(kind, data, n - 1) == 2 else n
    if wait_start < 0:
        base = text[:base_end]
    elif wait_start == 0:  # the first segment: it goes with the separator after it
        base = text[min(wait_end + 1, base_end) : base_end]
    else:  # later: with the separator before it
        base = text[: wait_start - 1] + text[wait_end:base_end]
    props[_CLUSTER] = cluster
    pair = _CLUSTER + "\x01" + cluster
    return props, (base + "\x02" + pair) if base else pair


def plain_send_fields(dict fields, str cluster, Py_ssize_t max_properties_size,
                      tuple names):
    cdef long long queue_id, sys_flag, born, flag, reconsume = 0
    if len(names) != 13:
        raise ValueError("names: the 13 header fields' names, in Java's order")
    topic = _field(fields, names[1])
    if (
        type(_field(fields, names[0])) is not str or type(topic) is not str
        or type(_field(fields, names[2])) is not str
    ):
        return None
    if _digits(_field(fields, names[3]), 10) < 0:
        return None
    queue_id = _digits(_field(fields, names[4]), 10)
    sys_flag = _digits(_field(fields, names[5]), 10)
    born = _digits(_field(fields, names[6]), 19)
    flag = _digits(_field(fields, names[7]), 10)
    if queue_id < 0 or sys_flag < 0 or born < 0 or flag < 0:
        return None
    value = _field(fields, names[9])
    if value is not None:
        reconsume = _digits(value, 10)
        if reconsume < 0:
            return None
    value = _field(fields, names[11])
    if value is not None and _digits(value, 10) < 0:
        return None
    if _boolean(_field(fields, names[10])) < 0 or _boolean(_field(fields, names[12])) != 0:
        return None
    text = _field(fields, names[8])
    if text is None:
        text = ""
    elif type(text) is not str:
        return None
    if len(<str>text) * 4 > max_properties_size:
        return None
    stored = _stored(text, cluster)
    if stored is None:
        return None
    return (topic, queue_id, sys_flag, born, flag, reconsume, stored[0], stored[1])
