"""MessageStore lifecycle: lock, abort marker, checkpoint, clean and crashed restarts,
SYNC_FLUSH group commit under concurrency.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from aiorocketmq.common.clock import ManualClock
from aiorocketmq.store.checkpoint import StoreCheckpoint
from aiorocketmq.store.config import FlushDiskType, MessageStoreConfig
from aiorocketmq.store.errors import StoreLoadError, StoreLockedError
from aiorocketmq.store.message_store import MessageStore
from aiorocketmq.store.results import GetMessageStatus, PutMessageStatus
from aiorocketmq.store.running_flags import RunningFlag, RunningFlags
from tests.unit.store.store_support import (
    TOPIC,
    dispatched,
    inner,
    open_store,
    put_ok,
    store_config,
)


async def stored_records(store: MessageStore, queue_ids: range) -> dict[int, list[bytes]]:
    """Every record of each queue, raw bytes, read through get_message."""
    out: dict[int, list[bytes]] = {}
    for queue_id in queue_ids:
        offset, raws = 0, []
        while True:
            result = store.get_message("g", TOPIC, queue_id, offset, 32)
            assert result is not None
            with result:
                if result.status is not GetMessageStatus.FOUND:
                    break
                raws.extend(bytes(view) for view in result.messages)
                offset = result.next_begin_offset
        out[queue_id] = raws
    return out


async def put_many(store: MessageStore, count: int, queues: int = 3) -> None:
    for i in range(count):
        props = {"KEYS": f"key{i}", "UNIQ_KEY": f"UNIQ{i:08d}", "TAGS": f"t{i % 2}"}
        await put_ok(store, inner(bytes([i % 256]) * (300 + i % 700), queue_id=i % queues, **props))


async def test_lock_refuses_a_second_store_on_the_same_directory(tmp_path: Path) -> None:
    config = store_config(tmp_path)
    first = await open_store(config)
    second = MessageStore(config)
    try:
        with pytest.raises(StoreLockedError):
            await second.load()
        assert config.lock_path.read_bytes()[:4] == b"lock"
    finally:
        await second.shutdown()
        await first.shutdown()
    third = MessageStore(config)
    await third.load()  # released at shutdown
    await third.shutdown()
    await third.shutdown()  # idempotent, also for a store that was only loaded


async def test_clean_restart_recovers_normally_with_identical_bytes(tmp_path: Path) -> None:
    config = store_config(tmp_path)
    store = await open_store(config)
    assert config.abort_path.exists()
    await put_many(store, 300)  # several 64 KiB CommitLog files
    await dispatched(store)
    before = await stored_records(store, range(3))
    assert len(store.commit_log.queue) > 2
    await store.shutdown()
    assert not config.abort_path.exists()
    checkpoint = StoreCheckpoint.load_blocking(config.checkpoint_path)
    assert checkpoint.physic_msg_timestamp > 0 and checkpoint.logics_msg_timestamp > 0

    again = await open_store(config)
    try:
        report = again.load_result.report  # type: ignore[union-attr]
        assert report.last_exit_ok and report.clean and report.lost_bytes == 0
        assert await stored_records(again, range(3)) == before
        assert sum(len(v) for v in before.values()) == 300
        assert (await put_ok(again, inner(queue_id=0))).queue_offset == 100
        with again.query_message(TOPIC, "key42", 32, 0, 2**62) as found:
            assert found.message_count == 1
    finally:
        await again.shutdown()


async def test_crash_copy_recovers_abnormally(tmp_path: Path) -> None:
    """A copy of a running store's directory looks like a crashed store: abort present."""
    config = store_config(tmp_path / "live")
    store = await open_store(config)
    try:
        await put_many(store, 200)
        await dispatched(store)
        before = await stored_records(store, range(3))
        await store.commit_log.allocator.idle()
        shutil.copytree(config.root_dir, tmp_path / "crashed")
    finally:
        await store.shutdown()
    crashed = MessageStoreConfig.model_validate(
        config.model_dump() | {"store_path_root_dir": str(tmp_path / "crashed")}
    )
    assert crashed.abort_path.exists()
    again = await open_store(crashed)
    try:
        report = again.load_result.report  # type: ignore[union-attr]
        assert not report.last_exit_ok
        assert report.redispatch_from <= report.commit_log_end_offset
        assert await stored_records(again, range(3)) == before
        with again.query_message(TOPIC, "UNIQ00000150", 32, 0, 2**62) as found:
            assert found.message_count == 1
    finally:
        await again.shutdown()
    assert not crashed.abort_path.exists()


