# cython: language_level=3, boundscheck=False, wraparound=False
"""C kernel of a reput chunk's per-record bookkeeping: its requests grouped per
queue, a run's ConsumeQueue units packed, and its arrival notices chosen.

Owns: ``group_runs``, the compiled twin of ``dispatch_runs.py_group_runs``;
``newest_arrivals``, the twin of ``dispatch_runs.py_newest_arrivals``; and
``pack_units``, the twin of ``consume_queue.py_pack_consecutive``. Their modules bind
them when built (``common.kernels``) and the same tests run against both. The
requests' fields are read from their slots (``common/_slots.pxd``): an attribute
lookup per field cost more than everything else these loops do.

Must not: answer differently from the references. Consecutive records nearly always
share their queue (and tag), so each loop compares a record with the one before
before it builds a key; keys compare as the reference's dict compares them (identity,
then ``==``). Anything the kernel cannot read as the reference would (a request
that is not exactly ``cls``, a field outside its C type) raises TypeError or
OverflowError, and the caller asks the reference instead.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.stdint cimport INT64_MAX, INT64_MIN, int64_t, uint8_t, uint64_t

from aiorocketmq.common._slots cimport _get, _member_offset

from types import MemberDescriptorType


_NAMES = (
    "topic", "queue_id", "commit_log_offset", "msg_size", "tags_code",
    "consume_queue_offset", "sys_flag",
)
_OFFSETS = {}  # class -> its _NAMES' slot offsets


cdef struct _At:
    Py_ssize_t topic
    Py_ssize_t queue_id
    Py_ssize_t offset
    Py_ssize_t size
    Py_ssize_t tags
    Py_ssize_t queue_offset
    Py_ssize_t sys_flag


cdef _At _slots_of(cls) except *:
    found = _OFFSETS.get(cls)
    if found is None:
        found = _OFFSETS[cls] = tuple(
            [_member_offset(cls, name, MemberDescriptorType) for name in _NAMES]
        )
    cdef _At at
    at.topic, at.queue_id, at.offset, at.size, at.tags, at.queue_offset, at.sys_flag = found
    return at


cdef inline int _check(object request, object cls) except -1:
    if type(request) is not cls:
        raise TypeError(f"not a {cls.__name__}: {type(request).__name__}")
    return 0


cdef inline bint _same(object a, object b):
    return a is b or a == b


def group_runs(list requests, cls, int64_t no_unit):
    """``py_group_runs``: the requests whose ``sys_flag`` has none of ``no_unit``'s
    bits, per ``(topic, queue_id)`` in order of first appearance, each in order."""
    cdef _At at = _slots_of(cls)
    cdef dict runs = {}
    cdef list run = None
    topic = queue_id = last_topic = last_queue_id = None
    for request in requests:
        _check(request, cls)
        if <int64_t>_get(request, at.sys_flag) & no_unit:
            continue
        topic, queue_id = _get(request, at.topic), _get(request, at.queue_id)
        if run is None or not (_same(topic, last_topic) and _same(queue_id, last_queue_id)):
            key = (topic, queue_id)
            run = runs.get(key)
            if run is None:
                run = runs[key] = []
            last_topic, last_queue_id = topic, queue_id
        run.append(request)
    return runs


def newest_arrivals(list requests, cls):
    """``py_newest_arrivals``: the newest request (largest ``consume_queue_offset``,
    the later one on a tie) of each ``(topic, queue_id, tags_code)``."""
    cdef _At at = _slots_of(cls)
    cdef dict newest = {}
    key = seen = None
    for request in requests:
        _check(request, cls)
        topic, queue_id = _get(request, at.topic), _get(request, at.queue_id)
        tags = _get(request, at.tags)
        if key is None or not (
            _same(topic, key[0]) and _same(queue_id, key[1]) and _same(tags, key[2])
        ):
            key = (topic, queue_id, tags)
            seen = newest.get(key)
        if seen is None or _get(seen, at.queue_offset) <= _get(request, at.queue_offset):
            newest[key] = seen = request
    return newest.values()


cdef inline void _be(uint8_t* p, uint64_t value, int width) noexcept:
    cdef int i
    for i in range(width):
        p[i] = <uint8_t>(value >> (8 * (width - 1 - i)))


def pack_units(list requests, cls):
    """``py_pack_consecutive`` of a non-empty run: its units (``>qiq``: offset, size,
    tagsCode) packed, or None unless their queue offsets are consecutive and each
    record ends past the one before."""
    cdef _At at = _slots_of(cls)
    cdef Py_ssize_t n = len(requests), i
    cdef int64_t expect, last_end = -1, offset, size, end
    if n == 0:
        raise IndexError("an empty run")
    _check(requests[0], cls)
    expect = <int64_t>_get(requests[0], at.queue_offset)
    out = PyBytes_FromStringAndSize(NULL, 20 * n)
    cdef uint8_t* p = <uint8_t*>PyBytes_AS_STRING(out)
    for i in range(n):
        request = requests[i]
        _check(request, cls)
        offset = <int64_t>_get(request, at.offset)
        size = <int64_t>_get(request, at.size)
        if not -2147483648 <= size <= 2147483647 or (
            offset > INT64_MAX - size if size > 0 else offset < INT64_MIN - size
        ):
            raise OverflowError("a unit field outside its struct range")
        end = offset + size
        if <int64_t>_get(request, at.queue_offset) != expect or end <= last_end:
            return None
        _be(p, <uint64_t>offset, 8)
        _be(p + 8, <uint64_t>size, 4)
        _be(p + 12, <uint64_t><int64_t>_get(request, at.tags), 8)
        p += 20
        if expect == INT64_MAX and i + 1 < n:
            raise OverflowError("a queue offset past int64")
        expect, last_end = expect + 1, end
    return out
