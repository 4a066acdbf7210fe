"""Crash recovery: decide where the CommitLog's valid data ends, and cut the rest.

Owns: the load-phase decision of RocketMQ's ``recoverNormally`` /
``recoverAbnormally`` (``specs/store.md`` §7.3-§7.5), written as a table, and the
``RecoveryReport`` that says what was kept and what was lost.

Must not: run while serving (everything here is ``_blocking`` and runs before the
store starts), dispatch records itself (the store's start-time reput does, from
``RecoveryReport.redispatch_from``; ConsumeQueue and index puts skip what exists), or
fail silently: every cut is in the report, and the store logs it.

Decision table ("exit" = whether the ``abort`` file was absent at load):

* no CommitLog files -> destroy every ConsumeQueue, offsets start at 0.
  Why: nothing they point at exists.
* clean exit -> scan from the third-from-last file.
  Why: only the tail can be unflushed.
* crash -> scan from the newest file whose first record was stored at or before
  ``checkpoint.min_timestamp()`` (the index-safe variant with messageIndexSafe),
  or from the first file if none qualifies.
  Why: the checkpoint says everything stored before then reached the queues.
* valid record (magic, sizes and, with checkCRCOnRecover, body CRC agree) -> keep.
* BLANK record -> continue in the next file; with none, the data ends at the BLANK.
* TOTALSIZE 0, or the file ends after a record -> the valid data ends here.
  Why: the unwritten part of a preallocated file.
* torn or corrupt record -> the data ends here; the bytes after it are LOST:
  zeroed, later files deleted, the amount reported.
  Why: RocketMQ trusts the CommitLog up to the last record that parses (§7.4).
* ConsumeQueue units at or past the end -> dropped, per queue.
* checkpoint ahead of or behind the data -> no special case: the scan decides
  where data ends; the checkpoint only picks where a crash scan starts.
* after a crash -> the reput starts at the first scanned record stored after the
  checkpoint's time, not at the queues' max, nor (as RocketMQ) at the scan start.
  Why: one queue may lag another after a crash, and re-putting is idempotent; but
  the checkpoint vouches for every record stored before its time, inside the file as
  much as at its start, so a crash replays seconds of traffic, not a whole file.

Zeroing the cut-off garbage goes beyond RocketMQ, which leaves it in place: a later
append that ended exactly at an old record boundary could otherwise bring stale
records back to life at the next recovery.
"""

from __future__ import annotations

import logging
import struct
from dataclasses import dataclass, field

import numpy as np

from aiorocketmq.common.constants import MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2
from aiorocketmq.common.message_codec import MIN_RECORD_SIZE, RecordScanner
from aiorocketmq.common.record_view import StopReason
from aiorocketmq.store.checkpoint import StoreCheckpoint
from aiorocketmq.store.commit_log import CommitLog
from aiorocketmq.store.config import MessageStoreConfig
from aiorocketmq.store.consume_queue_table import ConsumeQueueTable
from aiorocketmq.store.mapped_file import MappedFile
from aiorocketmq.store.page_ops import msync

log = logging.getLogger(__name__)

#: RocketMQ rescans the last three files after a clean exit.
NORMAL_RECOVERY_FILES = 3
#: Store timestamp of a record sits at byte 56 with an IPv4 born host (68 with IPv6).
_FIRST_RECORD = struct.Struct(">ii")
_SYSFLAG_AT = 36
_BORN_V6 = 0x10
_ZERO_SCAN_CHUNK = 1 << 22
_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")
_STAMP_AT, _STAMP_AT_V6 = 56, 68  # STORETIMESTAMP with an IPv4 / IPv6 born host
_MAGICS = (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2)


@dataclass(slots=True)
class RecoveryReport:
    """What recovery kept and cut.

    Attributes:
        last_exit_ok: the abort file was absent (clean shutdown).
        scan_start_offset: CommitLog offset the scan began at.
        commit_log_end_offset: ``processOffset``: every byte below it is valid data.
        lost_bytes: non-zero bytes found after the end and removed (torn or corrupt
            tail, and any later files).
        stop_reason: why the scan stopped (``StopReason`` value, or ``"no-files"``).
        stop_detail: the decoder's message for an unclean stop.
        records_scanned: valid records seen by the scan.
        truncated_queues: ``"topic-queueId"`` of queues that lost units.
        consume_queue_max_physical_offset: largest ConsumeQueue end after trimming.
        redispatch_from: where the start-time reput must begin.
        first_unchecked_offset: after a crash, the first scanned record stored after
            the checkpoint's time (-1: none, or a clean exit).
        deleted_files: CommitLog files removed because they lay after the end.
    """

    last_exit_ok: bool
    scan_start_offset: int = 0
    commit_log_end_offset: int = 0
    lost_bytes: int = 0
    stop_reason: str = "no-files"
    stop_detail: str = ""
    records_scanned: int = 0
    truncated_queues: list[str] = field(default_factory=list)
    consume_queue_max_physical_offset: int = -1
    redispatch_from: int = 0
    deleted_files: list[str] = field(default_factory=list)
    first_unchecked_offset: int = -1

    @property
    def clean(self) -> bool:
        """True when nothing was cut."""
        return self.lost_bytes == 0 and not self.truncated_queues and not self.deleted_files

    def log_line(self) -> str:
        """One INFO line for the store's log."""
        mode = "normal" if self.last_exit_ok else "abnormal"
        return (
            f"recovery mode={mode} scan_start={self.scan_start_offset} "
            f"end={self.commit_log_end_offset} records={self.records_scanned} "
            f"stop={self.stop_reason} lost_bytes={self.lost_bytes} "
            f"deleted_files={len(self.deleted_files)} "
            f"truncated_queues={len(self.truncated_queues)} "
            f"redispatch_from={self.redispatch_from}"
            + (f" detail={self.stop_detail!r}" if self.stop_detail else "")
        )


