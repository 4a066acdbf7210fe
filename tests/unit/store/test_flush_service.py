"""Group commit batches waiters into few flushes; async flush follows its interval rules."""

from __future__ import annotations

import asyncio

from aiorocketmq.store.flush import FlushRealTimeService, GroupCommitService
from tests.support.wait import wait_until


class FakeDisk:
    """Stands in for the CommitLog's flush: everything written so far becomes durable.

    A flush takes until ``release`` is set, so a test can pile up waiters behind one
    flush in progress, as concurrent puts do behind a real msync.
    """

    def __init__(self) -> None:
        self.written = 0
        self.calls: list[int] = []
        self.release = asyncio.Event()
        self.release.set()
        self.fail = False

    async def flush(self, least_pages: int) -> int:
        self.calls.append(least_pages)
        await self.release.wait()
        if self.fail:
            raise OSError("disk gone")
        return self.written


async def test_concurrent_waiters_share_flushes() -> None:
    disk = FakeDisk()
    service = GroupCommitService(disk.flush, timeout_ms=5000)
    await service.start()
    try:
        disk.release.clear()
        disk.written = 100
        first = service.request(100)
        await wait_until(lambda: disk.calls, what="first flush started")
        # 63 more puts arrive while the first msync is in progress.
        futures = []
        for i in range(63):
            disk.written = 200 + i * 10
            futures.append(service.request(disk.written))
        disk.release.set()
        results = await asyncio.wait_for(asyncio.gather(first, *futures), 5)
        assert all(results)
        # One round for the first put, one for the 63 that queued behind it.
        assert service.flush_rounds <= 3
        assert service.pending == 0
    finally:
        await service.shutdown()


async def test_already_durable_offset_resolves_at_once() -> None:
    disk = FakeDisk()
    service = GroupCommitService(disk.flush)
    await service.start()
    try:
        disk.written = 50
        assert await asyncio.wait_for(service.request(50), 5) is True
        calls = len(disk.calls)
        assert await asyncio.wait_for(service.request(40), 5) is True
        assert len(disk.calls) == calls, "no flush needed below the durable offset"
    finally:
        await service.shutdown()


async def test_unflushed_waiter_times_out_false() -> None:
    disk = FakeDisk()
    service = GroupCommitService(disk.flush, timeout_ms=50)
    await service.start()
    try:
        disk.written = 10  # the flush never reaches the waiter's offset
        assert await asyncio.wait_for(service.request(20), 5) is False
    finally:
        await service.shutdown()


async def test_failing_flush_times_out_and_service_survives() -> None:
    disk = FakeDisk()
    disk.fail = True
    service = GroupCommitService(disk.flush, timeout_ms=50)
    await service.start()
    try:
        assert await asyncio.wait_for(service.request(20), 5) is False
        disk.fail = False
        disk.written = 30
        assert await asyncio.wait_for(service.request(30), 5) is True
        assert not service.failures
    finally:
        await service.shutdown()


async def test_shutdown_resolves_every_waiter() -> None:
    disk = FakeDisk()
    service = GroupCommitService(disk.flush, timeout_ms=60_000)
    await service.start()
    disk.release.clear()
    disk.written = 10
    pending = service.request(1000)  # never durable
    await wait_until(lambda: disk.calls, what="flush started")
    disk.release.set()
    await service.shutdown()
    assert pending.done() and pending.result() is False


async def test_realtime_flush_least_pages_then_thorough() -> None:
    disk = FakeDisk()
    flushed: list[int] = []
    service = FlushRealTimeService(
        disk.flush,
        interval_ms=10,
        least_pages=4,
        thorough_interval_ms=60,
        on_flushed=flushed.append,
    )
    disk.written = 4096
    await service.start()
    try:
        await wait_until(
            lambda: 0 in disk.calls and 4 in disk.calls,
            timeout=5,
            what="both a least-pages and a thorough flush",
        )
        await wait_until(lambda: flushed == [4096], what="on_flushed once for the new offset")
    finally:
        await service.shutdown()
    # The shutdown flush is a full one.
    assert disk.calls[-1] == 0


async def test_hung_flush_times_out_by_deadline() -> None:
    # FlushDiskWatcher's job: a flush that never returns must not hold a put forever.
    disk = FakeDisk()
    disk.release.clear()
    service = GroupCommitService(disk.flush, timeout_ms=50)
    await service.start()
    try:
        disk.written = 10
        assert await asyncio.wait_for(service.request(10), 5) is False
    finally:
        disk.release.set()
        await service.shutdown()
