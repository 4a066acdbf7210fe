"""ReadAhead: the records a pull returns are read from disk in a thread, not on the loop.

Owns: the check of a pull's ConsumeQueue units (before ``get_message`` reads them)
and of its ``GetMessageResult``'s records (before the reply is written) against the
page cache and, for those not in memory, their read in a pool of their own
(``store-read``) while the pull waits. A pull reply's records go to the socket
straight from the mapped CommitLog: the kernel's copy takes whatever page faults they
need, and on data that is not in memory (a consumer catching up after a restart, an
offset reset to yesterday) each fault waited for the disk on the event loop, stalling
every other request: with the disk at 20 MiB/s a 2 MiB pull held the loop about
100 ms. The units ``get_message`` reads first fault the same way, a page at a time.

The check is ``mincore`` over the units and each run of records (a few µs): what is
in memory costs no thread hop, and the reply goes out as before. Cold ones are read
with ``MADV_POPULATE_READ`` in the pool, which releases the GIL, and the pull awaits
them.
Where that madvise does not exist (Linux < 5.14) nothing changes.

The same holds for records read by their CommitLog offsets (``read_message``,
``fault_in_records``): a send-back's original, a delayed or timed message due for
delivery (hours or days old: the records most likely to have left memory), an
end-transaction's half message, a POP's requeue, an operator's view or key query.

Must not: read on the loop, or outlive the records it reads (the result holds their
files until it is released, after the reply is written; the pool only reads while the
awaiting pull keeps the result).
"""

from __future__ import annotations

import logging
import mmap
from collections.abc import Awaitable, Callable, Iterable
from typing import Final

from aiorocketmq.common.constants import CQ_STORE_UNIT_SIZE as _UNIT_SIZE
from aiorocketmq.common.message import MessageExt
from aiorocketmq.runtime.executor import BlockingExecutor
from aiorocketmq.store.commit_log import CommitLog
from aiorocketmq.store.consume_queue_table import ConsumeQueueTable
from aiorocketmq.store.errors import StoreIOError
from aiorocketmq.store.get_message import MIN_FILTER_UNITS
from aiorocketmq.store.mapped_file import MappedFile
from aiorocketmq.store.page_ops import populate_read, resident
from aiorocketmq.store.results import GetMessageResult

__all__ = ["READ_THREADS", "ReadAhead"]

log = logging.getLogger(__name__)

READ_THREADS: Final = 4
"""Cold pulls read at once: one slow disk read must not wait behind another's."""

_Range = tuple[mmap.mmap, int, int]  # (mapping, start, end) of one run of records

_SIZE_FIELD: Final = 4  # a record's TOTALSIZE, big-endian, first