def recover_blocking(
    config: MessageStoreConfig,
    commit_log: CommitLog,
    cq_table: ConsumeQueueTable,
    checkpoint: StoreCheckpoint,
    *,
    last_exit_ok: bool,
) -> RecoveryReport:
    """Recover the loaded CommitLog and ConsumeQueues (load phase, blocking).

    Call after loading the CommitLog, the ConsumeQueues, the checkpoint and the index.
    Afterwards the CommitLog and ConsumeQueues end at valid data, the CommitLog's
    ``topic_queue_table`` is rebuilt, and ``redispatch_from`` says where the reput
    starts; after that reput the store rebuilds the offset table once more (§7.5).
    """
    report = RecoveryReport(last_exit_ok=last_exit_ok)
    cq_table.recover_blocking()
    # Queues as their own files say (loaded files count as full until recovered).
    before = cq_table.queue_offsets()
    files = commit_log.queue.files
    if not files:
        cq_table.destroy_blocking()
        commit_log.queue.flushed_where = commit_log.queue.committed_where = 0
        commit_log.topic_queue_table = {}
        report.truncated_queues = sorted(k for k, v in before.items() if v > 0)
        return report
    limit = -1
    if last_exit_ok:
        start = _normal_start(files)
    else:
        limit = _checkpoint_limit(config, checkpoint)
        start = _abnormal_start(files, limit)
    report.scan_start_offset = files[start].file_from_offset
    _scan(files, start, config.check_crc_on_recover, report, limit)
    _cut_commit_log(commit_log, report)
    _trim_consume_queues(cq_table, report, before)
    commit_log.topic_queue_table = cq_table.queue_offsets()
    cq_table.correct_min_offsets(commit_log.min_offset)
    report.redispatch_from = _redispatch_from(commit_log, report)
    return report


def _normal_start(files: list[MappedFile]) -> int:
    return max(0, len(files) - NORMAL_RECOVERY_FILES)


def _checkpoint_limit(config: MessageStoreConfig, checkpoint: StoreCheckpoint) -> int:
    """The store time up to which the checkpoint vouches that records reached the
    ConsumeQueues and the index durably.

    RocketMQ counts the index only with messageIndexSafe, because its index time moves
    only when a file fills (a minute or a day apart); ours moves with every checkpoint,
    so counting it costs a second of replay and loses no key."""
    if config.message_index_enable:
        return checkpoint.min_timestamp_index()
    return checkpoint.min_timestamp()


def _abnormal_start(files: list[MappedFile], limit: int) -> int:
    # The newest file whose first record the checkpoint vouches for.
    for index in range(len(files) - 1, -1, -1):
        stamp = _first_store_timestamp(files[index])
        if stamp is not None and stamp != 0 and stamp <= limit:
            log.info("recover abnormally from file=%s store_time=%s", files[index].path, stamp)
            return index
    return 0


def _first_store_timestamp(mapped: MappedFile) -> int | None:
    buf = mapped.buffer
    if mapped.file_size < 72:
        return None
    _size, magic = _FIRST_RECORD.unpack_from(buf, 0)
    if magic != MESSAGE_MAGIC_CODE:
        return None
    (sys_flag,) = _INT.unpack_from(buf, _SYSFLAG_AT)
    (stamp,) = _LONG.unpack_from(buf, _STAMP_AT_V6 if sys_flag & _BORN_V6 else _STAMP_AT)
    return int(stamp)


