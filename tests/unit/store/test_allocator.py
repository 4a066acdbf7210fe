"""MappedFileAllocator: files are created and warmed in the pool, handed out without
waiting when ready, retried after a failure, and never left behind at shutdown."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.runtime.executor import BlockingExecutor
from aiorocketmq.runtime.lifecycle import ServiceStateError
from aiorocketmq.store import page_ops
from aiorocketmq.store.allocator import MappedFileAllocator
from aiorocketmq.store.errors import StoreError, StoreIOError
from aiorocketmq.store.mapped_file import (
    OS_PAGE_SIZE,
    WARM_STEP_BYTES,
    MappedFile,
    offset_to_file_name,
)
from tests.support.wait import wait_until
from tests.unit.store.helpers import small_config, started_commit_log

SIZE = 8192


@pytest.fixture
async def executor() -> AsyncIterator[BlockingExecutor]:
    pool = BlockingExecutor("test-alloc", 2)
    yield pool
    await pool.shutdown()


async def test_prepare_then_take(tmp_path: Path, executor: BlockingExecutor) -> None:
    allocator = MappedFileAllocator(executor)
    await allocator.start()
    path = tmp_path / offset_to_file_name(0)
    assert allocator.take(path) is None
    allocator.prepare(path, SIZE)
    allocator.prepare(path, SIZE)  # already under way: no second creation
    assert allocator.pending_paths == {path}
    await allocator.idle()
    mapped = allocator.take(path)
    assert mapped is not None and mapped.file_size == SIZE and path.exists()
    assert allocator.take(path) is None and allocator.created == 1 and allocator.waited == 0
    mapped.shutdown()
    await allocator.shutdown()


needs_populate = pytest.mark.skipif(
    not page_ops.populate_supported(), reason="needs MADV_POPULATE_WRITE (Linux >= 5.14)"
)


class GatedWarming:
    """Records each warming step (thread, range, msync start) and holds it at a gate."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[str, int, int, int]] = []
        self.gate = threading.Event()
        real = MappedFile.warm_range_blocking

        def gated(
            mapped: MappedFile, start: int, end: int, zero_fill: bool, sync_from: int = -1
        ) -> bool:
            self.calls.append((threading.current_thread().name, start, end, sync_from))
            assert not zero_fill, "the zero-byte fallback never runs on a file in use"
            assert self.gate.wait(10), "the test never opened the gate"
            return real(mapped, start, end, zero_fill, sync_from)

        monkeypatch.setattr(MappedFile, "warm_range_blocking", gated)


@needs_populate
async def test_a_file_is_handed_out_before_warming_which_goes_on_ahead_of_the_writer(
    tmp_path: Path, executor: BlockingExecutor, monkeypatch: pytest.MonkeyPatch
) -> None:
    warming = GatedWarming(monkeypatch)
    size = WARM_STEP_BYTES + 3 * OS_PAGE_SIZE
    async with BlockingExecutor("test-warm", idle=True) as warm_pool:
        allocator = MappedFileAllocator(
            executor, warm=True, msync_every_pages=2, warm_executor=warm_pool
        )
        await allocator.start()
        mapped = await allocator.allocate(tmp_path / offset_to_file_name(0), size)
        await wait_until(lambda: len(warming.calls) == 1, what="the first step started")
        # Written while the pool populates the same pages: populate keeps the bytes.
        data = b"\xff" * (WARM_STEP_BYTES + 10)
        mapped.append(data)
        warming.gate.set()
        await allocator.idle()
        await allocator.shutdown()
    assert warming.calls == [
        ("test-warm_0", 0, WARM_STEP_BYTES, 0),
        # The writer got past the first step: the next starts at its next page.
        ("test-warm_0", WARM_STEP_BYTES + OS_PAGE_SIZE, size, WARM_STEP_BYTES),
    ]
    assert mapped.path.read_bytes() == data + bytes(size - len(data))
    mapped.shutdown()


async def window_allocator(
    monkeypatch: pytest.MonkeyPatch, executor: BlockingExecutor, ahead: int
) -> tuple[GatedWarming, MappedFileAllocator]:
    """A started allocator warming a window of ``ahead`` bytes, its steps recorded."""
    warming = GatedWarming(monkeypatch)
    warming.gate.set()
    allocator = MappedFileAllocator(executor, warm=True, warm_ahead=ahead)
    await allocator.start()
    return warming, allocator


