"""MappedFileAllocator: new store files are created (and warmed) off the event loop.

Owns: RocketMQ's ``AllocateMappedFileService`` role. A file queue asks for the file
it needs *next* before it needs it (``prepare``); a pool thread creates it, maps it
and optionally faults in every page (``MappedFile.warm_blocking``); the queue takes
it without waiting when it rolls (``take``). When a roll comes before the file is
ready, ``allocate`` awaits the creation in progress (or starts one): the put path
awaits, the event loop never blocks.

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
from aiorocketmq.store.mapped_file import MappedFile, delete_files_blocking

__all__ = ["MappedFileAllocator"]

log = logging.getLogger(__name__)


def _create_blocking(
    path: Path, file_size: int, preallocate: bool, warm: bool, msync_every_pages: int
) -> MappedFile:
    mapped = MappedFile.create_blocking(path, file_size, preallocate=preallocate)
    if warm:
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
        warm: fault in every page of a new file before handing it out.
        msync_every_pages: while warming, msync every this many pages (0: never);
            RocketMQ does it under SYNC_FLUSH.
        name: service name for logs.

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
    ) -> None:
        super().__init__(name)
        self._executor = executor
        self._owns_executor = owns_executor
        self._preallocate = preallocate
        self._warm = warm
        self._msync_every_pages = msync_every_pages
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
        """Wait until no creation is under way (tests, benchmarks, shutdown)."""
        while self._pending:
            await asyncio.wait(list(self._pending.values()))

    def _accepting(self) -> bool:
        return not self.stopping.is_set()

    async def _create(self, path: Path, file_size: int, future: asyncio.Future[MappedFile]) -> None:
        try:
            mapped = await self._executor.run(
                _create_blocking,
                path,
                file_size,
                self._preallocate,
                self._warm,
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

    async def on_shutdown(self) -> None:
        # Creations under way were let finish (shutdown_grace_s), so every file the
        # pool made is in _ready unless a queue took it.
        unused = list(self._ready.values())
        self._ready.clear()
        for mapped in unused:
            mapped.shutdown()
        if unused:
            deleted = await self._executor.run(delete_files_blocking, unused)
            log.info("deleted %d pre-allocated file(s) never used", deleted)
        if self._owns_executor:
            await self._executor.shutdown()
