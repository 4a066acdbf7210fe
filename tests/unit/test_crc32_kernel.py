"""The record kernel's body CRC (``common/_crc32.h``): zlib's crc32 for every body.

Its bulk is folded with carry-less multiplies where the CPU has them: lengths around
the fold's edges (under 64 bytes, whole 16-byte blocks, a tail of 1-15 bytes, one and
several 64-byte rounds) and unaligned starts must all give zlib's answer.
"""

from __future__ import annotations

import zlib

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.kernels import kernel_or_skip


@settings(max_examples=400)
@given(data=st.binary(max_size=600), skip=st.integers(0, 15))
def test_the_body_crc_is_zlibs(data: bytes, skip: int) -> None:
    kernel = kernel_or_skip("aiorocketmq.common._record_kernels")
    view = memoryview(data)[min(skip, len(data)) :]
    assert kernel.body_crc32(view) == zlib.crc32(view)


def test_every_length_around_the_fold_edges_is_zlibs() -> None:
    kernel = kernel_or_skip("aiorocketmq.common._record_kernels")
    base = bytes((i * 131 + 7) & 0xFF for i in range(5000))
    for length in [*range(0, 200), 1023, 1024, 1025, 4095, 4096, 4097, 4999]:
        for skip in (0, 1, 8, 15):
            view = memoryview(base)[skip : skip + length]
            assert kernel.body_crc32(view) == zlib.crc32(view), (length, skip)
    for fill in (b"\x00", b"\xff"):
        assert kernel.body_crc32(fill * 1024) == zlib.crc32(fill * 1024)
