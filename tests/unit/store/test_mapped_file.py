"""MappedFile: creation, positions, reads bounded by the read position, the flush rule,
warming, fault hooks, and the lifetime rule (never unmapped under a holder)."""

from __future__ import annotations

import errno
import gc
import os
from pathlib import Path

import pytest

from aiorocketmq.store import mapped_file as mapped_file_module
from aiorocketmq.store import page_ops
from aiorocketmq.store.errors import StoreError, StoreIOError, StoreLoadError
from aiorocketmq.store.mapped_file import (
    OS_PAGE_SIZE,
    MappedFile,
    delete_files_blocking,
    offset_to_file_name,
    parse_file_name,
)

SIZE = 16 * OS_PAGE_SIZE


def new_file(tmp_path: Path, offset: int = 0, size: int = SIZE) -> MappedFile:
    return MappedFile.create_blocking(tmp_path / offset_to_file_name(offset), size)


def test_file_names_are_20_digit_offsets() -> None:
    assert offset_to_file_name(0) == "00000000000000000000"
    assert offset_to_file_name(1073741824) == "00000000001073741824"
    assert parse_file_name("00000000001073741824") == 1073741824
    for bad in ("abc", "-1", "12a", "", "\uff11\uff12"):
        with pytest.raises(StoreLoadError):
            parse_file_name(bad)


def test_create_makes_a_full_length_zero_file(tmp_path: Path) -> None:
    mapped = new_file(tmp_path / "nested" / "dir", offset=SIZE * 3)
    assert mapped.path.stat().st_size == SIZE
    assert mapped.file_from_offset == SIZE * 3
    assert mapped.path.read_bytes() == bytes(SIZE)
    assert (mapped.wrote_position, mapped.flushed_position, mapped.committed_position) == (0, 0, 0)
    with pytest.raises(StoreError, match="already exists"):
        MappedFile.create_blocking(mapped.path, SIZE)
    mapped.shutdown()


@pytest.mark.parametrize("preallocate", [False, True])
def test_create_faults_in_the_first_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, preallocate: bool
) -> None:
    """The first write's fault (1-40 ms on ext4: the kernel may read the whole new
    file's zeros in with it) is the creating thread's, not the event loop's."""
    if not page_ops.populate_supported():
        pytest.skip("no MADV_POPULATE_WRITE here: the first write faults the page in")
    mapped = MappedFile.create_blocking(
        tmp_path / offset_to_file_name(0), SIZE, preallocate=preallocate
    )
    try:
        assert page_ops.resident(mapped.buffer, 0, OS_PAGE_SIZE)
        assert mapped.path.read_bytes() == bytes(SIZE)  # populating changed no byte
    finally:
        mapped.shutdown()
    # The same creation without the populate: its page is not in (the check can fail).
    monkeypatch.setattr(mapped_file_module, "populate_write", lambda *_args: True)
    bare = MappedFile.create_blocking(
        tmp_path / offset_to_file_name(SIZE), SIZE, preallocate=preallocate
    )
    try:
        assert not page_ops.resident(bare.buffer, 0, OS_PAGE_SIZE)
    finally:
        bare.shutdown()


def test_a_create_whose_first_page_cannot_be_faulted_in_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail(*_args: object) -> bool:
        raise StoreIOError("madvise(MADV_POPULATE_WRITE) failed: Cannot allocate memory")

    monkeypatch.setattr(mapped_file_module, "populate_write", fail)
    path = tmp_path / offset_to_file_name(0)
    with pytest.raises(StoreIOError, match="Cannot allocate memory"):
        MappedFile.create_blocking(path, SIZE)
    assert list(tmp_path.iterdir()) == []


def test_preallocated_file_reserves_its_blocks(tmp_path: Path) -> None:
    sparse = MappedFile.create_blocking(tmp_path / offset_to_file_name(0), SIZE)
    dense = MappedFile.create_blocking(tmp_path / offset_to_file_name(SIZE), SIZE, preallocate=True)
    assert os.stat(dense.path).st_blocks * 512 >= SIZE
    assert os.stat(sparse.path).st_blocks * 512 < SIZE
    sparse.shutdown()
    dense.shutdown()


def test_open_requires_the_configured_size(tmp_path: Path) -> None:
    path = tmp_path / offset_to_file_name(0)
    path.write_bytes(bytes(SIZE - 1))
    with pytest.raises(StoreLoadError, match=f"{SIZE - 1} bytes"):
        MappedFile.open_blocking(path, SIZE)
    path.write_bytes(b"x" * SIZE)
    mapped = MappedFile.open_blocking(path, SIZE)
    assert mapped.wrote_position == 0  # the queue's load sets positions
    assert mapped.mtime_ms > 0 and mapped.store_timestamp == 0
    mapped.shutdown()


