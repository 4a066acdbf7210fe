# cython: language_level=3
"""What the kernels that build or read ``__slots__`` objects share
(``common/_record_kernels.pyx``, ``store/_dispatch_kernels.pyx``,
``client/_produce_kernels.pyx`` and the remoting kernels through ``_kernel_io.pxd``):
where a slot lives in an object, and a read and a write there. Inline, so each kernel
compiles its own copy.

A slot is read and written at its member descriptor's offset, which is what the
descriptor's ``__get__`` and ``__set__`` do, less the attribute lookup and the call:
per object and field, that lookup cost more than the rest of a kernel's work.
"""

from cpython.ref cimport PyObject


cdef extern from "Python.h":
    ctypedef struct PyMemberDef:
        Py_ssize_t offset
    ctypedef struct PyMemberDescrObject:
        PyMemberDef* d_member
    void Py_INCREF(PyObject* o)
    void Py_XDECREF(PyObject* o)


cdef inline Py_ssize_t _member_offset(object cls, str name, object member) except -1:
    """Where the slot ``name`` of a ``cls`` object lives: the nearest descriptor of that
    name in ``cls``'s MRO that is a ``member`` (``types.MemberDescriptorType``; a
    property of the same name in front of it is the class's business). Anything else:
    ValueError, never a guess."""
    for klass in cls.__mro__:
        descr = klass.__dict__.get(name)
        if descr is not None and type(descr) is member:
            return (<PyMemberDescrObject*><PyObject*>descr).d_member.offset
    raise ValueError(f"{cls.__name__}.{name} is not a slot")


cdef inline void _put(object obj, Py_ssize_t offset, object value) noexcept:
    """Store ``value`` in the slot at ``offset`` of ``obj`` (a member's ``__set__``)."""
    cdef PyObject** slot = <PyObject**>((<char*><PyObject*>obj) + offset)
    cdef PyObject* old = slot[0]
    Py_INCREF(<PyObject*>value)
    slot[0] = <PyObject*>value
    Py_XDECREF(old)


cdef inline object _get(object obj, Py_ssize_t offset):
    """The slot at ``offset`` of ``obj`` (a member's ``__get__``); AttributeError if unset."""
    cdef PyObject* value = (<PyObject**>((<char*><PyObject*>obj) + offset))[0]
    if value == NULL:
        raise AttributeError(f"a slot of {type(obj).__name__} is not set")
    return <object>value


cdef inline tuple _cached_offsets(object cls, tuple names, dict cache):
    """Where each of ``names`` lives in a ``cls`` object (``_member_offset``), found
    once per class and kept in ``cache``."""
    offsets = cache.get(cls)
    if offsets is None:
        from types import MemberDescriptorType
        offsets = cache[cls] = tuple(
            [_member_offset(cls, name, MemberDescriptorType) for name in names]
        )
    return <tuple>offsets
