"""FlushConsumeQueueService: msync ConsumeQueues on an interval and write the checkpoint.

Owns: when ConsumeQueue files are flushed (``DefaultMessageStore.
FlushConsumeQueueService``; specs/store.md §4 "Flush", §7.1): every
``flushIntervalConsumeQueue`` ms each queue with at least
``flushConsumeQueueLeastPages`` dirty pages; every
``flushConsumeQueueThoroughInterval`` ms everything, after which the checkpoint is
written with ``logicsMsgTimestamp`` set to the value captured *before* that flush,
so the file never claims a queue write that might not be on disk yet. At shutdown,
a full flush (three passes: one pass flushes one file per queue) and a checkpoint.

Must not: msync on the loop (``ConsumeQueueTable.flush`` runs it in the executor),
or write the checkpoint itself: the store's ``write_checkpoint`` serialises every
writer (CommitLog flush, index file full, this service, shutdown).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Final

from aiorocketmq.common.clock import Clock, SystemClock
from aiorocketmq.runtime.lifecycle import Service
from aiorocketmq.store.checkpoint import StoreCheckpoint
from aiorocketmq.store.consume_queue_table import ConsumeQueueTable

__all__ = ["FlushConsumeQueueService"]

log = logging.getLogger(__name__)

RETRY_TIMES_OVER: Final = 3
"""Full-flush passes at shutdown (RocketMQ's ``RETRY_TIMES_OVER``)."""


class FlushConsumeQueueService(Service):
    """Flushes every ConsumeQueue; see the module docstring.

    Args:
        cq_table: the queues.
        checkpoint: its ``logicsMsgTimestamp`` is captured before a full flush.
        write_checkpoint: the store's serialised checkpoint writer.
        interval_ms: ``flushIntervalConsumeQueue``.
        least_pages: ``flushConsumeQueueLeastPages``.
        thorough_interval_ms: ``flushConsumeQueueThoroughInterval``.
        clock: monotonic time for the thorough interval.
        flush_index: msyncs the index file being written and returns the store time
            it now covers, which the checkpoint's ``indexMsgTimestamp`` takes (RocketMQ
            moves it only when a file fills); None leaves the index alone.

    Attributes:
        full_flushes: full flushes done (each followed by a checkpoint write).
    """

    def __init__(
        self,
        cq_table: ConsumeQueueTable,
        checkpoint: StoreCheckpoint,
        write_checkpoint: Callable[[], Awaitable[None]],
        *,
        interval_ms: int = 1000,
        least_pages: int = 2,
        thorough_interval_ms: int = 60_000,
        clock: Clock | None = None,
        flush_index: Callable[[], Awaitable[int]] | None = None,
    ) -> None:
        super().__init__("flush-consume-queue")
        self._cq_table = cq_table
        self._checkpoint = checkpoint
        self._write_checkpoint = write_checkpoint
        self._interval_s = max(interval_ms, 1) / 1000
        self._least_pages = least_pages
        self._thorough_ms = thorough_interval_ms
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._flush_index = flush_index
        self._last_thorough_ms = self._clock.monotonic_ms()
        self.full_flushes = 0

    async def on_start(self) -> None:
        self.periodic(self._interval_s, self.do_flush, name="flush")

    async def do_flush(self) -> None:
        """One interval pass (a full one when the thorough interval has passed)."""
        least_pages = self._least_pages
        logics_timestamp = 0
        now = self._clock.monotonic_ms()
        if now >= self._last_thorough_ms + self._thorough_ms:
            self._last_thorough_ms = now
            least_pages = 0
            # Captured before the flush: units written while it runs are not covered.
            logics_timestamp = self._checkpoint.logics_msg_timestamp
        await self._cq_table.flush(least_pages)
        if least_pages == 0:
            await self._checkpoint_after_full_flush(logics_timestamp)

    async def _checkpoint_after_full_flush(self, logics_timestamp: int) -> None:
        if logics_timestamp > 0:
            self._checkpoint.logics_msg_timestamp = logics_timestamp
        if self._flush_index is not None:
            index_timestamp = await self._flush_index()
            self._checkpoint.index_msg_timestamp = max(
                self._checkpoint.index_msg_timestamp, index_timestamp
            )
        self.full_flushes += 1
        await self._write_checkpoint()

    async def flush_all(self) -> None:
        """Flush every queue completely and write the checkpoint (shutdown)."""
        logics_timestamp = self._checkpoint.logics_msg_timestamp
        for _ in range(RETRY_TIMES_OVER):
            await self._cq_table.flush(0)
        await self._checkpoint_after_full_flush(logics_timestamp)

    async def on_shutdown(self) -> None:
        await self.flush_all()
        log.info("consume queues flushed at shutdown queues=%d", len(self._cq_table))