def test_append_copies_and_advances_until_full(tmp_path: Path) -> None:
    mapped = new_file(tmp_path)
    assert mapped.append(b"abc") == 0
    assert mapped.append(bytearray(b"defg")) == 3
    assert mapped.append(memoryview(b"h")) == 7
    assert mapped.wrote_position == mapped.committed_position == 8
    assert mapped.append(bytes(SIZE)) == -1, "does not fit: nothing written"
    assert mapped.wrote_position == 8
    assert mapped.append(bytes(SIZE - 8)) == 8
    assert mapped.is_full and mapped.append(b"x") == -1
    assert mapped.path.read_bytes()[:8] == b"abcdefgh"  # visible through the page cache
    mapped.shutdown()


def test_fill_to_end_writes_only_the_head(tmp_path: Path) -> None:
    mapped = new_file(tmp_path)
    mapped.append(b"12345")
    assert mapped.fill_to_end(b"BLANKHDR") == 5
    assert mapped.is_full
    data = mapped.path.read_bytes()
    assert data[5:13] == b"BLANKHDR" and data[13:] == bytes(SIZE - 13)
    mapped.shutdown()


def test_select_never_passes_the_read_position(tmp_path: Path) -> None:
    mapped = new_file(tmp_path, offset=SIZE)
    mapped.append(b"0123456789")
    with mapped.select(2, 5) as sel:  # type: ignore[union-attr]
        assert bytes(sel.view) == b"23456" and sel.start_offset == SIZE + 2 and sel.size == 5
        assert sel.view.readonly
    whole = mapped.select(4)
    assert whole is not None and bytes(whole.view) == b"456789"
    whole.release()
    assert mapped.select(6, 5) is None, "ends past the read position"
    assert mapped.select(10) is None, "nothing left to read"
    assert mapped.select(-1, 2) is None
    assert mapped.select(3, 0) is None
    assert mapped.ref_count == 1, "every select was released"
    mapped.shutdown()


def test_shutdown_waits_for_holders(tmp_path: Path) -> None:
    mapped = new_file(tmp_path)
    mapped.append(b"payload")
    held = mapped.select(0, 7)
    assert held is not None
    mapped.shutdown()
    assert not mapped.available and not mapped.closed, "a holder keeps it mapped"
    assert mapped.select(0, 7) is None and not mapped.hold(), "no new holders"
    assert bytes(held.view) == b"payload"
    held.release()
    held.release()  # idempotent
    assert mapped.closed and mapped.ref_count == 0
    mapped.shutdown()  # idempotent


def test_a_view_kept_past_release_keeps_the_mapping_alive(tmp_path: Path) -> None:
    mapped = new_file(tmp_path)
    mapped.append(b"survivor")
    held = mapped.select(0, 8)
    assert held is not None
    leaked = held.view[0:8]  # a careless reader slices and keeps the slice
    held.release()
    mapped.shutdown()
    assert mapped.closed, "our side is done"
    assert bytes(leaked) == b"survivor", "CPython keeps the mmap until the view dies"
    del leaked
    gc.collect()


def test_delete_while_held_keeps_bytes_readable(tmp_path: Path) -> None:
    first, second = new_file(tmp_path, 0), new_file(tmp_path, SIZE)
    first.append(b"still here")
    held = first.select(0)
    assert held is not None
    first.shutdown()
    assert delete_files_blocking([first, second]) == 2
    assert not first.path.exists() and not second.path.exists()
    assert bytes(held.view) == b"still here"
    held.release()
    assert first.closed
    assert delete_files_blocking([first]) == 0
    second.shutdown()


@pytest.mark.parametrize(
    ("wrote", "flushed", "least_pages", "expected"),
    [
        (0, 0, 0, False),  # nothing written
        (1, 0, 0, True),  # anything written, least 0
        (4095, 0, 1, False),  # page not complete
        (4096, 0, 1, True),
        (4 * 4096 - 1, 0, 4, False),
        (4 * 4096, 0, 4, True),
        (5 * 4096 + 7, 4096 + 9, 4, True),  # counts completed pages, not bytes
        (5 * 4096 + 7, 4096 + 9, 5, False),
        (SIZE, SIZE, 4, True),  # a full file always qualifies
    ],
)
def test_flush_rule(
    tmp_path: Path, wrote: int, flushed: int, least_pages: int, expected: bool
) -> None:
    mapped = new_file(tmp_path)
    mapped.wrote_position, mapped.flushed_position = wrote, flushed
    assert mapped.flush_needed(least_pages) is expected
    mapped.shutdown()


