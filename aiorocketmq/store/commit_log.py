"""CommitLog: append encoded records to the current file, roll, read them back.

Owns: the CommitLog directory's files (through a ``MappedFileQueue`` and a
``MappedFileAllocator`` that pre-creates and warms the next file), the append of one
record or one batch (``CommitLog.DefaultAppendMessageCallback.doAppend``), the
end-of-file rule, reads by physical offset, and the per-queue offset counter
(``topicQueueTable``). specs/store.md §3.

Must not: encode records (``common.message_codec`` does, before the append), decide
put statuses (the MessageStore maps ``AppendStatus`` to ``PutMessageStatus``),
flush on its own, or await inside an append.

The append is the put path's critical section, run on the event loop with no await
and no system call, so no lock is needed (RocketMQ's put lock): it assigns the
QUEUEOFFSET, patches QUEUEOFFSET, PHYSICALOFFSET and STORETIMESTAMP into the encoded
record (``patch_record``), and copies it into the mapping; or it hands the record
kernel the place and the final fields, and the record is encoded there
(``append_fields`` for a plain single put, ``append_batch_in_place`` for a batch).
End-of-file rule (§3.6)::

    maxBlank = file_size - wrote_position
    record + 8 <= maxBlank  -> the record goes here
    otherwise               -> write the 8-byte BLANK record (TOTALSIZE = maxBlank,
                               MAGIC = 0xCBD43194) and nothing else, mark the file
                               full, and put the record at offset 0 of the next file

A batch (records back to back, one ``append_batch``) is placed whole: it never
straddles two files. A record that could not fit even in an empty file
(``record + 8 > file_size``) is refused with MESSAGE_SIZE_EXCEEDED before anything is
written (RocketMQ writes a BLANK record into the fresh file and loops instead).

The next file normally is ready: the allocator starts creating file N+1 as soon as
file N is added. If it is not (a burst outran the allocator), the append returns
NEED_FILE after the BLANK record; the caller awaits ``allocate_next_file()`` and
appends again. The queue offset counter only moves when a record is written.

Queue offsets live here, as in RocketMQ: ``topic_queue_table`` maps
``"<topic>-<queueId>"`` (a hyphen, ``queue_key``) to the next QUEUEOFFSET. Normal and
transaction-commit records take the value and advance it; PREPARED and ROLLBACK
records get QUEUEOFFSET 0 and leave it. Recovery rebuilds it from each ConsumeQueue's
max offset (``set_queue_offset``); ``remove_queue`` forgets a deleted queue.
"""

from __future__ import annotations

import enum
import logging
import struct
from dataclasses import dataclass
from typing import Final

from aiorocketmq.common.constants import (
    END_FILE_MIN_BLANK_LENGTH,
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    MessageSysFlag,
)
from aiorocketmq.common.kernels import load_kernel
from aiorocketmq.common.message import BytesLike
from aiorocketmq.common.message_codec import (
    MIN_RECORD_SIZE,
    blank_record,
    patch_record,
)
from aiorocketmq.common.record_encoder import HOST_V6_BITS, RECORD_LAYOUTS, BatchPlacer
from aiorocketmq.runtime.executor import BlockingExecutor
from aiorocketmq.store.allocator import MappedFileAllocator
from aiorocketmq.store.commit_log_batch import frame_batch, patch_batch, verify_records
from aiorocketmq.store.config import FlushDiskType, MessageStoreConfig
from aiorocketmq.store.errors import StoreIOError
from aiorocketmq.store.mapped_file import MappedFile, SelectedBuffer
from aiorocketmq.store.mapped_file_queue import MappedFileQueue

__all__ = ["AppendResult", "AppendStatus", "CommitLog", "queue_key"]

log = logging.getLogger(__name__)

_INT: Final = struct.Struct(">i")
_LONG: Final = struct.Struct(">q")
_HEAD: Final = struct.Struct(">ii")
_SYS_FLAG_POS: Final = 36
_STORE_TIMESTAMP_POS_V4: Final = 56  # after a 16-byte born host: 68
_BLANK_MIN: Final = END_FILE_MIN_BLANK_LENGTH
_TRAN_MASK: Final = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE  # 0xC
_NO_QUEUE_OFFSET: Final = frozenset(
    {MessageSysFlag.TRANSACTION_PREPARED_TYPE, MessageSysFlag.TRANSACTION_ROLLBACK_TYPE}
)


