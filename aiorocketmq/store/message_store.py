"""MessageStore: the store facade; wires the parts and owns their lifecycle order.

Owns: one store directory and everything in it, through its parts (CommitLog,
ConsumeQueueTable, IndexService, checkpoint, dispatcher, flush services), and the
order they load, start and stop in (``DefaultMessageStore``; specs/store.md §7.2,
§7.5):

* ``load()`` (executor): lock ``<root>/lock`` (refused if held), read the
  ``abort`` marker (absent = last exit clean), load CommitLog, ConsumeQueues,
  checkpoint and IndexFiles, recover, and log recovery's report;
* ``start()``: allocators; redispatch from the report's ``redispatch_from`` until
  caught up, then rebuild the queue-offset table; the CommitLog flush service
  (SYNC_FLUSH: group commit; ASYNC_FLUSH: interval flush); the ConsumeQueue flush
  service (which writes the checkpoint); create ``abort``; file expiry and the
  disk guard (``CleanupService``, whose verdict sets the DISK_FULL flag); then
  accept puts;
* ``shutdown()`` (idempotent): refuse puts, let waiting appends and the reput
  finish, stop expiry, flush the CommitLog, ConsumeQueues and index, write the checkpoint,
  unmap, and delete ``abort`` only if the store is writeable and the reput caught
  up, so a store that was not healthy recovers as after a crash next time.

Puts go through ``MessagePutter`` (``put_message``), reads through
``MessageGetter`` (``get_message``); this class only delegates to them.

Must not: do blocking work on the loop (load, lock, marker files and checkpoint
writes run in the store's executor), or talk to sockets (HA plugs in through
``replica_waiter``, ``get_commit_log_data`` and ``append_to_commit_log``).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Collection
from pathlib import Path
from typing import Any, Final

from aiorocketmq.common.clock import Clock, SystemClock
from aiorocketmq.common.constants import (
    LMQ_PREFIX,
    RMQ_SYS_SCHEDULE_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
)
from aiorocketmq.common.errors import RemoteProtocolError
from aiorocketmq.common.message import MessageExt
from aiorocketmq.common.msg_id import decode_offset_msg_id
from aiorocketmq.runtime.executor import BlockingExecutor
from aiorocketmq.runtime.lifecycle import Service, ServiceStateError
from aiorocketmq.store.checkpoint import StoreCheckpoint, write_checkpoint_blocking
from aiorocketmq.store.cleanup import CleanupService
from aiorocketmq.store.commit_log import AppendStatus, CommitLog
from aiorocketmq.store.config import FlushDiskType, MessageStoreConfig
from aiorocketmq.store.consume_queue import ConsumeQueue
from aiorocketmq.store.consume_queue_flush import FlushConsumeQueueService
from aiorocketmq.store.consume_queue_table import ConsumeQueueTable
from aiorocketmq.store.dispatch_soon import DispatchSoon
from aiorocketmq.store.dispatcher import ArrivalListener, ReputMessageService
from aiorocketmq.store.errors import StoreError
from aiorocketmq.store.flush import FlushRealTimeService, GroupCommitService
from aiorocketmq.store.get_message import MessageGetter, RecordFilter
from aiorocketmq.store.index_file import IndexFile
from aiorocketmq.store.index_service import IndexService, QueryOffsetResult
from aiorocketmq.store.inner_message import MessageExtBatch, MessageExtBrokerInner
from aiorocketmq.store.mapped_file import MappedFile, SelectedBuffer, delete_files_blocking
from aiorocketmq.store.put_message import MessagePutter, ReplicaWaiter
from aiorocketmq.store.read_ahead import ReadAhead
from aiorocketmq.store.results import GetMessageResult, PutMessageResult, QueryMessageResult
from aiorocketmq.store.running_flags import RunningFlags
from aiorocketmq.store.store_lifecycle import (
    LoadResult,
    acquire_lock_blocking,
    create_abort_file_blocking,
    delete_abort_file_blocking,
    load_store_blocking,
    release_lock_blocking,
)
from aiorocketmq.store.store_lifecycle import total_physical_memory as host_physical_memory
from aiorocketmq.store.store_stats import StoreStats

__all__ = ["MessageStore"]

log = logging.getLogger(__name__)

SHUTDOWN_DISPATCH_WAIT_S: Final = 5.0
"""How long shutdown lets the reput catch up (RocketMQ: 50 x 100 ms)."""
#: Topics ``cleanUnusedTopic`` never destroys, configured or not.
_NEVER_CLEANED: Final = frozenset({RMQ_SYS_SCHEDULE_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC})


class MessageStore(Service):
    """One message store; see the module docstring.

    Args:
        config: every store setting (small files work: tests use KiB-sized ones).
        clock: store timestamps, index file names, stall and flush intervals.
        executor: the pool for blocking work; by default the store makes and owns one.
        total_physical_memory: RAM in bytes for the on-disk / suggest-slave rules;
            by default what the OS reports (24 GiB if it does not).
        replica_waiter: SYNC_MASTER's wait for a slave (the HA layer's seam).

    Attributes:
        config, clock, executor, flags, stats, checkpoint: as named.
        commit_log, cq_table, index_service, dispatcher: the parts.
        plain_putter: a plain single put from its fields (``plain_put.py``); None where
            puts keep a flush or replica promise, or the record kernel is not built.
        load_result: what ``load()`` found (None before).
        read_ahead: reads a pull's records that are not in memory, off the loop.
    """

    def __init__(
        self,
        config: MessageStoreConfig,
        *,
        clock: Clock | None = None,
        executor: BlockingExecutor | None = None,
        total_physical_memory: int | None = None,
        replica_waiter: ReplicaWaiter | None = None,
    ) -> None:
        super().__init__("message-store")
        self.config = config
        self.clock: Clock = clock if clock is not None else SystemClock()
        self._own_executor = executor is None
        self.executor = (
            executor if executor is not None else BlockingExecutor("store", 4, prestart=True)
        )
        self.flags = RunningFlags()
        self.stats = StoreStats()
        self.checkpoint = StoreCheckpoint(config.checkpoint_path)
        self.commit_log = CommitLog(config, self.executor)
        self.cq_table = ConsumeQueueTable(config, self.executor)
        self.index_service = IndexService(
            config, self.executor, clock=self.clock, on_file_full=self._on_index_file_full
        )
        self.dispatcher = ReputMessageService(
            config, self.commit_log, self.cq_table, self.index_service, self.checkpoint,
            flags=self.flags, stats=self.stats,
        )  # fmt: skip
        soon = DispatchSoon(self.dispatcher.dispatch_fields, self.dispatcher.dispatch_now)
        self._putter = MessagePutter(
            config, self.commit_log, clock=self.clock, flags=self.flags, stats=self.stats,
            wakeup=soon.note_batch, dispatch_put=soon.note_put, note_fields=soon.note_fields,
        )  # fmt: skip
        self.plain_putter = self._putter.plain
        self._putter.replica_waiter = replica_waiter
        self._getter = MessageGetter(
            config, self.commit_log, self.cq_table, self.index_service, stats=self.stats,
            total_physical_memory=total_physical_memory or host_physical_memory(),
        )  # fmt: skip
        self.read_ahead = ReadAhead(self.cq_table, self.commit_log, self.look_message_by_offset)
        self.flush_service = self._build_flush_service()
        self.cq_flush_service = FlushConsumeQueueService(
            self.cq_table, self.checkpoint, self.write_checkpoint,
            interval_ms=config.flush_interval_consume_queue,
            least_pages=config.flush_consume_queue_least_pages,
            thorough_interval_ms=config.full_cq_flush_interval_ms, clock=self.clock,
            flush_index=self.index_service.flush_current if config.message_index_enable else None,
        )  # fmt: skip
        # Deletions get a pool of their own: unlinking a 1 GiB file must not delay a flush.
        self._clean_executor = BlockingExecutor("store-clean", 1, prestart=True)
        self.cleanup_service = CleanupService(
            config, self.commit_log, self.cq_table, self.index_service, self._clean_executor,
            self.clock, on_writable_changed=self.on_disk_writable_changed,
        )  # fmt: skip
        self._putter.on_out_of_space = self.cleanup_service.request_disk_check
        self.load_result: LoadResult | None = None
        self._lock_fd: int | None = None
        self._checkpoint_lock = asyncio.Lock()
        self._closed = False

    def _build_flush_service(self) -> GroupCommitService | FlushRealTimeService:
        config = self.config
        if config.flush_disk_type is FlushDiskType.SYNC_FLUSH:
            return GroupCommitService(self._flush_commit_log, config.sync_flush_timeout)
        # flushCommitLogTimed=false (flush woken by every put) is not offered: the
        # interval service always runs at its fixed period.
        return FlushRealTimeService(
            self._flush_commit_log,
            interval_ms=max(config.flush_interval_commit_log, 1),
            least_pages=config.flush_commit_log_least_pages,
            thorough_interval_ms=config.flush_commit_log_thorough_interval,
        )

    # -- lifecycle -----------------------------------------------------------------------

    async def load(self) -> LoadResult:
        """Lock the directory, load every file and recover (``DefaultMessageStore.load``).

        Raises:
            StoreLockedError: another store holds the directory.
            StoreLoadError: a file does not look like a 4.9 store's.
        """
        if self.load_result is not None:
            return self.load_result
        self._lock_fd = await self.executor.run(acquire_lock_blocking, self.config.lock_path)
        try:
            result = await self.executor.run(
                load_store_blocking, self.config, self.commit_log, self.cq_table,
                self.index_service, self.checkpoint,
            )  # fmt: skip
        except BaseException:
            await self._close(delete_abort=False)
            raise
        log.info(result.report.log_line())
        self.load_result = result
        return result

    async def on_start(self) -> None:
        try:
            await self._start_parts()
        except BaseException:
            log.exception("message store failed to start")
            await self._stop_parts()
            await self._close(delete_abort=False)
            raise
        log.info(
            "message store started root=%s max_phy_offset=%s",
            self.config.root_dir, self.commit_log.max_offset,
        )  # fmt: skip

    async def _start_parts(self) -> None:
        result = self.load_result or await self.load()
        await self.commit_log.start()
        await self.cq_table.start()
        await self.index_service.start()
        self.dispatcher.reput_from = result.report.redispatch_from
        await self.dispatcher.start()
        # Everything recovered must be in the queues before anything is served.
        await self.dispatcher.replay_until(self.commit_log.max_offset)
        self.recover_topic_queue_table()
        if isinstance(self.flush_service, GroupCommitService):
            self._putter.group_commit = self.flush_service
        await self.flush_service.start()
        await self.cq_flush_service.start()
        await self.executor.run(create_abort_file_blocking, self.config.abort_path)
        await self.cleanup_service.start()
        self._putter.accepting = True

    def recover_topic_queue_table(self) -> None:
        """Rebuild the next-queue-offset table from the queues (``recoverTopicQueueTable``)."""
        self.commit_log.topic_queue_table = self.cq_table.queue_offsets()
        self.cq_table.correct_min_offsets(self.commit_log.min_offset)

    async def on_shutdown(self) -> None:
        self._putter.accepting = False
        await self._putter.wait_appends_done()
        try:
            async with asyncio.timeout(SHUTDOWN_DISPATCH_WAIT_S):
                await self.dispatcher.wait_dispatched(self.commit_log.max_offset)
        except TimeoutError:
            log.warning("shutdown before the reput caught up behind=%s", self.dispatcher.behind())
        await self._stop_parts()
        await self._close(delete_abort=True)

    async def shutdown(self) -> None:
        """Stop the store (idempotent); also releases a store only loaded, never started."""
        await super().shutdown()
        await self._close(delete_abort=False)

    async def _stop_parts(self) -> None:
        # No more deletions; then the reput (nothing more reaches the queues), the final
        # CommitLog flush (group-commit waiters get their answer), queues, index.
        await self.cleanup_service.shutdown()
        await self.dispatcher.shutdown()
        await self.flush_service.shutdown()
        await self.cq_flush_service.shutdown()
        await self.index_service.shutdown()  # and flushes the newest index files

    async def _close(self, *, delete_abort: bool) -> None:
        """Write the checkpoint, unmap, maybe delete ``abort``, unlock (idempotent)."""
        if self._closed:
            return
        self._closed = True
        caught_up = self.dispatcher.behind() <= 0
        if self.load_result is not None and not self.executor.closed:
            await self.write_checkpoint()
        await self.commit_log.shutdown()
        await self.cq_table.shutdown()
        self.index_service.close()
        if delete_abort and self.flags.writeable and caught_up:
            await self.executor.run(delete_abort_file_blocking, self.config.abort_path)
            log.info("message store shut down normally")
        elif delete_abort:
            log.warning("store unhealthy or behind: keeping the abort file flags=%s", self.flags)
        if self._lock_fd is not None:
            await self.executor.run(release_lock_blocking, self._lock_fd)
            self._lock_fd = None
        await self._clean_executor.shutdown()
        await self.read_ahead.shutdown()
        if self._own_executor:
            await self.executor.shutdown()

    # -- flush and checkpoint ------------------------------------------------------------

    async def _flush_commit_log(self, least_pages: int) -> int:
        flushed = await self.commit_log.flush(least_pages)
        stored = self.commit_log.queue.store_timestamp
        if stored > 0:
            self.checkpoint.physic_msg_timestamp = stored
        return flushed

    async def write_checkpoint(self) -> None:
        """Write the checkpoint file now; writers are serialised, newest snapshot last."""
        async with self._checkpoint_lock:
            data = self.checkpoint.encode()
            await self.executor.run(write_checkpoint_blocking, self.checkpoint.path, data)

    def _on_index_file_full(self, index_file: IndexFile) -> None:
        self.checkpoint.index_msg_timestamp = index_file.end_timestamp
        if self.running:
            self.spawn(self.write_checkpoint(), name="checkpoint:index-full")

    # -- puts ----------------------------------------------------------------------------

    @property
    def replica_waiter(self) -> ReplicaWaiter | None:
        """SYNC_MASTER's wait for a slave; set by the HA layer."""
        return self._putter.replica_waiter

    @replica_waiter.setter
    def replica_waiter(self, waiter: ReplicaWaiter | None) -> None:
        self._putter.replica_waiter = waiter

    async def put_message(self, msg: MessageExtBrokerInner) -> PutMessageResult:
        """Store one message (``asyncPutMessage``); see ``put_message.py`` for statuses."""
        return await self._putter.put_message(msg)

    async def put_messages(self, batch: MessageExtBatch) -> PutMessageResult:
        """Store a batch of one queue (``asyncPutMessages``)."""
        return await self._putter.put_messages(batch)

    def put_message_nowait(
        self, msg: MessageExtBrokerInner
    ) -> PutMessageResult | Awaitable[PutMessageResult]:
        """``put_message``, answered inline when nothing must be awaited (the send
        processor's fast path: no coroutine, no task per request)."""
        return self._putter.put_message_nowait(msg)

    def put_messages_nowait(
        self, batch: MessageExtBatch
    ) -> PutMessageResult | Awaitable[PutMessageResult]:
        """``put_messages``, answered inline when nothing must be awaited."""
        return self._putter.put_messages_nowait(batch)

    async def append_to_commit_log(self, start_offset: int, data: bytes | memoryview) -> bool:
        """Append replicated CommitLog bytes at ``start_offset`` (a slave's HA client).

        Returns:
            True when appended (the dispatcher is woken); False when the store is
            not running or the bytes do not continue this CommitLog (logged).
        """
        if not self.running or self.stopping.is_set():
            return False
        status = self.commit_log.append_data(start_offset, data)
        if status is AppendStatus.NEED_FILE:
            try:
                await self.commit_log.allocate_next_file(start_offset)
            except (StoreError, ServiceStateError) as exc:
                log.error("append_to_commit_log: no file for %s: %s", start_offset, exc)
                return False
            status = self.commit_log.append_data(start_offset, data)
        if status is not AppendStatus.PUT_OK:
            log.error("append_to_commit_log failed at %s (%d bytes)", start_offset, len(data))
            return False
        self.dispatcher.wakeup()
        return True

    def get_commit_log_data(self, offset: int) -> SelectedBuffer | None:
        """Held CommitLog bytes from ``offset`` to its file's readable end (HA transfer)."""
        if not self.running:
            return None
        return self.commit_log.get_data(offset)

    # -- reads ---------------------------------------------------------------------------

    def get_message(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_msgs: int,
        *,
        tag_codes: Collection[int] | None = None,
        record_filter: RecordFilter | None = None,
    ) -> GetMessageResult | None:
        """Pull records (``getMessage``); None when the store is not serving.

        The result holds its files: release it once the reply is written.
        ``group`` is accepted for parity (RocketMQ records disk fall-behind by it).
        """
        if not self.running or not self.flags.readable:
            return None
        return self._getter.get_message(
            topic, queue_id, offset, max_msgs, tag_codes=tag_codes, record_filter=record_filter
        )

    def look_message_by_offset(self, physical_offset: int) -> MessageExt | None:
        """The message stored at ``physical_offset``, or None (also when not serving)."""
        if not self.running:
            return None
        return self._getter.look_message_by_offset(physical_offset)

    def look_message_by_msg_id(self, msg_id: str) -> MessageExt | None:
        """The message an offsetMsgId names (``VIEW_MESSAGE_BY_ID``), or None."""
        try:
            _ip, _port, offset = decode_offset_msg_id(msg_id)
        except RemoteProtocolError:
            return None
        return self.look_message_by_offset(offset)

    def select_one_message_by_offset(self, physical_offset: int) -> SelectedBuffer | None:
        """The held raw record at ``physical_offset`` (release it), or None."""
        if not self.running:
            return None
        return self._getter.select_one_message_by_offset(physical_offset)

    def query_message(  # noqa: PLR0917 - the query's window, as QUERY_MESSAGE names it
        self, topic: str, key: str, max_num: int, begin: int, end: int,
        first: QueryOffsetResult | None = None,
    ) -> QueryMessageResult:  # fmt: skip
        """Messages by ``KEYS``/``UNIQ_KEY`` stored in ``[begin, end]`` ms; release it.

        Empty when the store is not serving. ``first``: the index lookup made already.
        """
        if not self.running:
            return QueryMessageResult()
        return self._getter.query_message(topic, key, max_num, begin, end, first)

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """Next queue offset to be written; 0 for an unknown queue."""
        queue = self.cq_table.get(topic, queue_id)
        return queue.max_offset if queue is not None else 0

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """First valid queue offset; 0 for an unknown queue.

        RocketMQ creates the queue on lookup, so a client asking GET_MIN_OFFSET for a
        queue nobody wrote gets 0, never -1; we answer the same without creating it.
        """
        queue = self.cq_table.get(topic, queue_id)
        return queue.min_offset if queue is not None else 0

    def get_message_total_in_queue(self, topic: str, queue_id: int) -> int:
        """max - min; 0 for an unknown queue (as RocketMQ's lookup-creates-it answers)."""
        queue = self.cq_table.get(topic, queue_id)
        return queue.message_total if queue is not None else 0

    def get_commit_log_offset_in_queue(self, topic: str, queue_id: int, queue_offset: int) -> int:
        """Physical offset of a queue offset's unit; 0 when there is none."""
        unit = self._unit(topic, queue_id, queue_offset)
        return unit[0] if unit is not None else 0

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """Queue offset stored closest to ``timestamp_ms``; 0 for an unknown queue."""
        queue = self.cq_table.get(topic, queue_id)
        if queue is None:
            return 0
        commit_log = self.commit_log
        return queue.offset_by_time(
            timestamp_ms, commit_log.pickup_store_timestamp, commit_log.min_offset
        )

    def get_message_store_timestamp(self, topic: str, queue_id: int, queue_offset: int) -> int:
        """Store time of the message at a queue offset, -1 when unknown."""
        unit = self._unit(topic, queue_id, queue_offset)
        if unit is None:
            return -1
        return self.commit_log.pickup_store_timestamp(unit[0], unit[1])

    def get_earliest_message_time(self, topic: str, queue_id: int) -> int:
        """Store time of a queue's first valid message, -1 when unknown."""
        queue = self.cq_table.get(topic, queue_id)
        if queue is None:
            return -1
        return self.get_message_store_timestamp(topic, queue_id, queue.min_offset)

    def get_earliest_store_time(self) -> int:
        """Store time of the CommitLog's first message, -1 when there is none."""
        selected = self.commit_log.read_record(max(self.commit_log.min_offset, 0))
        if selected is None:
            return -1
        with selected:
            offset, size = selected.start_offset, selected.size
        return self.commit_log.pickup_store_timestamp(offset, size)

    def check_in_disk_by_consume_offset(self, topic: str, queue_id: int, queue_offset: int) -> bool:
        """Whether a queue offset's message lies beyond what RAM would keep cached."""
        unit = self._unit(topic, queue_id, queue_offset)
        return unit is not None and self._getter.in_disk(unit[0])

    def _unit(self, topic: str, queue_id: int, queue_offset: int) -> tuple[int, int, int] | None:
        queue = self.cq_table.get(topic, queue_id)
        return queue.get_unit(queue_offset) if queue is not None else None

    @property
    def max_phy_offset(self) -> int:
        """End of the CommitLog's readable data."""
        return self.commit_log.max_offset

    @property
    def min_phy_offset(self) -> int:
        """First readable CommitLog offset (-1 without files)."""
        return self.commit_log.min_offset

    def dispatch_behind_bytes(self) -> int:
        """CommitLog bytes not yet dispatched (``dispatchBehindBytes``)."""
        return self.dispatcher.behind()

    def disk_ratios(self) -> tuple[float, float, float]:
        """The last used shares (0..1, -1 unmeasured) of the CommitLog, ConsumeQueue and
        index directories' file systems, as RocketMQ's refusals quote them."""
        stats = self.cleanup_service.stats
        return stats.commit_log_disk_ratio, stats.consume_queue_disk_ratio, stats.index_disk_ratio

    def on_disk_writable_changed(self, writable: bool) -> None:
        """The cleanup service's disk verdict: a full disk refuses puts, reads go on."""
        (self.flags.get_and_make_disk_ok if writable else self.flags.get_and_make_disk_full)()

    def add_arrival_listener(self, listener: ArrivalListener) -> None:
        """Call ``listener`` for every dispatched record (long polling; never on a SLAVE)."""
        self.dispatcher.add_arrival_listener(listener)

    # -- maintenance ---------------------------------------------------------------------

    async def clean_expired_consume_queue(self) -> int:
        """Remove queues whose last unit points below the CommitLog's min offset.

        ``cleanExpiredConsumerQueue`` (admin code 306); ``SCHEDULE_TOPIC_XXXX`` is
        kept. Returns how many queues went.
        """
        min_offset = self.commit_log.min_offset
        removed = 0
        for queue in list(self.cq_table):
            if queue.topic == RMQ_SYS_SCHEDULE_TOPIC:
                continue
            last = queue.last_offset()
            if last == -1:
                log.warning("consume queue %r may have been created just now", queue)
                continue
            if last >= min_offset:
                continue
            await self._destroy_queue(queue)
            log.info("expired consume queue %s-%s destroyed", queue.topic, queue.queue_id)
            removed += 1
        return removed

    async def clean_unused_topic(self, topics: Collection[str]) -> int:
        """Destroy the queues of every topic not in ``topics`` (``cleanUnusedTopic``).

        DELETE_TOPIC_IN_BROKER passes the topics still configured. As in Java,
        ``SCHEDULE_TOPIC_XXXX``, ``RMQ_SYS_TRANS_OP_HALF_TOPIC`` and LMQ topics are
        kept; each queue's files are deleted and its CommitLog queue offset is
        forgotten, so a topic created again starts at offset 0.

        Returns:
            How many topics went.
        """
        keep = set(topics)
        removed = 0
        for topic in self.cq_table.topics():
            if topic in keep or topic in _NEVER_CLEANED or topic.startswith(LMQ_PREFIX):
                continue
            for queue in [q for q in self.cq_table if q.topic == topic]:
                await self._destroy_queue(queue)
                log.info("cleanUnusedTopic: %s %s consume queue cleaned", topic, queue.queue_id)
            log.info("cleanUnusedTopic: %s destroyed", topic)
            removed += 1
        return removed

    async def _destroy_queue(self, queue: ConsumeQueue) -> None:
        self.cq_table.remove(queue.topic, queue.queue_id)
        self.commit_log.remove_queue(queue.topic, queue.queue_id)
        files = queue.queue.files
        queue.queue.detach(files)
        await self.executor.run(_destroy_queue_files_blocking, files, queue.queue.directory)

    def runtime_info(self) -> dict[str, Any]:
        """Counters and offsets for ``GET_BROKER_RUNTIME_INFO`` (``getRuntimeInfo``)."""
        info: dict[str, Any] = dict(self.stats.snapshot())
        info.update(
            commitLogMinOffset=self.min_phy_offset,
            commitLogMaxOffset=self.max_phy_offset,
            dispatchBehindBytes=self.dispatch_behind_bytes(),
            runningFlags=int(self.flags.bits),
        )
        return info


def _destroy_queue_files_blocking(files: list[MappedFile], directory: Path) -> None:
    delete_files_blocking(files)
    try:
        os.rmdir(directory)
    except OSError as exc:
        log.warning("kept %s: %s", directory, exc)