class ReadAhead:
    """Reads what a pull needs that is not in memory, off the loop (module docstring).

    Args:
        cq_table: the store's ConsumeQueues.
        commit_log: the store's CommitLog.
        look: the store's ``look_message_by_offset``.

    Attributes:
        cold_reads: pulls and look-ups whose units or records had to be read first
            (tests, logs).
    """

    def __init__(
        self,
        cq_table: ConsumeQueueTable,
        commit_log: CommitLog,
        look: Callable[[int], MessageExt | None],
    ) -> None:
        self._cq_table = cq_table
        self._commit_log = commit_log
        self._look = look
        self._executor: BlockingExecutor | None = None
        self.cold_reads = 0

    async def read_message(self, offset: int) -> MessageExt | None:
        """``look_message_by_offset`` of the record at CommitLog ``offset``, read in the
        pool first when it is not in memory."""
        pending = self.fault_in_record(offset)
        if pending is not None:
            await pending
        return self._look(offset)

    def fault_in_record(self, offset: int) -> Awaitable[None] | None:
        """``fault_in_records`` of the one record at CommitLog ``offset``."""
        return self.fault_in_records((offset,))

    def fault_in_records(self, offsets: Iterable[int]) -> Awaitable[None] | None:
        """None when the records at these CommitLog offsets are in memory (or there
        are none to read); otherwise their read, in one hop. A record's size is in
        its first bytes: when those are not in memory either, the thread reads them
        and then the rest."""
        cold: list[tuple[MappedFile, int, int]] = []
        for offset in offsets:
            mapped = self._commit_log.queue.find_file(offset)
            if mapped is None or not mapped.hold():  # held first: a shut file is unmapped
                continue
            start = offset - mapped.file_from_offset
            limit = mapped.read_position
            buffer = mapped.buffer
            if (
                start < 0 or start + _SIZE_FIELD > limit
                or (resident(buffer, start, start + _SIZE_FIELD)
                    and resident(buffer, start, _record_end(buffer, start, limit)))
            ):  # fmt: skip
                mapped.release()  # nothing to read, or nothing cold
                continue
            cold.append((mapped, start, limit))
        if not cold:
            return None
        self.cold_reads += 1
        records = [(mapped.buffer, start, limit) for mapped, start, limit in cold]
        return self._read_held([mapped for mapped, _, _ in cold], _read_records_blocking, records)

    def fault_in_units(
        self, topic: str, queue_id: int, offset: int, max_msgs: int
    ) -> Awaitable[None] | None:
        """None when the ConsumeQueue units ``get_message`` will read for this pull are
        in memory (or there are none); otherwise their read, for the caller to await
        before it calls ``get_message``."""
        queue = self._cq_table.get(topic, queue_id)
        if queue is None:
            return None
        units = max(MIN_FILTER_UNITS, max_msgs) * _UNIT_SIZE
        return self._fault_in_file(
            queue.queue.find_file(offset * _UNIT_SIZE), offset * _UNIT_SIZE, units
        )

    def fault_in_commit_log(self, offset: int, size: int) -> Awaitable[None] | None:
        """``fault_in_units`` for CommitLog bytes from ``offset`` (up to ``size``, within
        its file): what an HA transfer to a slave reads next."""
        return self._fault_in_file(self._commit_log.queue.find_file(offset), offset, size)

    def _fault_in_file(
        self, mapped: MappedFile | None, offset: int, size: int
    ) -> Awaitable[None] | None:
        if mapped is None or not mapped.hold():  # held first: a shut file is unmapped
            return None
        start = offset - mapped.file_from_offset
        end = min(mapped.read_position, start + size)
        if start < 0 or end <= start or resident(mapped.buffer, start, end):
            mapped.release()
            return None
        self.cold_reads += 1
        return self._read_held([mapped], _read_blocking, [(mapped.buffer, start, end)])

    async def _read_held(
        self, held: list[MappedFile], read: Callable[[list[_Range]], None], ranges: list[_Range]
    ) -> None:
        """``read(ranges)`` in the pool, then ``held`` released (each was held once)."""
        try:
            await self._pool().run(read, ranges)
        finally:
            for mapped in held:
                mapped.release()

    def fault_in(self, result: GetMessageResult) -> Awaitable[None] | None:
        """None when every record of ``result`` is in memory; otherwise the read of
        those that are not, for the caller to await before it writes them."""
        cold: list[_Range] = []
        # Back-to-back records of one file are asked about as one range: a pull the
        # per-record scan answered holds a slice per record (1,000 of them, say).
        ranges: list[tuple[MappedFile, int, int]] = []
        for selected in result.buffers:
            mapped = selected.file
            if mapped is None:
                continue
            start = selected.start_offset - mapped.file_from_offset
            end = start + selected.view.nbytes
            if ranges and ranges[-1][0] is mapped and ranges[-1][2] == start:
                ranges[-1] = (mapped, ranges[-1][1], end)
            else:
                ranges.append((mapped, start, end))
        for mapped, start, end in ranges:
            if not resident(mapped.buffer, start, end):
                cold.append((mapped.buffer, start, end))
        if not cold:
            return None
        self.cold_reads += 1
        return self._pool().run(_read_blocking, cold)

    def _pool(self) -> BlockingExecutor:
        if self._executor is None:
            self._executor = BlockingExecutor("store-read", READ_THREADS)
        return self._executor

    async def shutdown(self) -> None:
        """Stop the pool (reads under way finish first)."""
        if self._executor is not None:
            await self._executor.shutdown()


def _record_end(buffer: mmap.mmap, start: int, limit: int) -> int:
    """Where the record at ``start`` ends by its TOTALSIZE, within ``limit``; a size
    that cannot be a record's ends it after the field (the reader refuses it)."""
    size = int.from_bytes(buffer[start : start + _SIZE_FIELD], "big", signed=True)
    return start + size if _SIZE_FIELD < size <= limit - start else start + _SIZE_FIELD


def _read_records_blocking(records: list[_Range]) -> None:
    """Each ``(mapping, start, limit)``: the record at ``start``, its size first."""
    for buffer, start, limit in records:
        # The size is read only from a page that came in: one that failed would SIGBUS.
        if _populated([(buffer, start, start + _SIZE_FIELD)]):
            _populated([(buffer, start, _record_end(buffer, start, limit))])


def _read_blocking(ranges: list[_Range]) -> None:
    _populated(ranges)


def _populated(ranges: list[_Range]) -> bool:
    """False when a read failed (logged: the reader meets it again, and says so)."""
    for mm, start, end in ranges:
        try:
            populate_read(mm, start, end)
        except StoreIOError as exc:
            log.warning("reading records ahead failed: %s", exc)
            return False
    return True
