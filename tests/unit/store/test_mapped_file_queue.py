"""MappedFileQueue: load rules, offsets, finding files, rolling through the allocator,
truncation, expiry choices and the queue-level flush position."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from aiorocketmq.runtime.executor import BlockingExecutor
from aiorocketmq.store.allocator import MappedFileAllocator
from aiorocketmq.store.errors import StoreError, StoreLoadError
from aiorocketmq.store.mapped_file import MappedFile, delete_files_blocking, offset_to_file_name
from aiorocketmq.store.mapped_file_queue import MappedFileQueue

SIZE = 4096


@pytest.fixture
async def executor() -> AsyncIterator[BlockingExecutor]:
    pool = BlockingExecutor("test-mfq", 2)
    yield pool
    await pool.shutdown()


def queue_with_files(directory: Path, count: int, *, first: int = 0) -> MappedFileQueue:
    """Files written on disk, then loaded (positions at full, as after a restart)."""
    directory.mkdir(parents=True, exist_ok=True)
    for n in range(count):
        (directory / offset_to_file_name(first + n * SIZE)).write_bytes(bytes([n + 1]) * SIZE)
    queue = MappedFileQueue(directory, SIZE)
    queue.load_blocking()
    return queue


def test_load_sorts_and_sets_positions_to_full(tmp_path: Path) -> None:
    queue = queue_with_files(tmp_path / "q", 3, first=5 * SIZE)
    assert [f.file_from_offset for f in queue.files] == [5 * SIZE, 6 * SIZE, 7 * SIZE]
    assert all(f.wrote_position == f.flushed_position == SIZE for f in queue.files)
    assert queue.min_offset == 5 * SIZE and queue.max_offset == 8 * SIZE
    assert not any(f.first_create_in_queue for f in queue.files)
    queue.shutdown()


def test_interrupted_creation_leaves_no_short_file(tmp_path: Path) -> None:
    # Story: the store crash test SIGKILLed a broker while the allocator was creating
    # the next CommitLog file; the 0-byte file it left made every later start fail
    # ("is 0 bytes, the configured file size is ..."). Files are now built under a
    # ".creating" name and linked into place at full length; leftovers go at load.
    directory = tmp_path / "q"
    queue = queue_with_files(directory, 2)
    queue.shutdown()
    leftover = directory / (offset_to_file_name(2 * SIZE) + ".creating")
    leftover.write_bytes(b"")
    reloaded = MappedFileQueue(directory, SIZE)
    reloaded.load_blocking()
    assert [f.file_from_offset for f in reloaded.files] == [0, SIZE]
    assert not leftover.exists()
    created = reloaded.create_last_file_blocking(2 * SIZE)
    assert created.path.stat().st_size == SIZE and not leftover.exists()
    assert sorted(p.name for p in directory.iterdir()) == [
        offset_to_file_name(n * SIZE) for n in range(3)
    ]
    reloaded.shutdown()


def test_missing_directory_is_an_empty_queue(tmp_path: Path) -> None:
    queue = MappedFileQueue(tmp_path / "absent", SIZE)
    queue.load_blocking()
    assert len(queue) == 0 and queue.min_offset == -1 and queue.max_offset == 0
    assert queue.find_file(0, True) is None


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        (offset_to_file_name(SIZE), b"x" * (SIZE + 1), "configured file size"),
        ("not-an-offset", b"x" * SIZE, "not a store file name"),
    ],
)
def test_load_refuses_a_malformed_directory(
    tmp_path: Path, name: str, content: bytes, message: str
) -> None:
    directory = tmp_path / "q"
    directory.mkdir()
    (directory / offset_to_file_name(0)).write_bytes(bytes(SIZE))
    (directory / name).write_bytes(content)
    queue = MappedFileQueue(directory, SIZE)
    with pytest.raises(StoreLoadError, match=message):
        queue.load_blocking()
    assert len(queue) == 0, "nothing half-loaded"


def test_load_refuses_a_subdirectory(tmp_path: Path) -> None:
    (tmp_path / "q" / offset_to_file_name(0)).mkdir(parents=True)
    with pytest.raises(StoreLoadError, match="not a regular file"):
        MappedFileQueue(tmp_path / "q", SIZE).load_blocking()


def test_find_file_by_index_math_and_linear_fallback(tmp_path: Path) -> None:
    queue = queue_with_files(tmp_path / "q", 3, first=2 * SIZE)
    files = queue.files
    assert queue.find_file(2 * SIZE) is files[0]
    assert queue.find_file(3 * SIZE + 17) is files[1]
    assert queue.find_file(5 * SIZE - 1) is files[2]
    assert queue.find_file(5 * SIZE) is None and queue.find_file(2 * SIZE - 1) is None
    assert queue.find_file(0, return_first_on_not_found=True) is files[0]
    # A hole (file 3 deleted by hand): index math misses, the linear scan finds it.
    queue.detach([files[1]])
    assert queue.find_file(4 * SIZE + 5) is files[2]
    assert queue.find_file(3 * SIZE + 5) is None
    assert queue.check_self() == [f"{files[0].file_name} -> {files[2].file_name}"]
    queue.shutdown()


def test_file_by_time_uses_last_modification(tmp_path: Path) -> None:
    queue = queue_with_files(tmp_path / "q", 3)
    files = queue.files
    for n, mapped in enumerate(files):
        mapped.mtime_ms, mapped.store_timestamp = 1000 * (n + 1), 0
    files[1].store_timestamp = 2500
    assert queue.file_by_time(500) is files[0]
    assert queue.file_by_time(2400) is files[1]
    assert queue.file_by_time(2600) is files[2]
    assert queue.file_by_time(99_999) is files[2], "else the last file"
    queue.shutdown()


async def test_get_last_file_takes_prepared_files(
    tmp_path: Path, executor: BlockingExecutor
) -> None:
    allocator = MappedFileAllocator(executor)
    await allocator.start()
    queue = MappedFileQueue(tmp_path / "q", SIZE, allocator=allocator, prepare_next=True)
    assert queue.next_file_offset(3 * SIZE + 5) == 3 * SIZE
    assert queue.get_last_file(3 * SIZE + 5) is None, "nothing prepared yet: never waits"
    first = await queue.allocate_last_file(3 * SIZE + 5)
    assert first.file_from_offset == 3 * SIZE and first.first_create_in_queue
    assert queue.get_last_file() is first, "room left: same file"
    await allocator.idle()
    assert queue.path_for(4 * SIZE) in allocator.ready_paths, "the next one is prepared"
    first.append(bytes(SIZE))
    assert queue.get_last_file(create=False) is first, "full, but create=False"
    second = queue.get_last_file()
    assert second is not None and second.file_from_offset == 4 * SIZE
    assert not second.first_create_in_queue
    assert allocator.waited == 1, "only the very first file was awaited"
    await allocator.shutdown()
    assert not queue.path_for(5 * SIZE).exists(), "the unused prepared file was deleted"
    queue.shutdown()


async def test_concurrent_allocations_share_one_file(
    tmp_path: Path, executor: BlockingExecutor
) -> None:
    allocator = MappedFileAllocator(executor)
    await allocator.start()
    queue = MappedFileQueue(tmp_path / "q", SIZE, allocator=allocator)
    a, b = await asyncio.gather(queue.allocate_last_file(), queue.allocate_last_file())
    assert a is b and len(queue) == 1 and allocator.created == 1
    await allocator.shutdown()
    queue.shutdown()


async def test_allocation_needs_an_allocator(tmp_path: Path) -> None:
    queue = MappedFileQueue(tmp_path / "q", SIZE)
    assert queue.get_last_file() is None
    with pytest.raises(StoreError, match="no allocator"):
        await queue.allocate_last_file()
    created = queue.create_last_file_blocking(SIZE * 2)
    assert created.file_from_offset == SIZE * 2 and queue.get_last_file() is created
    queue.shutdown()


def test_truncate_dirty_cuts_positions_and_detaches_later_files(tmp_path: Path) -> None:
    queue = queue_with_files(tmp_path / "q", 4)
    files = queue.files
    removed = queue.truncate_dirty(SIZE + 100)
    assert removed == files[2:]
    assert all(not f.available for f in removed)
    assert files[0].wrote_position == SIZE, "before the cut: untouched"
    assert files[1].wrote_position == files[1].flushed_position == 100
    assert queue.max_offset == SIZE + 100
    assert delete_files_blocking(removed) == 2
    assert sorted(p.name for p in (tmp_path / "q").iterdir()) == [f.file_name for f in files[:2]]
    # A cut exactly at a file boundary keeps that file, empty.
    assert queue.truncate_dirty_blocking(SIZE) == []
    assert files[1].wrote_position == 0 and queue.max_offset == SIZE
    queue.shutdown()


def test_pick_expired_by_time(tmp_path: Path) -> None:
    queue = queue_with_files(tmp_path / "q", 14)
    for n, mapped in enumerate(queue.files):
        mapped.mtime_ms = 1_000 * n
    files = queue.files
    assert queue.pick_expired_by_time(now_ms=2_500, reserved_ms=1_000) == files[:2]
    files[1].store_timestamp = 10_000  # written recently: the walk stops there, no hole
    assert queue.pick_expired_by_time(now_ms=5_000, reserved_ms=1_000) == files[:1]
    everything = queue.pick_expired_by_time(now_ms=0, reserved_ms=0, clean_immediately=True)
    assert everything == files[:10], "at most 10 per pass"
    late = queue.pick_expired_by_time(now_ms=10**9, reserved_ms=0, max_files=100)
    assert late == files[:-1], "never the last file"
    queue.shutdown()


def test_pick_expired_by_offset_reads_each_files_last_unit(tmp_path: Path) -> None:
    directory = tmp_path / "cq"
    directory.mkdir()
    unit = 20
    size = unit * 4
    for n, last_offset in enumerate([100, 200, 300, 400]):
        body = bytes(size - unit) + last_offset.to_bytes(8, "big") + bytes(12)
        (directory / offset_to_file_name(n * size)).write_bytes(body)
    queue = MappedFileQueue(directory, size)
    queue.load_blocking()
    files = queue.files
    assert queue.pick_expired_by_offset(250, unit) == files[:2]
    assert queue.pick_expired_by_offset(10_000, unit) == files[:3], "never the last"
    files[0].set_positions(size - unit)  # last unit unreadable: stop
    assert queue.pick_expired_by_offset(10_000, unit) == []
    queue.shutdown()


async def test_flush_walks_file_by_file(tmp_path: Path, executor: BlockingExecutor) -> None:
    queue = MappedFileQueue(tmp_path / "q", SIZE)
    first = queue.create_last_file_blocking()
    first.append(b"a" * 100)
    first.store_timestamp = 111
    assert await queue.flush(executor, 1) is True, "less than a page: nothing moved"
    assert await queue.flush(executor, 0) is False
    assert queue.flushed_where == 100 and first.flushed_position == 100
    assert queue.store_timestamp == 111 and queue.remaining_to_flush == 0
    first.append(b"b" * (SIZE - 100))
    second = queue.create_last_file_blocking()
    second.append(b"c" * 10)
    assert await queue.flush(executor, 4) is False, "a full file flushes whatever least_pages"
    assert queue.flushed_where == SIZE
    assert await queue.flush(executor, 0) is False
    assert queue.flushed_where == SIZE + 10 and queue.store_timestamp == 0
    assert await queue.flush(executor, 0) is True
    queue.shutdown()


def test_destroy_removes_files_and_directory(tmp_path: Path) -> None:
    queue = queue_with_files(tmp_path / "q", 2)
    queue.flushed_where = SIZE
    queue.destroy_blocking()
    assert not (tmp_path / "q").exists() and len(queue) == 0 and queue.flushed_where == 0


def test_added_file_must_have_the_queue_size(tmp_path: Path) -> None:
    queue = MappedFileQueue(tmp_path / "q", SIZE)
    odd = MappedFile.create_blocking(tmp_path / "q" / offset_to_file_name(0), SIZE * 2)
    with pytest.raises(StoreError, match="not 4096"):
        queue._add(odd)
    odd.shutdown()
