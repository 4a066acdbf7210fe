"""IndexFile: a hash index from ``topic#key`` to CommitLog offsets, in one mapped file.

Owns: one ``index/<yyyyMMddHHmmssSSS>`` file (``IndexFile.java``, ``IndexHeader.java``;
specs/store.md §5), big-endian::

    header, 40 bytes at 0
      off  size  field
        0    8   beginTimestamp   store time (ms) of the first item
        8    8   endTimestamp     store time of the last item
       16    8   beginPhyOffset   CommitLog offset of the first item
       24    8   endPhyOffset     CommitLog offset of the last item
       32    4   hashSlotCount    slots ever used
       36    4   indexCount       next item number; items start at 1 (0 on disk
                                  until the first put, read as 1)
    slot s, 4 bytes at 40 + s*4:   item number of the newest item of the bucket;
                                   0 or anything outside [1, indexCount] is empty
    item n, 20 bytes at 40 + slots*4 + n*20
      off  size  field
        0    4   keyHash          abs(hashCode("topic#key")), abs(MIN_VALUE) -> 0
        4    8   phyOffset        the message's CommitLog offset
       12    4   timeDiff         (storeTime - beginTimestamp) / 1000, in seconds,
                                  0 if negative or no begin, capped at 2**31-1
       16    4   prevIndex        previous item of the same slot; 0 ends the chain

Slot = ``keyHash % slots``. File size = ``40 + slots*4 + items*20`` (420,000,040 with
the defaults). The file is full when ``indexCount >= items``: it holds items - 1.
Header fields are written as soon as they change. The shadow (``shadow_blocking``, the
store's writable file): header and slot table (the first ``40 + slots*4`` bytes) are
kept in an anonymous copy, with a mark per 4 KiB page written since the last flush;
items still go to the mapping. Keys land in random slots, and every msync
write-protects the pages it cleaned: with the table in the mapping, the puts after
each flush took ~800 page faults a second on the event loop at 10,000 single sends/s
(each an ext4 ``page_mkwrite``). A flush takes the marks and the header on the loop
(``take_marks``), ``pwrite``s the marked slot pages from the copy in the executor, the
header as taken last, then msyncs the mapping (which covers them). A full file's
shadow is written, and dropped, before the next file is created. The shadow's file work
(read, walk back, write out) is in ``index_shadow``.

So the file on disk has the header of a flush and slots at least as new (puts during
the flush). Opening a file for a shadow walks a slot that names an item the header does
not count down its items' ``prevIndex`` links (items are in the mapping, written before
their slot) to the newest one it counts: the slots as of the header. A process killed
between flushes recovers as after an OS crash: the replay from the checkpoint re-adds
every key past the header's endPhyOffset.

Must not: decide which keys a message has (``IndexService``), or create, flush or
delete a file outside a ``*_blocking`` method.
"""

from __future__ import annotations

import logging
import mmap
import struct
import time
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt

from aiorocketmq.common.kernels import load_kernel
from aiorocketmq.common.tag_hash import index_key_hash
from aiorocketmq.store.errors import StoreIOError, StoreLoadError
from aiorocketmq.store.index_shadow import (
    MARK_SHIFT,
    Marks,
    mark_count,
    read_table_blocking,
    repair_heads,
    write_marked_blocking,
)
from aiorocketmq.store.mapped_file import OS_PAGE_SIZE, MappedFile
from aiorocketmq.store.page_ops import msync, populate_write

__all__ = [
    "HASH_SLOT_SIZE",
    "INDEX_HEADER_SIZE",
    "INDEX_ITEM_SIZE",
    "IndexFile",
    "index_file_name",
    "index_file_size",
]

log = logging.getLogger(__name__)

INDEX_HEADER_SIZE: Final = 40
HASH_SLOT_SIZE: Final = 4
INDEX_ITEM_SIZE: Final = 20

_HEADER: Final = struct.Struct(">qqqqii")
_ITEM: Final = struct.Struct(">iqii")
_INT: Final = struct.Struct(">i")
_LONG: Final = struct.Struct(">q")
_INT_MAX: Final = 0x7FFFFFFF
_SLOT_DTYPE: Final = np.dtype(">i4")
_ITEM_DTYPE: Final = np.dtype([("hash", ">i4"), ("phy", ">i8"), ("diff", ">i4"), ("prev", ">i4")])
_BEGIN_TIMESTAMP, _END_TIMESTAMP, _BEGIN_PHY, _END_PHY, _SLOT_COUNT, _INDEX_COUNT = (
    0, 8, 16, 24, 32, 36,
)  # fmt: skip