async def test_unwriteable_store_keeps_the_abort_file(tmp_path: Path) -> None:
    config = store_config(tmp_path)
    store = await open_store(config)
    await put_ok(store, inner())
    store.flags.make_logics_queue_error()
    await store.shutdown()
    assert config.abort_path.exists()
    again = await open_store(config)
    try:
        assert not again.load_result.last_exit_ok  # type: ignore[union-attr]
        assert again.get_max_offset_in_queue(TOPIC, 0) == 1
    finally:
        await again.shutdown()


async def test_load_failure_releases_the_lock(tmp_path: Path) -> None:
    config = store_config(tmp_path)
    config.commit_log_dir.mkdir(parents=True)
    bad = config.commit_log_dir / "00000000000000000000"
    bad.write_bytes(b"short")
    store = MessageStore(config)
    with pytest.raises(StoreLoadError):
        await store.load()
    await store.shutdown()
    bad.unlink()
    fine = await open_store(config)
    await fine.shutdown()


async def test_sync_flush_64_concurrent_puts_are_group_committed_and_durable(
    tmp_path: Path,
) -> None:
    config = store_config(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH)
    store = await open_store(config)
    try:
        for _round in range(4):
            results = await asyncio.gather(
                *(store.put_message(inner(bytes([i]) * 200, queue_id=i % 4)) for i in range(64))
            )
            assert {r.status for r in results} == {PutMessageStatus.PUT_OK}
            end = max(r.physical_offset + r.wrote_bytes for r in results)
            assert store.commit_log.flushed_where >= end
        rounds = store.flush_service.flush_rounds  # type: ignore[union-attr]
        assert rounds < 4 * 64 / 4  # many puts share one flush
        await dispatched(store)
        before = await stored_records(store, range(4))
    finally:
        await store.shutdown()
    again = await open_store(config)
    try:
        assert await stored_records(again, range(4)) == before
        assert sum(len(v) for v in before.values()) == 256
    finally:
        await again.shutdown()


async def test_the_cleanup_disk_guard_refuses_puts_while_full(tmp_path: Path) -> None:
    store = await open_store(store_config(tmp_path))
    cleanup = store.cleanup_service
    try:
        cleanup._disk_usage = lambda path: 0.95  # above diskSpaceWarningLevelRatio
        await cleanup.check_disk()
        assert store.flags.disk_full and not store.flags.writeable
        assert (await store.put_message(inner())).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
        cleanup._disk_usage = lambda path: 0.10
        await cleanup.check_disk()
        await put_ok(store, inner())
    finally:
        await store.shutdown()


def test_running_flags() -> None:
    flags = RunningFlags()
    assert flags.readable and flags.writeable
    assert flags.get_and_make_disk_full() and not flags.get_and_make_disk_full()
    assert not flags.writeable and flags.readable
    assert flags.get_and_make_disk_ok() and flags.writeable
    flags.make_index_file_error()
    assert not flags.writeable and "WRITE_INDEX_FILE_ERROR" in repr(flags)
    assert flags.clear(RunningFlag.WRITE_INDEX_FILE_ERROR) and flags.writeable
    assert not flags.set(RunningFlag.NOT_READABLE) and not flags.readable


async def test_consume_queue_flush_writes_the_checkpoint_on_its_thorough_interval(
    tmp_path: Path,
) -> None:
    clock = ManualClock()
    config = store_config(tmp_path, flush_consume_queue_thorough_interval=60_000)
    store = await open_store(config, clock=clock)
    try:
        result = await put_ok(store, inner())
        await dispatched(store)
        service = store.cq_flush_service
        await service.do_flush()
        assert service.full_flushes == 0  # interval flush only: no checkpoint
        clock.advance(60_000)
        await service.do_flush()
        assert service.full_flushes == 1
        on_disk = StoreCheckpoint.load_blocking(config.checkpoint_path)
        assert on_disk.logics_msg_timestamp == result.store_timestamp
        queue = store.cq_table.get(TOPIC, 0)
        assert queue is not None and queue.queue.flushed_where == 20
    finally:
        await store.shutdown()