class AppendStatus(enum.Enum):
    """How an append ended (``AppendMessageStatus`` plus NEED_FILE)."""

    PUT_OK = "PUT_OK"
    END_OF_FILE = "END_OF_FILE"  # RocketMQ's internal roll signal; append rolls itself
    MESSAGE_SIZE_EXCEEDED = "MESSAGE_SIZE_EXCEEDED"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"
    NEED_FILE = "NEED_FILE"  # aiorocketmq: await allocate_next_file(), then append again


_PUT_OK: Final = AppendStatus.PUT_OK
#: Where the body starts in a record with two IPv4 hosts (``RECORD_LAYOUTS[0]``).
_V4_BODY_POS: Final = RECORD_LAYOUTS[0].body_pos
_NEED_FILE: Final = AppendStatus.NEED_FILE
#: The file allocator's thread niceness (0 = the loop's own priority, 19 = lowest).
_ALLOCATE_NICE: Final = 10


@dataclass(slots=True)
class AppendResult:
    """What an append did (``AppendMessageResult``).

    Attributes:
        status: how it ended; only PUT_OK wrote the record(s).
        physical_offset: CommitLog offset of the (first) record (wroteOffset).
        wrote_bytes: bytes of the record(s).
        queue_offset: QUEUEOFFSET of the (first) record (0 for PREPARED/ROLLBACK).
        store_timestamp: the STORETIMESTAMP written.
        message_count: records written (1, or the batch's).
        record_offsets: physical offset of each record of a batch (None for one).
    """

    status: AppendStatus
    physical_offset: int = -1
    wrote_bytes: int = 0
    queue_offset: int = -1
    store_timestamp: int = 0
    message_count: int = 0
    record_offsets: list[int] | None = None

    @property
    def next_offset(self) -> int:
        """The offset just past the written bytes: what a SYNC_FLUSH put waits for."""
        return self.physical_offset + self.wrote_bytes


def queue_key(topic: str, queue_id: int) -> str:
    """The ``topic_queue_table`` key, ``"<topic>-<queueId>"``."""
    return f"{topic}-{queue_id}"