def index_file_size(hash_slot_num: int, index_num: int) -> int:
    """Bytes of an IndexFile with these counts."""
    return INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE + index_num * INDEX_ITEM_SIZE


def index_file_name(timestamp_ms: int) -> str:
    """``yyyyMMddHHmmssSSS`` in local time (``UtilAll.timeMillisToHumanString``)."""
    local = time.localtime(timestamp_ms // 1000)
    return time.strftime("%Y%m%d%H%M%S", local) + f"{timestamp_ms % 1000:03d}"


class IndexFile:
    """One IndexFile; header values are mirrored in attributes and written through.

    Build with ``create_blocking`` or ``open_blocking``.

    Attributes:
        mapped: the underlying file (its positions are not used).
        hash_slot_num: slots.
        index_num: item capacity, item 0 included.
        begin_timestamp, end_timestamp, begin_phy_offset, end_phy_offset,
        hash_slot_count, index_count: the header (``index_count`` >= 1 in memory).
    """

    __slots__ = (
        "_buf",
        "_dirty",
        "_head",
        "_items_base",
        "begin_phy_offset",
        "begin_timestamp",
        "end_phy_offset",
        "end_timestamp",
        "hash_slot_count",
        "hash_slot_num",
        "index_count",
        "index_num",
        "mapped",
    )

    begin_timestamp: int
    end_timestamp: int
    begin_phy_offset: int
    end_phy_offset: int
    hash_slot_count: int

    def __init__(self, mapped: MappedFile, hash_slot_num: int, index_num: int) -> None:
        self.mapped = mapped
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self._buf = mapped.buffer
        self._head: mmap.mmap = mapped.buffer  # header and slots: here or the shadow
        self._dirty: bytearray | None = None  # the shadow's page marks
        self._items_base = INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE
        (
            self.begin_timestamp,
            self.end_timestamp,
            self.begin_phy_offset,
            self.end_phy_offset,
            self.hash_slot_count,
            count,
        ) = _HEADER.unpack_from(self._buf, 0)
        self.index_count: int = max(count, 1)  # IndexHeader.load: <= 0 reads as 1

    @classmethod
    def create_blocking(  # noqa: PLR0917 - called with IndexService's argument tuple
        cls,
        path: Path,
        hash_slot_num: int,
        index_num: int,
        end_phy_offset: int = 0,
        end_timestamp: int = 0,
        preallocate: bool = False,
        shadow: bool = False,
    ) -> IndexFile:
        """Create a new IndexFile that continues where the previous one ended.

        Begin and end phyOffset start at ``end_phy_offset`` when it is > 0, begin and
        end timestamp at ``end_timestamp`` when > 0 (the first put then overwrites
        the begin values); otherwise they stay 0. ``preallocate`` reserves its disk
        blocks, so a full disk fails here and not as SIGBUS on a later put. ``shadow``:
        see ``shadow_blocking``.
        """
        mapped = MappedFile.create_blocking(
            path, index_file_size(hash_slot_num, index_num), preallocate=preallocate
        )
        index = cls(mapped, hash_slot_num, index_num)
        if end_phy_offset > 0:
            index._set_long(_BEGIN_PHY, end_phy_offset)
            index._set_long(_END_PHY, end_phy_offset)
        if end_timestamp > 0:
            index._set_long(_BEGIN_TIMESTAMP, end_timestamp)
            index._set_long(_END_TIMESTAMP, end_timestamp)
        if shadow:
            index.shadow_blocking()
        else:
            # Keys land in random hash slots: on a fresh file nearly every put faulted
            # in a zero page of the slot table, on the event loop (a dispatch chunk of a
            # few thousand keys stalled it ~6 ms). Fault the table in here, off the loop.
            populate_write(mapped.buffer, 0, index._items_base)
        # The first key's item lands past the slot table, on a page of its own: faulted
        # in here, as MappedFile.create_blocking does the file's first page.
        first_item = index._items_base - index._items_base % OS_PAGE_SIZE
        populate_write(mapped.buffer, first_item, min(first_item + OS_PAGE_SIZE, mapped.file_size))
        return index

    def shadow_blocking(self) -> None:
        """Move the header and slot table writes to an anonymous copy (module docstring).

        Nothing happens to a full or shadowed file. Executor or load phase only.

        Raises:
            StoreIOError: the file could not be read.
        """
        if self._dirty is not None or self.is_write_full:
            return
        table = read_table_blocking(self.mapped.path, self._items_base)
        dirty = bytearray(mark_count(self._items_base))
        links = np.frombuffer(self._buf, _ITEM_DTYPE, self.index_num, self._items_base)["prev"]
        walked = repair_heads(
            table, dirty, links, slot_num=self.hash_slot_num, count=self.index_count
        )
        if walked:
            log.info(
                "index file %s: %d slot(s) newer than its header walked back to indexCount=%d",
                self.file_name, walked, self.index_count,
            )  # fmt: skip
        self._head, self._dirty = table, dirty

    @property
    def is_shadowed(self) -> bool:
        """Whether header and slots are written to the shadow (``shadow_blocking``)."""
        return self._dirty is not None

    def take_marks(self) -> Marks | None:
        """The shadow's page marks since the last take, now cleared (None: no shadow).

        On the loop, where puts mark: a put is either in these marks or in the next.
        """
        dirty = self._dirty
        if dirty is None:
            return None
        self._dirty = bytearray(len(dirty))
        return dirty, self.is_write_full, self._head[:INDEX_HEADER_SIZE]

    @classmethod
    def open_blocking(cls, path: Path, hash_slot_num: int, index_num: int) -> IndexFile:
        """Map an existing IndexFile and read its header.

        Raises:
            StoreLoadError: the file's size does not match the counts (RocketMQ
                would map it anyway and read garbage).
        """
        if not path.name.isdigit():
            raise StoreLoadError(f"{path} is not an IndexFile name (yyyyMMddHHmmssSSS)")
        expected = index_file_size(hash_slot_num, index_num)
        if path.stat().st_size != expected:
            raise StoreLoadError(
                f"{path} is {path.stat().st_size} bytes; {hash_slot_num} slots and "
                f"{index_num} items make {expected}"
            )
        mapped = MappedFile.open_blocking(path, expected)
        return cls(mapped, hash_slot_num, index_num)

    @property
    def file_name(self) -> str:
        """The file's name (its creation time)."""
        return self.mapped.path.name

    @property
    def is_write_full(self) -> bool:
        """No room for another item."""
        return self.index_count >= self.index_num

    def _set_long(self, pos: int, value: int) -> None:
        _LONG.pack_into(self._head, pos, value)
        if self._dirty is not None:
            self._dirty[0] = 1
        if pos == _BEGIN_TIMESTAMP:
            self.begin_timestamp = value
        elif pos == _END_TIMESTAMP:
            self.end_timestamp = value
        elif pos == _BEGIN_PHY:
            self.begin_phy_offset = value
        else:
            self.end_phy_offset = value

    def put_key(self, key: str, phy_offset: int, store_timestamp: int) -> bool:
        """Add an item for ``key`` (``IndexFile.putKey``); False when the file is full.

        Args:
            key: the full index key, ``topic#key``.
            phy_offset: the message's CommitLog offset.
            store_timestamp: its store time (ms).
        """
        return self._put_hash(index_key_hash(key), phy_offset, store_timestamp)

    def put_hashes(
        self,
        hashes: npt.NDArray[np.int64],
        phy_offsets: npt.NDArray[np.int64],
        store_timestamps: npt.NDArray[np.int64],
    ) -> int:
        """Add items for many keys at once, exactly as ``put_key`` one by one would.

        Args:
            hashes: each key's ``index_key_hash`` (``index_key_hashes``).
            phy_offsets: each key's message offset, non-decreasing.
            store_timestamps: each key's message store time (ms).

        Returns:
            How many were added (a prefix); fewer than given when the file filled.
        """
        if _KERNEL is not None:
            return self._put_hashes_kernel(hashes, phy_offsets, store_timestamps)
        total = min(len(hashes), self.index_num - self.index_count)
        done = 0
        # The first items also set the begin values, which later items' timeDiff reads.
        while done < total and self.index_count <= 1:
            self._put_hash(int(hashes[done]), int(phy_offsets[done]), int(store_timestamps[done]))
            done += 1
        if done < total:
            self._put_hashes(
                hashes[done:total], phy_offsets[done:total], store_timestamps[done:total]
            )
        return total

    def _put_hashes_kernel(
        self,
        hashes: npt.NDArray[np.int64],
        phy_offsets: npt.NDArray[np.int64],
        store_timestamps: npt.NDArray[np.int64],
    ) -> int:
        """``put_hashes`` by the C kernel (``_index_kernels.pyx``): one loop in C."""
        assert _KERNEL is not None
        outcome = _KERNEL.put_hashes(
            self._buf, self._head, self._dirty, self._items_base, self.hash_slot_num,
            self.index_num, self.index_count, self.hash_slot_count, self.begin_timestamp,
            self.begin_phy_offset,
            np.ascontiguousarray(hashes, np.int64), np.ascontiguousarray(phy_offsets, np.int64),
            np.ascontiguousarray(store_timestamps, np.int64),
        )  # fmt: skip
        return self._kernel_put(outcome, phy_offsets, store_timestamps)

    @property
    def takes_hash_lists(self) -> bool:
        """Whether ``put_hash_list`` puts (its C kernel is built)."""
        return _KERNEL is not None

    def put_hash_list(
        self, hashes: list[int], phy_offsets: list[int], store_timestamps: list[int]
    ) -> int | None:
        """``put_hashes`` for up to 16 keys given as lists, by the C kernel; None when it
        is not built (then ``put_key`` per key)."""
        if _KERNEL is None:
            return None
        outcome = _KERNEL.put_hash_list(
            self._buf, self._head, self._dirty, self._items_base, self.hash_slot_num,
            self.index_num, self.index_count, self.hash_slot_count, self.begin_timestamp,
            self.begin_phy_offset,
            hashes, phy_offsets, store_timestamps,
        )  # fmt: skip
        return self._kernel_put(outcome, phy_offsets, store_timestamps)

    def _kernel_put(
        self,
        outcome: tuple[int, int, int, int, int],
        phy_offsets: npt.NDArray[np.int64] | list[int],
        store_timestamps: npt.NDArray[np.int64] | list[int],
    ) -> int:
        """Take over what the kernel wrote: counters and begin/end values."""
        done, count, slots, begin_ts, begin_phy = outcome
        if done:
            self.index_count, self.hash_slot_count = count, slots
            self.begin_timestamp, self.begin_phy_offset = begin_ts, begin_phy
            self.end_phy_offset = int(phy_offsets[done - 1])
            self.end_timestamp = int(store_timestamps[done - 1])
        return done

    def _put_hashes(
        self,
        hashes: npt.NDArray[np.int64],
        phy_offsets: npt.NDArray[np.int64],
        store_timestamps: npt.NDArray[np.int64],
    ) -> None:
        """The vectorised ``putKey`` loop; every item fits and ``index_count`` >= 2."""
        n = len(hashes)
        count0 = self.index_count
        positions = np.arange(count0, count0 + n, dtype=np.int64)  # each item's number
        slot_table = np.frombuffer(self._head, _SLOT_DTYPE, self.hash_slot_num, INDEX_HEADER_SIZE)
        slots = hashes % self.hash_slot_num
        # Chains: an item links to the previous item of its slot in this run, the first
        # of each slot to the slot's head, kept only if valid for the count of its time.
        order = np.argsort(slots, kind="stable")
        ordered = slots[order]
        follows = np.empty(n, dtype=bool)
        follows[0] = False
        np.equal(ordered[1:], ordered[:-1], out=follows[1:])
        prev = np.empty(n, dtype=np.int64)
        prev[order[1:]] = positions[order[:-1]]
        heads = slot_table[slots].astype(np.int64)
        firsts = order[~follows]
        head_of_first = heads[firsts]
        valid = (head_of_first > 0) & (head_of_first <= positions[firsts])
        prev[firsts] = np.where(valid, head_of_first, 0)
        begin = self.begin_timestamp
        if begin > 0:
            diff = np.clip((store_timestamps - begin) // 1000, 0, _INT_MAX)
        else:
            diff = np.zeros(n, dtype=np.int64)
        items = np.frombuffer(
            self._buf, _ITEM_DTYPE, n, self._items_base + count0 * INDEX_ITEM_SIZE
        )
        items["hash"] = hashes
        items["phy"] = phy_offsets
        items["diff"] = diff
        items["prev"] = prev
        lasts = order[np.append(~follows[1:], True)]
        slot_table[slots[lasts]] = positions[lasts]
        if self._dirty is not None:
            marks = np.frombuffer(self._dirty, np.uint8)
            marks[(INDEX_HEADER_SIZE + slots[lasts] * HASH_SLOT_SIZE) >> MARK_SHIFT] = 1
        self.hash_slot_count += int(np.count_nonzero(~valid))
        _INT.pack_into(self._head, _SLOT_COUNT, self.hash_slot_count)
        self.index_count = count0 + n
        _INT.pack_into(self._head, _INDEX_COUNT, self.index_count)
        self._set_long(_END_PHY, int(phy_offsets[-1]))
        self._set_long(_END_TIMESTAMP, int(store_timestamps[-1]))

    def _put_hash(self, key_hash: int, phy_offset: int, store_timestamp: int) -> bool:
        count = self.index_count
        if count >= self.index_num:
            return False
        table = self._head
        slot_pos = INDEX_HEADER_SIZE + (key_hash % self.hash_slot_num) * HASH_SLOT_SIZE
        head = _INT.unpack_from(table, slot_pos)[0]
        if head <= 0 or head > count:
            head = 0
        # timeDiff uses the header *before* this put updates it (first item included).
        begin = self.begin_timestamp
        diff_s = (store_timestamp - begin) // 1000 if begin > 0 else 0
        diff_s = min(max(diff_s, 0), _INT_MAX)
        _ITEM.pack_into(
            self._buf, self._items_base + count * INDEX_ITEM_SIZE, key_hash, phy_offset,
            diff_s, head,
        )  # fmt: skip
        _INT.pack_into(table, slot_pos, count)
        if self._dirty is not None:
            self._dirty[slot_pos >> MARK_SHIFT] = 1
        if count <= 1:
            self._set_long(_BEGIN_PHY, phy_offset)
            self._set_long(_BEGIN_TIMESTAMP, store_timestamp)
        if head == 0:
            self.hash_slot_count += 1
            _INT.pack_into(table, _SLOT_COUNT, self.hash_slot_count)
        self.index_count = count + 1
        _INT.pack_into(table, _INDEX_COUNT, self.index_count)
        self._set_long(_END_PHY, phy_offset)
        self._set_long(_END_TIMESTAMP, store_timestamp)
        return True

    def is_time_matched(self, begin: int, end: int) -> bool:
        """Whether the file's time range overlaps ``[begin, end]`` (``isTimeMatched``)."""
        first, last = self.begin_timestamp, self.end_timestamp
        return (begin < first and end > last) or first <= begin <= last or first <= end <= last

    def select_phy_offsets(self, key: str, max_num: int, begin: int, end: int) -> list[int]:
        """CommitLog offsets of items of ``key`` stored within ``[begin, end]``, newest first.

        ``selectPhyOffset``: walks the slot's chain; hash collisions are possible,
        so callers re-read the messages and check the real key.

        Args:
            key: the full index key, ``topic#key``.
            max_num: stop after this many offsets.
            begin: earliest store time (ms).
            end: latest store time (ms).
        """
        found: list[int] = []
        count = self.index_count
        key_hash = index_key_hash(key)
        slot_pos = INDEX_HEADER_SIZE + (key_hash % self.hash_slot_num) * HASH_SLOT_SIZE
        current = _INT.unpack_from(self._head, slot_pos)[0]
        if current <= 0 or current > count or count <= 1:
            return found
        while len(found) < max_num:
            item_hash, offset, diff_s, prev = _ITEM.unpack_from(
                self._buf, self._items_base + current * INDEX_ITEM_SIZE
            )
            if diff_s < 0:
                break
            time_read = self.begin_timestamp + diff_s * 1000
            if item_hash == key_hash and begin <= time_read <= end:
                found.append(offset)
            if prev <= 0 or prev > count or prev == current or time_read < begin:
                break
            current = prev
        return found

    def flush_blocking(self, marks: Marks | None = None) -> None:
        """``write_shadow_blocking``, then msync the whole file; executor only, held.

        RocketMQ rewrites the header from memory first; ours is written through already
        (a flushed file that never got an item keeps indexCount 0, read as 1 either way).
        """
        self.write_shadow_blocking(marks)
        msync(self._buf)

    def write_shadow_blocking(self, marks: Marks | None = None) -> None:
        """Write a shadow's marked pages and its header as taken into the file (the page
        cache: a process killed afterwards loses none of it); a full file's copy goes.

        Args:
            marks: what ``take_marks`` took on the loop; None takes them here, which
                only a caller with no put running concurrently may do (load, tests).

        Raises:
            StoreIOError: the pages could not be written (they stay marked).
        """
        if marks is None:
            marks = self.take_marks()
        if marks is not None:
            pages, full, header = marks
            try:
                write_marked_blocking(self.mapped.path, self._head, self._items_base, pages, header)
            except StoreIOError:
                if self._dirty is not None:  # written again by the next flush
                    again = np.frombuffer(self._dirty, np.uint8)
                    again |= np.frombuffer(pages, np.uint8)
                raise
            if full:  # no put follows: the file has it all, the copy can go
                self._head, self._dirty = self._buf, None


#: The C ``put_hashes`` (``_index_kernels.pyx``) when built and not turned off.
_KERNEL = load_kernel("aiorocketmq.store._index_kernels")
