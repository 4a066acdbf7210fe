"""CleanupService: CommitLog expiry (deleteWhen, fileReservedTime, disk pressure, manual
trigger, batches), ConsumeQueue and index files following the CommitLog, the disk guard,
and files held by readers. Real small files; a ManualClock; no sleeps.

The rig: 64 KiB CommitLog files holding three 20,000-byte records each (then a BLANK),
ConsumeQueue files of three units and IndexFiles of three keys, so CommitLog file *k*,
ConsumeQueue file *k* and IndexFile *k* describe the same three records.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.common.clock import ManualClock
from aiorocketmq.runtime.executor import BlockingExecutor
from aiorocketmq.store.cleanup import (
    MAX_MANUAL_DELETE_FILE_TIMES,
    CleanupService,
    DiskVerdict,
    disk_used_ratio_blocking,
    is_time_to_delete,
    judge_disk,
    measure_disks_blocking,
    parse_delete_when,
)
from aiorocketmq.store.commit_log import AppendResult, CommitLog, queue_key
from aiorocketmq.store.config import MessageStoreConfig
from aiorocketmq.store.consume_queue import PutUnitStatus
from aiorocketmq.store.consume_queue_table import ConsumeQueueTable
from aiorocketmq.store.dispatch_request import DispatchRequest
from aiorocketmq.store.index_service import IndexService
from tests.support.wait import wait_until
from tests.unit.store.helpers import (
    SMALL_COMMIT_LOG,
    append,
    record_of_size,
    small_config,
    started_commit_log,
)

TOPIC = "TopicTest"
KEY = queue_key(TOPIC, 0)
RECORD = 20_000
PER_FILE = 3
HOUR = 3_600_000


def local_ms(day: int, hour: int, minute: int = 0) -> int:
    """Epoch ms of a *local* time in January 2031 (deleteWhen reads the local hour)."""
    return int(datetime(2031, 1, day, hour, minute).timestamp() * 1000)


STORED = local_ms(10, 3)  # records are stored at 03:00 on the 10th: not a deleteWhen hour
EXPIRED_AT_3 = local_ms(13, 3, 30)  # 72.5 h later, still 03:xx
EXPIRED_AT_4 = local_ms(13, 4, 30)  # 73.5 h later, in deleteWhen "04"


@pytest.fixture
async def executor() -> AsyncIterator[BlockingExecutor]:
    pool = BlockingExecutor("test-cleanup", 2)
    yield pool
    await pool.shutdown()


@dataclass
class Rig:
    config: MessageStoreConfig
    clock: ManualClock
    commit_log: CommitLog
    cq_table: ConsumeQueueTable
    index: IndexService
    service: CleanupService
    results: list[AppendResult]
    usage: dict[str, float] = field(default_factory=lambda: {"commitlog": 0.5, "cq": 0.5})
    events: list[bool] = field(default_factory=list)

    def files(self) -> list[str]:
        return [f.file_name for f in self.commit_log.queue.files]

    def cq_files(self, topic: str = TOPIC, queue_id: int = 0) -> list[Path]:
        return sorted((self.config.consume_queue_dir / topic / str(queue_id)).iterdir())

    def at(self, wall_ms: int) -> None:
        self.clock.advance(wall_ms - self.clock.now_ms())


def fake_usage(rig_usage: dict[str, float], config: MessageStoreConfig) -> Callable[[Path], float]:
    def measure(path: Path) -> float:
        return rig_usage["commitlog" if path == config.commit_log_dir else "cq"]

    return measure


async def index_one(index: IndexService, request: DispatchRequest) -> None:
    while not index.build_index(request):
        await index.create_file()


async def fill(rig: Rig, records: int, step_ms: int = 0) -> None:
    """Append ``records`` records, each with its ConsumeQueue unit and index key."""
    for _ in range(records):
        result = await append(rig.commit_log, record_of_size(RECORD), KEY, rig.clock.now_ms())
        rig.results.append(result)
        unit = rig.cq_table.find_or_create(TOPIC, 0).put_blocking(
            result.physical_offset, result.wrote_bytes, 0, result.queue_offset
        )
        assert unit is PutUnitStatus.OK
        request = DispatchRequest(
            topic=TOPIC,
            queue_id=0,
            commit_log_offset=result.physical_offset,
            msg_size=result.wrote_bytes,
            tags_code=0,
            store_timestamp=result.store_timestamp,
            consume_queue_offset=result.queue_offset,
            keys=f"k{result.queue_offset}",
        )
        await index_one(rig.index, request)
        rig.clock.advance(step_ms)


@pytest.fixture
async def make_rig(tmp_path: Path, executor: BlockingExecutor) -> AsyncIterator[Callable[..., Any]]:
    rigs: list[Rig] = []

    async def build(
        full_files: int = 4, step_ms: int = 0, service_kw: dict[str, Any] | None = None, **over: Any
    ) -> Rig:
        values: dict[str, Any] = {
            "mapped_file_size_consume_queue": 20 * PER_FILE,
            "max_index_num": PER_FILE + 1,  # item 0 is never used
            "delete_commit_log_files_interval": 0,
            "delete_consume_queue_files_interval": 0,
        }
        config = small_config(tmp_path, **(values | over))
        clock = ManualClock(wall_ms=STORED)
        commit_log = await started_commit_log(config, executor)
        cq_table = ConsumeQueueTable(config, executor)
        index = IndexService(config, executor, clock=clock)
        usage = {"commitlog": 0.5, "cq": 0.5}
        events: list[bool] = []
        kw: dict[str, Any] = {
            "disk_usage": fake_usage(usage, config),
            "on_writable_changed": events.append,
        }
        kw |= service_kw or {}
        service = CleanupService(config, commit_log, cq_table, index, executor, clock, **kw)
        rig = Rig(config, clock, commit_log, cq_table, index, service, [], usage, events)
        rigs.append(rig)
        await fill(rig, full_files * PER_FILE + 1, step_ms)
        assert len(rig.files()) == full_files + 1
        return rig

    yield build
    for rig in rigs:
        await rig.service.shutdown()
        await rig.index.shutdown()
        rig.index.close()
        await rig.cq_table.shutdown()
        await rig.commit_log.shutdown()


# -- pure parts --------------------------------------------------------------------------


def test_delete_when_parses_hours() -> None:
    assert parse_delete_when("04") == {4}
    assert parse_delete_when("04;05") == {4, 5}
    assert parse_delete_when(" 4 ; 23;") == {4, 23}, "blanks and a trailing ';' are fine"
    assert parse_delete_when("") == frozenset()
    for bad in ("4a", "24", "-1", "04,05"):
        with pytest.raises(ValueError, match="not an hour"):
            parse_delete_when(bad)


def test_time_to_delete_reads_the_local_hour() -> None:
    assert is_time_to_delete(frozenset({4}), local_ms(13, 4, 0))
    assert is_time_to_delete(frozenset({4}), local_ms(13, 4, 59))
    assert not is_time_to_delete(frozenset({4}), local_ms(13, 5, 0))
    assert is_time_to_delete(frozenset({3, 5}), local_ms(13, 5, 10))
    assert not is_time_to_delete(frozenset(), local_ms(13, 4))


@pytest.mark.parametrize(
    ("ratios", "verdict"),
    [
        ((0.50, 0.50), DiskVerdict(full=False, clean_immediately=False, space_to_delete=False)),
        ((0.75, 0.75), DiskVerdict(full=False, clean_immediately=False, space_to_delete=False)),
        ((0.76, 0.10), DiskVerdict(full=False, clean_immediately=False, space_to_delete=True)),
        ((0.85, 0.10), DiskVerdict(full=False, clean_immediately=False, space_to_delete=True)),
        ((0.10, 0.86), DiskVerdict(full=False, clean_immediately=True, space_to_delete=True)),
        ((0.90, 0.10), DiskVerdict(full=False, clean_immediately=True, space_to_delete=True)),
        ((0.10, 0.91), DiskVerdict(full=True, clean_immediately=True, space_to_delete=True)),
        ((-1.0, 0.10), DiskVerdict(full=False, clean_immediately=False, space_to_delete=True)),
    ],
)
def test_judge_disk_thresholds_are_strict(
    tmp_path: Path, ratios: tuple[float, float], verdict: DiskVerdict
) -> None:
    assert judge_disk(ratios, small_config(tmp_path)) == verdict


def test_max_used_ratio_is_clamped_and_scaled(tmp_path: Path) -> None:
    config = small_config(tmp_path, disk_max_used_space_ratio=5)  # clamped to 10
    assert judge_disk([0.11], config).space_to_delete
    assert not judge_disk([0.10], config).space_to_delete


def test_disk_ratio_rounds_up_to_whole_percent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = disk_used_ratio_blocking(tmp_path)
    assert 0 < real <= 1 and round(real * 100) == pytest.approx(real * 100)
    assert disk_used_ratio_blocking(tmp_path / "not" / "yet") == real, "measured on the parent"

    usage = {"total": 2000, "used": 902, "free": 98}

    def fake(path: Any) -> Any:
        return type("Usage", (), usage)()

    monkeypatch.setattr("aiorocketmq.store.cleanup.shutil.disk_usage", fake)
    assert disk_used_ratio_blocking(tmp_path) == 0.91, "90.2 % of used + usable reads 91 %"
    usage.update(used=900, free=100)
    assert disk_used_ratio_blocking(tmp_path) == 0.90
    usage.update(total=0)
    assert disk_used_ratio_blocking(tmp_path) == -1


def test_a_failed_measurement_reads_minus_one(tmp_path: Path) -> None:
    def broken(path: Path) -> float:
        raise OSError("EIO")

    (reading,) = measure_disks_blocking(broken, [tmp_path])
    assert reading.ratio == -1 and reading.error == "OSError: EIO"


# -- CommitLog expiry ------------------------------------------------------------------


async def test_expired_files_go_only_at_delete_when(make_rig: Callable[..., Any]) -> None:
    rig: Rig = await make_rig()
    names = rig.files()
    rig.at(EXPIRED_AT_3)
    await rig.service.clean_once()
    assert rig.files() == names, "expired, but 03:xx is not deleteWhen"
    rig.at(EXPIRED_AT_4)
    await rig.service.clean_once()
    assert rig.files() == names[-1:], "everything but the current file"
    assert rig.commit_log.min_offset == 4 * SMALL_COMMIT_LOG
    for name in names[:-1]:
        assert not (rig.config.commit_log_dir / name).exists()
    stats = rig.service.stats
    assert (stats.commit_log_files_deleted, stats.passes) == (4, 2)
    assert stats.last_run_ms == EXPIRED_AT_4 and stats.writable and not stats.clean_immediately


async def test_delete_when_lists_several_hours(make_rig: Callable[..., Any]) -> None:
    rig: Rig = await make_rig(delete_when="02;03")
    rig.at(EXPIRED_AT_3)
    await rig.service.clean_once()
    assert len(rig.files()) == 1


async def test_nothing_goes_before_file_reserved_time(make_rig: Callable[..., Any]) -> None:
    rig: Rig = await make_rig()
    rig.at(local_ms(12, 4, 30))  # 49.5 h after the last store: deleteWhen, but young
    await rig.service.clean_once()
    assert len(rig.files()) == 5 and rig.service.stats.commit_log_files_deleted == 0


async def test_file_reserved_time_is_configurable(make_rig: Callable[..., Any]) -> None:
    rig: Rig = await make_rig(file_reserved_time=48)  # the shipped broker.conf value
    rig.at(local_ms(12, 4, 30))
    await rig.service.clean_once()
    assert len(rig.files()) == 1


async def test_expiry_stops_at_the_first_young_file(make_rig: Callable[..., Any]) -> None:
    # One record per hour: file k was last modified at STORED + (3k + 2) h, so it
    # expires at STORED + 74, 77, 80, 83 h.
    rig: Rig = await make_rig(step_ms=HOUR, delete_when="08")
    names = rig.files()
    rig.at(local_ms(13, 8, 30))  # STORED + 77.5 h: files 0 and 1 expired, 2 not
    await rig.service.clean_once()
    assert rig.files() == names[2:]
    assert rig.service.stats.commit_log_files_deleted == 2


async def test_the_current_file_is_never_deleted(make_rig: Callable[..., Any]) -> None:
    rig: Rig = await make_rig(full_files=1, file_reserved_time=0)
    rig.usage["commitlog"] = 0.95  # forcibly, too
    for _ in range(3):
        await rig.service.clean_once()
    assert len(rig.files()) == 1 and rig.commit_log.max_offset == rig.results[-1].next_offset
    assert rig.service.stats.commit_log_files_deleted == 1


async def test_at_most_ten_files_per_pass(make_rig: Callable[..., Any]) -> None:
    rig: Rig = await make_rig(full_files=12, delete_commit_log_files_interval=1)
    rig.at(EXPIRED_AT_4)
    await rig.service.clean_once()
    assert len(rig.files()) == 3, "a batch is 10 files"
    await rig.service.clean_once()
    assert len(rig.files()) == 1
    assert rig.service.stats.commit_log_files_deleted == 12


async def test_shutdown_cuts_a_pause_between_deletions(make_rig: Callable[..., Any]) -> None:
    rig: Rig = await make_rig(delete_commit_log_files_interval=600_000)
    rig.at(EXPIRED_AT_4)
    task = asyncio.get_running_loop().create_task(rig.service.clean_once())
    await wait_until(lambda: rig.service.stats.commit_log_files_deleted == 1, what="first delete")
    await rig.service.shutdown()
    await wait_until(task.done, timeout=5, what="the pass to end without its 10-minute pause")
    assert task.exception() is None and len(rig.files()) == 4, "no further file after shutdown"


# -- disk pressure and the manual trigger ------------------------------------------------


async def test_above_max_used_ratio_only_expired_files_go(make_rig: Callable[..., Any]) -> None:
    rig: Rig = await make_rig(step_ms=HOUR)  # files expire at STORED + 74, 77, 80, 83 h
    rig.usage["commitlog"] = 0.80  # > diskMaxUsedSpaceRatio 75 %, < clean-forcibly 0.85
    rig.at(local_ms(13, 9))  # STORED + 78 h, not deleteWhen: files 0 and 1 expired
    await rig.service.clean_once()
    assert len(rig.files()) == 3 and not rig.service.stats.clean_immediately


async def test_above_clean_forcibly_ratio_any_age_goes(make_rig: Callable[..., Any]) -> None:
    rig: Rig = await make_rig()
    rig.usage["cq"] = 0.86  # the ConsumeQueue directory counts too
    await rig.service.clean_once()  # hour 3, everything young
    assert len(rig.files()) == 1
    stats = rig.service.stats
    assert stats.clean_immediately and stats.writable and stats.consume_queue_disk_ratio == 0.86


async def test_forcible_cleaning_can_be_disabled(make_rig: Callable[..., Any]) -> None:
    rig: Rig = await make_rig(clean_file_forcibly_enable=False)
    rig.usage["commitlog"] = 0.95
    await rig.service.clean_once()
    assert len(rig.files()) == 5, "a pass runs, but only for expired files"
    assert not rig.service.writable, "the disk guard does not depend on it"


async def test_unmeasurable_disk_asks_for_a_pass(
    make_rig: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    rig: Rig = await make_rig(service_kw={"disk_usage": _raising})
    rig.at(EXPIRED_AT_3)  # not deleteWhen
    with caplog.at_level(logging.WARNING, logger="aiorocketmq.store.cleanup"):
        await rig.service.clean_once()
        await rig.service.clean_once()
    assert len(rig.files()) == 1 and rig.service.writable
    warnings = [r for r in caplog.records if "cannot measure" in r.getMessage()]
    assert len(warnings) == 2, "once per directory, not once per pass"
    assert rig.service.stats.commit_log_disk_ratio == -1


def _raising(path: Path) -> float:
    raise OSError("no such device")


async def test_manual_trigger_runs_passes_off_hours(make_rig: Callable[..., Any]) -> None:
    rig: Rig = await make_rig()
    rig.at(EXPIRED_AT_3)
    await rig.service.clean_once()
    assert len(rig.files()) == 5
    rig.service.trigger_delete()  # not started: nothing to wake, the next pass runs it
    assert rig.service.stats.manual_deletes_pending == MAX_MANUAL_DELETE_FILE_TIMES
    await rig.service.clean_once()
    assert len(rig.files()) == 1
    assert rig.service.stats.manual_deletes_pending == MAX_MANUAL_DELETE_FILE_TIMES - 1


async def test_manual_trigger_keeps_young_files(make_rig: Callable[..., Any]) -> None:
    rig: Rig = await make_rig()
    rig.service.trigger_delete()
    await rig.service.clean_once()
    assert len(rig.files()) == 5, "RocketMQ's manual delete still honours fileReservedTime"


# -- ConsumeQueue and index files follow -------------------------------------------------


async def test_consume_queue_and_index_files_follow(make_rig: Callable[..., Any]) -> None:
    rig: Rig = await make_rig()
    cq_names = [p.name for p in rig.cq_files()]
    index_names = [f.file_name for f in rig.index.files]
    assert len(cq_names) == len(index_names) == 5
    rig.at(EXPIRED_AT_4)
    await rig.service.clean_once()
    assert [p.name for p in rig.cq_files()] == cq_names[-1:]
    assert [f.file_name for f in rig.index.files] == index_names[-1:]
    assert sorted(p.name for p in rig.config.index_dir.iterdir()) == index_names[-1:]
    queue = rig.cq_table.get(TOPIC, 0)
    assert queue is not None and (queue.min_offset, queue.max_offset) == (12, 13)
    stats = rig.service.stats
    assert (stats.consume_queue_files_deleted, stats.index_files_deleted) == (4, 4)
    found = rig.index.query_offset(TOPIC, "k12", 5, 0, 2**62).phy_offsets
    assert found == [rig.results[12].physical_offset], "the kept file still answers"


async def test_min_offset_is_corrected_inside_a_kept_file(make_rig: Callable[..., Any]) -> None:
    rig: Rig = await make_rig()
    min_after = 4 * SMALL_COMMIT_LOG
    # TopicC-0: its first (full) file points below, below, above the new min offset.
    queue = rig.cq_table.find_or_create("TopicC", 0)
    for q, physical in enumerate((0, 100, min_after, min_after + 100)):
        assert queue.put_blocking(physical, 100, 0, q) is PutUnitStatus.OK
    rig.at(EXPIRED_AT_4)
    await rig.service.clean_once()
    assert len(rig.cq_files("TopicC")) == 2, "its last unit is above: the file stays"
    assert queue.min_offset == 2


async def test_logic_files_are_checked_only_when_min_offset_rises(
    make_rig: Callable[..., Any],
) -> None:
    rig: Rig = await make_rig(step_ms=HOUR, delete_when="08")  # expiry at +74, 77, 80, 83 h
    rig.at(local_ms(13, 8, 30))
    await rig.service.clean_once()  # CommitLog files 0 and 1 go
    assert rig.commit_log.min_offset == 2 * SMALL_COMMIT_LOG
    # A queue whose full first file points below the min offset arrives afterwards.
    late = rig.cq_table.find_or_create("TopicB", 0)
    for q, physical in enumerate((0, 10, 20, 4 * SMALL_COMMIT_LOG)):
        assert late.put_blocking(physical, 10, 0, q) is PutUnitStatus.OK
    await rig.service.clean_once()  # nothing new goes from the CommitLog
    assert len(rig.cq_files("TopicB")) == 2, "the min offset did not rise"
    assert late.min_offset == 0
    rig.at(local_ms(14, 8))  # everything but the current file expired
    await rig.service.clean_once()
    assert rig.commit_log.min_offset == 4 * SMALL_COMMIT_LOG
    assert len(rig.cq_files("TopicB")) == 1 and late.min_offset == PER_FILE


# -- the disk guard ----------------------------------------------------------------------


async def test_writable_flips_at_the_warning_level_and_back(
    make_rig: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    rig: Rig = await make_rig(full_files=1)
    service = rig.service
    with caplog.at_level(logging.INFO, logger="aiorocketmq.store.cleanup"):
        for ratio, writable in ((0.90, True), (0.91, False), (0.99, False), (0.86, True)):
            rig.usage["commitlog"] = ratio
            verdict = await service.check_disk()
            assert (service.writable, verdict.full) == (writable, not writable), ratio
        rig.usage["cq"] = 0.93
        await service.check_disk()
    assert rig.events == [False, True, False], "one callback per transition"
    assert service.stats.disk_full_transitions == 3 and not service.stats.writable
    full_lines = [r for r in caplog.records if "disk full" in r.getMessage()]
    ok_lines = [r for r in caplog.records if "disk space OK" in r.getMessage()]
    assert len(full_lines) == 2 and len(ok_lines) == 1
    assert all(r.levelno == logging.ERROR for r in full_lines)


async def test_reads_go_on_while_the_disk_is_full(make_rig: Callable[..., Any]) -> None:
    rig: Rig = await make_rig(full_files=1)
    rig.usage["commitlog"] = 0.97
    await rig.service.clean_once()
    assert not rig.service.writable
    first = rig.results[-1]
    selected = rig.commit_log.get_message(first.physical_offset, first.wrote_bytes)
    assert selected is not None
    selected.release()


async def test_an_older_measurement_never_overrides_a_newer_one(
    make_rig: Callable[..., Any],
) -> None:
    """The clean pass and the disk job both check the disk. A check whose measurement
    is held up in a thread must not land after a later one with its stale verdict."""
    entered, release = threading.Event(), threading.Event()
    rig: Rig | None = None

    def measure(path: Path) -> float:
        assert rig is not None
        ratio = rig.usage["commitlog" if path == rig.config.commit_log_dir else "cq"]
        if path == rig.config.commit_log_dir and not entered.is_set():
            entered.set()
            release.wait(5)
        return ratio

    rig = await make_rig(full_files=1, service_kw={"disk_usage": measure})
    rig.usage["commitlog"] = 0.95
    slow = asyncio.create_task(rig.service.check_disk())  # measures 0.95, then stalls
    await wait_until(entered.is_set, what="the first check inside its measurement")
    rig.usage["commitlog"] = 0.5
    fresh = asyncio.create_task(rig.service.check_disk())  # measures 0.5
    # Unordered checks let the fresh one finish now; ordered ones queue it on the lock.
    await wait_until(
        lambda: fresh.done() or bool(rig.service._disk_lock._waiters),  # type: ignore[attr-defined]
        what="the second check finished, or waiting behind the first",
    )
    release.set()
    await asyncio.gather(slow, fresh)
    assert rig.service.writable and rig.events == [False, True]


# -- a file held by a reader -------------------------------------------------------------


async def test_a_held_file_is_unmapped_only_at_release(make_rig: Callable[..., Any]) -> None:
    rig: Rig = await make_rig(full_files=2)
    first = rig.results[0]
    selected = rig.commit_log.get_message(first.physical_offset, first.wrote_bytes)
    assert selected is not None and selected.file is not None
    mapped = selected.file
    before = bytes(selected.view)
    rig.usage["commitlog"] = 0.86
    await rig.service.clean_once()
    assert rig.commit_log.min_offset == 2 * SMALL_COMMIT_LOG
    assert not mapped.path.exists() and not mapped.closed and not mapped.available
    assert bytes(selected.view) == before, "the reader still sees its bytes"
    assert rig.commit_log.get_message(first.physical_offset, first.wrote_bytes) is None
    selected.release()
    assert mapped.closed


# -- the running service -----------------------------------------------------------------


async def test_started_service_cleans_and_guards_on_its_own(
    make_rig: Callable[..., Any],
) -> None:
    kw = {"initial_delay_s": 0.0, "disk_check_interval_s": 0.01, "disk_check_initial_delay_s": 0}
    rig: Rig = await make_rig(clean_resource_interval=10, service_kw=kw)
    rig.usage["commitlog"] = 0.95
    await rig.service.start()
    await wait_until(
        lambda: rig.service.stats.index_files_deleted == 4 and rig.events == [False],
        what="forced deletion, index files following, and a full disk",
        describe=lambda: rig.service.stats,
    )
    assert len(rig.files()) == 1
    rig.usage["commitlog"] = 0.5
    await wait_until(lambda: rig.events == [False, True], what="writable again")
    await rig.service.shutdown()


async def test_trigger_wakes_a_started_service(make_rig: Callable[..., Any]) -> None:
    rig: Rig = await make_rig(service_kw={"initial_delay_s": 3600.0})
    rig.at(EXPIRED_AT_3)
    await rig.service.start()
    rig.service.trigger_delete()
    await wait_until(lambda: len(rig.files()) == 1, what="the woken pass")
    await rig.service.shutdown()


async def test_too_little_room_for_the_next_files_refuses_writes(
    make_rig: Callable[..., Any],
) -> None:
    """Below every ratio, but the next CommitLog and ConsumeQueue files would not fit."""
    free = [10**12]
    rig: Rig = await make_rig(service_kw={"disk_free": lambda _path: free[0]})
    await rig.service.check_disk()
    assert rig.service.writable and rig.events == []
    need = rig.config.mapped_file_size_commit_log + rig.config.mapped_file_size_consume_queue
    free[0] = need - 1
    verdict = await rig.service.check_disk()
    assert verdict.full and not rig.service.writable and rig.events == [False]
    free[0] = need
    await rig.service.check_disk()
    assert rig.service.writable and rig.events == [False, True]
