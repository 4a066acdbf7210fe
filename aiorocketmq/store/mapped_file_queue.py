"""MappedFileQueue: the ordered files of one CommitLog or ConsumeQueue directory.

Owns: the list of a directory's files, each exactly ``file_size`` bytes and named by
its 20-digit start offset, contiguous from the first; loading them; finding the file
that holds an offset; getting (or rolling to) the file to append to; cutting a dirty
tail; picking files to expire; and the queue-level flush position (``flushedWhere``)
(``MappedFileQueue.java``; specs/store.md §2).

Must not: interpret the bytes, create or delete files on the event loop, or sleep.

Offsets. The queue spans one address space: a CommitLog's physical offsets, or a
ConsumeQueue's logical *byte* offsets (unit index x 20). File *n* covers
``[first.file_from_offset + n * file_size, ... + file_size)``.

Two phases, two kinds of method (see ``mapped_file`` for the thread rule):

- Load and recovery, before the store serves, run on one thread that owns the
  queue: ``load_blocking``, ``create_last_file_blocking``, ``truncate_dirty_blocking``,
  ``destroy_blocking`` change the queue *and* do file I/O.
- While the store serves, the event loop owns the queue: everything else is a plain,
  non-blocking method. New files come from a ``MappedFileAllocator`` (``get_last_file``
  takes a prepared one, ``allocate_last_file`` awaits one); removed files are returned
  to the caller, already detached and shut down, for ``delete_files_blocking`` in
  the executor; ``flush`` runs the msync in the executor.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Iterable
from pathlib import Path
from typing import Final

from aiorocketmq.runtime.executor import BlockingExecutor
from aiorocketmq.store.allocator import MappedFileAllocator
from aiorocketmq.store.errors import StoreError, StoreLoadError
from aiorocketmq.store.mapped_file import (
    CREATING_SUFFIX,
    MappedFile,
    delete_files_blocking,
    offset_to_file_name,
)

__all__ = ["DELETE_FILES_BATCH_MAX", "MappedFileQueue"]

log = logging.getLogger(__name__)

DELETE_FILES_BATCH_MAX: Final = 10
"""Files one expiry pass deletes at most (``MappedFileQueue.DELETE_FILES_BATCH_MAX``)."""

_LONG: Final = struct.Struct(">q")


class MappedFileQueue:
    """The files of one directory, in offset order.

    Args:
        directory: where the files live (created with the first file).
        file_size: the exact size of every file.
        allocator: source of new files while serving; without one, files are only
            created by ``create_last_file_blocking`` (load/recovery, tests).
        prepare_next: when a file is added, ask the allocator to prepare the one
            after it, so the next roll does not wait (CommitLog: yes; ConsumeQueue:
            no, there can be thousands of queues).

    Attributes:
        flushed_where: offset up to which the queue is known to be on disk.
        committed_where: follows the write position (no transient pool).
        store_timestamp: store time of the last record a flush that moved
            ``flushed_where`` (or a full one) covered; 0 if unknown.
    """

    def __init__(
        self,
        directory: Path,
        file_size: int,
        *,
        allocator: MappedFileAllocator | None = None,
        prepare_next: bool = False,
    ) -> None:
        if file_size <= 0:
            raise ValueError(f"file_size must be positive, got {file_size}")
        self.directory = directory
        self.file_size = file_size
        self._allocator = allocator
        self._prepare_next = prepare_next
        self._files: list[MappedFile] = []
        self.flushed_where = 0
        self.committed_where = 0
        self.store_timestamp = 0

    # -- load (load/recovery phase) ----------------------------------------------------

    def load_blocking(self) -> None:
        """Map every file of the directory, oldest first, with positions at full.

        A missing directory is an empty queue. Positions are set to the file size,
        as RocketMQ does; recovery then truncates the tail.

        Raises:
            StoreLoadError: an entry is not a regular file named by a decimal offset,
                or a file is not exactly ``file_size`` bytes. Nothing stays mapped.
        """
        if self._files:
            raise StoreError(f"{self.directory} is already loaded")
        try:
            names = sorted(os.listdir(self.directory))
        except FileNotFoundError:
            return
        loaded: list[MappedFile] = []
        try:
            for name in names:
                path = self.directory / name
                if name.endswith(CREATING_SUFFIX):
                    # A creation a crash interrupted: never part of the queue.
                    log.warning("removing interrupted file creation %s", path)
                    path.unlink(missing_ok=True)
                    continue
                if not path.is_file():
                    raise StoreLoadError(f"{path} is not a regular file")
                mapped = MappedFile.open_blocking(path, self.file_size)
                mapped.set_positions(self.file_size)
                loaded.append(mapped)
        except BaseException:
            for mapped in loaded:
                mapped.shutdown()
            raise
        self._files = loaded
        log.info("loaded %d file(s) from %s", len(loaded), self.directory)

    # -- queries -----------------------------------------------------------------------

    @property
    def files(self) -> list[MappedFile]:
        """A copy of the file list, oldest first."""
        return list(self._files)

    def __len__(self) -> int:
        return len(self._files)

    @property
    def first_file(self) -> MappedFile | None:
        """The oldest file."""
        return self._files[0] if self._files else None

    @property
    def last_file(self) -> MappedFile | None:
        """The newest file (the one being written)."""
        return self._files[-1] if self._files else None

    @property
    def min_offset(self) -> int:
        """The first file's start offset, -1 when there is no file."""
        return self._files[0].file_from_offset if self._files else -1

    @property
    def max_offset(self) -> int:
        """The last file's start + read position (readable end), 0 without files."""
        if not self._files:
            return 0
        last = self._files[-1]
        return last.file_from_offset + last.read_position

    @property
    def max_wrote_offset(self) -> int:
        """The last file's start + write position."""
        if not self._files:
            return 0
        last = self._files[-1]
        return last.file_from_offset + last.wrote_position

    @property
    def remaining_to_flush(self) -> int:
        """Readable bytes not yet known to be on disk."""
        return self.max_offset - self.flushed_where

    def path_for(self, offset: int) -> Path:
        """The path of the file that starts at ``offset``."""
        return self.directory / offset_to_file_name(offset)

    def find_file(self, offset: int, return_first_on_not_found: bool = False) -> MappedFile | None:
        """The file holding ``offset`` (``findMappedFileByOffset``).

        Index math first (``offset // size - first // size``), then a linear scan in
        case files are not contiguous.

        Args:
            offset: an offset in the queue's address space.
            return_first_on_not_found: return the first file when ``offset`` lies
                outside every file (RocketMQ passes ``offset == 0`` here).
        """
        files = self._files
        if not files:
            return None
        size = self.file_size
        first_from = files[0].file_from_offset
        if first_from <= offset < files[-1].file_from_offset + size:
            index = offset // size - first_from // size
            if 0 <= index < len(files):
                candidate = files[index]
                if candidate.file_from_offset <= offset < candidate.file_from_offset + size:
                    return candidate
            for candidate in files:
                if candidate.file_from_offset <= offset < candidate.file_from_offset + size:
                    return candidate
        return files[0] if return_first_on_not_found else None

    def file_by_time(self, timestamp_ms: int) -> MappedFile | None:
        """The first file last modified at or after ``timestamp_ms``, else the last file."""
        for mapped in self._files:
            if mapped.last_modified_ms >= timestamp_ms:
                return mapped
        return self.last_file

    def check_self(self) -> list[str]:
        """Log and return every pair of adjacent files not exactly one size apart."""
        problems = []
        for prev, cur in zip(self._files, self._files[1:], strict=False):
            if cur.file_from_offset - prev.file_from_offset != self.file_size:
                problems.append(f"{prev.file_name} -> {cur.file_name}")
        for problem in problems:
            log.error("[BUG] adjacent files of %s do not match: %s", self.directory, problem)
        return problems

    # -- the file to append to -----------------------------------------------------------

    def next_file_offset(self, start_offset: int = 0) -> int | None:
        """Start offset of the file an append needs created, or None if the last has room.

        With no files it is ``start_offset`` rounded down to a file boundary; when
        the last file is full, the offset right after it.
        """
        last = self.last_file
        if last is None:
            return start_offset - start_offset % self.file_size
        if last.is_full:
            return last.file_from_offset + self.file_size
        return None

    def get_last_file(self, start_offset: int = 0, create: bool = True) -> MappedFile | None:
        """The file to append to, never waiting (``getLastMappedFile``).

        Args:
            start_offset: where the first file should start if there is none.
            create: when the last file is full (or there is none), take the next one
                from the allocator if it is ready.

        Returns:
            The last file if it has room; with ``create``, the newly added next file
            if the allocator had it ready, else None (then ``await
            allocate_last_file()``). Without ``create``, the last file even if full.
        """
        files = self._files
        last = files[-1] if files else None
        if last is not None and not last.is_full:
            return last
        if not create:
            return last
        offset = self.next_file_offset(start_offset)
        if offset is None or self._allocator is None:
            return None
        mapped = self._allocator.take(self.path_for(offset))
        if mapped is None:
            return None
        self._add(mapped)
        return mapped

    async def allocate_last_file(self, start_offset: int = 0) -> MappedFile:
        """Like ``get_last_file``, but waits for the allocator to create the file.

        Raises:
            StoreError: the queue has no allocator.
            StoreIOError: the file could not be created.
        """
        mapped = self.get_last_file(start_offset)
        if mapped is not None:
            return mapped
        offset = self.next_file_offset(start_offset)
        if offset is None or self._allocator is None:
            raise StoreError(f"{self.directory}: no allocator to create files with")
        mapped = await self._allocator.allocate(self.path_for(offset), self.file_size)
        last = self.last_file
        if last is not None and last.file_from_offset == offset:
            return last  # a concurrent caller added it while we waited
        if self.next_file_offset(start_offset) != offset:
            mapped.shutdown()
            raise StoreError(f"{self.directory} changed while {mapped.file_name} was created")
        self._add(mapped)
        return mapped

    def create_last_file_blocking(self, start_offset: int = 0) -> MappedFile:
        """Create the next file in this thread (load/recovery phase only)."""
        mapped = self.get_last_file(start_offset, create=False)
        if mapped is not None and not mapped.is_full:
            return mapped
        offset = self.next_file_offset(start_offset)
        assert offset is not None  # no room in the last file, so there is a next one
        mapped = MappedFile.create_blocking(self.path_for(offset), self.file_size)
        self._add(mapped)
        return mapped

    def _add(self, mapped: MappedFile) -> None:
        if mapped.file_size != self.file_size:
            raise StoreError(f"{mapped.path} is {mapped.file_size} bytes, not {self.file_size}")
        if not self._files:
            mapped.first_create_in_queue = True
        self._files.append(mapped)
        if self._prepare_next and self._allocator is not None:
            next_offset = mapped.file_from_offset + self.file_size
            self._allocator.prepare(self.path_for(next_offset), self.file_size)

    # -- truncation and expiry -------------------------------------------------------------

    def detach(self, files: Iterable[MappedFile]) -> None:
        """Remove files from the queue and shut them down; delete their paths separately.

        A reader holding one keeps its mapping until it releases it.
        """
        gone = {id(f) for f in files}
        kept = [f for f in self._files if id(f) not in gone]
        for mapped in self._files:
            if id(mapped) in gone:
                mapped.shutdown()
        self._files = kept

    def truncate_dirty(self, offset: int) -> list[MappedFile]:
        """Cut everything at and after ``offset`` (``truncateDirtyFiles``).

        The file holding ``offset`` keeps its bytes but has all three positions set
        to ``offset % file_size``; files entirely after it are detached.

        Returns:
            The detached files, for ``delete_files_blocking``.
        """
        removed = []
        for mapped in self._files:
            if mapped.file_from_offset + self.file_size > offset:
                if offset >= mapped.file_from_offset:
                    mapped.set_positions(offset - mapped.file_from_offset)
                else:
                    removed.append(mapped)
        self.detach(removed)
        return removed

    def truncate_dirty_blocking(self, offset: int) -> list[MappedFile]:
        """``truncate_dirty`` and delete the removed files (load/recovery phase)."""
        removed = self.truncate_dirty(offset)
        delete_files_blocking(removed)
        return removed

    def delete_last_file(self) -> MappedFile | None:
        """Detach the newest file (ConsumeQueue truncation); delete its path separately."""
        last = self.last_file
        if last is not None:
            self.detach([last])
            log.info("on recover, detached last file %s", last.path)
        return last

    def pick_expired_by_time(
        self,
        now_ms: int,
        reserved_ms: int,
        *,
        clean_immediately: bool = False,
        max_files: int = DELETE_FILES_BATCH_MAX,
    ) -> list[MappedFile]:
        """Oldest files past their reserved time (``deleteExpiredFileByTime``'s choice).

        Never the last file, at most ``max_files``, and it stops at the first file
        that is not expired, so no hole appears. Detach what it returns.

        Args:
            now_ms: the clock.
            reserved_ms: ``fileReservedTime`` in ms.
            clean_immediately: every file but the last is expired (disk pressure).
            max_files: cap per pass.
        """
        chosen: list[MappedFile] = []
        for mapped in self._files[:-1]:
            if not clean_immediately and now_ms < mapped.last_modified_ms + reserved_ms:
                break
            chosen.append(mapped)
            if len(chosen) >= max_files:
                break
        return chosen

    def pick_expired_by_offset(self, min_offset: int, unit_size: int) -> list[MappedFile]:
        """ConsumeQueue files whose last unit points below ``min_offset``.

        Reads the 8-byte physical offset at ``file_size - unit_size`` of each full
        file except the last (``deleteExpiredFileByOffset``'s choice); stops at the
        first file it keeps or cannot read. Detach what it returns.
        """
        chosen: list[MappedFile] = []
        for mapped in self._files[:-1]:
            selected = mapped.select(self.file_size - unit_size)
            if selected is None:
                break
            with selected:
                last_unit_offset = _LONG.unpack_from(selected.view, 0)[0]
            if last_unit_offset >= min_offset:
                break
            chosen.append(mapped)
        return chosen

    # -- flush ---------------------------------------------------------------------------

    async def flush(self, executor: BlockingExecutor, least_pages: int) -> bool:
        """Flush the file holding ``flushed_where`` if the rule allows; advance it.

        Only that one file: after a roll, the next call flushes the next file.

        Args:
            executor: where the msync runs.
            least_pages: the flush rule's threshold (0: anything written).

        Returns:
            True when ``flushed_where`` did not move (RocketMQ's meaning).

        Raises:
            StoreIOError: the msync failed; ``flushed_where`` did not move.
        """
        mapped = self.find_file(self.flushed_where, self.flushed_where == 0)
        if mapped is None or not mapped.hold():
            return True
        try:
            store_timestamp = mapped.store_timestamp
            position = await executor.run(mapped.flush_blocking, least_pages)
        finally:
            mapped.release()
        mapped.flushed_position = max(mapped.flushed_position, position)
        where = mapped.file_from_offset + position
        unchanged = where <= self.flushed_where
        self.flushed_where = max(self.flushed_where, where)
        if least_pages == 0 or not unchanged:
            # RocketMQ moves it on thorough flushes only (10 s apart), so a crash
            # checkpoint lagged by that much; any flush that moved covered every
            # record appended before store_timestamp was read, thorough or not.
            self.store_timestamp = store_timestamp
        return unchanged

    # -- end of life ---------------------------------------------------------------------

    def shutdown(self) -> None:
        """Shut every file down (unmapped as readers release them); keeps the files."""
        for mapped in self._files:
            mapped.shutdown()

    def destroy_blocking(self) -> None:
        """Delete every file and the directory if empty (load/recovery phase)."""
        files, self._files = self._files, []
        for mapped in files:
            mapped.shutdown()
        delete_files_blocking(files)
        self.flushed_where = self.committed_where = 0
        try:
            self.directory.rmdir()
        except FileNotFoundError:
            pass
        except OSError as exc:  # e.g. a stray file: RocketMQ's File.delete() fails quietly too
            log.warning("kept %s after destroying its files: %s", self.directory, exc)