@needs_populate
async def test_a_window_warming_keeps_its_distance_parks_and_follows_the_writer(
    tmp_path: Path, executor: BlockingExecutor, monkeypatch: pytest.MonkeyPatch
) -> None:
    ahead = WARM_STEP_BYTES // 2
    size = WARM_STEP_BYTES + ahead + 3 * OS_PAGE_SIZE
    warming, allocator = await window_allocator(monkeypatch, executor, ahead)
    mapped = await allocator.allocate(tmp_path / offset_to_file_name(0), size)
    await allocator.idle()  # parked behind a writer that has not written: idle
    assert [c[1:3] for c in warming.calls] == [(0, ahead)]
    assert allocator.warming_paths == {mapped.path}, "parked, not ended"
    # The writer uses more than half the window: the warming goes on from where it
    # stopped to the window's end past the writer, in steps of at most WARM_STEP_BYTES.
    mapped.append(b"\x01" * (ahead // 2 + 10))
    wake_end = -(-(ahead // 2 + 10 + ahead) // OS_PAGE_SIZE) * OS_PAGE_SIZE
    await wait_until(lambda: len(warming.calls) == 2, what="the parked warming woke")
    await allocator.idle()
    assert [c[1:3] for c in warming.calls] == [(0, ahead), (ahead, wake_end)]
    # A writer that fills the file ends the warming, wherever it was.
    mapped.append(b"\x02" * (size - mapped.wrote_position))
    await wait_until(lambda: not allocator.warming_paths, what="the warming ended")
    assert all(end <= size for _, _, end, _ in warming.calls)
    await allocator.shutdown()
    assert not allocator.failures
    mapped.shutdown()


@needs_populate
async def test_shutdown_ends_a_parked_window_warming_at_once(
    tmp_path: Path, executor: BlockingExecutor, monkeypatch: pytest.MonkeyPatch
) -> None:
    warming, allocator = await window_allocator(monkeypatch, executor, OS_PAGE_SIZE * 4)
    path = tmp_path / offset_to_file_name(0)
    allocator.prepare(path, 3 * WARM_STEP_BYTES)
    await allocator.idle()
    assert [c[1:3] for c in warming.calls] == [(0, OS_PAGE_SIZE * 4)]
    assert allocator.warming_paths == {path}
    await asyncio.wait_for(allocator.shutdown(), 10)
    assert not allocator.warming_paths
    assert not allocator.failures and not path.exists()


@needs_populate
async def test_shutdown_stops_warming_at_its_step_and_deletes_the_unused_file(
    tmp_path: Path, executor: BlockingExecutor, monkeypatch: pytest.MonkeyPatch
) -> None:
    warming = GatedWarming(monkeypatch)
    allocator = MappedFileAllocator(executor, warm=True)
    await allocator.start()
    path = tmp_path / offset_to_file_name(0)
    allocator.prepare(path, 3 * WARM_STEP_BYTES)
    await wait_until(lambda: len(warming.calls) == 1, what="the first step started")
    stopping = asyncio.ensure_future(allocator.shutdown())
    await wait_until(allocator.stopping.is_set, what="shutdown began")
    warming.gate.set()  # the step in the pool thread holds the file until it returns
    await asyncio.wait_for(stopping, 10)
    assert len(warming.calls) == 1 and not allocator.failures
    assert not path.exists() and not allocator.ready_paths


@needs_populate
async def test_a_failed_warming_step_ends_the_warming_and_leaves_the_file_in_use(
    tmp_path: Path,
    executor: BlockingExecutor,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def fail(mapped: MappedFile, start: int, end: int, *args: object) -> bool:
        raise StoreIOError("madvise(MADV_POPULATE_WRITE) failed: Cannot allocate memory")

    monkeypatch.setattr(MappedFile, "warm_range_blocking", fail)
    allocator = MappedFileAllocator(executor, warm=True)
    await allocator.start()
    mapped = await allocator.allocate(tmp_path / offset_to_file_name(0), 2 * WARM_STEP_BYTES)
    await allocator.idle()
    assert not allocator.failures, "a warming failure is no task death"
    assert "warming" in caplog.text and "Cannot allocate memory" in caplog.text
    mapped.append(b"still writable")
    assert mapped.path.read_bytes()[:14] == b"still writable"
    mapped.shutdown()
    await allocator.shutdown()


async def test_without_populate_the_zero_byte_warming_runs_before_handing_out(
    tmp_path: Path, executor: BlockingExecutor, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(page_ops, "_LIBC", None)
    monkeypatch.setattr(page_ops, "_SUPPORTED", [])  # probe again, without libc
    calls: list[tuple[str, int]] = []

    def record_warm(self: MappedFile, msync_every_pages: int = 0) -> None:
        calls.append((threading.current_thread().name, msync_every_pages))

    monkeypatch.setattr(MappedFile, "warm_blocking", record_warm)
    allocator = MappedFileAllocator(executor, warm=True, msync_every_pages=4096)
    await allocator.start()
    mapped = await allocator.allocate(tmp_path / offset_to_file_name(0), SIZE)
    # Done in the creation, before the file was handed out: nothing writes it meanwhile.
    assert calls == [(calls[0][0], 4096)] and calls[0][0].startswith("test-alloc")
    assert allocator.waited == 1 and not allocator.pending_paths
    mapped.shutdown()
    await allocator.shutdown()


async def test_without_populate_a_window_is_not_warmed(
    tmp_path: Path, executor: BlockingExecutor, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(page_ops, "_LIBC", None)
    monkeypatch.setattr(page_ops, "_SUPPORTED", [])  # probe again, without libc
    calls: list[str] = []
    monkeypatch.setattr(MappedFile, "warm_blocking", lambda *_: calls.append("whole file"))
    monkeypatch.setattr(MappedFile, "warm_range_blocking", lambda *_: calls.append("range"))
    allocator = MappedFileAllocator(executor, warm=True, warm_ahead=OS_PAGE_SIZE)
    await allocator.start()
    mapped = await allocator.allocate(tmp_path / offset_to_file_name(0), SIZE)
    await allocator.idle()
    assert calls == [] and not allocator.warming_paths
    mapped.shutdown()
    await allocator.shutdown()


async def test_failed_creation_is_retried_by_allocate(
    tmp_path: Path, executor: BlockingExecutor
) -> None:
    allocator = MappedFileAllocator(executor)
    await allocator.start()
    path = tmp_path / offset_to_file_name(0)
    path.write_bytes(b"squatter")  # creation refuses an existing file
    allocator.prepare(path, SIZE)
    await allocator.idle()
    assert allocator.take(path) is None and not allocator.failures, "logged, not a task death"
    with pytest.raises(StoreError, match="already exists"):
        await allocator.allocate(path, SIZE)
    path.unlink()
    mapped = await allocator.allocate(path, SIZE)
    assert mapped.path == path
    mapped.shutdown()
    await allocator.shutdown()


async def test_shutdown_deletes_unused_and_in_flight_files(
    tmp_path: Path, executor: BlockingExecutor
) -> None:
    allocator = MappedFileAllocator(executor)
    await allocator.start()
    used, unused, in_flight = (tmp_path / offset_to_file_name(n * SIZE) for n in range(3))
    allocator.prepare(used, SIZE)
    allocator.prepare(unused, SIZE)
    await allocator.idle()
    taken = allocator.take(used)
    assert taken is not None
    allocator.prepare(in_flight, SIZE)  # still being created when shutdown starts
    await allocator.shutdown()
    assert used.exists() and not unused.exists() and not in_flight.exists()
    assert not allocator.ready_paths and not allocator.pending_paths
    allocator.prepare(unused, SIZE)  # ignored after shutdown
    assert not allocator.pending_paths
    with pytest.raises(ServiceStateError):
        await allocator.allocate(unused, SIZE)
    taken.shutdown()


@needs_populate
@pytest.mark.parametrize("rocketmq_warm", [False, True])
async def test_a_commit_log_warms_a_window_by_default_and_the_whole_file_as_rocketmq(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rocketmq_warm: bool
) -> None:
    calls: list[tuple[int, int, bool]] = []  # the first file's: range, and idle or not
    real = MappedFile.warm_range_blocking

    def record(mapped: MappedFile, start: int, end: int, *args: Any) -> bool:
        if mapped.path.name == offset_to_file_name(0):
            idle = os.sched_getscheduler(0) == getattr(os, "SCHED_IDLE", -1)
            calls.append((start, end, idle))
        return real(mapped, start, end, *args)

    monkeypatch.setattr(MappedFile, "warm_range_blocking", record)
    size, ahead = 4 * WARM_STEP_BYTES, WARM_STEP_BYTES + OS_PAGE_SIZE
    config = small_config(
        tmp_path,
        mapped_file_size_commit_log=size,
        warm_commit_log_ahead_bytes=ahead,
        warm_maped_file_enable=rocketmq_warm,
    )
    async with BlockingExecutor("test-store") as executor:
        log = await started_commit_log(config, executor)
        try:
            if rocketmq_warm:  # RocketMQ's warming: every page, on idle cores only
                assert [c[:2] for c in calls] == [
                    (n, n + WARM_STEP_BYTES) for n in range(0, size, WARM_STEP_BYTES)
                ]
                assert all(idle for *_, idle in calls) == hasattr(os, "SCHED_IDLE")
            else:  # the default: a window ahead of the writer, at normal priority
                assert [c[:2] for c in calls] == [(0, WARM_STEP_BYTES), (WARM_STEP_BYTES, ahead)]
                assert not any(idle for *_, idle in calls)
                assert log.allocator.warming_paths, "parked behind the writer"
        finally:
            await log.shutdown()
