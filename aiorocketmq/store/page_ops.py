"""Page-cache calls on a mapping that let the event loop run meanwhile.

Owns: ``msync``, ``populate_write`` and ``populate_read``, thin wrappers over libc's
``msync`` and ``madvise(MADV_POPULATE_WRITE / MADV_POPULATE_READ)`` called through
ctypes, which releases the GIL for the duration of the call; and ``resident``, libc's
``mincore``: whether a range is in memory, so the loop can tell a read that would wait
for the disk from one that would not.

Why not ``mmap.flush``: CPython (3.11 at least) calls ``msync`` holding the GIL, so
a flush in the executor froze the event loop for as long as the disk took (118 ms
for 256 MiB of dirty pages, measured here): every put and pull of the broker
stalled behind the flush thread. ``mmap.flush`` remains the fallback where libc
cannot be loaded.

Must not: call ``msync`` or a populate on the event loop (they wait for the disk or
the page allocator; ``resident`` only looks and is meant for the loop), or outlive the
mapping (each call holds a buffer export only while it runs).
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
from typing import Any, Final

from aiorocketmq.common.kernels import load_kernel
from aiorocketmq.store.errors import StoreIOError

__all__ = [
    "msync",
    "populate_read",
    "populate_supported",
    "populate_write",
    "py_resident",
    "resident",
]

_MADV_POPULATE_READ: Final = 22  # Linux >= 5.14; not exported by Python's mmap module
_MADV_POPULATE_WRITE: Final = 23
_MS_SYNC: Final = getattr(mmap, "MS_SYNC", 4)  # Linux's value when the module lacks it
_PAGE: Final = mmap.PAGESIZE


def _load_libc() -> Any:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        for name in ("madvise", "msync"):
            function = getattr(libc, name)
            function.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
            function.restype = ctypes.c_int
    except (OSError, AttributeError):
        return None
    return libc


def _load_mincore() -> Any:
    # Through PyDLL, which keeps the GIL: mincore only looks the pages up and returns
    # in microseconds, and the loop calls it on every pull. Giving the GIL away around
    # it would let a reading thread take it, and the loop wait to get it back.
    try:
        mincore = ctypes.PyDLL(None, use_errno=True).mincore
        mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
        mincore.restype = ctypes.c_int
    except (OSError, AttributeError):
        return None
    return mincore


_LIBC: Final = _load_libc()  # read-only after import
_MINCORE: Final = _load_mincore()


def msync(mm: mmap.mmap, start: int = 0, length: int | None = None) -> None:
    """Write ``[start, start + length)`` of ``mm`` to disk (MS_SYNC) without the GIL.

    ``start`` is rounded down to a page, as msync requires.

    Raises:
        OSError: msync failed (EIO on a failing disk, for instance).
    """
    end = len(mm) if length is None else start + length
    start -= start % _PAGE
    if end <= start:
        return
    if _LIBC is None:
        mm.flush(start, end - start)
        return
    anchor = ctypes.c_char.from_buffer(mm)  # an export: must go before mm can close
    try:
        if _LIBC.msync(ctypes.addressof(anchor) + start, end - start, _MS_SYNC) == 0:
            return
        err = ctypes.get_errno()
    finally:
        del anchor
    raise OSError(err, f"msync failed: {os.strerror(err)}")


def populate_write(mm: mmap.mmap, start: int, end: int) -> bool:
    """madvise(MADV_POPULATE_WRITE) on ``[start, end)``; False if unsupported.

    Raises:
        StoreIOError: the kernel supports it but it failed (out of memory, say).
    """
    return _populate(mm, start, end, _MADV_POPULATE_WRITE, "MADV_POPULATE_WRITE")


def populate_read(mm: mmap.mmap, start: int, end: int) -> bool:
    """madvise(MADV_POPULATE_READ) on ``[start, end)``: read what is not in memory from
    disk now, without the GIL; False if unsupported (nothing was done).

    ``start`` is rounded down to a page.

    Raises:
        StoreIOError: the kernel supports it but it failed (a read error, say).
    """
    return _populate(mm, start - start % _PAGE, end, _MADV_POPULATE_READ, "MADV_POPULATE_READ")


def _populate(mm: mmap.mmap, start: int, end: int, advice: int, name: str) -> bool:
    if _LIBC is None:
        return False
    anchor = ctypes.c_char.from_buffer(mm)  # an export: must go before mm can close
    try:
        address = ctypes.addressof(anchor) + start
        if _LIBC.madvise(address, end - start, advice) == 0:
            return True
        err = ctypes.get_errno()
    finally:
        del anchor
    if err not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        raise StoreIOError(f"madvise({name}) failed: {os.strerror(err)}")
    return False


#: Each mincore byte's lowest bit says "in memory"; the others are undefined.
_IN_MEMORY_BIT: Final = bytes(b & 1 for b in range(256))


def resident(mm: mmap.mmap, start: int, end: int) -> bool:
    """Whether every page of ``[start, end)`` of ``mm`` is in memory (``mincore``), so
    reading it waits for no disk. True also where it cannot be told (no libc, an
    error, a read-only mapping): the caller then reads as it would have without asking.

    A syscall and one byte per page: for the loop, before it reads. In C
    (``_page_kernels.pyx``) when built; ``py_resident`` is the reference.
    """
    if _KERNEL is not None:
        return _KERNEL.resident(mm, start, end)  # type: ignore[no-any-return]
    return py_resident(mm, start, end)


def py_resident(mm: mmap.mmap, start: int, end: int) -> bool:
    """``resident`` through ctypes (about 1.7 µs a call here)."""
    if _MINCORE is None or end <= start:
        return True
    start -= start % _PAGE
    pages = -(-(end - start) // _PAGE)
    vec = ctypes.create_string_buffer(pages)
    try:
        anchor = ctypes.c_char.from_buffer(mm)  # an export: must go before mm can close
    except TypeError:  # a read-only mapping: ours are all writable
        return True
    try:
        rc = _MINCORE(ctypes.addressof(anchor) + start, end - start, vec)
    finally:
        del anchor
    return rc != 0 or b"\0" not in vec.raw.translate(_IN_MEMORY_BIT)


_SUPPORTED: list[bool] = []  # the probe's answer, once


def populate_supported() -> bool:
    """Whether ``populate_write`` works here (Linux >= 5.14 and libc reachable).

    Probed once on a one-page anonymous mapping.
    """
    if not _SUPPORTED:
        probe = mmap.mmap(-1, _PAGE)
        try:
            _SUPPORTED.append(populate_write(probe, 0, _PAGE))
        except StoreIOError:
            _SUPPORTED.append(False)
        finally:
            probe.close()
    return _SUPPORTED[0]


_KERNEL = load_kernel("aiorocketmq.store._page_kernels")
