"""BodyPool: the buffers large frame bodies are received into, used again once free.

Owns: handing ``FrameDecoder`` a ``bytearray`` of exactly a large body's size, reusing
one it handed out before when nothing references that one any more. There is one pool
per thread (``thread_body_pool``), shared by every connection of that thread's event
loop, so a broker with thousands of producers keeps ``MAX_KEPT_BYTES`` in all, not per
connection; and no two threads ever look at the same buffer (the free test and the
reuse are not atomic).

Why: a pull reply of 1,000 messages is a ~1 MiB body. A fresh ``bytearray`` of that
size is zero-filled, and glibc serves it from fresh pages: mmapped at first, then from
a heap top that it trims again as soon as the body is freed. So every reply paid
~256 page faults plus a memset before the first byte was copied in: 0.45 µs of the
2.4 µs a consumer spent per message (measured with ``benchmarks/client_bench.py``'s
consume phase). A kept buffer has its pages already.

Free means: the pool's list holds the only reference. A message body, a ``memoryview``
or a numpy array over the buffer all hold a reference (a view holds its exporter), so
a buffer anything can still read is never handed out again; it is simply not reused
until it is dropped. Resizing a free buffer within its allocation moves no bytes, and
its contents need no clearing: the decoder fills every byte before anyone sees it.

Must not: keep more than ``MAX_KEPT_BYTES`` per thread, or pool bodies above
``MAX_POOLED_BODY`` (those get a fresh ``bytearray``, as before).
"""

from __future__ import annotations

import sys
import threading
from typing import Final

__all__ = ["MAX_KEPT_BYTES", "MAX_POOLED_BODY", "REUSE", "BodyPool", "thread_body_pool"]

MAX_POOLED_BODY: Final = 4 * 1024 * 1024
"""Largest body a kept buffer is used for (a bigger one is rare and allocated alone)."""

MAX_KEPT_BYTES: Final = 16 * 1024 * 1024
"""Most bytes one pool keeps: a dozen 1 MiB pull replies in flight, or four of the
largest pooled bodies."""


def _refs(kept: list[bytearray], index: int) -> int:
    return sys.getrefcount(kept[index])


def _can_reuse() -> bool:
    # The free test reads a reference count: only where the GIL makes that count exact
    # between bytecodes (CPython with its GIL). Elsewhere every body is a fresh one.
    gil = getattr(sys, "_is_gil_enabled", None)
    return hasattr(sys, "getrefcount") and (gil is None or bool(gil()))


REUSE: Final = _can_reuse()
"""Whether pools reuse buffers at all on this interpreter."""

# What _refs reports for a buffer only the list holds, measured rather than assumed
# (the count includes the call's own temporary reference, which varies by version).
_IDLE_REFS: Final = _refs([bytearray(1)], 0) if REUSE else 0


class BodyPool:
    """Receive buffers for large frames (not thread-safe: see ``thread_body_pool``)."""

    __slots__ = ("_kept",)

    def __init__(self) -> None:
        self._kept: list[bytearray] = []

    @property
    def kept(self) -> int:
        """Buffers held for reuse, free or not."""
        return len(self._kept)

    @property
    def kept_bytes(self) -> int:
        """Bytes the kept buffers have allocated."""
        return sum(buf.__alloc__() for buf in self._kept)

    def take(self, size: int) -> bytearray:
        """A ``bytearray`` of exactly ``size`` bytes, of unspecified contents."""
        if size > MAX_POOLED_BODY or not REUSE:
            return bytearray(size)
        kept = self._kept
        for index in range(len(kept)):
            if _refs(kept, index) == _IDLE_REFS:
                return self._resized(index, size)
        buf = bytearray(size)
        if self.kept_bytes + buf.__alloc__() <= MAX_KEPT_BYTES:
            kept.append(buf)
        return buf

    def _resized(self, index: int, size: int) -> bytearray:
        buf = self._kept[index]
        have = len(buf)
        if have > size:
            del buf[size:]  # within the allocation unless it shrinks by more than half
        elif have < size:
            if self.kept_bytes - buf.__alloc__() + size > MAX_KEPT_BYTES:
                del self._kept[index]  # let it go rather than grow past the bound
                return bytearray(size)
            buf += bytes(size - have)
        return buf


_LOCAL = threading.local()


def thread_body_pool() -> BodyPool:
    """The calling thread's pool (created on first use)."""
    try:
        pool: BodyPool = _LOCAL.pool
    except AttributeError:
        pool = _LOCAL.pool = BodyPool()
    return pool
