# cython: language_level=3, boundscheck=False, wraparound=False
"""C kernel of ``remoting.metrics_http``: a timed request handler.

Owns: ``ObservedHandler``, the compiled twin of ``metrics_http.observed``'s closure.
It times a handler on the given clock (``time.perf_counter``), counts the time in
milliseconds into a ``BucketHistogram``'s rows under the request code (the same row
layout and bucket choice as ``BucketHistogram.observe``), and hands the requests
whose code asks for it to the reply observer. Every request of a broker with metrics
on passes through one: here that costs no Python frame, where the closure, the
histogram's ``observe`` and the observer took three.

Must not: decide anything the reference decides differently. An awaitable result goes
to the reference's ``_finish`` coroutine, given by the caller, so a held reply is timed
by the same code either way.
"""

from cpython.dict cimport PyDict_GetItem, PyDict_SetItem
from cpython.list cimport PyList_GET_ITEM
from cpython.object cimport PyObject

cdef enum:
    _MAX_BOUNDS = 64


cdef class ObservedHandler:
    """``handler`` timed into a histogram's rows (module docstring).

    Args:
        handler: the processor.
        rows: the ``BucketHistogram``'s rows (key -> counts per bucket, +Inf, sum).
        bounds: its finite bounds, increasing (at most 64).
        on_reply: gets ``(request, reply, seconds)`` for codes in ``reply_codes``.
        reply_codes: the codes ``on_reply`` wants.
        finish: ``(awaitable, request, start, report)`` -> the coroutine that awaits
            a reply given as an awaitable and reports it through ``report``.
        command_type: ``RemotingCommand``, a reply given inline.
        isawaitable: ``inspect.isawaitable``.
        clock: seconds, as ``time.perf_counter``.
    """

    cdef readonly object handler
    cdef dict _rows
    cdef double _bounds[_MAX_BOUNDS]
    cdef Py_ssize_t _n
    cdef object _on_reply
    cdef frozenset _reply_codes
    cdef object _finish
    cdef type _command_type
    cdef object _isawaitable
    cdef object _clock

    def __init__(
        self, handler, dict rows, tuple bounds, on_reply, reply_codes, finish,
        type command_type, isawaitable, clock,
    ):
        cdef Py_ssize_t i
        if len(bounds) > _MAX_BOUNDS:
            raise ValueError(f"at most {_MAX_BOUNDS} bounds, got {len(bounds)}")
        self.handler = handler
        self._rows = rows
        self._n = len(bounds)
        for i in range(self._n):
            self._bounds[i] = bounds[i]
        self._on_reply = on_reply
        self._reply_codes = frozenset(reply_codes)
        self._finish = finish
        self._command_type = command_type
        self._isawaitable = isawaitable
        self._clock = clock

    def __call__(self, conn, request):
        cdef double start = self._clock()
        try:
            result = self.handler(conn, request)
        except Exception:
            self.report(request, None, self._clock() - start)
            raise
        kind = type(result)
        if (
            kind is self._command_type or kind is bytes or result is None
            or not self._isawaitable(result)
        ):
            self.report(request, result, self._clock() - start)
            return result
        return self._finish(result, request, start, self.report)

    cpdef report(self, request, reply, double seconds):
        """Count ``seconds`` under ``request``'s code; tell the reply observer if it asks."""
        code = request.code
        _observe(self._rows, self._bounds, self._n, code, seconds * 1000.0)
        if self._on_reply is not None and code in self._reply_codes:
            self._on_reply(request, reply, seconds)


cdef int _observe(dict rows, double* bounds, Py_ssize_t n, object key, double value) except -1:
    """``BucketHistogram.observe``: one count in the bucket of ``value``, and the sum."""
    cdef PyObject* found = PyDict_GetItem(rows, key)
    cdef list row
    cdef Py_ssize_t i = 0
    if found is NULL:
        row = [0] * (n + 2)
        PyDict_SetItem(rows, key, row)
    else:
        row = <list>found
    while i < n and bounds[i] < value:  # bisect_left over a few bounds
        i += 1
    row[i] = <object>PyList_GET_ITEM(row, i) + 1
    row[n + 1] = <object>PyList_GET_ITEM(row, n + 1) + value
    return 0
