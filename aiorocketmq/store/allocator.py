"""MappedFileAllocator: new store files are created (and warmed) off the event loop.

Owns: RocketMQ's ``AllocateMappedFileService`` role. A file queue asks for the file
it needs *next* before it needs it (``prepare``); a pool thread creates and maps it;
the queue takes it without waiting when it rolls (``take``). When a roll comes before
the file is created, ``allocate`` awaits the creation in progress (or starts one): the
put path awaits, the event loop never blocks.

Warming (optional) faults pages in ahead of the writer, so the loop's copies into
the file meet no first-touch page faults. It runs after the creation, at most one
4 MiB step per call, in its own pool. A file is handed out as soon as it is created: a
roll never waits for warming, which goes on ahead of the writer (``MADV_POPULATE_WRITE``
keeps the bytes); a late warming costs the writer the faults it would have met anyway.
Each step holds the file, so it is never unmapped under the pool thread. Two extents:

- *a window* (``warm_ahead`` > 0): never more than ``warm_ahead`` bytes past the
  writer. The warming parks when it is that far ahead and wakes when the writer has
  used half the window (it looks every 10 ms while the writer moves, backing off to
  every 250 ms while it stands still). The pool thread takes the faults the loop
  would have taken, no more; on a VM whose fresh memory faults slowly (2 µs per KiB
  and stalls of 10-50 ms on the machines measured) that is what keeps the loop's lag
  under a few milliseconds during a burst.
- *the whole file* (``warm_ahead`` == 0), as RocketMQ's ``warmMapedFileEnable``: best
  in a pool whose thread runs at idle CPU priority, since it zeroes and dirties the
  whole file at once.

Where the kernel cannot populate (Linux < 5.14), RocketMQ's zero-byte warming of the
whole file runs in the creation instead, before the file is handed out (it writes to
the file); a window is not warmed there.

Must not: register files in a queue (the queue does, on the loop), create files on
the loop, or leave a prepared file behind: at shutdown every file prepared but never
taken is unmapped and deleted, as RocketMQ does, so a clean stop leaves no empty
file after the last real one. (After a crash one may remain; recovery reads its
zero magic as the end of data and truncates it away.)

One allocator may serve several queues: files are keyed by path.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from aiorocketmq.runtime.executor import BlockingExecutor
from aiorocketmq.runtime.lifecycle import Service, ServiceStateError
from aiorocketmq.store.errors import StoreIOError
from aiorocketmq.store.mapped_file import (
    OS_PAGE_SIZE,
    WARM_STEP_BYTES,
    MappedFile,
    delete_files_blocking,
)
from aiorocketmq.store.page_ops import populate_supported

__all__ = ["MappedFileAllocator"]

log = logging.getLogger(__name__)

_PARKED_POLL_MIN_S = 0.01
"""How often a parked window warming looks at a writer that moves."""
_PARKED_POLL_MAX_S = 0.25
"""... and, backing off, at one that stands still."""


def _page_ceil(position: int) -> int:
    return -(-position // OS_PAGE_SIZE) * OS_PAGE_SIZE


def _create_blocking(
    path: Path, file_size: int, preallocate: bool, warm_now: bool, msync_every_pages: int
) -> MappedFile:
    mapped = MappedFile.create_blocking(path, file_size, preallocate=preallocate)
    if warm_now:  # the zero-byte fallback: only before anyone writes the file
        try:
            mapped.warm_blocking(msync_every_pages)
        except BaseException:
            mapped.shutdown()
            mapped.delete_blocking()
            raise
    return mapped


class MappedFileAllocator(Service):
    """Creates files in ``executor`` ahead of need; see the module docstring.

    Args:
        executor: the store's pool for blocking work.
        preallocate: reserve disk blocks for new files (``posix_fallocate``).
        warm: fault in the pages of a new file ahead of the writer.
        warm_ahead: with ``warm``, how far ahead of the writer at most (bytes; 0:
            the whole file at once).
        msync_every_pages: while warming, msync every this many pages (0: never);
            RocketMQ does it under SYNC_FLUSH.
        warm_executor: the pool that warms (by default ``executor``); give it
            ``idle=True`` so warming only takes cores nobody else wants.
        name: service name for logs.
        owns_executor: shut the pools down with the allocator.

    Attributes:
        created: files created so far (taken or not).
        waited: rolls that found their file not ready and had to wait for it.
    """

    # A creation in a pool thread cannot be interrupted; shutdown lets it finish (so
    # its file is swept with the other unused ones) instead of orphaning it.
    shutdown_grace_s = 60.0

    def __init__(
        self,
        executor: BlockingExecutor,
        *,
        preallocate: bool = False,
        warm: bool = False,
        msync_every_pages: int = 0,
        name: str = "allocate-mapped-file",
        owns_executor: bool = False,
        warm_executor: BlockingExecutor | None = None,
        warm_ahead: int = 0,
    ) -> None:
        super().__init__(name)
        self._executor = executor
        self._owns_executor = owns_executor
        self._preallocate = preallocate
        self._warm = warm
        self._msync_every_pages = msync_every_pages
        self._warm_executor = warm_executor or executor
        self._warm_ahead = warm_ahead
        # Files whose warming is at work (not parked behind its writer): idle() waits
        # for them and for creations, and _settled says when there are none.
        self._working: set[Path] = set()
        self._warmers: dict[Path, asyncio.Task[None]] = {}
        self._settled = asyncio.Event()
        self._settled.set()
        self._ready: dict[Path, MappedFile] = {}
        self._pending: dict[Path, asyncio.Future[MappedFile]] = {}
        self.created = 0
        self.waited = 0

    @property
    def ready_paths(self) -> frozenset[Path]:
        """Files created and not taken yet."""
        return frozenset(self._ready)

    @property
    def pending_paths(self) -> frozenset[Path]:
        """Files being created now."""
        return frozenset(self._pending)

    def take(self, path: Path) -> MappedFile | None:
        """Hand over the prepared file for ``path`` if it is ready; never waits."""
        return self._ready.pop(path, None)

    def prepare(self, path: Path, file_size: int) -> None:
        """Start creating ``path`` in the background unless it is ready or under way.

        A failure is logged; the next ``allocate`` for the path tries again and
        raises it to its caller.
        """
        if path in self._ready or path in self._pending or not self._accepting():
            return
        future: asyncio.Future[MappedFile] = asyncio.get_running_loop().create_future()
        self._pending[path] = future
        self._note_activity()
        self.spawn(self._create(path, file_size, future), name=f"create:{path.name}")

    async def allocate(self, path: Path, file_size: int) -> MappedFile:
        """Return the file for ``path``: the prepared one, or one created now.

        Concurrent callers for one path share one creation and get the same file.

        Raises:
            StoreIOError: creating the file failed (disk full, permissions...).
            ServiceStateError: the allocator is shut down.
        """
        mapped = self.take(path)
        if mapped is not None:
            return mapped
        if not self._accepting():
            raise ServiceStateError(f"{self.name}: allocate({path.name}) after shutdown")
        self.waited += 1
        self.prepare(path, file_size)
        mapped = await asyncio.shield(self._pending[path])
        self._ready.pop(path, None)  # handed out now: no longer "prepared"
        return mapped

    async def idle(self) -> None:
        """Wait until no creation or warming is at work (tests, benchmarks).

        A window warming parked behind its writer counts as idle.
        """
        while self._pending or self._working:
            await self._settled.wait()

    @property
    def warming_paths(self) -> frozenset[Path]:
        """Files whose warming has not ended (at work or parked behind the writer)."""
        return frozenset(self._warmers)

    def _warmed(self, path: Path, task: asyncio.Task[None]) -> None:
        if self._warmers.get(path) is task:
            del self._warmers[path]
        self._working.discard(path)
        self._note_activity()

    def _note_activity(self) -> None:
        if self._pending or self._working:
            self._settled.clear()
        else:
            self._settled.set()

    def _accepting(self) -> bool:
        return not self.stopping.is_set()

    async def _create(self, path: Path, file_size: int, future: asyncio.Future[MappedFile]) -> None:
        try:
            background = self._warm and populate_supported()
            mapped = await self._executor.run(
                _create_blocking,
                path,
                file_size,
                self._preallocate,
                # Without populate a window is not warmed: zero bytes written to a whole
                # file at its creation are RocketMQ's warming, not a window's.
                self._warm and not background and not self._warm_ahead,
                self._msync_every_pages,
            )
        except BaseException as exc:
            del self._pending[path]
            self._note_activity()
            if isinstance(exc, asyncio.CancelledError):
                future.cancel()
                raise
            log.warning("pre-allocation of %s failed: %s", path, exc)
            future.set_exception(exc)
            future.exception()  # retrieved: allocate() callers re-raise it themselves
            return
        del self._pending[path]
        self.created += 1
        self._ready[path] = mapped
        future.set_result(mapped)
        if background and self._accepting():
            self._working.add(path)
            task = self.spawn(self._warm_file(mapped), name=f"warm:{path.name}")
            self._warmers[path] = task
            task.add_done_callback(lambda t: self._warmed(path, t))
        self._note_activity()

    async def _warm_file(self, mapped: MappedFile) -> None:
        """Fault ``mapped`` in, step by step, from wherever its writer has got to.

        A failure (out of memory, say) only ends the warming: the file is in use, and
        its writer faults in what is left, as with warming off.
        """
        every, ahead = self._msync_every_pages, self._warm_ahead
        pos = synced = 0
        size = mapped.file_size
        while self._accepting():
            # The writer may have passed this step already (it faulted those pages).
            start = max(pos, _page_ceil(mapped.wrote_position))
            if start >= size:
                return
            limit = min(size, _page_ceil(mapped.wrote_position + ahead)) if ahead else size
            if start >= limit:
                if not await self._park(mapped, start):
                    return
                continue
            end = min(start - start % WARM_STEP_BYTES + WARM_STEP_BYTES, limit)
            sync = every > 0 and (end - synced) // OS_PAGE_SIZE >= every
            if not mapped.hold():
                return
            try:
                if not await self._warm_executor.run(
                    mapped.warm_range_blocking, start, end, False, synced if sync else -1
                ):
                    return  # populate refused after all: the writer faults the pages in
            except (StoreIOError, OSError) as exc:
                log.warning("warming %s stopped at %d: %s", mapped.path, start, exc)
                return
            finally:
                mapped.release()
            synced = end if sync else synced
            pos = end

    async def _park(self, mapped: MappedFile, warmed: int) -> bool:
        """Wait until the writer has used half the window; False: stop warming."""
        path, delay, seen = mapped.path, _PARKED_POLL_MIN_S, mapped.wrote_position
        self._working.discard(path)
        self._note_activity()
        try:
            while warmed - mapped.wrote_position > self._warm_ahead // 2:
                await asyncio.sleep(delay)
                if not (self._accepting() and mapped.available):
                    return False
                moved, seen = mapped.wrote_position != seen, mapped.wrote_position
                delay = _PARKED_POLL_MIN_S if moved else min(delay * 2, _PARKED_POLL_MAX_S)
            return True
        finally:
            self._working.add(path)
            self._note_activity()

    async def on_shutdown(self) -> None:
        # Creations under way were let finish (shutdown_grace_s), so every file the
        # pool made is in _ready unless a queue took it; warming stopped at its step.
        unused = list(self._ready.values())
        self._ready.clear()
        for mapped in unused:
            mapped.shutdown()
        if unused:
            deleted = await self._executor.run(delete_files_blocking, unused)
            log.info("deleted %d pre-allocated file(s) never used", deleted)
        if self._owns_executor:
            await self._executor.shutdown()
            if self._warm_executor is not self._executor:
                await self._warm_executor.shutdown()