def _scan(
    files: list[MappedFile], start: int, check_crc: bool, report: RecoveryReport, limit: int
) -> None:
    for index in range(start, len(files)):
        mapped = files[index]
        if limit >= 0 and report.first_unchecked_offset < 0:
            scanner = _skip_checkpointed(mapped, check_crc, limit, report)
        else:
            scanner = RecordScanner(mapped.buffer, 0, mapped.file_size, check_crc=check_crc)
        report.records_scanned += sum(1 for _ in scanner)
        stop = scanner.stop
        assert stop is not None
        report.commit_log_end_offset = mapped.file_from_offset + stop.offset
        report.stop_reason = stop.reason.value
        report.stop_detail = stop.message if not stop.clean else ""
        if stop.reason is StopReason.BLANK and index + 1 < len(files):
            # The rest of this file is filler: the data goes on in the next file.
            report.commit_log_end_offset = files[index + 1].file_from_offset
            continue
        if stop.reason is StopReason.END and index + 1 < len(files):
            continue
        return


def _skip_checkpointed(
    mapped: MappedFile, check_crc: bool, limit: int, report: RecoveryReport
) -> RecordScanner:
    """Walk the records the checkpoint vouches for by their sizes alone; return a
    scanner (with CRC as configured) from the first record stored after ``limit``.

    Those records were flushed before the checkpoint was written: no torn write can
    hide among them, so neither their CRC nor their inner lengths are worth checking
    (the walk reads three fields a record instead of decoding it, most of the scan).
    Anything but a plain record (a BLANK, the written end, damage) hands over to the
    full scanner there, which says what it is.
    """
    buf, size, pos = mapped.buffer, mapped.file_size, 0
    head, flag, stamp = _FIRST_RECORD.unpack_from, _INT.unpack_from, _LONG.unpack_from
    while pos + MIN_RECORD_SIZE <= size:
        total, magic = head(buf, pos)
        if magic not in _MAGICS or not MIN_RECORD_SIZE <= total <= size - pos:
            break
        born_v6 = flag(buf, pos + _SYSFLAG_AT)[0] & _BORN_V6
        if stamp(buf, pos + (_STAMP_AT_V6 if born_v6 else _STAMP_AT))[0] > limit:
            report.first_unchecked_offset = mapped.file_from_offset + pos
            break
        report.records_scanned += 1
        pos += total
    return RecordScanner(buf, pos, size, check_crc=check_crc)


def _cut_commit_log(commit_log: CommitLog, report: RecoveryReport) -> None:
    end = report.commit_log_end_offset
    queue = commit_log.queue
    holder = queue.find_file(end)
    if holder is not None:
        cut = end - holder.file_from_offset
        report.lost_bytes += _zero_tail_blocking(holder, cut)
    later = [f for f in queue.files if f.file_from_offset > end and f is not holder]
    for mapped in later:
        report.lost_bytes += _dirty_extent_blocking(mapped, 0)
    removed = queue.truncate_dirty_blocking(end)
    report.deleted_files = [m.file_name for m in removed]
    queue.flushed_where = queue.committed_where = end
    if report.lost_bytes:
        log.warning("recovery cut the commitlog %s", report.log_line())
    elif removed:
        log.info("recovery removed %d empty CommitLog file(s) past the data", len(removed))


def _dirty_extent_blocking(mapped: MappedFile, start: int) -> int:
    """How many bytes from ``start`` up to the last non-zero byte of the file."""
    data = np.frombuffer(mapped.buffer, dtype=np.uint8)
    last = -1
    for chunk_start in range(start, mapped.file_size, _ZERO_SCAN_CHUNK):
        nonzero = np.flatnonzero(data[chunk_start : chunk_start + _ZERO_SCAN_CHUNK])
        if nonzero.size:
            last = chunk_start + int(nonzero[-1])
    del data
    return 0 if last < start else last + 1 - start


def _zero_tail_blocking(mapped: MappedFile, cut: int) -> int:
    """Zero the garbage after ``cut`` (so it can never parse again); return its size."""
    extent = _dirty_extent_blocking(mapped, cut)
    if extent:
        mapped.buffer[cut : cut + extent] = bytes(extent)
        msync(mapped.buffer)
    return extent


def _trim_consume_queues(
    cq_table: ConsumeQueueTable, report: RecoveryReport, before: dict[str, int]
) -> None:
    end = report.commit_log_end_offset
    if cq_table.max_physic_offset() >= end:
        cq_table.truncate_dirty_blocking(end)
    after = cq_table.queue_offsets()
    report.truncated_queues = sorted(k for k, v in before.items() if after.get(k, 0) < v)
    report.consume_queue_max_physical_offset = cq_table.max_physic_offset()


def _redispatch_from(commit_log: CommitLog, report: RecoveryReport) -> int:
    # The reput resumes after the furthest ConsumeQueue unit; after a crash it goes
    # back to the first record the checkpoint does not vouch for, because queues may
    # lag one another (§7.3.2).
    start = max(report.consume_queue_max_physical_offset, commit_log.min_offset, 0)
    if not report.last_exit_ok:
        unchecked = report.first_unchecked_offset
        start = min(start, unchecked if unchecked >= 0 else report.commit_log_end_offset)
    return min(start, report.commit_log_end_offset)
