"""Cleanup: CommitLog file expiry, the ConsumeQueue and index files that follow it,
and the disk guard that refuses writes on a full disk.

Owns: RocketMQ 4.9.8's ``CleanCommitLogService``, ``CleanConsumeQueueService`` and
the disk check (``isSpaceFull``) of ``DefaultMessageStore`` (specs/store.md §10):
when a pass runs, which files go, the pauses between deletions, the store's
*writable* flag (disk full or not), and the counters a metrics exporter reads.

Must not: delete, stat or measure anything on the event loop (``*_blocking``
functions run in the executor, take their inputs as arguments and return
results), read the wall clock other than through the injected ``Clock``, decide
put statuses (the MessageStore turns ``on_writable_changed(False)`` into
SERVICE_NOT_AVAILABLE and keeps serving reads), or touch files of the last
(current) CommitLog file, ConsumeQueue file or IndexFile.

One pass (every ``cleanResourceInterval``, 10 s; the first after
``initial_delay_s``, 60 s in RocketMQ)::

    CommitLog   runs if  the local hour is in deleteWhen ("04", "04;05")
                      or a disk is above diskMaxUsedSpaceRatio (75 %) or unmeasurable
                      or a manual delete is pending (trigger_delete: 20 passes)
                deletes  the oldest files, never the last, at most 10 per pass,
                         pausing deleteCommitLogFilesInterval between two, stopping
                         at the first file younger than fileReservedTime hours;
                         any age goes when cleanImmediately (a disk above
                         diskSpaceCleanForciblyRatio, 0.85) and cleanFileForciblyEnable
    ConsumeQueue runs if the CommitLog min offset rose since the last such pass
                deletes  per queue, the oldest files whose last unit points below
                         it (never the last file), corrects the queue's min offset,
                         pauses deleteConsumeQueueFilesInterval after each queue
                         that lost files; then IndexFiles whose endPhyOffset is
                         below it (never the last)

Disk guard. Usage is RocketMQ's ``used / (used + usable)`` rounded up to a whole
percent, for the CommitLog and the ConsumeQueue directories. Above
``diskSpaceWarningLevelRatio`` (0.90) on either, the disk is *full*: the store
stops accepting writes (``on_writable_changed(False)``, one ERROR line) until a
later check sees both below it (``on_writable_changed(True)``, one INFO line). The
check runs in every pass and on its own every 10 s (``disk_check_interval_s``).

Held files. A deleted file is detached from its queue (``MappedFile.shutdown``)
and its path unlinked in the executor; a reader holding a ``SelectedBuffer`` keeps
the mapping, and its bytes, until it releases it (see ``mapped_file``). So there
is no "hanged" file to force-unmap later: RocketMQ's ``destroyMapedFileIntervalForcibly``
and ``redeleteHangedFileInterval`` have nothing to do here.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import math
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from aiorocketmq.common.clock import Clock
from aiorocketmq.runtime.executor import BlockingExecutor
from aiorocketmq.runtime.lifecycle import Periodic, Service
from aiorocketmq.store.commit_log import CommitLog
from aiorocketmq.store.config import MessageStoreConfig
from aiorocketmq.store.consume_queue_table import ConsumeQueueTable
from aiorocketmq.store.index_service import IndexService
from aiorocketmq.store.mapped_file import delete_files_blocking
from aiorocketmq.store.mapped_file_queue import DELETE_FILES_BATCH_MAX

__all__ = [
    "MAX_MANUAL_DELETE_FILE_TIMES",
    "CleanupService",
    "CleanupStats",
    "DiskReading",
    "DiskVerdict",
    "disk_free_bytes_blocking",
    "disk_used_ratio_blocking",
    "is_time_to_delete",
    "judge_disk",
    "measure_disks_blocking",
    "parse_delete_when",
]

log = logging.getLogger(__name__)

MAX_MANUAL_DELETE_FILE_TIMES: Final = 20
"""Passes a manual delete keeps forcing a CommitLog run (``executeDeleteFilesManually``;
4.9.8's admin request is DELETE_EXPIRED_COMMITLOG, code 329: TRIGGER_DELETE_FILES,
code 27, is declared but no processor handles it)."""

_HOUR_MS: Final = 3_600_000
_UNMEASURED: Final = -1.0  # RocketMQ's value for "could not measure": counts as full


# -- pure decisions ------------------------------------------------------------------------


_FULL_CHECK_S: Final = 1.0


def parse_delete_when(value: str) -> frozenset[int]:
    """The hours of ``deleteWhen`` (``"04"``, ``"04;05"``) as ints.

    Empty segments are skipped (Java's ``split`` drops trailing ones); surrounding
    blanks are allowed.

    Raises:
        ValueError: a segment is not an hour 0..23 (RocketMQ would throw from
            ``Integer.parseInt`` on every pass, or silently never match 24+).
    """
    hours = set()
    for raw in value.split(";"):
        part = raw.strip()
        if not part:
            continue
        if not (part.isascii() and part.isdigit()) or not 0 <= int(part) <= 23:
            raise ValueError(f"deleteWhen {value!r}: {part!r} is not an hour 0..23")
        hours.add(int(part))
    return frozenset(hours)


def is_time_to_delete(hours: frozenset[int], now_ms: int) -> bool:
    """True when the *local* hour of ``now_ms`` is one of ``hours`` (``isItTimeToDo``)."""
    return time.localtime(now_ms / 1000).tm_hour in hours


@dataclass(slots=True, frozen=True)
class DiskReading:
    """One measured directory.

    Attributes:
        path: the directory (CommitLog or ConsumeQueue).
        ratio: used share 0..1, rounded up to whole percent; -1 if unmeasurable.
        error: why it could not be measured.
    """

    path: Path
    ratio: float
    error: str | None = None


@dataclass(slots=True, frozen=True)
class DiskVerdict:
    """What the readings mean for the store.

    Attributes:
        full: above the warning level: refuse writes.
        clean_immediately: above the clean-forcibly level: delete files of any age.
        space_to_delete: above ``diskMaxUsedSpaceRatio`` or unmeasurable: run a
            CommitLog pass whatever the hour.
    """

    full: bool
    clean_immediately: bool
    space_to_delete: bool


def judge_disk(ratios: Sequence[float], config: MessageStoreConfig) -> DiskVerdict:
    """Apply RocketMQ's three thresholds to the measured ratios (all strict ``>``).

    A -1 (unmeasurable) reading asks for a pass but neither marks the disk full
    nor forces early deletion, as in RocketMQ.
    """
    max_used = config.disk_max_used_space_ratio / 100.0
    return DiskVerdict(
        full=any(r > config.disk_space_warning_level_ratio for r in ratios),
        clean_immediately=any(r > config.disk_space_clean_forcibly_ratio for r in ratios),
        space_to_delete=any(r < 0 or r > max_used for r in ratios),
    )


# -- blocking measurements (executor) -------------------------------------------------------


def disk_used_ratio_blocking(path: Path) -> float:
    """Used share of the file system holding ``path`` (``getDiskPartitionSpaceUsedPercent``).

    ``used / (used + usable)``, where *used* counts blocks reserved for root and
    *usable* is what an unprivileged writer may still use, rounded up to a whole
    percent: a disk that is 90.2 % used reads 0.91. A directory that does not exist
    yet is measured on its nearest existing parent (RocketMQ answers -1).

    Raises:
        OSError: the file system cannot be queried.
    """
    probe = path
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    usage = shutil.disk_usage(probe)  # used = total - f_bfree; free = f_bavail
    entire = usage.used + usage.free
    if usage.total <= 0 or entire <= 0:
        return _UNMEASURED
    return math.ceil(usage.used * 100 / entire) / 100.0


def disk_free_bytes_blocking(path: Path) -> int:
    """Bytes an unprivileged writer can still allocate on ``path``'s file system."""
    probe = path
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    return shutil.disk_usage(probe).free


def _free_or_unknown(disk_free: Callable[[Path], int], path: Path) -> int:
    try:
        return int(disk_free(path))
    except Exception:  # unmeasurable: the ratios alone decide (as a failed ratio reads -1)
        return -1


def measure_disks_blocking(
    disk_usage: Callable[[Path], float], paths: Sequence[Path]
) -> tuple[DiskReading, ...]:
    """Measure every path with ``disk_usage``; a failure reads -1 with its reason."""
    readings = []
    for path in paths:
        try:
            readings.append(DiskReading(path, float(disk_usage(path))))
        except Exception as exc:  # RocketMQ: any failure is -1, which asks for a pass
            readings.append(DiskReading(path, _UNMEASURED, f"{type(exc).__name__}: {exc}"))
    return tuple(readings)


# -- the service ---------------------------------------------------------------------------


@dataclass(slots=True, frozen=True)
class CleanupStats:
    """Counters for metrics; a snapshot (``CleanupService.stats``).

    Attributes:
        commit_log_files_deleted: CommitLog files deleted since start.
        consume_queue_files_deleted: ConsumeQueue files deleted since start.
        index_files_deleted: IndexFiles deleted since start.
        passes: clean passes completed.
        failed_passes: clean passes that raised (logged by the periodic job).
        last_run_ms: wall time (the injected clock) the last pass ended; 0 never.
        writable: False while the disk is full.
        disk_full_transitions: times ``writable`` changed.
        commit_log_disk_ratio: last reading of the CommitLog directory (-1: none).
        consume_queue_disk_ratio: last reading of the ConsumeQueue directory.
        index_disk_ratio: last reading of the index directory (reported, not judged,
            as RocketMQ's ``diskUtil``).
        clean_immediately: the last pass deleted regardless of file age.
        manual_deletes_pending: passes a ``trigger_delete`` still forces.
    """

    commit_log_files_deleted: int
    consume_queue_files_deleted: int
    index_files_deleted: int
    passes: int
    failed_passes: int
    last_run_ms: int
    writable: bool
    disk_full_transitions: int
    commit_log_disk_ratio: float
    consume_queue_disk_ratio: float
    index_disk_ratio: float
    clean_immediately: bool
    manual_deletes_pending: int


class CleanupService(Service):
    """File expiry and the disk guard of one store; see the module docstring.

    Args:
        config: cleanup settings (``fileReservedTime``, ``deleteWhen``, ratios,
            intervals) and the directories to measure.
        commit_log: its files expire by age.
        cq_table: its files follow the CommitLog's min offset.
        index_service: its files follow the CommitLog's min offset.
        executor: where deletions and disk measurements run. RocketMQ runs them on
            a scheduler thread of their own; a dedicated executor keeps an unlink
            of a 1 GiB file from delaying a flush.
        clock: ``now_ms`` for file ages, ``deleteWhen`` and ``last_run_ms``.
        disk_usage: used share 0..1 of the file system of a path, called in the
            executor; default ``disk_used_ratio_blocking``. Tests inject one.
        on_writable_changed: called on the loop with False when the disk becomes
            full and True when it is no longer; exceptions propagate to the caller
            of the check (the periodic job logs them).
        initial_delay_s: seconds before the first pass (RocketMQ: 60).
        disk_check_interval_s: seconds between stand-alone disk checks (10).
        disk_check_initial_delay_s: seconds before the first one (RocketMQ: 1).

    Attributes:
        on_forced_delete: called on the loop after CommitLog files were deleted early
            for a full disk, once the queues' first offsets follow (the broker counts
            what consumer groups lost).

    Raises:
        ValueError: ``deleteWhen`` is malformed (see ``parse_delete_when``).
    """

    def __init__(  # noqa: PLR0917 - the store's components, positionally, as agreed
        self,
        config: MessageStoreConfig,
        commit_log: CommitLog,
        cq_table: ConsumeQueueTable,
        index_service: IndexService,
        executor: BlockingExecutor,
        clock: Clock,
        *,
        disk_usage: Callable[[Path], float] = disk_used_ratio_blocking,
        disk_free: Callable[[Path], int] = disk_free_bytes_blocking,
        on_writable_changed: Callable[[bool], None] | None = None,
        initial_delay_s: float = 60.0,
        disk_check_interval_s: float = 10.0,
        disk_check_initial_delay_s: float = 1.0,
    ) -> None:
        super().__init__("store-cleanup")
        self._config = config
        self._commit_log = commit_log
        self._cq_table = cq_table
        self._index_service = index_service
        self._executor = executor
        self._clock = clock
        self._disk_usage = disk_usage
        self._disk_free = disk_free
        self._low_space = False
        # Room the next CommitLog and ConsumeQueue files take (both are fallocated).
        self._next_files_bytes = (
            config.mapped_file_size_commit_log + config.mapped_file_size_consume_queue
        )
        self._on_writable_changed = on_writable_changed
        self._initial_delay_s = initial_delay_s
        self._disk_check_interval_s = disk_check_interval_s
        self._disk_check_initial_delay_s = disk_check_initial_delay_s
        self._delete_hours = parse_delete_when(config.delete_when)
        self._disk_paths = (config.commit_log_dir, config.consume_queue_dir)
        self._measured_paths = (*self._disk_paths, config.index_dir)
        self._pass_lock = asyncio.Lock()
        # The clean pass and the disk job both measure; one at a time, so a measurement
        # held up in a thread never lands after a newer one with its stale verdict.
        self._disk_lock = asyncio.Lock()
        self._clean_job: Periodic | None = None
        self._disk_job: Periodic | None = None
        # decisions and counters: touched on the loop only
        self._manual_deletes = 0
        self._last_physical_min_offset = 0
        self._writable = True
        self._clean_immediately = False
        self._readings: tuple[DiskReading, ...] = ()
        self.on_forced_delete: Callable[[], None] | None = None
        self._unmeasured_logged = False
        self._stuck_logged = False
        self._deleted = {"commit_log": 0, "consume_queue": 0, "index": 0}
        self._passes = 0
        self._transitions = 0
        self._last_run_ms = 0

    # -- lifecycle -------------------------------------------------------------------

    async def on_start(self) -> None:
        """Schedule the clean pass and the stand-alone disk check."""
        interval_s = max(self._config.clean_resource_interval, 1) / 1000
        self._clean_job = self.periodic(
            interval_s, self.clean_once, name="clean-files", initial_delay_s=self._initial_delay_s
        )
        self._disk_job = self.periodic(
            self._disk_check_interval_s,
            self.check_disk,
            name="disk-check",
            initial_delay_s=self._disk_check_initial_delay_s,
        )

    # -- state -----------------------------------------------------------------------

    @property
    def writable(self) -> bool:
        """False while a disk is above ``diskSpaceWarningLevelRatio``."""
        return self._writable

    @property
    def stats(self) -> CleanupStats:
        """A snapshot of the counters."""
        ratios = {r.path: r.ratio for r in self._readings}
        job = self._clean_job
        return CleanupStats(
            commit_log_files_deleted=self._deleted["commit_log"],
            consume_queue_files_deleted=self._deleted["consume_queue"],
            index_files_deleted=self._deleted["index"],
            passes=self._passes,
            failed_passes=job.failures if job is not None else 0,
            last_run_ms=self._last_run_ms,
            writable=self._writable,
            disk_full_transitions=self._transitions,
            commit_log_disk_ratio=ratios.get(self._disk_paths[0], _UNMEASURED),
            consume_queue_disk_ratio=ratios.get(self._disk_paths[1], _UNMEASURED),
            index_disk_ratio=ratios.get(self._measured_paths[2], _UNMEASURED),
            clean_immediately=self._clean_immediately,
            manual_deletes_pending=self._manual_deletes,
        )

    # -- triggers --------------------------------------------------------------------

    def trigger_delete(self) -> None:
        """Run the CommitLog pass on the next 20 passes whatever the hour, the first
        one now (``executeDeleteFilesManually``).

        Only files past ``fileReservedTime`` go, unless the disk also asks for
        early deletion: this is RocketMQ's meaning of a manual delete.
        """
        self._manual_deletes = MAX_MANUAL_DELETE_FILE_TIMES
        log.info("manual delete of expired files requested")
        if self._clean_job is not None:
            self._clean_job.wakeup()

    async def check_disk(self) -> DiskVerdict:
        """Measure both directories in the executor and apply the verdict (``isSpaceFull``).

        Returns:
            The verdict; ``writable`` and the callback follow ``verdict.full``.
        """
        async with self._disk_lock:
            readings = await self._executor.run(
                measure_disks_blocking, self._disk_usage, self._measured_paths
            )
            free = await self._executor.run(_free_or_unknown, self._disk_free, self._disk_paths[0])
            self._readings = readings
            judged = readings[: len(self._disk_paths)]
            self._log_unmeasured(judged)
            verdict = judge_disk([r.ratio for r in judged], self._config)
            verdict = self._refuse_when_low(free, verdict)
            self._set_writable(not verdict.full, judged)
            return verdict

    def _refuse_when_low(self, free: int, verdict: DiskVerdict) -> DiskVerdict:
        """Full as well when the next CommitLog and ConsumeQueue files cannot be made."""
        low = 0 <= free < self._next_files_bytes
        if low != self._low_space:
            self._low_space = low
            if low:
                log.warning(
                    "%d bytes free for the CommitLog, less than the next CommitLog and "
                    "ConsumeQueue files take (%d): refusing writes", free, self._next_files_bytes,
                )  # fmt: skip
        if low and not verdict.full:
            # Below the ratios, yet the next file cannot be made: refuse now, cleanly.
            return dataclasses.replace(verdict, full=True)
        return verdict

    async def clean_once(self) -> None:
        """One pass: CommitLog files, then ConsumeQueue and index files.

        Concurrent calls run one after the other.
        """
        async with self._pass_lock:
            await self._clean_commit_log()
            await self._clean_logic_files()
            self._passes += 1
            self._last_run_ms = self._clock.now_ms()

    # -- CleanCommitLogService ---------------------------------------------------------

    async def _clean_commit_log(self) -> int:
        """``deleteExpiredFiles``: decide whether to run, then delete; files deleted."""
        time_up = is_time_to_delete(self._delete_hours, self._clock.now_ms())
        verdict = await self.check_disk()  # isSpaceToDelete
        self._clean_immediately = verdict.clean_immediately
        manual = self._manual_deletes > 0
        if not (time_up or verdict.space_to_delete or manual):
            return 0
        if manual:
            self._manual_deletes -= 1
        forcibly = self._config.clean_file_forcibly_enable and verdict.clean_immediately
        log.info(
            "deleting CommitLog files older than %d h: time_up=%s space_full=%s "
            "manual_passes_left=%d clean_at_once=%s",
            self._config.file_reserved_time, time_up, verdict.space_to_delete,
            self._manual_deletes, forcibly,
        )  # fmt: skip
        deleted = await self._delete_commit_log_files(forcibly)
        if deleted and forcibly and self.on_forced_delete is not None:
            # Queues' first offsets follow the new CommitLog start before anyone counts.
            self._cq_table.correct_min_offsets(self._commit_log.min_offset)
            self.on_forced_delete()
        if deleted == 0 and verdict.space_to_delete:
            if not self._stuck_logged:
                log.warning("disk space will be full soon, but no CommitLog file could be deleted")
            self._stuck_logged = True
        elif deleted:
            self._stuck_logged = False
        return deleted

    async def _delete_commit_log_files(self, clean_immediately: bool) -> int:
        """``deleteExpiredFileByTime``: oldest first, never the last, at most a batch.

        One file at a time: detach it (readers holding it keep its mapping), unlink
        it in the executor, pause, then look at the next with a fresh clock.
        """
        queue = self._commit_log.queue
        reserved_ms = self._config.file_reserved_time * _HOUR_MS
        deleted = 0
        while deleted < DELETE_FILES_BATCH_MAX and not self.stopping.is_set():
            picked = queue.pick_expired_by_time(
                self._clock.now_ms(), reserved_ms, clean_immediately=clean_immediately, max_files=1
            )
            if not picked:
                break
            queue.detach(picked)
            await self._executor.run(delete_files_blocking, picked)
            deleted += 1
            self._deleted["commit_log"] += 1
            log.info(
                "deleted CommitLog file %s (last modified %d ms)",
                picked[0].path, picked[0].last_modified_ms,
            )  # fmt: skip
            if deleted < DELETE_FILES_BATCH_MAX and len(queue) > 1:
                await self._pause(self._config.delete_commit_log_files_interval)
        return deleted

    # -- CleanConsumeQueueService ------------------------------------------------------

    async def _clean_logic_files(self) -> tuple[int, int]:
        """Delete ConsumeQueue and index files wholly below the CommitLog's min offset.

        Runs only when that offset rose since the last time it ran. Each queue's
        min offset is corrected as its files are picked (``ConsumeQueue.pick_expired``).

        Returns:
            (ConsumeQueue files, IndexFiles) deleted.
        """
        min_offset = self._commit_log.min_offset
        if min_offset <= self._last_physical_min_offset:
            return 0, 0
        self._last_physical_min_offset = min_offset
        cq_deleted = 0
        for queue in self._cq_table:
            if self.stopping.is_set():
                break
            expired = queue.pick_expired(min_offset)
            if not expired:
                continue
            await self._executor.run(delete_files_blocking, expired)
            cq_deleted += len(expired)
            self._deleted["consume_queue"] += len(expired)
            log.info(
                "deleted %d ConsumeQueue file(s) of %s-%s below physical offset %d",
                len(expired), queue.topic, queue.queue_id, min_offset,
            )  # fmt: skip
            await self._pause(self._config.delete_consume_queue_files_interval)
        index_deleted = await self._index_service.delete_expired(min_offset)
        self._deleted["index"] += index_deleted
        if index_deleted:
            log.info("deleted %d IndexFile(s) below physical offset %d", index_deleted, min_offset)
        return cq_deleted, index_deleted

    # -- helpers ---------------------------------------------------------------------

    async def _pause(self, interval_ms: int) -> None:
        """Wait ``interval_ms`` between deletions; shutdown cuts it short."""
        if interval_ms <= 0:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(interval_ms / 1000):
                await self.stopping.wait()

    def request_disk_check(self) -> None:
        """Measure now rather than at the next tick (a put just met a full disk)."""
        if self._disk_job is not None:
            self._disk_job.wakeup()

    def _set_writable(self, writable: bool, readings: Sequence[DiskReading]) -> None:
        """Record the disk state; on a change log one line and call back."""
        if writable == self._writable:
            return
        self._writable = writable
        if self._disk_job is not None:
            # While full, look every second: writes resume soon after space is freed.
            full_s = min(self._disk_check_interval_s, _FULL_CHECK_S)
            self._disk_job.interval_s = self._disk_check_interval_s if writable else full_s
        self._transitions += 1
        usage = ", ".join(f"{r.path}={r.ratio:.2f}" for r in readings)
        if writable:
            log.info("disk space OK again (%s): accepting writes", usage)
        else:
            log.error(
                "disk full, above %.2f (%s): refusing writes, still serving reads",
                self._config.disk_space_warning_level_ratio, usage,
            )  # fmt: skip
        if self._on_writable_changed is not None:
            self._on_writable_changed(writable)

    def _log_unmeasured(self, readings: Sequence[DiskReading]) -> None:
        """Warn once per streak of unmeasurable readings (each pass would repeat it)."""
        failed = [r for r in readings if r.error is not None]
        if failed and not self._unmeasured_logged:
            for reading in failed:
                log.warning("cannot measure disk usage of %s: %s", reading.path, reading.error)
        elif not failed and self._unmeasured_logged:
            log.info("disk usage measurable again")
        self._unmeasured_logged = bool(failed)
