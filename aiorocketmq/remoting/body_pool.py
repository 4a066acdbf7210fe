"""BodyPool: the buffers large frame bodies are received into, used again once free.

Owns: handing ``FrameDecoder`` a ``bytearray`` of exactly a large body's size, reusing
one it handed out before when nothing references that one any more.

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

Must not: keep more than ``MAX_KEPT_BYTES`` per decoder, or pool bodies above
``MAX_POOLED_BODY`` (those get a fresh ``bytearray``, as before).
"""

from __future__ import annotations

import sys
from typing import Final

__all__ = ["MAX_KEPT_BYTES", "MAX_POOLED_BODY", "BodyPool"]

MAX_POOLED_BODY: Final = 4 * 1024 * 1024
"""Largest body a kept buffer is used for (a bigger one is rare and allocated alone)."""

MAX_KEPT_BYTES: Final = 8 * 1024 * 1024
"""Most bytes one decoder keeps (one connection): two of the largest pooled bodies."""


def _refs(kept: list[bytearray], index: int) -> int:
    return sys.getrefcount(kept[index])


# What _refs reports for a buffer only the list holds, measured rather than assumed
# (the count includes the call's own temporary reference, which varies by version).
_IDLE_REFS: Final = _refs([bytearray(1)], 0)


class BodyPool:
    """Receive buffers for one connection's large frames (not thread-safe)."""

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
        if size > MAX_POOLED_BODY:
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
