"""MappedFileAllocator: new store files are created (and warmed) off the event loop.

Owns: RocketMQ's ``AllocateMappedFileService`` role. A file queue asks for the file
it needs *next* before it needs it (``prepare``); a pool thread creates and maps it;
the queue takes it without waiting when it rolls (``take``). When a roll comes before
the file is created, ``allocate`` awaits the creation in progress (or starts one): the
put path awaits, the event loop never blocks.

Warming (optional) faults every page in ahead of the writer, so the loop's copies
into the file meet no first-touch page faults. It runs after the creation, one 4 MiB
step per call, in its own pool whose thread runs at idle CPU priority: the kernel's
page zeroing never takes a core from the event loop (at nice 10 it still did, a few
ms at a time). A file is handed out as soon as it is created: a roll never waits for
warming, which goes on ahead of the writer (``MADV_POPULATE_WRITE`` keeps the bytes);
a starved warming costs the writer the faults it would have met anyway. Each step
holds the file, so it is never unmapped under the pool thread. Where the kernel cannot
populate, RocketMQ's zero-byte warming runs in the creation instead, before the file
is handed out (it writes to the file).

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
from typing import Any

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
        warm: fault in every page of a new file, ahead of the writer.
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
    ) -> None:
        super().__init__(name)
        self._executor = executor
        self._owns_executor = owns_executor
        self._preallocate = preallocate
        self._warm = warm
        self._msync_every_pages = msync_every_pages
        self._warm_executor = warm_executor or executor
        self._warming: dict[Path, asyncio.Task[None]] = {}
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
        """Wait until no creation or warming is under way (tests, benchmarks)."""
        while self._pending or self._warming:
            waits: list[asyncio.Future[Any]] = [*self._pending.values(), *self._warming.values()]
            await asyncio.wait(waits)

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
                self._warm and not background,
                self._msync_every_pages,
            )
        except BaseException as exc:
            del self._pending[path]
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
            task = self.spawn(self._warm_file(mapped), name=f"warm:{path.name}")
            self._warming[path] = task
            task.add_done_callback(lambda t: self._warming.pop(path, None) if t is task else None)

    async def _warm_file(self, mapped: MappedFile) -> None:
        """Fault ``mapped`` in, step by step, from wherever its writer has got to.

        A failure (out of memory, say) only ends the warming: the file is in use, and
        its writer faults in what is left, as with warming off.
        """
        every = self._msync_every_pages
        pos = synced = 0
        while pos < mapped.file_size and self._accepting() and mapped.hold():
            try:
                # The writer may have passed this step already (it faulted those pages).
                start = max(pos, -(-mapped.wrote_position // OS_PAGE_SIZE) * OS_PAGE_SIZE)
                end = min(start - start % WARM_STEP_BYTES + WARM_STEP_BYTES, mapped.file_size)
                sync = every > 0 and (end - synced) // OS_PAGE_SIZE >= every
                if start < end and not await self._warm_executor.run(
                    mapped.warm_range_blocking, start, end, False, synced if sync else -1
                ):
                    return  # populate refused after all: the writer faults the pages in
            except (StoreIOError, OSError) as exc:
                log.warning("warming %s stopped at %d: %s", mapped.path, pos, exc)
                return
            finally:
                mapped.release()
            synced = end if sync else synced
            pos = end

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