class CommitLog:
    """The CommitLog files of one store; see the module docstring.

    Args:
        config: file size, directory, warming and verification settings.
        executor: the store's pool for blocking work (file creation, msync).
        allocator: a custom allocator (tests); by default one built from ``config``.

    Attributes:
        queue: the files.
        allocator: pre-creates the next file; start it with ``start()``.
        topic_queue_table: ``"<topic>-<queueId>"`` -> next QUEUEOFFSET.
    """

    def __init__(
        self,
        config: MessageStoreConfig,
        executor: BlockingExecutor,
        *,
        allocator: MappedFileAllocator | None = None,
    ) -> None:
        self.file_size = config.mapped_file_size_commit_log
        self._executor = executor
        self._verify = config.verify_writes
        if allocator is None:
            allocator = _default_allocator(config)
        self.allocator = allocator
        self.queue = MappedFileQueue(
            config.commit_log_dir, self.file_size, allocator=allocator, prepare_next=True
        )
        self.topic_queue_table: dict[str, int] = {}

    # -- lifecycle -----------------------------------------------------------------------

    def load_blocking(self) -> None:
        """Map the existing files (load phase); see ``MappedFileQueue.load_blocking``."""
        self.queue.load_blocking()

    async def start(self) -> None:
        """Start the allocator and have the file the next append needs prepared."""
        await self.allocator.start()
        offset = self.queue.next_file_offset(0)
        if offset is not None:
            self.allocator.prepare(self.queue.path_for(offset), self.file_size)

    async def shutdown(self) -> None:
        """Stop the allocator (deleting unused prepared files) and unmap every file.

        Flush first: this does not msync.
        """
        await self.allocator.shutdown()
        self.queue.shutdown()

    async def allocate_next_file(self, start_offset: int = 0) -> MappedFile:
        """Wait until the file an append needs exists (after NEED_FILE).

        Raises:
            StoreIOError: it could not be created; report CREATE_MAPEDFILE_FAILED.
        """
        return await self.queue.allocate_last_file(start_offset)

    # -- append (event loop, no await) ---------------------------------------------------

    def append(self, record: bytearray, queue_key: str, store_timestamp: int) -> AppendResult:
        """Append one encoded record; see the module docstring.

        Args:
            record: exactly one record from ``encode_record`` (its offsets may be 0);
                patched in place with the final QUEUEOFFSET, PHYSICALOFFSET and
                STORETIMESTAMP before it is copied.
            queue_key: ``queue_key(topic, queue_id)``, computed before the append.
            store_timestamp: the broker clock now, in ms.

        Returns:
            PUT_OK with offsets; NEED_FILE (nothing written, append again after
            ``allocate_next_file``); MESSAGE_SIZE_EXCEEDED (larger than a file
            allows); UNKNOWN_ERROR (the write failed; nothing counted).
        """
        size = len(record)
        if size + _BLANK_MIN > self.file_size:
            return AppendResult(AppendStatus.MESSAGE_SIZE_EXCEEDED)
        if size < MIN_RECORD_SIZE:
            log.error("refusing a %d-byte record: below the fixed part of a record", size)
            return AppendResult(AppendStatus.UNKNOWN_ERROR)
        table = self.topic_queue_table
        queue_offset = table.get(queue_key, 0)
        # PREPARED and ROLLBACK records get QUEUEOFFSET 0 and do not advance the counter.
        advance = (_INT.unpack_from(record, _SYS_FLAG_POS)[0] & _TRAN_MASK) not in _NO_QUEUE_OFFSET
        try:
            mapped = self._writable(size)
            if mapped is None:
                return AppendResult(_NEED_FILE)
            physical_offset = mapped.file_from_offset + mapped.wrote_position
            patch_record(
                record,
                0,
                queue_offset=queue_offset if advance else 0,
                physical_offset=physical_offset,
                store_timestamp=store_timestamp,
            )
            if self._verify:
                verify_records(record, 1)
            mapped.append(record)
        except StoreIOError:
            log.exception("append failed queue_key=%s", queue_key)
            return AppendResult(AppendStatus.UNKNOWN_ERROR)
        mapped.store_timestamp = store_timestamp
        table[queue_key] = queue_offset + 1 if advance else queue_offset
        return AppendResult(
            _PUT_OK,
            physical_offset,
            size,
            queue_offset if advance else 0,
            store_timestamp,
            1,
        )

    @property
    def appends_fields(self) -> bool:
        """Whether ``append_fields`` can take records (the record kernel is built)."""
        return _KERNEL is not None

    def append_fields(  # noqa: PLR0917 - a record's fields, positional on the hot path
        self, queue_key: str, store_timestamp: int, max_size: int, body: BytesLike,
        topic_raw: bytes, props_raw: bytes, queue_id: int, flag: int, sys_flag: int,
        born_timestamp: int, born: tuple[bytes, int], store: tuple[bytes, int],
        reconsume_times: int,
    ) -> tuple[int, int, int, int] | None:  # fmt: skip
        """``append`` of one plain record given by its fields: a single put's way.

        The C kernel encodes it with its final QUEUEOFFSET, PHYSICALOFFSET and
        STORETIMESTAMP straight into the mapped file: no record object, nothing
        patched. Plain: no transaction bits, IPv4 hosts
        (4-byte ``born`` and ``store`` addresses with their ports).

        Returns:
            ``(physical_offset, wrote_bytes, queue_offset, store_timestamp)``, as
            ``append``'s PUT_OK of the same record (a tuple: no result object on the
            single put's way); None when the kernel is not built or declines (a
            field it cannot encode), the record would pass ``max_size`` or what a file
            takes, a write fails, or the file it needs is not ready. Then nothing is
            written or counted (a BLANK may have closed the current file, as
            ``append`` would have) and ``append`` decides.
        """
        if _KERNEL is None or sys_flag & (_TRAN_MASK | HOST_V6_BITS):
            return None
        body_len = body.nbytes if isinstance(body, memoryview) else len(body)
        size = _V4_BODY_POS + body_len + 3 + len(topic_raw) + len(props_raw)
        if size > max_size or size + _BLANK_MIN > self.file_size:
            return None
        mapped = self.queue.last_file
        if mapped is None or size + _BLANK_MIN > mapped.file_size - mapped.wrote_position:
            mapped = self._writable(size)  # full, or the record ends it: roll
            if mapped is None:
                return None
        if mapped.fail_writes is not None:
            return None  # ``append`` meets the same failure and reports it
        table = self.topic_queue_table
        queue_offset = table.get(queue_key, 0)
        pos = mapped.wrote_position
        physical_offset = mapped.file_from_offset + pos
        # ``verify_writes`` checks the record before it reaches the file: encoded aside.
        aside = bytearray(size) if self._verify else None
        wrote = _KERNEL.encode_one_record_into(
            mapped.buffer if aside is None else aside, pos if aside is None else 0, body,
            topic_raw, props_raw, queue_id, flag, queue_offset, physical_offset, sys_flag,
            born_timestamp, born[0], born[1], store_timestamp, store[0], store[1],
            reconsume_times,
        )  # fmt: skip
        if wrote != size:
            return None  # declined: nothing was written
        if aside is None:
            mapped.wrote_in_place(size)
        else:
            verify_records(aside, 1)
            mapped.append(aside)
        mapped.store_timestamp = store_timestamp
        table[queue_key] = queue_offset + 1
        return physical_offset, size, queue_offset, store_timestamp

    def append_batch(
        self, records: bytearray, queue_key: str, store_timestamp: int
    ) -> AppendResult:
        """Append several encoded records of one queue as a unit (never split by a roll).

        Args:
            records: records back to back, each from ``encode_record``; all plain
                (non-transactional) messages of the queue ``queue_key`` names.
            queue_key: as for ``append``.
            store_timestamp: written into every record.

        Returns:
            As ``append``; ``queue_offset`` is the first record's, the others follow
            consecutively, and ``record_offsets`` lists each record's physical offset.
            UNKNOWN_ERROR also covers records that do not frame exactly.
        """
        size = len(records)
        sizes = frame_batch(records)
        if sizes is None:
            log.error("batch of %d bytes does not frame into records", size)
            return AppendResult(AppendStatus.UNKNOWN_ERROR)
        if size + _BLANK_MIN > self.file_size:
            return AppendResult(AppendStatus.MESSAGE_SIZE_EXCEEDED)
        first_queue_offset = self.topic_queue_table.get(queue_key, 0)
        try:
            mapped = self._writable(size)
            if mapped is None:
                return AppendResult(_NEED_FILE)
            base = mapped.file_from_offset + mapped.wrote_position
            offsets = patch_batch(records, sizes, base, first_queue_offset, store_timestamp)
            if self._verify:
                verify_records(records, len(sizes))
            mapped.append(records)
        except StoreIOError:
            log.exception("batch append failed queue_key=%s", queue_key)
            return AppendResult(AppendStatus.UNKNOWN_ERROR)
        mapped.store_timestamp = store_timestamp
        self.topic_queue_table[queue_key] = first_queue_offset + len(sizes)
        return AppendResult(
            _PUT_OK, base, size, first_queue_offset, store_timestamp, len(sizes), offsets
        )

    def append_batch_in_place(
        self, queue_key: str, store_timestamp: int, place: BatchPlacer
    ) -> AppendResult | None:
        """``append_batch`` of a batch that ``place`` (``record_encoder.batch_placer``)
        encodes straight into the mapped file with its final QUEUEOFFSET, PHYSICALOFFSET
        and STORETIMESTAMP: no records buffer, no copy, nothing patched.

        Returns:
            As ``append_batch``'s PUT_OK; None when the encoder declines, the batch
            passes what a file takes, the file it needs is not ready, a write would
            fail, or ``verify_writes`` is on. Then nothing is written or counted (a
            BLANK may have closed the current file, as ``append_batch`` would have)
            and ``append_batch`` decides.
        """
        if self._verify:
            return None
        first_queue_offset = self.topic_queue_table.get(queue_key, 0)
        mapped = self.queue.last_file or self._writable(0)  # the store's first file
        for _ in range(2):  # the current file, then the next one after a roll
            if mapped is None or mapped.fail_writes is not None:
                return None
            pos = mapped.wrote_position
            placed = place(
                mapped.buffer, pos, mapped.file_size - pos - _BLANK_MIN,
                mapped.file_from_offset + pos, first_queue_offset, store_timestamp,
            )  # fmt: skip
            if isinstance(placed, tuple):
                size, offsets = placed
                mapped.wrote_in_place(size)
                mapped.store_timestamp = store_timestamp
                self.topic_queue_table[queue_key] = first_queue_offset + len(offsets)
                return AppendResult(
                    _PUT_OK, offsets[0], size, first_queue_offset, store_timestamp,
                    len(offsets), offsets,
                )  # fmt: skip
            if placed is None or placed + _BLANK_MIN > self.file_size:
                return None  # declined, or no file takes it: append_batch decides
            mapped = self._writable(placed)  # full, or the batch ends it: roll
        return None

    def _writable(self, size: int) -> MappedFile | None:
        """The file ``size`` bytes go into, rolling with a BLANK record if needed.

        None when the file needed is not ready yet (the BLANK may be written).
        """
        queue = self.queue
        mapped = queue.last_file
        if mapped is None or mapped.is_full:
            mapped = queue.get_last_file(0)
            if mapped is None:
                return None
        max_blank = mapped.file_size - mapped.wrote_position
        if size + _BLANK_MIN <= max_blank:
            return mapped
        # End of file: only TOTALSIZE and MAGIC are written; the file is now full.
        mapped.fill_to_end(blank_record(max_blank))
        return queue.get_last_file(0)

    def append_data(self, start_offset: int, data: bytes | bytearray | memoryview) -> AppendStatus:
        """Append raw CommitLog bytes at ``start_offset`` (a slave applying HA data).

        ``data`` is what the master read from one file (``get_data``), so it never
        crosses a file boundary; BLANK records and the zeros after them come along.

        Returns:
            PUT_OK; NEED_FILE (await ``allocate_next_file(start_offset)``, retry);
            UNKNOWN_ERROR when ``start_offset`` is not where this CommitLog ends or
            the bytes do not fit the file (logged).
        """
        mapped = self.queue.get_last_file(start_offset)
        if mapped is None:
            return _NEED_FILE
        end = mapped.file_from_offset + mapped.wrote_position
        if end != start_offset:
            log.error("append_data at %s but the CommitLog ends at %s", start_offset, end)
            return AppendStatus.UNKNOWN_ERROR
        try:
            if mapped.append(data) < 0:
                log.error("append_data of %d bytes does not fit at %s", len(data), start_offset)
                return AppendStatus.UNKNOWN_ERROR
        except StoreIOError:
            log.exception("append_data failed at %s", start_offset)
            return AppendStatus.UNKNOWN_ERROR
        return _PUT_OK

    # -- queue offsets -------------------------------------------------------------------

    def queue_offset(self, topic: str, queue_id: int) -> int:
        """The QUEUEOFFSET the next record of this queue will get."""
        return self.topic_queue_table.get(queue_key(topic, queue_id), 0)

    def set_queue_offset(self, topic: str, queue_id: int, next_offset: int) -> None:
        """Set the next QUEUEOFFSET (recovery: the ConsumeQueue's max offset)."""
        self.topic_queue_table[queue_key(topic, queue_id)] = next_offset

    def remove_queue(self, topic: str, queue_id: int) -> None:
        """Forget a queue (``removeQueueFromTopicQueueTable``)."""
        self.topic_queue_table.pop(queue_key(topic, queue_id), None)

    # -- reads ---------------------------------------------------------------------------

    @property
    def min_offset(self) -> int:
        """First readable physical offset, -1 without files (``getMinOffset``)."""
        first = self.queue.first_file
        if first is None:
            return -1
        if first.available:
            return first.file_from_offset
        return self.roll_next_file(first.file_from_offset)

    @property
    def max_offset(self) -> int:
        """End of readable data (last file start + read position), 0 without files."""
        return self.queue.max_offset

    def roll_next_file(self, offset: int) -> int:
        """Start of the file after the one holding ``offset``."""
        return offset + self.file_size - offset % self.file_size

    def get_message(self, offset: int, size: int) -> SelectedBuffer | None:
        """Hold and return ``[offset, offset + size)``, or None if not readable.

        The range must lie in one file and below its read position; release the
        result when done.
        """
        mapped = self.queue.find_file(offset, offset == 0)
        if mapped is None:
            return None
        return mapped.select(offset - mapped.file_from_offset, size)

    def get_data(
        self, offset: int, return_first_on_not_found: bool | None = None
    ) -> SelectedBuffer | None:
        """Hold and return the bytes from ``offset`` to its file's read position.

        For dispatch (reput) and HA transfer: a read never spans two files.

        Args:
            offset: a physical offset.
            return_first_on_not_found: default ``offset == 0``, as RocketMQ.
        """
        if return_first_on_not_found is None:
            return_first_on_not_found = offset == 0
        mapped = self.queue.find_file(offset, return_first_on_not_found)
        if mapped is None:
            return None
        # With return_first_on_not_found an offset outside every file reads the
        # first file from its start, as RocketMQ's offset % fileSize does for 0.
        pos = offset - mapped.file_from_offset
        return mapped.select(pos if 0 <= pos < self.file_size else offset % self.file_size)

    def read_record(self, offset: int) -> SelectedBuffer | None:
        """Hold and return the message record at ``offset`` (its TOTALSIZE bytes).

        Returns None for anything but a message record there: a BLANK record, zeros,
        an offset beyond the readable data. Decode with ``decode_record(sel.view)``.
        """
        mapped = self.queue.find_file(offset)
        if mapped is None:
            return None
        pos = offset - mapped.file_from_offset
        if pos + MIN_RECORD_SIZE > mapped.read_position:
            return None
        total, magic = _HEAD.unpack_from(mapped.buffer, pos)
        if magic not in (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2) or total < MIN_RECORD_SIZE:
            return None
        return mapped.select(pos, total)

    def pickup_store_timestamp(self, offset: int, size: int) -> int:
        """STORETIMESTAMP of the record at ``offset``, or -1 (``pickupStoreTimestamp``)."""
        if offset < self.min_offset:
            return -1
        selected = self.get_message(offset, size)
        if selected is None:
            return -1
        with selected:
            sys_flag = _INT.unpack_from(selected.view, _SYS_FLAG_POS)[0]
            pos = _STORE_TIMESTAMP_POS_V4
            if sys_flag & MessageSysFlag.BORNHOST_V6_FLAG:
                pos += 12
            return int(_LONG.unpack_from(selected.view, pos)[0])

    # -- flush ---------------------------------------------------------------------------

    @property
    def flushed_where(self) -> int:
        """Physical offset up to which the CommitLog is known to be on disk."""
        return self.queue.flushed_where

    async def flush(self, least_pages: int) -> int:
        """Flush (msync in the executor) what the rule allows; return ``flushed_where``.

        One file per call, like RocketMQ: call again after a roll. This is the
        ``flush`` that ``store.flush``'s services take.
        """
        await self.queue.flush(self._executor, least_pages)
        return self.queue.flushed_where


