"""DispatchFiles: the files dispatched records wait for, and what their absence imposes.

Owns: creating the ConsumeQueue file or IndexFile a record waits for (a few attempts
a second apart), the running flags a failed creation sets (WRITE_LOGICS_QUEUE_ERROR,
WRITE_INDEX_FILE_ERROR: puts are refused meanwhile), the keys skipped while no
IndexFile can be created, and lifting all of it once a creation succeeds again: a
full disk heals without a restart. ``ReputMessageService`` owns one and calls it from
its loop task.

Must not: create files on the loop thread (the queue's and the index's own creation
run in their threads), or dispatch anything (the service redoes the waiting record
once the file exists).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Final

from aiorocketmq.runtime.lifecycle import Service
from aiorocketmq.store.consume_queue import ConsumeQueue
from aiorocketmq.store.dispatch_request import DispatchRequest
from aiorocketmq.store.errors import StoreError
from aiorocketmq.store.index_service import IndexService
from aiorocketmq.store.running_flags import RunningFlag, RunningFlags

__all__ = ["DispatchFiles"]

log = logging.getLogger(__name__)

_FILE_RETRIES: Final = 3  # 3 creations 1 s apart, then puts are refused meanwhile
_INDEX_RETRY_MS: Final = 1000  # without an index file: one more creation attempt a second
_RETRY_PAUSE_S: Final = 1.0


class DispatchFiles:
    """See the module docstring.

    Args:
        owner: the dispatching service (its tasks, and its stop that ends a pause).
        index_service: creates IndexFiles.
        flags: the store's running flags.

    Attributes:
        index_down_since_ms: monotonic ms of the last failed IndexFile creation; 0
            while an IndexFile can be created (read on every dispatch: test it before
            calling ``skips_keys``).
    """

    def __init__(self, owner: Service, index_service: IndexService, flags: RunningFlags) -> None:
        self._owner = owner
        self._index = index_service
        self._flags = flags
        self._failing = False  # a file creation failed and none succeeded since
        self._queue_error_is_ours = False  # WRITE_LOGICS_QUEUE_ERROR set for a missing file
        self._unindexed = 0  # records dispatched without their keys meanwhile
        self.index_down_since_ms = 0

    def skips_keys(self, records: int) -> bool:
        """Whether the keys of ``records`` just dispatched go unindexed (no IndexFile,
        and its next creation attempt not due yet); counted when they do."""
        down = self.index_down_since_ms
        if down and time.monotonic_ns() // 1_000_000 - down < _INDEX_RETRY_MS:
            self._unindexed += records
            return True
        return False

    async def provide(self, request: DispatchRequest, queue: ConsumeQueue | None) -> None:
        """Create the file ``request``'s record waits for (``queue``'s, or an IndexFile
        when None); then the service redoes the record.

        A ConsumeQueue file that cannot be created (a full disk) stops dispatch, which
        is ordered, and refuses puts until it can; an IndexFile that cannot be created
        refuses puts and leaves the keys of the records dispatched meanwhile unindexed
        (their units still go in, so every stored message stays readable). Both heal
        by themselves once a file can be created again: no restart is needed.
        """
        attempts = 1 if queue is None and self.index_down_since_ms else _FILE_RETRIES
        for attempt in range(1, attempts + 1):
            try:
                if queue is not None:
                    await queue.allocate_file(request.consume_queue_offset)
                else:
                    await self._index.create_file()
            except StoreError as exc:
                if attempt == 1 and not self._failing:
                    log.error("creating a file for %s failed: %s; retrying", request, exc)
                self._failing = True
                if attempt < attempts:
                    await self._pause()
                continue
            self._recovered(queue is None)
            return
        if queue is not None:
            self._flags.make_logics_queue_error()
            self._queue_error_is_ours = True
            await self._pause()  # then the step meets the same record and tries again
        else:
            self._flags.make_index_file_error()
            if not self.index_down_since_ms:
                log.error("no index file can be created: puts refused, keys not indexed")
                if self._owner.running:
                    self._owner.spawn(self._heal_index(), name="heal-index")
            self.index_down_since_ms = time.monotonic_ns() // 1_000_000

    async def _pause(self) -> None:
        """A retry's pause: a second, or until the service stops."""
        try:
            async with asyncio.timeout(_RETRY_PAUSE_S):
                await self._owner.stopping.wait()
        except TimeoutError:
            pass

    async def _heal_index(self) -> None:
        """Retry the IndexFile each second while there is none: puts are refused, so no
        record brings a retry (a disk full at an index roll refused puts until restart)."""
        while self.index_down_since_ms:
            await self._pause()
            if self._owner.stopping.is_set():
                return
            try:
                await self._index.create_file()
            except StoreError:
                continue  # still full
            self._recovered(True)

    def _recovered(self, index: bool) -> None:
        """A file could be created again: lift what its failure imposed."""
        if self._failing:
            log.warning("store files can be created again; dispatch and puts resume")
        self._failing = False
        if self._queue_error_is_ours:
            self._flags.clear(RunningFlag.WRITE_LOGICS_QUEUE_ERROR)
            self._queue_error_is_ours = False
        if index and self.index_down_since_ms:
            self._flags.clear(RunningFlag.WRITE_INDEX_FILE_ERROR)
            self.index_down_since_ms = 0
            if self._unindexed:
                log.warning("%d messages were stored without index keys", self._unindexed)
            self._unindexed = 0
