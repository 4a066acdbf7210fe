"""The read side: pulls by queue offset, lookups by physical offset, queries by key.

Owns: ``DefaultMessageStore.getMessage`` with every status and ``nextBeginOffset``
rule of specs/store.md §9.1, the transfer limits (in memory vs on disk),
``suggestPullingFromSlave``, and the other reads of the facade: a record by
physical offset, a query by key through the IndexFile, the per-queue min/max
offsets, offset by time and store times.

Must not: write anything, await (every read is a plain def over held mapped
slices), or copy record bytes: a ``GetMessageResult`` holds its files until the
caller releases it (after writing the pull reply).

Status table (``offset`` is the request's, ``min``/``max`` the queue's)::

    queue unknown                    NO_MATCHED_LOGIC_QUEUE  next = 0
    max == 0                         NO_MESSAGE_IN_QUEUE     next = 0
    offset < min                     OFFSET_TOO_SMALL        next = min
    offset == max                    OFFSET_OVERFLOW_ONE     next = offset
    offset > max                     OFFSET_OVERFLOW_BADLY   next = max
    no unit slice at offset          OFFSET_FOUND_NULL       next = first offset of next file
    else scan: FOUND / NO_MATCHED_MESSAGE / MESSAGE_WAS_REMOVING, next = offset + units scanned

Every ``next`` above except the scan's goes through ``nextOffsetCorrection``: a
SLAVE without ``offsetCheckInSlave`` keeps the requested offset. RocketMQ creates
a queue object for any (topic, queue) a pull names and so answers
NO_MESSAGE_IN_QUEUE for an unknown queue; we answer NO_MATCHED_LOGIC_QUEUE
without creating one, which the broker maps to the same response.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterator
from typing import Final

from aiorocketmq.common.errors import RemoteProtocolError
from aiorocketmq.common.message import MessageExt
from aiorocketmq.common.message_codec import decode_record
from aiorocketmq.store.commit_log import CommitLog
from aiorocketmq.store.config import BrokerRole, MessageStoreConfig
from aiorocketmq.store.consume_queue import UnitSlice, tags_match
from aiorocketmq.store.consume_queue_table import ConsumeQueueTable
from aiorocketmq.store.get_runs import WORTH_UNITS, scan_units
from aiorocketmq.store.index_service import IndexService, QueryOffsetResult
from aiorocketmq.store.mapped_file import SelectedBuffer
from aiorocketmq.store.results import GetMessageResult, GetMessageStatus, QueryMessageResult
from aiorocketmq.store.store_stats import StoreStats

__all__ = ["MIN_FILTER_UNITS", "MessageGetter", "RecordFilter"]

log = logging.getLogger(__name__)

RecordFilter = Callable[[memoryview], bool]
"""A CommitLog-level filter (SQL92): sees the whole record, True keeps it."""

MIN_FILTER_UNITS: Final = 16000 // 20
"""A pull scans at most max(16000 bytes of units, maxMsgNums units): 800 units."""

QUERY_ROUNDS: Final = 3
"""``queryMessage`` retries a key query at most this many times."""

_CHUNK_UNITS: Final = 64  # units converted to Python ints at a time during a scan
_S = GetMessageStatus


class MessageGetter:
    """Reads for the MessageStore facade; see the module docstring.

    Args:
        config: transfer limits, ratio, role, ``offsetCheckInSlave``.
        commit_log: records.
        cq_table: queues.
        index_service: key queries.
        stats: get counters.
        total_physical_memory: bytes of RAM (``StoreUtil.TOTAL_PHYSICAL_MEMORY_SIZE``).

    Attributes:
        memory_threshold: bytes behind the CommitLog end beyond which data counts
            as on disk: RAM x ``accessMessageInMemoryMaxRatio`` / 100.
    """

    def __init__(
        self,
        config: MessageStoreConfig,
        commit_log: CommitLog,
        cq_table: ConsumeQueueTable,
        index_service: IndexService,
        *,
        stats: StoreStats,
        total_physical_memory: int,
    ) -> None:
        self._commit_log = commit_log
        self._cq_table = cq_table
        self._index = index_service
        self._stats = stats
        self.memory_threshold = int(
            total_physical_memory * (config.access_message_in_memory_max_ratio / 100.0)
        )
        self._correct_offsets = (
            config.broker_role is not BrokerRole.SLAVE or config.offset_check_in_slave
        )
        self._memory_limits = (
            config.max_transfer_bytes_on_message_in_memory,
            config.max_transfer_count_on_message_in_memory,
        )
        self._disk_limits = (
            config.max_transfer_bytes_on_message_in_disk,
            config.max_transfer_count_on_message_in_disk,
        )

    # -- pull ----------------------------------------------------------------------------

    def get_message(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_msgs: int,
        *,
        tag_codes: Collection[int] | None = None,
        record_filter: RecordFilter | None = None,
    ) -> GetMessageResult:
        """Records of a queue from ``offset`` (``getMessage``); release the result.

        Args:
            topic: the topic.
            queue_id: the queue.
            offset: the first queue offset wanted.
            max_msgs: most records returned.
            tag_codes: tagsCodes to keep (the subscription's code set); None or
                empty keeps everything.
            record_filter: optional CommitLog-level filter.
        """
        queue = self._cq_table.get(topic, queue_id)
        if queue is None:
            missing = GetMessageResult(_S.NO_MATCHED_LOGIC_QUEUE, self._correct(offset, 0))
            return self._count(missing)
        min_offset, max_offset = queue.min_offset, queue.max_offset
        if max_offset == 0:
            result = GetMessageResult(_S.NO_MESSAGE_IN_QUEUE, self._correct(offset, 0))
        elif offset < min_offset:
            result = GetMessageResult(_S.OFFSET_TOO_SMALL, self._correct(offset, min_offset))
        elif offset == max_offset:
            result = GetMessageResult(_S.OFFSET_OVERFLOW_ONE, self._correct(offset, offset))
        elif offset > max_offset:
            result = GetMessageResult(_S.OFFSET_OVERFLOW_BADLY, self._correct(offset, max_offset))
        else:
            units = queue.get_units(offset, max(MIN_FILTER_UNITS, max_msgs))
            if units is None:
                log.warning(
                    "consume queue slice missing topic=%s queue_id=%s offset=%s min=%s max=%s",
                    topic, queue_id, offset, min_offset, max_offset,
                )  # fmt: skip
                next_offset = self._correct(offset, queue.roll_next_file(offset))
                result = GetMessageResult(_S.OFFSET_FOUND_NULL, next_offset)
            else:
                with units:
                    result = self._scan_units(units, max_msgs, tag_codes, record_filter)
        result.min_offset, result.max_offset = min_offset, max_offset
        return self._count(result)

    def _scan_units(
        self,
        units: UnitSlice,
        max_msgs: int,
        tag_codes: Collection[int] | None,
        record_filter: RecordFilter | None,
    ) -> GetMessageResult:
        """The vectorised scan when it pays (``get_runs.WORTH_UNITS``), else the per-unit one."""
        if record_filter is None:
            most = max(self._memory_limits[1], self._disk_limits[1])
            visits = len(units) if tag_codes else min(len(units), max_msgs, most)
            if visits >= WORTH_UNITS:
                vectorised = scan_units(
                    units, max_msgs, tag_codes, self._commit_log,
                    memory_threshold=self.memory_threshold,
                    memory_limits=self._memory_limits, disk_limits=self._disk_limits,
                )  # fmt: skip
                if vectorised is not None:  # else: beyond one readable file
                    return vectorised
        return self._scan(units, max_msgs, tag_codes, record_filter)

    def _scan(
        self,
        units: UnitSlice,
        max_msgs: int,
        tag_codes: Collection[int] | None,
        record_filter: RecordFilter | None,
    ) -> GetMessageResult:
        """Walk the units: batch-full check, tag filter, read, CommitLog filter."""
        result = GetMessageResult(_S.NO_MATCHED_MESSAGE)
        commit_log = self._commit_log
        max_offset_py = commit_log.max_offset
        first = units.first_queue_offset
        matches = tags_match(units.units, tag_codes).tolist() if tag_codes else None
        skip_below = -1  # after a removed record: skip the rest of its CommitLog file
        last_pulled = 0
        scanned = len(units)
        for index, physical_offset, size in self._iter_units(units):
            last_pulled = physical_offset
            if physical_offset < skip_below:
                continue
            if self._batch_full(size, max_msgs, result, max_offset_py - physical_offset):
                scanned = index  # the unit that filled the batch is not consumed
                break
            if matches is not None and not matches[index]:
                if not result.buffer_total_size:
                    result.status = _S.NO_MATCHED_MESSAGE
                continue
            selected = commit_log.get_message(physical_offset, size)
            if selected is None:
                if not result.buffer_total_size:
                    result.status = _S.MESSAGE_WAS_REMOVING
                skip_below = commit_log.roll_next_file(physical_offset)
                continue
            if record_filter is not None and not record_filter(selected.view):
                selected.release()
                if not result.buffer_total_size:
                    result.status = _S.NO_MATCHED_MESSAGE
                continue
            result.add_message(selected)
            result.message_queue_offsets.append(first + index)
            result.status = _S.FOUND
            skip_below = -1
        result.next_begin_offset = first + scanned
        result.suggest_pulling_from_slave = max_offset_py - last_pulled > self.memory_threshold
        return result

    @staticmethod
    def _iter_units(units: UnitSlice) -> Iterator[tuple[int, int, int]]:
        """``(index, physical offset, size)`` per unit, converted a chunk at a time.

        A pull usually stops within its first units; converting all 800 a scan may
        cover would cost more than the pull itself.
        """
        array = units.units
        for start in range(0, len(array), _CHUNK_UNITS):
            chunk = array[start : start + _CHUNK_UNITS]
            offsets, sizes = chunk["offset"].tolist(), chunk["size"].tolist()
            yield from zip(range(start, start + len(offsets)), offsets, sizes, strict=True)

    def _batch_full(self, size: int, max_msgs: int, result: GetMessageResult, behind: int) -> bool:
        """``isTheBatchFull``: never while empty; then count, then the byte/count limits."""
        total, count = result.buffer_total_size, result.message_count
        if total == 0 or count == 0:
            return False
        if count >= max_msgs:
            return True
        max_bytes, max_count = self._disk_limits if behind > self.memory_threshold else (
            self._memory_limits
        )  # fmt: skip
        return total + size > max_bytes or count > max_count - 1

    def _correct(self, old: int, new: int) -> int:
        """``nextOffsetCorrection``: a slave keeps the consumer's offset unless asked."""
        return new if self._correct_offsets else old

    def _count(self, result: GetMessageResult) -> GetMessageResult:
        if result.status is _S.FOUND:
            self._stats.get_message_times_total_found += 1
            self._stats.get_message_transfered_msg_count += result.message_count
        else:
            self._stats.get_message_times_total_miss += 1
        return result

    # -- by physical offset --------------------------------------------------------------

    def select_one_message_by_offset(self, physical_offset: int) -> SelectedBuffer | None:
        """The held record at ``physical_offset`` (release it), or None."""
        return self._commit_log.read_record(physical_offset)

    def look_message_by_offset(self, physical_offset: int) -> MessageExt | None:
        """The message at ``physical_offset``, decoded with its body copied, or None."""
        selected = self._commit_log.read_record(physical_offset)
        if selected is None:
            return None
        with selected:
            try:
                return decode_record(selected.view).to_message_ext(copy_body=True)
            except RemoteProtocolError as exc:
                log.warning("no readable message at %s: %s", physical_offset, exc)
                return None

    def in_disk(self, physical_offset: int) -> bool:
        """Whether the record lies further behind the CommitLog end than RAM would keep."""
        return self._commit_log.max_offset - physical_offset > self.memory_threshold

    # -- by key --------------------------------------------------------------------------

    def query_message(  # noqa: PLR0917 - the query's window, as QUERY_MESSAGE names it
        self, topic: str, key: str, max_num: int, begin: int, end: int,
        first: QueryOffsetResult | None = None,
    ) -> QueryMessageResult:  # fmt: skip
        """Messages whose ``KEYS`` or ``UNIQ_KEY`` hash like ``key`` in ``[begin, end]``.

        Up to three rounds: when the offsets found cannot be read, the window's end
        moves to the store time of the first one read and the index is asked again.
        Hash collisions are returned too; callers check the real key. Release it.
        ``first``: the first round's lookup, when the caller made it already (to read
        its records ahead).
        """
        result = QueryMessageResult()
        last_query_time = end
        for _ in range(QUERY_ROUNDS):
            found = first
            if found is None:
                found = self._index.query_offset(topic, key, max_num, begin, last_query_time)
            first = None
            if not found.phy_offsets:
                break
            result.index_last_update_phyoffset = found.index_last_update_phyoffset
            result.index_last_update_timestamp = found.index_last_update_timestamp
            for position, physical_offset in enumerate(sorted(found.phy_offsets)):
                selected = self._commit_log.read_record(physical_offset)
                if selected is None:
                    continue
                if position == 0:
                    last_query_time = self._commit_log.pickup_store_timestamp(
                        physical_offset, selected.size
                    )
                result.add_message(selected)
            if result.buffer_total_size > 0 or last_query_time < begin:
                break
        return result
