"""MappedFile: one fixed-size store file, mapped read-write, and its positions.

Owns: creating, opening, appending to, reading from, flushing, warming and deleting
one CommitLog, ConsumeQueue or IndexFile file (``MappedFile.java``), the held slice
handed to readers (``SelectedBuffer``, RocketMQ's ``SelectMappedBufferResult``), and
the file-name rule (the file's first offset, 20 decimal digits).

Must not: know what the bytes mean (CommitLog, ConsumeQueue and IndexFile do), or
do blocking work in a method whose name does not end in ``_blocking``.

Positions (ints, relative to the file start; specs/store.md §2)::

    0 ........ flushed_position ........ wrote_position ........ file_size
    |  on disk (msync'ed)  |  in the page cache only  |  not written yet  |

``committed_position`` exists for RocketMQ's transient-pool mode, which we do not
implement; it always follows ``wrote_position``, and ``read_position`` equals
``wrote_position``: readers never see a byte past it. The file is *full* when
``wrote_position == file_size``.

Threads. Everything that changes a MappedFile (positions, references, closing)
runs on one thread: the event loop while the store serves, or the single thread
that loads and recovers the store before it serves. The ``*_blocking`` methods
(``flush_blocking``, ``warm_blocking``) only touch the mapped bytes and *return*
what changed; the loop stores it. Their caller must hold the file around the call.

Lifetime (``ReferenceResource``). A file starts with one reference, its owner's.
``hold()`` adds one for a reader and fails once the file is shut down; every
successful ``hold()`` is paired with ``release()`` (``SelectedBuffer.release`` does
it). ``shutdown()`` marks the file unavailable and drops the owner's reference; the
mapping is closed when the last reference goes, so a file is never unmapped under a
reader that holds it. CPython adds a second guard: an mmap cannot be closed while a
memoryview or numpy array points into it, so a view kept past ``release()`` keeps
the mapping alive, never dangling. Deleting the path (``delete_blocking``) is apart
from unmapping: an unlinked mapped file stays readable until unmapped (RocketMQ
force-unmaps a still-referenced file after 120 s; Python cannot do that safely).
"""

from __future__ import annotations

import logging
import mmap
import os
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType
from typing import Any, Final

import numpy as np

from aiorocketmq.runtime.files import fsync_dir_blocking
from aiorocketmq.store.errors import StoreError, StoreIOError, StoreLoadError
from aiorocketmq.store.page_ops import msync, populate_write

__all__ = [
    "CREATING_SUFFIX",
    "FILE_NAME_DIGITS",
    "OS_PAGE_SIZE",
    "WARM_STEP_BYTES",
    "MappedFile",
    "SelectedBuffer",
    "delete_files_blocking",
    "offset_to_file_name",
    "parse_file_name",
]

log = logging.getLogger(__name__)

OS_PAGE_SIZE: Final = 4096
"""RocketMQ's page size for the flush rule (``MappedFile.OS_PAGE_SIZE``)."""
FILE_NAME_DIGITS: Final = 20
"""CommitLog and ConsumeQueue file names: the start offset, zero-padded to 20 digits."""

WARM_STEP_BYTES: Final = 4 * 1024 * 1024
"""How much of a file one warming call faults in (``warm_range_blocking``)."""
CREATING_SUFFIX: Final = ".creating"
"""Suffix of a file being created; see ``MappedFile.create_blocking``."""


def reserve_blocks(fd: int, size: int) -> None:
    """Give the first ``size`` bytes of ``fd`` real disk blocks, so a full disk fails now.

    ``posix_fallocate`` where the OS has it (Linux); elsewhere (macOS has no such call)
    the bytes are written as zeros, which allocates the same blocks, only slower.

    Raises:
        OSError: the disk is full or the file cannot be written.
    """
    fallocate = getattr(os, "posix_fallocate", None)
    if fallocate is not None:
        fallocate(fd, 0, size)
        return
    zeros = memoryview(bytes(min(size, WARM_STEP_BYTES)))
    offset = 0
    while offset < size:
        offset += os.pwrite(fd, zeros[: size - offset], offset)


def offset_to_file_name(offset: int) -> str:
    """Return the file name for a start offset (``UtilAll.offset2FileName``)."""
    return f"{offset:0{FILE_NAME_DIGITS}d}"


