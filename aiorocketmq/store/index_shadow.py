"""The IndexFile shadow's file work: reading the slot table in, walking slots back,
writing marked pages out.

Owns: the blocking parts of the shadow ``IndexFile.shadow_blocking`` sets up (why it
exists, and what a crash leaves: ``index_file``'s module docstring). The header and
slot table (the first ``40 + slots*4`` bytes of the file) live in an anonymous copy
with a mark per 4 KiB page written since the last flush; these functions fill that
copy from the file, repair slots the header does not count, and write marked pages
back with ``pwrite``.

Must not: touch the mapping's items (``repair_heads`` reads their ``prevIndex``
links only), or run on the event loop (``*_blocking``).
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt

from aiorocketmq.store.errors import StoreIOError

__all__ = [
    "MARK_SHIFT",
    "Marks",
    "mark_count",
    "read_table_blocking",
    "repair_heads",
    "write_marked_blocking",
]

MARK_SHIFT: Final = 12
"""A shadow's marks are per 4 KiB page (the C kernel's too)."""

Marks = tuple[bytearray, bool, bytes]
"""What ``IndexFile.take_marks`` took: the marks (a byte per page, non-zero = written),
whether the file was full then (no put follows them) and the header as it was."""

_SLOT_DTYPE: Final = np.dtype(">i4")
_HEADER_SIZE: Final = 40  # the IndexFile header; slots follow it
_HUGE_PAGE: Final = 2 * 1024 * 1024  # x86-64's transparent huge page


def mark_count(size: int) -> int:
    """Marks (pages) of a shadow of ``size`` bytes."""
    return ((size - 1) >> MARK_SHIFT) + 1


def read_table_blocking(path: Path, size: int) -> mmap.mmap:
    """The first ``size`` bytes of ``path`` in a new anonymous mapping.

    Read with ``preadv``, which faults the copy's pages in without the GIL.

    Raises:
        StoreIOError: the file could not be read, or is shorter.
    """
    # Private: Python's default for an anonymous map is shared memory, which gets no
    # transparent huge pages unless the system turns them on for shmem.
    table = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    if size >= _HUGE_PAGE:
        # Every put writes a slot at random in the table (20 MB with the defaults):
        # with 4 KiB pages nearly each one is a TLB miss and a page walk on the loop.
        # Huge pages (transparent, where the kernel gives them) cover it in a few
        # entries; without them the table works the same.
        try:
            table.madvise(mmap.MADV_HUGEPAGE)
        except (AttributeError, OSError):
            pass
    view = memoryview(table)
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            done = 0
            while done < size:
                read = os.preadv(fd, [view[done:]], done)
                if read <= 0:
                    raise StoreIOError(f"{path}: short read of its slot table")
                done += read
        finally:
            os.close(fd)
    except OSError as exc:
        table.close()
        raise StoreIOError(f"{path}: slot table not read: {exc}") from exc
    finally:
        view.release()
    return table


def repair_heads(
    table: mmap.mmap,
    dirty: bytearray,
    links: npt.NDArray[np.int64] | npt.NDArray[np.int32],
    *,
    slot_num: int,
    count: int,
) -> int:
    """Walk every slot at or past ``count`` (the next item's number) down its items'
    ``links`` (``prevIndex`` by item number) to the newest item below it; marks the
    pages it changed and says how many slots moved.

    A link that does not go down (stale bytes past the count) ends the chain: the
    slot reads as empty, as RocketMQ reads any head past the count.
    """
    slots = np.frombuffer(table, _SLOT_DTYPE, slot_num, _HEADER_SIZE)
    ahead = np.flatnonzero(slots >= count)
    if not len(ahead):
        return 0
    item_num = len(links)
    values = slots[ahead].astype(np.int64)
    beyond = values >= count
    while beyond.any():  # every step goes down: at most (items - count) steps
        current = values[beyond]
        down = links[np.minimum(current, item_num - 1)].astype(np.int64)
        values[beyond] = np.where((current < item_num) & (down < current), down, 0)
        beyond = values >= count
    slots[ahead] = values
    pages = (_HEADER_SIZE + ahead * _SLOT_DTYPE.itemsize) >> MARK_SHIFT
    np.frombuffer(dirty, np.uint8)[pages] = 1
    return len(ahead)


def write_marked_blocking(
    path: Path, table: mmap.mmap, size: int, pages: bytearray, header: bytes
) -> None:
    """``pwrite`` each run of marked pages of ``table`` (its first ``size`` bytes, past
    the header) to ``path``, then ``header`` at 0; no GIL held meanwhile.

    Nothing is written when no page is marked, or when the file was deleted meanwhile
    (expired while held): nothing is left to keep.

    Raises:
        StoreIOError: a write failed (its ``__cause__``); the caller marks ``pages``
            again for the next flush.
    """
    marked = np.flatnonzero(np.frombuffer(pages, np.uint8))
    if not len(marked):
        return
    # Runs of consecutive pages: one pwrite each.
    breaks = np.flatnonzero(np.diff(marked) != 1) + 1
    starts = marked[np.concatenate(([0], breaks))]
    ends = marked[np.concatenate((breaks - 1, [len(marked) - 1]))] + 1
    view = memoryview(table)
    try:
        try:
            fd = os.open(path, os.O_WRONLY)
        except FileNotFoundError:
            return
        try:
            for first, last in zip(starts.tolist(), ends.tolist(), strict=True):
                at = max(first << MARK_SHIFT, _HEADER_SIZE)
                end = min(last << MARK_SHIFT, size)
                while at < end:
                    at += os.pwrite(fd, view[at:end], at)
            if os.pwrite(fd, header, 0) != _HEADER_SIZE:
                raise OSError(f"short header write at {path}")
        finally:
            os.close(fd)
    except OSError as exc:
        raise StoreIOError(f"{path}: slot table not written: {exc}") from exc
    finally:
        view.release()
