"""ConsumeQueue: one topic queue's index into the CommitLog, as numpy over the mapping.

Owns: the files of ``consumequeue/<topic>/<queueId>/`` and their 20-byte units
(``ConsumeQueue.java``; specs/store.md §4), big-endian::

    off  size  field          numpy field
      0    8   physical offset  'offset'  >i8   CommitLog offset of the message
      8    4   size             'size'    >i4   the record's TOTALSIZE
     12    8   tagsCode         'tags'    >i8   hashCode(TAGS) sign-extended; a
                                                deliver time in SCHEDULE_TOPIC_XXXX

The unit of queue offset *q* sits at logical byte ``q * 20``: file
``q * 20 // file_size``, position ``q * 20 % file_size`` (file sizes are multiples of
20). A *blank* unit (0, 0x7FFFFFFF, 0) fills the front of a queue that starts
mid-stream. Reads are numpy structured arrays (``CQ_UNIT_DTYPE``) viewed over each
file's mapping with ``np.frombuffer``: no copy, and tag filtering is one vectorised
``np.isin`` over the tagsCode column. Writes pack units with ``struct`` (cheaper
than numpy item assignments for the few dozen units of a run): a dispatch chunk's
units of one queue go in as one append (``put_run``) when they continue the queue
exactly, else unit by unit through ``put``, which holds every append rule.

Must not: read the CommitLog itself (offset-by-time takes a callback), decide which
records get a unit (the dispatcher: normal and commit records only), or create files
on the event loop (``put`` answers NEED_FILE; the caller awaits ``allocate_file``).

Append rules (``putMessagePositionInfo``), all kept: a unit whose record ends at or
below ``max_physic_offset`` is already here (redispatch is idempotent); the first
file ever created, still empty, for a queue offset other than 0 is pre-filled with
blank units up to it (and ``min_logic_offset`` set there); a unit for a queue offset
below the write position is a duplicate; one above it is logged as "[BUG]" and
written anyway.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import numpy as np

from aiorocketmq.common.constants import CQ_STORE_UNIT_SIZE
from aiorocketmq.runtime.executor import BlockingExecutor
from aiorocketmq.store.allocator import MappedFileAllocator
from aiorocketmq.store.dispatch_request import CQ_UNIT, DispatchRequest, pack_units
from aiorocketmq.store.errors import StoreIOError
from aiorocketmq.store.mapped_file import MappedFile, delete_files_blocking
from aiorocketmq.store.mapped_file_queue import MappedFileQueue

__all__ = [
    "BLANK_UNIT",
    "CQ_UNIT_DTYPE",
    "ConsumeQueue",
    "PutUnitStatus",
    "RunResult",
    "UnitSlice",
    "tags_match",
]

log = logging.getLogger(__name__)

CQ_UNIT_DTYPE: Final = np.dtype([("offset", ">i8"), ("size", ">i4"), ("tags", ">i8")])
"""One ConsumeQueue unit; ``itemsize == 20``."""

_UNIT: Final = CQ_UNIT
BLANK_UNIT: Final = _UNIT.pack(0, 0x7FFFFFFF, 0)
"""The pre-blank unit: physical offset 0, size Integer.MAX_VALUE, tagsCode 0."""

_UNIT_SIZE: Final = CQ_STORE_UNIT_SIZE
assert CQ_UNIT_DTYPE.itemsize == _UNIT_SIZE == _UNIT.size


class PutUnitStatus(enum.Enum):
    """How ``ConsumeQueue.put`` ended."""

    OK = "OK"  # the unit was written
    DUPLICATE = "DUPLICATE"  # already present (redispatch); nothing written, success
    NEED_FILE = "NEED_FILE"  # await allocate_file(queue_offset), then put again
    ERROR = "ERROR"  # the write failed (RocketMQ retries, then marks the queue in error)


@dataclass(slots=True)
class RunResult:
    """How ``ConsumeQueue.put_run`` ended.

    Attributes:
        done: how many of the run's units are done; the unit at ``done`` (if any)
            answered NEED_FILE, and the rest were not tried.
        last_ok: index of the last unit written (OK), -1 if none.
        failed: indexes of the units whose write failed (ERROR).
    """

    done: int
    last_ok: int
    failed: list[int] = field(default_factory=list)


class UnitSlice:
    """Held units of one ConsumeQueue file, from a queue offset to the write position.

    Release it (or use ``with``) when done; ``units`` must not be used afterwards.

    Attributes:
        first_queue_offset: queue offset of ``units[0]``.
        units: read-only structured array (``CQ_UNIT_DTYPE``) over the mapping.
    """

    __slots__ = ("_file", "first_queue_offset", "units")

    def __init__(self, file: MappedFile, first_queue_offset: int, units: np.ndarray[Any, Any]):
        self._file: MappedFile | None = file
        self.first_queue_offset = first_queue_offset
        self.units = units

    def __len__(self) -> int:
        return len(self.units)

    def release(self) -> None:
        """Drop the file reference (idempotent)."""
        file, self._file = self._file, None
        if file is not None:
            file.release()

    def __enter__(self) -> UnitSlice:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()


def tags_match(units: np.ndarray[Any, Any], tag_codes: Collection[int]) -> np.ndarray[Any, Any]:
    """Boolean mask of the units whose tagsCode is one of ``tag_codes`` (vectorised).

    An empty ``tag_codes`` means "no tag filter" and matches everything, as a
    subscription of ``*`` does.
    """
    if not tag_codes:
        return np.ones(len(units), dtype=bool)
    codes = np.fromiter(tag_codes, dtype=np.int64, count=len(tag_codes))
    return np.isin(units["tags"], codes)


class ConsumeQueue:
    """The ConsumeQueue of one topic and queue id.

    Args:
        topic: the topic.
        queue_id: the queue id.
        root_dir: the store's ``consumequeue`` directory.
        file_size: ``mappedFileSizeConsumeQueue`` (a multiple of 20).
        allocator: creates files off the loop (a ``ConsumeQueueTable`` shares one).

    Attributes:
        max_physic_offset: end (offset + size) of the last unit written or
            recovered, -1 when none; puts below it are duplicates.
        min_logic_offset: logical byte offset of the first valid unit.
    """

    def __init__(
        self,
        topic: str,
        queue_id: int,
        root_dir: Path,
        file_size: int,
        *,
        allocator: MappedFileAllocator | None = None,
    ) -> None:
        if file_size % _UNIT_SIZE:
            raise ValueError(f"a ConsumeQueue file size must be a multiple of 20, not {file_size}")
        self.topic = topic
        self.queue_id = queue_id
        self.file_size = file_size
        self.queue = MappedFileQueue(
            root_dir / topic / str(queue_id), file_size, allocator=allocator
        )
        self.max_physic_offset = -1
        self.min_logic_offset = 0

    def __repr__(self) -> str:
        where = f"{self.topic}-{self.queue_id}"
        return f"ConsumeQueue({where}, min={self.min_offset}, max={self.max_offset})"

    # -- offsets -------------------------------------------------------------------------

    @property
    def min_offset(self) -> int:
        """First valid queue offset (``getMinOffsetInQueue``)."""
        return self.min_logic_offset // _UNIT_SIZE

    @property
    def max_offset(self) -> int:
        """The next queue offset to be written (``getMaxOffsetInQueue``)."""
        return self.queue.max_offset // _UNIT_SIZE

    @property
    def message_total(self) -> int:
        """``max_offset - min_offset``."""
        return self.max_offset - self.min_offset

    def roll_next_file(self, queue_offset: int) -> int:
        """First queue offset of the file after the one holding ``queue_offset``."""
        per_file = self.file_size // _UNIT_SIZE
        return queue_offset + per_file - queue_offset % per_file

    # -- append (event loop, no await) ---------------------------------------------------

    def put(
        self,
        physical_offset: int,
        size: int,
        tags_code: int,
        queue_offset: int,
        store_timestamp: int = 0,
    ) -> PutUnitStatus:
        """Write the unit for ``queue_offset`` (``putMessagePositionInfo``).

        Args:
            physical_offset: the record's CommitLog offset.
            size: the record's TOTALSIZE.
            tags_code: what the unit stores in its tagsCode field.
            queue_offset: the record's QUEUEOFFSET.
            store_timestamp: the record's store time; kept as the file's last
                modification time (for ``offset_by_time``), if > 0.

        Returns:
            OK, DUPLICATE (already there: fine), NEED_FILE, or ERROR.
        """
        if physical_offset + size <= self.max_physic_offset:
            return PutUnitStatus.DUPLICATE
        expect = queue_offset * _UNIT_SIZE
        mapped = self.queue.get_last_file(expect)
        if mapped is None:
            return PutUnitStatus.NEED_FILE
        if mapped.first_create_in_queue and queue_offset != 0 and mapped.wrote_position == 0:
            self._fill_pre_blank(mapped, expect)
        if queue_offset != 0:
            current = mapped.file_from_offset + mapped.wrote_position
            if expect < current:
                return PutUnitStatus.DUPLICATE
            if expect != current:
                log.warning(
                    "[BUG] logic queue order maybe wrong topic=%s queue_id=%s expect=%s current=%s",
                    self.topic, self.queue_id, expect, current,
                )  # fmt: skip
        self.max_physic_offset = physical_offset + size
        try:
            written = mapped.append(_UNIT.pack(physical_offset, size, tags_code))
        except StoreIOError:
            log.exception(
                "consume queue write failed topic=%s queue_id=%s", self.topic, self.queue_id
            )
            return PutUnitStatus.ERROR
        if written < 0:
            return PutUnitStatus.ERROR
        if store_timestamp > 0:
            mapped.store_timestamp = store_timestamp
        return PutUnitStatus.OK

    def put_run(self, requests: Sequence[DispatchRequest]) -> RunResult:
        """``put`` of each request in turn (this queue's units, in CommitLog order).

        A run that continues the queue exactly (the first unit new and at the write
        position, consecutive queue offsets, room in the last file, no pre-blank
        fill) is packed and written as one append; the outcome, bytes and state are
        those of the unit-by-unit puts, which take every other run.
        """
        mapped = self._run_file(requests)
        data = pack_units(requests) if mapped is not None else None
        if mapped is not None and data is not None:
            try:
                written = mapped.append(data)
            except StoreIOError:
                written = -1  # unchanged: the puts below fail and log one by one
            if written >= 0:
                last = requests[-1]
                self.max_physic_offset = last.commit_log_offset + last.msg_size
                mapped.store_timestamp = last.store_timestamp
                return RunResult(len(requests), len(requests) - 1)
        result = RunResult(0, -1)
        for i, request in enumerate(requests):
            status = self.put(
                request.commit_log_offset, request.msg_size, request.tags_code,
                request.consume_queue_offset, request.store_timestamp,
            )  # fmt: skip
            if status is PutUnitStatus.NEED_FILE:
                return result
            if status is PutUnitStatus.OK:
                result.last_ok = i
            elif status is PutUnitStatus.ERROR:
                result.failed.append(i)
            result.done = i + 1
        return result

    def _run_file(self, requests: Sequence[DispatchRequest]) -> MappedFile | None:
        """The last file, if ``put_run`` may append ``requests`` to it in one write."""
        first, last = requests[0], requests[-1]
        if (
            first.commit_log_offset + first.msg_size <= self.max_physic_offset
            or last.store_timestamp <= 0  # put keeps the last timestamp > 0
        ):  # fmt: skip
            return None
        expect = first.consume_queue_offset * _UNIT_SIZE
        mapped = self.queue.get_last_file(expect)
        if (
            mapped is None
            or mapped.file_from_offset + mapped.wrote_position != expect
            or mapped.wrote_position + len(requests) * _UNIT_SIZE > mapped.file_size
            or (mapped.first_create_in_queue and expect and not mapped.wrote_position)
        ):  # fmt: skip
            return None
        return mapped

    def _fill_pre_blank(self, mapped: MappedFile, expect: int) -> None:
        # A queue that starts mid-stream (a slave, or files deleted): blank units up
        # to the expected position, and the queue's minimum starts there.
        self.min_logic_offset = expect
        self.queue.flushed_where = self.queue.committed_where = expect
        until = expect % self.file_size
        mapped.append(BLANK_UNIT * (until // _UNIT_SIZE))
        log.info("filled pre-blank units in %s up to %s", mapped.path, until)

    async def allocate_file(self, queue_offset: int) -> MappedFile:
        """Wait until the file a put for ``queue_offset`` needs exists (NEED_FILE)."""
        return await self.queue.allocate_last_file(queue_offset * _UNIT_SIZE)

    def put_blocking(
        self,
        physical_offset: int,
        size: int,
        tags_code: int,
        queue_offset: int,
        store_timestamp: int = 0,
    ) -> PutUnitStatus:
        """``put``, creating a missing file in this thread (load/recovery phase only)."""
        status = self.put(physical_offset, size, tags_code, queue_offset, store_timestamp)
        if status is PutUnitStatus.NEED_FILE:
            self.queue.create_last_file_blocking(queue_offset * _UNIT_SIZE)
            status = self.put(physical_offset, size, tags_code, queue_offset, store_timestamp)
        return status

    # -- reads ---------------------------------------------------------------------------

    def get_units(self, queue_offset: int, max_units: int | None = None) -> UnitSlice | None:
        """Units from ``queue_offset`` to the end of its file's written part (``getIndexBuffer``).

        Args:
            queue_offset: the first unit wanted.
            max_units: cap on units returned (a pull reads at most what it can use).

        Returns:
            A held ``UnitSlice`` (never crossing a file), or None when the offset is
            below the minimum, beyond the written units, or its file is gone.
        """
        offset = queue_offset * _UNIT_SIZE
        if offset < self.min_logic_offset:
            return None
        mapped = self.queue.find_file(offset)
        if mapped is None:
            return None
        first = (offset - mapped.file_from_offset) // _UNIT_SIZE
        end = mapped.read_position // _UNIT_SIZE
        if max_units is not None:
            end = min(end, first + max_units)
        if end <= first or not mapped.hold():
            return None
        units = mapped.array(CQ_UNIT_DTYPE)[first:end]
        units.flags.writeable = False
        return UnitSlice(mapped, queue_offset, units)

    def get_unit(self, queue_offset: int) -> tuple[int, int, int] | None:
        """``(physical offset, size, tagsCode)`` of one unit, or None."""
        with_slice = self.get_units(queue_offset, 1)
        if with_slice is None:
            return None
        with with_slice:
            unit = with_slice.units[0]
            return int(unit["offset"]), int(unit["size"]), int(unit["tags"])

    def last_offset(self) -> int:
        """End (offset + size) of the last valid unit of the last file, -1 if none.

        ``getLastOffset``: scans from the last written unit forward.
        """
        mapped = self.queue.last_file
        if mapped is None:
            return -1
        position = max(mapped.wrote_position - _UNIT_SIZE, 0)
        units = mapped.array(CQ_UNIT_DTYPE)[position // _UNIT_SIZE :]
        valid = (units["offset"] >= 0) & (units["size"] > 0)
        invalid = np.flatnonzero(~valid)
        count = int(invalid[0]) if len(invalid) else len(units)
        if count == 0:
            return -1
        last = units[count - 1]
        return int(last["offset"]) + int(last["size"])

    def offset_by_time(
        self,
        timestamp_ms: int,
        store_time_of: Callable[[int, int], int],
        min_physical_offset: int,
    ) -> int:
        """The queue offset whose message was stored closest to ``timestamp_ms``.

        ``getOffsetInQueueByTime``: picks the first file modified at or after the
        time (else the last), then binary-searches its units, reading each probe's
        STORETIMESTAMP from the CommitLog. Units below the CommitLog's min offset
        count as too early. An exact hit wins; otherwise the nearer of the closest
        earlier and later probes, the earlier on a tie.

        Args:
            timestamp_ms: the time wanted.
            store_time_of: ``(physical offset, size) -> store time``, negative when
                unreadable (``CommitLog.pickup_store_timestamp``).
            min_physical_offset: the CommitLog's min offset.

        Returns:
            A queue offset; 0 when there is no file or a probe could not be read.
        """
        mapped = self.queue.file_by_time(timestamp_ms)
        if mapped is None or not mapped.hold():
            return 0
        try:
            units = mapped.array(CQ_UNIT_DTYPE)[: mapped.read_position // _UNIT_SIZE]
            low = max(self.min_logic_offset - mapped.file_from_offset, 0) // _UNIT_SIZE
            found = _search_by_time(units, low, timestamp_ms, store_time_of, min_physical_offset)
        finally:
            mapped.release()
        if found is None:
            return 0
        return (mapped.file_from_offset + found * _UNIT_SIZE) // _UNIT_SIZE

    # -- recovery and expiry ---------------------------------------------------------------

    def recover_blocking(self) -> int:
        """Find the last valid unit and cut the rest (load/recovery phase).

        Scans from the third-from-last file; a unit is valid while ``offset >= 0 and
        size > 0`` (blank units are). Sets ``max_physic_offset``.

        Returns:
            The logical byte offset where the valid units end.
        """
        files = self.queue.files
        if not files:
            return 0
        index = max(len(files) - 3, 0)
        process_offset = files[index].file_from_offset
        for mapped in files[index:]:
            units = mapped.array(CQ_UNIT_DTYPE)
            valid = (units["offset"] >= 0) & (units["size"] > 0)
            invalid = np.flatnonzero(~valid)
            count = int(invalid[0]) if len(invalid) else len(units)
            if count:
                last = units[count - 1]
                self.max_physic_offset = int(last["offset"]) + int(last["size"])
            process_offset = mapped.file_from_offset + count * _UNIT_SIZE
            if count < len(units):
                break
        self.queue.flushed_where = self.queue.committed_where = process_offset
        removed = self.queue.truncate_dirty_blocking(process_offset)
        if removed:
            log.info(
                "consume queue %s-%s dropped %d file(s)", self.topic, self.queue_id, len(removed)
            )
        return process_offset

    def truncate_dirty_logic_files_blocking(self, physical_offset: int) -> None:
        """Drop units pointing at or past ``physical_offset`` (load/recovery phase).

        ``truncateDirtyLogicFiles`` (specs/store.md §7.3 step 3): from the last file
        backwards, a file whose first unit already points there goes entirely;
        otherwise keep its valid units below the offset and stop. Unlike RocketMQ's
        code, the first unit must be valid too: Java keeps an all-zero first unit
        (offset 0 < the cut) as if it were a message.
        """
        while (mapped := self.queue.last_file) is not None:
            units = mapped.array(CQ_UNIT_DTYPE)
            if int(units[0]["offset"]) >= physical_offset:
                self.queue.delete_last_file()
                delete_files_blocking([mapped])
                continue
            keep = (
                (units["offset"] >= 0) & (units["size"] > 0) & (units["offset"] < physical_offset)
            )
            stops = np.flatnonzero(~keep)
            count = int(stops[0]) if len(stops) else len(units)
            mapped.set_positions(count * _UNIT_SIZE)
            break
        self.max_physic_offset = self._last_unit_end()

    def _last_unit_end(self) -> int:
        """End (offset + size) of the last written unit of the queue, -1 if none."""
        files = self.queue.files
        for mapped in reversed(files):
            written = mapped.wrote_position // _UNIT_SIZE
            if written:
                last = mapped.array(CQ_UNIT_DTYPE)[written - 1]
                return int(last["offset"]) + int(last["size"])
        return -1

    def correct_min_offset(self, min_physical_offset: int) -> None:
        """Move ``min_logic_offset`` to the first unit of the first file that points at
        or past ``min_physical_offset`` (``correctMinOffset``); unchanged if none does.
        """
        mapped = self.queue.first_file
        if mapped is None or not mapped.hold():
            return
        try:
            units = mapped.array(CQ_UNIT_DTYPE)[: mapped.read_position // _UNIT_SIZE]
            hits = np.flatnonzero(units["offset"] >= min_physical_offset)
        finally:
            mapped.release()
        if len(hits):
            self.min_logic_offset = mapped.file_from_offset + int(hits[0]) * _UNIT_SIZE
            log.info(
                "consume queue %s-%s min offset now %s", self.topic, self.queue_id, self.min_offset
            )

    def pick_expired(self, min_physical_offset: int) -> list[MappedFile]:
        """Detach files whose last unit points below the CommitLog's min offset, then
        correct the min offset (``deleteExpiredFile``). Delete the returned paths in
        the executor (``delete_files_blocking``).
        """
        expired = self.queue.pick_expired_by_offset(min_physical_offset, _UNIT_SIZE)
        self.queue.detach(expired)
        self.correct_min_offset(min_physical_offset)
        return expired

    async def flush(self, executor: BlockingExecutor, least_pages: int) -> bool:
        """Flush as ``MappedFileQueue.flush``; True when nothing moved."""
        return await self.queue.flush(executor, least_pages)

    def destroy_blocking(self) -> None:
        """Delete every file (load/recovery phase, e.g. the CommitLog is empty)."""
        self.max_physic_offset = -1
        self.min_logic_offset = 0
        self.queue.destroy_blocking()


def _search_by_time(
    units: np.ndarray[Any, Any],
    low: int,
    target: int,
    store_time_of: Callable[[int, int], int],
    min_physical_offset: int,
) -> int | None:
    """Binary search of units by store time; the unit index, or None (read failure)."""
    if len(units) == 0:
        return None
    high = len(units) - 1
    left = right = -1
    left_time = right_time = -1
    while high >= low:
        mid = (low + high) // 2
        offset, size = int(units[mid]["offset"]), int(units[mid]["size"])
        if offset < min_physical_offset:
            low, left = mid + 1, mid
            continue
        store_time = store_time_of(offset, size)
        if store_time < 0:
            return None
        if store_time == target:
            return mid
        if store_time > target:
            high, right, right_time = mid - 1, mid, store_time
        else:
            low, left, left_time = mid + 1, mid, store_time
    if left_time == -1:
        # Every probe was later than the target, or below the CommitLog's min offset;
        # RocketMQ then returns rightOffset even when it is -1 (one byte before the
        # file); we return the first unit after those below the min offset.
        return right if right >= 0 else left + 1
    if right_time == -1:
        return left
    return right if abs(target - left_time) > abs(target - right_time) else left
