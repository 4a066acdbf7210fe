"""Reading CommitLog files offline: which files, which chunks, and walking a chunk.

Owns: finding the CommitLog files of store roots (``commitlog_files``), cutting them
into chunks (``plan_chunks``), and ``scan_chunk``, which walks one chunk's records
and yields Arrow record batches, then reports how it ended (``ChunkStats``).

Chunk rule: a chunk ``[start, end)`` of a file owns the records that *start* in it.
Chunk 0 of a file starts at byte 0. A later chunk finds its first record by
searching for the message magic code at ``p + 4`` whose PHYSICALOFFSET field equals
``fileOffset + p`` (the record's own address: a body that merely contains the magic
bytes does not pass), so no chunk needs to read its predecessors. A record that
starts in a chunk may run past its end; the chunk reads it whole.

Stop rules (``specs/store.md`` §3.6, §7): a walk stops cleanly at a BLANK record, a
zero TOTALSIZE (the written end of a preallocated file) or the file's end. A torn or
corrupt record stops it uncleanly; the chunk then searches (same rule as above) for
the next record in its range, and the bytes in between are ``skipped_bytes``
(without the all-zero tail, when nothing follows). Nothing here raises on bad data.

Must not: write anything, import pyspark (executors and the driver both use this),
or use an event loop.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import numpy as np
import pyarrow as pa  # type: ignore[import-untyped]

from aiorocketmq.analytics import columns
from aiorocketmq.common.constants import MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2
from aiorocketmq.common.message_codec import MIN_RECORD_SIZE, RecordScanner, StopReason

__all__ = [
    "DEFAULT_BATCH_ROWS",
    "DEFAULT_CHUNK_BYTES",
    "Chunk",
    "ChunkStats",
    "CommitLogFile",
    "broker_name_of",
    "commitlog_files",
    "plan_chunks",
    "scan_chunk",
]

DEFAULT_CHUNK_BYTES: Final = 64 * 1024 * 1024
DEFAULT_BATCH_ROWS: Final = 32_768
_HEAD: Final = struct.Struct(">ii")
_PHYS: Final = struct.Struct(">q")
_MAGICS: Final = (
    struct.pack(">i", MESSAGE_MAGIC_CODE),
    struct.pack(">i", MESSAGE_MAGIC_CODE_V2),
)
_HOST_V6_BITS: Final = 0x30


@dataclass(frozen=True, slots=True)
class CommitLogFile:
    """One CommitLog file: its broker, path, first offset (its name) and size."""

    broker: str
    path: str
    base_offset: int
    size: int


@dataclass(frozen=True, slots=True)
class Chunk:
    """Records starting in ``[start, end)`` of ``file`` (positions within the file)."""

    file: CommitLogFile
    start: int
    end: int


@dataclass(slots=True)
class ChunkStats:
    """How a chunk's walk went; one row of the data source's ``stats`` mode."""

    broker: str
    file: str
    start: int
    end: int
    records: int = 0
    record_bytes: int = 0
    stop_reason: str = "none"
    stop_offset: int = -1
    skipped_bytes: int = 0
    problems: list[str] = field(default_factory=list)


def broker_name_of(store_root: Path) -> str:
    """A broker name from a store root: its directory name without ``-store`` (the
    parent's name for a directory named ``store`` or ``commitlog``)."""
    root = store_root.resolve()
    if root.name in ("store", "commitlog"):
        return root.parent.name
    return root.name.removesuffix("-store")


def commitlog_files(store_root: str | Path, broker: str | None = None) -> list[CommitLogFile]:
    """The CommitLog files of a store root (or of a ``commitlog`` directory), in order.

    Args:
        store_root: ``storePathRootDir``, or its ``commitlog`` directory itself.
        broker: the broker name to report; defaults to ``broker_name_of(store_root)``.

    Raises:
        FileNotFoundError: no ``commitlog`` directory there.
    """
    root = Path(store_root)
    directory = root if root.name == "commitlog" else root / "commitlog"
    if not directory.is_dir():
        raise FileNotFoundError(f"no CommitLog directory at {directory}")
    name = broker if broker else broker_name_of(root)
    found = []
    for entry in os.scandir(directory):
        if entry.is_file() and len(entry.name) == 20 and entry.name.isdigit():
            found.append(CommitLogFile(name, entry.path, int(entry.name), entry.stat().st_size))
    return sorted(found, key=lambda f: f.base_offset)


def plan_chunks(files: list[CommitLogFile], chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> list[Chunk]:
    """Cut every file into chunks of ``chunk_bytes`` (the last one shorter)."""
    if chunk_bytes < MIN_RECORD_SIZE:
        raise ValueError(f"chunk size must be at least {MIN_RECORD_SIZE} bytes, not {chunk_bytes}")
    return [
        Chunk(f, start, min(start + chunk_bytes, f.size))
        for f in files
        for start in range(0, max(f.size, 1), chunk_bytes)
        if start < f.size
    ]


def _find_record(mm: mmap.mmap, base: int, start: int, end: int) -> int | None:
    """First record start in ``[start, end)`` by magic code plus its own address."""
    v1 = _find_record_one(mm, base, start, end, _MAGICS[0])
    v2 = _find_record_one(mm, base, start, end if v1 is None else v1, _MAGICS[1])
    return v2 if v2 is not None else v1


def _find_record_one(mm: mmap.mmap, base: int, start: int, end: int, magic: bytes) -> int | None:
    pos = start
    while (hit := mm.find(magic, pos + 4, min(end + 4, len(mm)))) >= 0:
        cand = hit - 4
        if cand + 36 <= len(mm) and _PHYS.unpack_from(mm, cand + 28)[0] == base + cand:
            return cand
        pos = cand + 1
    return None


def _walk(mm: mmap.mmap, pos: int, end: int, max_rows: int) -> tuple[list[int], int]:
    """Hop over record headers from ``pos`` while they look like messages.

    Returns the record starts (at most ``max_rows``, all below ``end``) and where
    the hop stopped. Inner lengths are checked later, vectorized.
    """
    size = len(mm)
    positions: list[int] = []
    append, unpack = positions.append, _HEAD.unpack_from
    v1, v2, smallest = MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2, MIN_RECORD_SIZE
    stop = min(end, size - 7)  # a header needs 8 bytes
    for _ in range(max_rows):
        if pos >= stop:
            break
        total, magic = unpack(mm, pos)
        if (magic != v1 and magic != v2) or total < smallest or pos + total > size:  # noqa: PLR1714
            break
        append(pos)
        pos += total
    return positions, pos


def _nonzero_end(mm: mmap.mmap, start: int, end: int) -> int:
    """Index just past the last non-zero byte in ``[start, end)`` (``start`` if none)."""
    step = 1 << 20
    hi = end
    while hi > start:
        lo = max(start, hi - step)
        block = np.frombuffer(mm, np.uint8, hi - lo, lo)
        nz = np.flatnonzero(block)
        del block
        if len(nz):
            return lo + int(nz[-1]) + 1
        hi = lo
    return start


class _ChunkReader:
    """Walks one chunk over an open mmap; ``batches()`` then ``stats``."""

    def __init__(
        self,
        mm: mmap.mmap,
        chunk: Chunk,
        include_body: bool,
        check_crc: bool,
        columns: frozenset[str] | None,
    ) -> None:
        self.mm = mm
        self.columns = columns
        self.chunk = chunk
        self.base = chunk.file.base_offset
        self.include_body = include_body
        self.check_crc = check_crc
        self.stats = ChunkStats(chunk.file.broker, chunk.file.path, chunk.start, chunk.end)

    def batches(self, batch_rows: int) -> Iterator[pa.RecordBatch]:
        chunk = self.chunk
        pos: int | None = chunk.start
        if chunk.start > 0:
            pos = _find_record(self.mm, self.base, chunk.start, chunk.end)
        u8 = np.frombuffer(self.mm, np.uint8)
        try:
            while pos is not None and pos < chunk.end:
                positions, hop_end = _walk(self.mm, pos, chunk.end, batch_rows)
                good, pos = self._decode(u8, positions, hop_end)
                if good is not None and good.num_rows:
                    yield good
        finally:
            del u8

    def _decode(
        self, u8: np.ndarray, positions: list[int], hop_end: int
    ) -> tuple[pa.RecordBatch | None, int | None]:
        """Decode the hop's records; return them and where to go on (None: done)."""
        chunk = self.chunk
        pos_arr = np.array(positions, np.int64)
        batch: pa.RecordBatch | None = None
        cut = len(positions)
        if cut:
            batch, cut = self._decode_positions(u8, pos_arr)
        self.stats.records += cut
        if cut < len(positions):
            return batch, self._stop_at(positions[cut])
        if hop_end >= chunk.end or hop_end >= len(self.mm):
            if hop_end >= len(self.mm) and self.stats.stop_reason == "none":
                self.stats.stop_reason = StopReason.END.value
                self.stats.stop_offset = self.base + hop_end
            return batch, None
        if len(positions) and hop_end < chunk.end and self._header_ok(hop_end):
            return batch, hop_end  # the hop only hit its row limit
        return batch, self._stop_at(hop_end)

    def _header_ok(self, pos: int) -> bool:
        if pos + 8 > len(self.mm):
            return False
        total, magic = _HEAD.unpack_from(self.mm, pos)
        return magic in (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2) and total >= MIN_RECORD_SIZE

    def _decode_positions(self, u8: np.ndarray, pos_arr: np.ndarray) -> tuple[pa.RecordBatch, int]:
        # The fast path needs v1 magic and IPv4 hosts on every record; else the codec.
        head, topic_len, props_len, props_pos, ok = columns.fast_layout(u8, pos_arr)
        magic = np.ascontiguousarray(head[:, 4:8]).view(">i4").ravel()
        sys_flag = np.ascontiguousarray(head[:, 36:40]).view(">i4").ravel()
        cut = int(np.argmin(ok)) if not ok.all() else len(pos_arr)
        if (magic[:cut] == MESSAGE_MAGIC_CODE).all() and not (sys_flag[:cut] & _HOST_V6_BITS).any():
            layout = (head[:cut], topic_len[:cut], props_len[:cut], props_pos[:cut])
            self.stats.record_bytes += int(
                np.ascontiguousarray(head[:cut, 0:4]).view(">i4").astype(np.int64).sum()
            )
            return columns.decode_fast(
                self.mm, u8, pos_arr[:cut], layout, broker=self.chunk.file.broker,
                include_body=self.include_body, check_crc=self.check_crc, columns=self.columns,
            ), cut  # fmt: skip
        return self._decode_exact(int(pos_arr[0]), int(pos_arr[-1]) + 1)

    def _decode_exact(self, first: int, last_start_end: int) -> tuple[pa.RecordBatch, int]:
        views = []
        scanner = RecordScanner(self.mm, first, len(self.mm))
        for view in scanner:
            if view.position >= last_start_end:
                break
            views.append(view)
        self.stats.record_bytes += sum(v.total_size for v in views)
        batch = columns.decode_exact(
            views, broker=self.chunk.file.broker, include_body=self.include_body,
            check_crc=self.check_crc, columns=self.columns,
        )  # fmt: skip
        del views
        return batch, batch.num_rows

    def _stop_at(self, pos: int) -> int | None:
        """Classify the stop at ``pos`` with the codec; resync after an unclean one."""
        scanner = RecordScanner(self.mm, pos, len(self.mm))
        next(scanner, None)
        stop = scanner.stop
        reason = stop.reason if stop is not None else StopReason.CORRUPT
        message = stop.message if stop is not None else f"record at {pos}: inconsistent lengths"
        del scanner
        if self.stats.stop_reason == "none":
            self.stats.stop_reason = reason.value
            self.stats.stop_offset = self.base + pos
        if reason in (StopReason.END, StopReason.BLANK, StopReason.ZERO):
            return None
        self.stats.problems.append(message)
        resume = _find_record(self.mm, self.base, pos + 1, self.chunk.end)
        gap_end = resume if resume is not None else _nonzero_end(self.mm, pos, self.chunk.end)
        self.stats.skipped_bytes += max(gap_end - pos, 0)
        return resume


def scan_chunk(
    chunk: Chunk,
    *,
    include_body: bool = False,
    check_crc: bool = True,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    stats_out: list[ChunkStats] | None = None,
    columns: frozenset[str] | None = None,
) -> Iterator[pa.RecordBatch]:
    """Yield Arrow batches of the records starting in ``chunk``.

    Args:
        chunk: from ``plan_chunks``.
        include_body: add the ``body`` column.
        check_crc: fill ``bodyCrcOk`` (else null).
        batch_rows: rows per batch at most.
        stats_out: receives the chunk's ``ChunkStats`` once the walk is over.
        columns: only these columns (None: all), the others not even decoded.
    """
    if chunk.file.size == 0:
        if stats_out is not None:
            stats_out.append(ChunkStats(chunk.file.broker, chunk.file.path, 0, 0))
        return
    with (
        open(chunk.file.path, "rb") as fh,
        mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm,
    ):
        reader = _ChunkReader(mm, chunk, include_body, check_crc, columns)
        yield from reader.batches(batch_rows)
        if stats_out is not None:
            stats_out.append(reader.stats)