def parse_file_name(name: str) -> int:
    """Return the start offset encoded in a CommitLog/ConsumeQueue file name.

    Raises:
        StoreLoadError: the name is not a non-negative decimal offset.
    """
    if not (name.isascii() and name.isdigit()):
        raise StoreLoadError(f"{name!r} is not a store file name (a decimal start offset)")
    return int(name)


class SelectedBuffer:
    """A read-only slice of a held MappedFile; release it when done.

    Use as a context manager, or call ``release()`` exactly when the bytes are no
    longer needed (e.g. after a pull reply was written). Releasing twice is a no-op.

    Attributes:
        start_offset: the offset of ``view[0]`` in the file queue's address space
            (physical offset for the CommitLog, logical byte offset for a
            ConsumeQueue).
        view: the bytes, never beyond the file's read position.
        file: the file the slice belongs to.
    """

    __slots__ = ("file", "start_offset", "view")

    def __init__(self, file: MappedFile, start_offset: int, view: memoryview) -> None:
        self.file: MappedFile | None = file
        self.start_offset = start_offset
        self.view = view

    @property
    def size(self) -> int:
        """Bytes in the slice."""
        return self.view.nbytes

    def release(self) -> None:
        """Drop the view and the file reference taken for it."""
        file, self.file = self.file, None
        if file is not None:
            self.view.release()
            file.release()

    def __enter__(self) -> SelectedBuffer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