def _default_allocator(config: MessageStoreConfig) -> MappedFileAllocator:
    sync_warm = config.warm_maped_file_enable and config.flush_disk_type is FlushDiskType.SYNC_FLUSH
    msync_every = config.flush_least_pages_when_warm_maped_file if sync_warm else 0
    # A low-priority thread creates files: the kernel zeroing a new file's pages must not
    # take the loop's core. A roll may wait for a creation (short), never for warming.
    # Whole-file warming runs only on idle cores; a window's warming at normal priority
    # (it keeps pace with the writer, taking only the faults the writer would take).
    warm = config.warm_commit_log_files or config.warm_maped_file_enable
    ahead = 0 if config.warm_maped_file_enable else config.warm_commit_log_ahead_bytes
    warm_pool = BlockingExecutor("store-warm", 1, idle=not ahead, prestart=True) if warm else None
    return MappedFileAllocator(
        BlockingExecutor("store-allocate", 1, nice=_ALLOCATE_NICE, prestart=True),
        owns_executor=True,
        warm_executor=warm_pool,
        warm_ahead=ahead,
        preallocate=config.preallocate_commit_log_blocks,
        warm=warm,
        msync_every_pages=msync_every,
        name="commitlog-allocate",
    )


#: The record kernels (``common/_record_kernels.pyx``): a batch's framing and patching
#: in C when built and not turned off.
_KERNEL = load_kernel("aiorocketmq.common._record_kernels")