def test_flush_blocking_returns_the_new_position(tmp_path: Path) -> None:
    mapped = new_file(tmp_path)
    mapped.append(bytes(range(256)) * 20)  # 5120 bytes: one full page
    assert mapped.flush_blocking(2) == 0, "rule says no: position unchanged"
    assert mapped.flush_blocking(1) == 5120
    assert mapped.flushed_position == 0, "the caller stores it"
    mapped.flushed_position = 5120
    mapped.append(b"x" * 100)
    assert mapped.flush_blocking(0) == 5220, "syncs from a page boundary below 5120"
    mapped.shutdown()


def test_fault_hooks(tmp_path: Path) -> None:
    mapped = new_file(tmp_path)
    mapped.fail_writes = OSError(errno.EIO, "injected")
    with pytest.raises(StoreIOError) as caught:
        mapped.append(b"data")
    assert isinstance(caught.value.__cause__, OSError)
    assert mapped.wrote_position == 0 and mapped.path.read_bytes()[:4] == bytes(4)
    mapped.fail_writes = None
    mapped.append(b"data")
    mapped.fail_flushes = OSError(errno.EIO, "injected")
    with pytest.raises(StoreIOError):
        mapped.flush_blocking(0)
    mapped.shutdown()


@pytest.mark.parametrize("use_populate", [True, False])
def test_warm_keeps_written_bytes_and_zeroes_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, use_populate: bool
) -> None:
    if not use_populate:
        monkeypatch.setattr(page_ops, "_LIBC", None)  # RocketMQ's zero-byte touch, mmap.flush
    size = 3 * 1024 * 1024 + 3 * OS_PAGE_SIZE  # not a multiple of the 4 MiB step
    mapped = MappedFile.create_blocking(tmp_path / offset_to_file_name(0), size)
    mapped.append(b"\xff" * (OS_PAGE_SIZE + 10))
    mapped.warm_blocking(msync_every_pages=64)
    data = mapped.path.read_bytes()
    assert data[: OS_PAGE_SIZE + 10] == b"\xff" * (OS_PAGE_SIZE + 10)
    assert data[OS_PAGE_SIZE + 10 :] == bytes(size - OS_PAGE_SIZE - 10)
    assert mapped.wrote_position == OS_PAGE_SIZE + 10, "warming is not writing"
    mapped.shutdown()


def test_array_is_a_view_over_the_mapping(tmp_path: Path) -> None:
    import numpy as np

    mapped = new_file(tmp_path)
    dtype = np.dtype(">i4")
    mapped.append((7).to_bytes(4, "big") + (-2).to_bytes(4, "big", signed=True))
    arr = mapped.array(dtype)
    assert arr is mapped.array(dtype), "made once per file"
    assert arr[:2].tolist() == [7, -2] and len(arr) == SIZE // 4
    mapped.append((9).to_bytes(4, "big"))
    assert arr[2] == 9, "no copy: later appends show through"
    del arr
    mapped.shutdown()
    assert mapped.closed
    with pytest.raises(StoreError):
        mapped.array(dtype)


def test_set_positions_bounds(tmp_path: Path) -> None:
    mapped = new_file(tmp_path)
    mapped.set_positions(100)
    assert (mapped.wrote_position, mapped.committed_position, mapped.flushed_position) == (
        100,
        100,
        100,
    )
    with pytest.raises(StoreError):
        mapped.set_positions(SIZE + 1)
    mapped.shutdown()


@pytest.mark.parametrize("through_libc", [True, False])
def test_msync_rounds_its_start_down_to_a_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, through_libc: bool
) -> None:
    if not through_libc:
        monkeypatch.setattr(page_ops, "_LIBC", None)  # mmap.flush, which holds the GIL
    mapped = new_file(tmp_path)
    mapped.append(b"x" * 5000)
    page_ops.msync(mapped.buffer, 4100, 900)  # unaligned: msync alone would say EINVAL
    page_ops.msync(mapped.buffer, 10, 0)  # nothing to do
    page_ops.msync(mapped.buffer)
    assert mapped.flush_blocking(0) == 5000
    mapped.shutdown()
    assert mapped.path.read_bytes()[:5000] == b"x" * 5000
