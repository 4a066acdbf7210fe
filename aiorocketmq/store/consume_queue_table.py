"""ConsumeQueueTable: every ConsumeQueue of a store, by topic and queue id.

Owns: ``consumequeue/<topic>/<queueId>/`` as a whole (``DefaultMessageStore``'s
``consumeQueueTable``, ``findConsumeQueue``, ``loadConsumeQueue``, and the per-queue
loops of recovery and expiry), and the allocator that creates ConsumeQueue files
off the event loop for all of them.

Must not: read the CommitLog, or keep the queue-offset counter (``CommitLog`` does,
``queue_offsets()`` gives recovery what to rebuild it from).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from aiorocketmq.runtime.executor import BlockingExecutor
from aiorocketmq.store.allocator import MappedFileAllocator
from aiorocketmq.store.commit_log import queue_key
from aiorocketmq.store.config import MessageStoreConfig
from aiorocketmq.store.consume_queue import ConsumeQueue
from aiorocketmq.store.errors import StoreLoadError
from aiorocketmq.store.mapped_file import delete_files_blocking

__all__ = ["ConsumeQueueTable"]

log = logging.getLogger(__name__)


class ConsumeQueueTable:
    """The store's ConsumeQueues.

    Args:
        config: ``consumequeue`` directory and ``mappedFileSizeConsumeQueue``.
        executor: the store's pool for blocking work.
        allocator: shared by every queue; by default a plain one (no warming: a
            ConsumeQueue file is written 20 bytes at a time).

    Attributes:
        allocator: start it with ``start()`` before puts that need new files.
    """

    def __init__(
        self,
        config: MessageStoreConfig,
        executor: BlockingExecutor,
        *,
        allocator: MappedFileAllocator | None = None,
    ) -> None:
        self.root_dir = config.consume_queue_dir
        self.file_size = config.mapped_file_size_consume_queue
        self._executor = executor
        self.allocator = allocator or MappedFileAllocator(
            executor,
            name="consumequeue-allocate",
            preallocate=config.preallocate_commit_log_blocks,
        )
        self._queues: dict[str, dict[int, ConsumeQueue]] = {}

    # -- lookup --------------------------------------------------------------------------

    def find_or_create(self, topic: str, queue_id: int) -> ConsumeQueue:
        """The queue object (``findConsumeQueue``); creating it touches no file."""
        by_id = self._queues.get(topic)
        if by_id is None:
            by_id = self._queues[topic] = {}
        queue = by_id.get(queue_id)
        if queue is None:
            queue = by_id[queue_id] = self._new_queue(topic, queue_id)
        return queue

    def get(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        """The queue if it exists."""
        return self._queues.get(topic, {}).get(queue_id)

    def topics(self) -> list[str]:
        """Topics that have at least one queue."""
        return list(self._queues)

    def __iter__(self) -> Iterator[ConsumeQueue]:
        for by_id in list(self._queues.values()):
            yield from list(by_id.values())

    def __len__(self) -> int:
        return sum(len(by_id) for by_id in self._queues.values())

    def remove(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        """Forget a queue (its files stay; ``destroy_blocking`` it in the executor)."""
        by_id = self._queues.get(topic)
        if by_id is None:
            return None
        queue = by_id.pop(queue_id, None)
        if not by_id:
            del self._queues[topic]
        return queue

    def _new_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        return ConsumeQueue(
            topic, queue_id, self.root_dir, self.file_size, allocator=self.allocator
        )

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        """Start the shared allocator."""
        await self.allocator.start()

    async def shutdown(self) -> None:
        """Stop the allocator and unmap every queue's files (flush first)."""
        await self.allocator.shutdown()
        for queue in self:
            queue.queue.shutdown()

    # -- load and recovery (load/recovery phase) -----------------------------------------

    def load_blocking(self) -> int:
        """Load ``consumequeue/<topic>/<queueId>/`` (``loadConsumeQueue``).

        Queue directory names that are not numbers are skipped, as RocketMQ does;
        a topic entry that is a file is skipped too.

        Returns:
            How many queues were loaded.

        Raises:
            StoreLoadError: a queue's files are malformed (see ``MappedFileQueue``).
        """
        if not self.root_dir.is_dir():
            return 0
        loaded = 0
        for topic_dir in sorted(self.root_dir.iterdir()):
            if not topic_dir.is_dir():
                continue
            for queue_dir in sorted(topic_dir.iterdir()):
                if not (queue_dir.name.isascii() and queue_dir.name.isdigit()):
                    log.warning("skipping %s: not a queue id", queue_dir)
                    continue
                if not queue_dir.is_dir():
                    raise StoreLoadError(f"{queue_dir} is not a directory")
                queue = self.find_or_create(topic_dir.name, int(queue_dir.name))
                queue.queue.load_blocking()
                loaded += 1
        log.info("loaded %d consume queue(s) from %s", loaded, self.root_dir)
        return loaded

    def recover_blocking(self) -> int:
        """Recover every queue; return the largest ``max_physic_offset`` (or -1)."""
        for queue in self:
            queue.recover_blocking()
        return self.max_physic_offset()

    def max_physic_offset(self) -> int:
        """The largest ``max_physic_offset`` of any queue, -1 when none has units."""
        return max((q.max_physic_offset for q in self), default=-1)

    def truncate_dirty_blocking(self, physical_offset: int) -> None:
        """Drop units pointing at or past ``physical_offset`` in every queue."""
        for queue in self:
            queue.truncate_dirty_logic_files_blocking(physical_offset)

    def correct_min_offsets(self, min_physical_offset: int) -> None:
        """``correct_min_offset`` on every queue."""
        for queue in self:
            queue.correct_min_offset(min_physical_offset)

    def queue_offsets(self) -> dict[str, int]:
        """``"<topic>-<queueId>"`` -> max offset: the CommitLog's ``topic_queue_table``
        as recovery rebuilds it (``recoverTopicQueueTable``).
        """
        return {queue_key(q.topic, q.queue_id): q.max_offset for q in self}

    def destroy_blocking(self) -> None:
        """Delete every queue's files (load/recovery phase: the CommitLog is empty)."""
        for queue in self:
            queue.destroy_blocking()
        self._queues.clear()

    # -- serving ---------------------------------------------------------------------------

    async def flush(self, least_pages: int) -> None:
        """Flush every queue (``FlushConsumeQueueService``'s pass)."""
        for queue in self:
            await queue.flush(self._executor, least_pages)

    async def delete_expired(self, min_physical_offset: int) -> int:
        """Delete files whose units all point below the CommitLog's min offset.

        Returns:
            How many files were deleted.
        """
        total = 0
        for queue in self:
            expired = queue.pick_expired(min_physical_offset)
            if expired:
                total += await self._executor.run(delete_files_blocking, expired)
        return total
