"""MappedFileAllocator: files are created and warmed in the pool, handed out without
waiting when ready, retried after a failure, and never left behind at shutdown."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from aiorocketmq.runtime.executor import BlockingExecutor
from aiorocketmq.runtime.lifecycle import ServiceStateError
from aiorocketmq.store.allocator import MappedFileAllocator
from aiorocketmq.store.errors import StoreError
from aiorocketmq.store.mapped_file import MappedFile, offset_to_file_name

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


async def test_warming_runs_in_a_pool_thread(
    tmp_path: Path, executor: BlockingExecutor, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, int]] = []

    def record_warm(self: MappedFile, msync_every_pages: int = 0) -> None:
        calls.append((threading.current_thread().name, msync_every_pages))

    monkeypatch.setattr(MappedFile, "warm_blocking", record_warm)
    allocator = MappedFileAllocator(executor, warm=True, msync_every_pages=4096)
    await allocator.start()
    mapped = await allocator.allocate(tmp_path / offset_to_file_name(0), SIZE)
    assert calls == [(calls[0][0], 4096)] and calls[0][0].startswith("test-alloc")
    assert allocator.waited == 1
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