class MappedFile:
    """One fixed-size file mapped read-write; see the module docstring for the rules.

    Build with ``create_blocking`` (a new file) or ``open_blocking`` (an existing one).

    Attributes:
        path: the file.
        file_from_offset: the offset of byte 0 (the file name as a number).
        file_size: the mapped length, equal to the file's length.
        wrote_position: bytes appended so far.
        committed_position: follows ``wrote_position`` (no transient pool).
        flushed_position: bytes known to be on disk.
        first_create_in_queue: the first file ever created in its queue
            (ConsumeQueue uses it for pre-blank filling).
        store_timestamp: store time (ms) of the last record appended, as the
            appender reports it (0 until then, as RocketMQ's ``storeTimestamp``).
        mtime_ms: the file's mtime when it was created or opened.
        fail_writes: fault hook for tests: when set, ``append`` raises a
            ``StoreIOError`` caused by this exception and writes nothing.
        fail_flushes: fault hook for tests: when set, ``flush_blocking`` raises.
    """

    __slots__ = (
        "_array",
        "_available",
        "_mm",
        "_refs",
        "_ro",
        "committed_position",
        "fail_flushes",
        "fail_writes",
        "file_from_offset",
        "file_size",
        "first_create_in_queue",
        "flushed_position",
        "mtime_ms",
        "path",
        "store_timestamp",
        "wrote_position",
    )

    def __init__(self, path: Path, file_size: int, mm: mmap.mmap, mtime_ms: int) -> None:
        self.path = path
        self.file_from_offset = parse_file_name(path.name)
        self.file_size = file_size
        self._mm: mmap.mmap | None = mm
        self._ro: memoryview | None = memoryview(mm).toreadonly()
        self._array: np.ndarray[Any, Any] | None = None
        self._refs = 1  # the owner's reference, dropped by shutdown()
        self._available = True
        self.wrote_position = 0
        self.committed_position = 0
        self.flushed_position = 0
        self.first_create_in_queue = False
        self.mtime_ms = mtime_ms
        self.store_timestamp = 0
        self.fail_writes: BaseException | None = None
        self.fail_flushes: BaseException | None = None

    # -- creation ------------------------------------------------------------------------

    @classmethod
    def create_blocking(
        cls, path: Path, file_size: int, *, preallocate: bool = False
    ) -> MappedFile:
        """Create a new zero-filled file of ``file_size`` bytes and map it.

        It appears at full length (sparse unless ``preallocate``), under its final
        name only once sized; the directory is fsync'ed, so the name survives a crash.

        Args:
            path: the new file; its parent directories are created.
            file_size: its length.
            preallocate: reserve the disk blocks (``posix_fallocate``) so that a full
                disk fails here, cleanly, instead of as SIGBUS on a later write.

        Raises:
            StoreError: the file already exists.
            StoreIOError: creating, sizing or mapping it failed (nothing is left).
        """
        # A kill mid-creation leaves a ".creating" leftover (removed at load), never a
        # short file under the final name, which would block the next start.
        temp = path.with_name(path.name + CREATING_SUFFIX)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if path.exists():
                raise FileExistsError(path)
            temp.unlink(missing_ok=True)  # an older interrupted attempt
            fd = os.open(temp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError as exc:
            raise StoreError(f"cannot create {path}: it already exists") from exc
        except OSError as exc:
            raise StoreIOError(f"cannot create {path}: {exc}") from exc
        mm: mmap.mmap | None = None
        try:
            os.ftruncate(fd, file_size)
            if preallocate:
                reserve_blocks(fd, file_size)
            mm = mmap.mmap(fd, file_size)
            # The first write's fault (1.5-15 ms on ext4: it may zero-fill the whole new
            # file) is taken here, in the creating thread, not by the loop's first put.
            populate_write(mm, 0, min(OS_PAGE_SIZE, file_size))
            mtime_ms = os.fstat(fd).st_mtime_ns // 1_000_000
            os.link(temp, path)  # fails if the name appeared meanwhile: no clobbering
            temp.unlink()
        except (OSError, StoreIOError) as exc:
            if mm is not None:
                mm.close()
            os.close(fd)
            temp.unlink(missing_ok=True)
            raise StoreIOError(f"cannot size, map or link {path}: {exc}") from exc
        os.close(fd)  # the mapping keeps its own descriptor
        fsync_dir_blocking(path.parent)
        return cls(path, file_size, mm, mtime_ms)

    @classmethod
    def open_blocking(cls, path: Path, file_size: int) -> MappedFile:
        """Map an existing file, which must be exactly ``file_size`` bytes long.

        The positions start at 0; a file queue's load sets them (RocketMQ sets all
        three to the file size, and recovery truncates).

        Raises:
            StoreLoadError: the file has another length, or its name is not an offset.
            StoreIOError: it cannot be opened or mapped.
        """
        parse_file_name(path.name)
        try:
            fd = os.open(path, os.O_RDWR)
        except OSError as exc:
            raise StoreIOError(f"cannot open {path}: {exc}") from exc
        try:
            stat = os.fstat(fd)
            if stat.st_size != file_size:
                raise StoreLoadError(
                    f"{path} is {stat.st_size} bytes, the configured file size is {file_size}"
                )
            mm = mmap.mmap(fd, file_size)
        except OSError as exc:
            raise StoreIOError(f"cannot map {path}: {exc}") from exc
        finally:
            os.close(fd)
        return cls(path, file_size, mm, stat.st_mtime_ns // 1_000_000)

    # -- state ---------------------------------------------------------------------------

    @property
    def file_name(self) -> str:
        """The file's name (its start offset, or an IndexFile's time stamp)."""
        return self.path.name

    @property
    def last_modified_ms(self) -> int:
        """When the file last changed: its mtime at open, or the last append's store time.

        Expiry (``fileReservedTime``) and ``getMappedFileByTime`` use RocketMQ's file
        mtime; this is the same moment kept in memory, so neither needs a ``stat``
        on the event loop.
        """
        return max(self.mtime_ms, self.store_timestamp)

    @property
    def read_position(self) -> int:
        """The last byte readers may see (``wrote_position``: no transient pool)."""
        return self.wrote_position

    @property
    def is_full(self) -> bool:
        """True when nothing more can be appended."""
        return self.wrote_position == self.file_size

    @property
    def available(self) -> bool:
        """False once ``shutdown()`` was called."""
        return self._available

    @property
    def ref_count(self) -> int:
        """Owner reference (until shutdown) plus readers' holds."""
        return self._refs

    @property
    def closed(self) -> bool:
        """True once the mapping was closed (or handed to the GC) for good."""
        return self._mm is None

    def set_positions(self, position: int) -> None:
        """Set wrote, committed and flushed positions at once (load, truncate)."""
        if not 0 <= position <= self.file_size:
            raise StoreError(f"position {position} outside {self.path} ({self.file_size} bytes)")
        self.wrote_position = self.committed_position = self.flushed_position = position

    # -- writing (event loop, no await, no system call) ----------------------------------

    def append(self, data: bytes | bytearray | memoryview) -> int:
        """Copy ``data`` at the write position and advance it.

        Args:
            data: the bytes (a memoryview copy into the mapping; nothing else).

        Returns:
            The position ``data`` was written at, or -1 when it does not fit (the
            file is then unchanged).

        Raises:
            StoreIOError: the ``fail_writes`` fault hook is set.
        """
        pos = self.wrote_position
        end = pos + len(data)
        if end > self.file_size:
            return -1
        if self.fail_writes is not None:
            raise StoreIOError(f"write to {self.path} failed") from self.fail_writes
        self._mm[pos:end] = data  # type: ignore[index]
        self.wrote_position = self.committed_position = end
        return pos

    def wrote_in_place(self, size: int) -> None:
        """Advance past ``size`` bytes written through ``buffer`` at the write position
        (a record encoded straight into the mapping)."""
        end = self.wrote_position + size
        if size < 0 or end > self.file_size:
            raise StoreError(f"{size} bytes do not fit at the end of {self.path}")
        self.wrote_position = self.committed_position = end

    def fill_to_end(self, head: bytes) -> int:
        """Write ``head`` at the write position and mark the file full.

        CommitLog uses it for the 8-byte BLANK record: only those bytes are written,
        the rest of the file stays as it is (zeros in a fresh file).

        Returns:
            The position ``head`` was written at.

        Raises:
            StoreError: ``head`` does not fit.
            StoreIOError: the ``fail_writes`` fault hook is set.
        """
        pos = self.append(head)
        if pos < 0:
            raise StoreError(f"{len(head)} bytes do not fit at the end of {self.path}")
        self.wrote_position = self.committed_position = self.file_size
        return pos

    @property
    def buffer(self) -> mmap.mmap:
        """The mapping itself, for format code that packs fields in place.

        Writes through it must stay below ``file_size`` and be followed by moving
        ``wrote_position``; reads past ``read_position`` see unwritten bytes.
        """
        if self._mm is None:
            raise StoreError(f"{self.path} is closed")
        return self._mm

    # -- reading -------------------------------------------------------------------------

    def select(self, pos: int, size: int | None = None) -> SelectedBuffer | None:
        """Hold the file and return ``[pos, pos + size)``, or ``[pos, read_position)``.

        Args:
            pos: position in the file.
            size: bytes wanted; None means "to the read position".

        Returns:
            A held slice, or None when the range is not readable (beyond the read
            position, empty, negative) or the file is shut down.
        """
        read = self.wrote_position
        end = read if size is None else pos + size
        if pos < 0 or end > read or end <= pos or not self.hold():
            return None
        view = self._ro[pos:end]  # type: ignore[index]
        return SelectedBuffer(self, self.file_from_offset + pos, view)

    def array(self, dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
        """A numpy array of ``dtype`` over the whole mapping, made once per file.

        No copy: element ``i`` is bytes ``[i*itemsize, (i+1)*itemsize)`` of the
        file. Elements beyond ``read_position`` are unwritten; callers slice. The
        file must be held while the array (or a slice of it) is in use.
        """
        arr = self._array
        if arr is None or arr.dtype != dtype:
            if self._mm is None:
                raise StoreError(f"{self.path} is closed")
            arr = self._array = np.frombuffer(self._mm, dtype=dtype)
        return arr

    # -- references ----------------------------------------------------------------------

    def hold(self) -> bool:
        """Take a reader reference; False once the file is shut down."""
        if not self._available:
            return False
        self._refs += 1
        return True

    def release(self) -> None:
        """Drop a reference taken by ``hold()``; the last one closes the mapping."""
        self._refs -= 1
        if self._refs <= 0:
            self._cleanup()

    def shutdown(self) -> None:
        """Refuse new holds and drop the owner's reference (idempotent).

        The mapping closes now if no reader holds the file, else at the last
        ``release()``. Delete the path separately with ``delete_blocking``.
        """
        if self._available:
            self._available = False
            self.release()

    def _cleanup(self) -> None:
        mm = self._mm
        if mm is None:
            return
        self._mm = None
        self._array = None
        if self._ro is not None:
            self._ro.release()
            self._ro = None
        try:
            mm.close()  # munmap; dirty pages stay in the page cache, no disk I/O
        except BufferError:
            # A view outlived its release(): the mmap object now dies with the last
            # such view, which unmaps it then. Never unsafe, just later.
            log.debug("mapping of %s still viewed; unmapped when the views go", self.path)

    # -- blocking work (executor; hold the file around the call) ------------------------

    def flush_needed(self, least_pages: int) -> bool:
        """RocketMQ's flush rule (``isAbleToFlush``), pages of 4096 bytes.

        True when the file is full, or ``least_pages > 0`` and at least that many
        pages were completed since the last flush, or ``least_pages == 0`` and
        anything was written since.
        """
        read, flushed = self.wrote_position, self.flushed_position
        if read == self.file_size:
            return True
        if least_pages > 0:
            return read // OS_PAGE_SIZE - flushed // OS_PAGE_SIZE >= least_pages
        return read > flushed

    def flush_blocking(self, least_pages: int) -> int:
        """msync the written, unflushed range if the flush rule allows; executor only.

        Reads the read position once, before the msync, as RocketMQ does, and
        syncs only the pages between the flushed and that position.

        Args:
            least_pages: the rule's threshold (0: flush anything written).

        Returns:
            The new flushed position; the caller stores it in ``flushed_position``
            on the loop. Unchanged when the rule said no.

        Raises:
            StoreIOError: msync failed, or the ``fail_flushes`` hook is set.
        """
        read, flushed = self.wrote_position, self.flushed_position
        if not self.flush_needed(least_pages):
            return flushed
        if read > flushed:
            if self.fail_flushes is not None:
                raise StoreIOError(f"flush of {self.path} failed") from self.fail_flushes
            start = flushed - flushed % OS_PAGE_SIZE
            try:
                msync(self.buffer, start, read - start)
            except (OSError, ValueError) as exc:
                raise StoreIOError(f"msync of {self.path} failed: {exc}") from exc
        return max(read, flushed)

    def warm_blocking(self, msync_every_pages: int = 0) -> None:
        """``warm_range_blocking`` from the write position on, 4 MiB a step, zero fill
        allowed: only while nothing writes the file; executor only. ``msync_every_pages``
        > 0: msync every that many pages and at the end (RocketMQ does so under
        SYNC_FLUSH, so a later sync flush meets no gigabyte of dirty zero pages)."""
        start = -(-self.wrote_position // OS_PAGE_SIZE) * OS_PAGE_SIZE
        synced = start
        for chunk in range(start, self.file_size, WARM_STEP_BYTES):
            end = min(chunk + WARM_STEP_BYTES, self.file_size)
            sync = msync_every_pages > 0 and (end - synced) // OS_PAGE_SIZE >= msync_every_pages
            self.warm_range_blocking(chunk, end, True, synced if sync else -1)
            synced = end if sync else synced
        if msync_every_pages > 0 and synced < self.file_size:
            msync(self.buffer, synced, self.file_size - synced)

    def warm_range_blocking(
        self, start: int, end: int, zero_fill: bool, sync_from: int = -1
    ) -> bool:
        """Fault in ``[start, end)`` (page-aligned start) writable; executor only.

        On Linux >= 5.14 this is ``madvise(MADV_POPULATE_WRITE)`` through ctypes, which
        releases the GIL and never changes a byte, so it is safe while the loop writes
        the same file. Elsewhere, with ``zero_fill``, it is RocketMQ's
        ``warmMappedFile``: a zero byte written at every 4 KiB page, which is only
        right while nothing is written there (before the file is handed out). With
        ``sync_from`` >= 0, ``[sync_from, end)`` is msynced afterwards.

        Returns False if nothing was done: no populate and no ``zero_fill``.
        """
        mm = self.buffer
        if not populate_write(mm, start, end):
            if not zero_fill:
                return False
            for page in range(start, end, OS_PAGE_SIZE):
                mm[page] = 0
        if sync_from >= 0 and end > sync_from:
            msync(mm, sync_from, end - sync_from)
        return True

    def delete_blocking(self) -> bool:
        """Remove the file's path; executor only. True if it existed.

        Safe while mapped: the mapping stays readable until it is closed.
        """
        try:
            self.path.unlink()
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise StoreIOError(f"cannot delete {self.path}: {exc}") from exc
        return True

    def __repr__(self) -> str:
        return (
            f"MappedFile({self.path.name}, wrote={self.wrote_position}, "
            f"flushed={self.flushed_position}, size={self.file_size}, refs={self._refs})"
        )


def delete_files_blocking(files: Iterable[MappedFile]) -> int:
    """Delete the paths of files already removed from their queue; executor only.

    Returns:
        How many paths existed and were removed.
    """
    return sum(1 for f in files if f.delete_blocking())
