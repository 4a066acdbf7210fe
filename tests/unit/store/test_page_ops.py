"""``page_ops.resident`` (``mincore``): the C kernel answers as the ctypes reference on
real mappings, pages touched and untouched; the dispatch follows the kernel switch."""

from __future__ import annotations

import mmap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiorocketmq.store import page_ops
from tests.support.kernels import IMPLEMENTATIONS, kernel_or_skip

PAGE = mmap.PAGESIZE
PAGES = 64


@settings(max_examples=200, deadline=None)
@given(
    touched=st.sets(st.integers(0, PAGES - 1), max_size=PAGES),
    start=st.integers(-PAGE, PAGES * PAGE),
    length=st.integers(-PAGE, PAGES * PAGE),
)
def test_the_kernel_answers_as_the_reference(touched: set[int], start: int, length: int) -> None:
    """An anonymous mapping's untouched pages are not in memory, its touched ones are;
    any range, empty, unaligned or running past the mapping, gets the same answer."""
    kernel = kernel_or_skip("aiorocketmq.store._page_kernels")
    mm = mmap.mmap(-1, PAGES * PAGE)
    try:
        for page in touched:
            mm[page * PAGE] = 1
        start = max(start, 0)
        end = start + length
        assert kernel.resident(mm, start, end) == page_ops.py_resident(mm, start, end)
        if 0 <= start < end <= PAGES * PAGE:
            wanted = range(start // PAGE, -(-end // PAGE))
            assert kernel.resident(mm, start, end) == all(p in touched for p in wanted)
    finally:
        mm.close()


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_a_read_only_mapping_cannot_be_told_and_counts_as_in_memory(
    implementation: str, monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    kernel = kernel_or_skip("aiorocketmq.store._page_kernels") if implementation == "c" else None
    monkeypatch.setattr(page_ops, "_KERNEL", kernel)
    path = f"{tmp_path}/f"
    with open(path, "wb") as f:
        f.write(b"\0" * PAGE * 4)
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        assert page_ops.resident(mm, 0, PAGE * 4)
    finally:
        mm.close()
    fresh = mmap.mmap(-1, PAGE * 4)
    try:
        assert not page_ops.resident(fresh, 0, PAGE)  # the dispatch asks, either way
        fresh[0] = 1
        assert page_ops.resident(fresh, 0, PAGE)
    finally:
        fresh.close()
