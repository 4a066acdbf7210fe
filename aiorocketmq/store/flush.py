"""CommitLog flushing: SYNC_FLUSH group commit and the ASYNC_FLUSH interval service.

Owns: when to flush and who to tell. ``GroupCommitService`` (``SYNC_FLUSH``) keeps a
waiter per acknowledged put, keyed by the put's end offset; one flush covers every
waiter queued before it, so 64 concurrent puts cost about one msync, not 64.
A waiter still unflushed at its deadline (``syncFlushTimeout``) resolves False,
which the put reports as FLUSH_DISK_TIMEOUT (RocketMQ's ``FlushDiskWatcher``).
``FlushRealTimeService`` (``ASYNC_FLUSH``) flushes every ``flushIntervalCommitLog``
once ``flushCommitLogLeastPages`` pages are dirty, and fully every
``flushCommitLogThoroughInterval``.

Must not: msync on the event loop. Both services take an async ``flush(least_pages)``
that runs the blocking part in the store's executor and returns the offset that is
now durable; the loop alone resolves waiters (STYLE habit 8).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiorocketmq.runtime.lifecycle import Service

log = logging.getLogger(__name__)

#: ``flush(least_pages)``: flush what the rule allows, return the durable offset.
FlushFn = Callable[[int], Awaitable[int]]


@dataclass(slots=True)
class _Waiter:
    next_offset: int
    future: asyncio.Future[bool]
    deadline: float


class GroupCommitService(Service):
    """SYNC_FLUSH: resolve each put's waiter once the CommitLog is durable past it.

    Args:
        flush: the store's flush coroutine function (see module docstring).
        timeout_ms: ``syncFlushTimeout``; a waiter resolves False after it.
    """

    def __init__(self, flush: FlushFn, timeout_ms: int = 5000) -> None:
        super().__init__("group-commit")
        self._flush = flush
        self._timeout_s = timeout_ms / 1000
        # Appends happen in offset order, so waiters are queued in offset order and a
        # flush resolves a prefix of the deque.
        self._waiters: deque[_Waiter] = deque()
        self._wake = asyncio.Event()
        # One timer for the oldest waiter's deadline, not one per put: waiters queue in
        # time order with one timeout, so the head always expires first.
        self._timer: asyncio.TimerHandle | None = None
        self.flushed_offset = 0
        self.flush_rounds = 0

    def request(self, next_offset: int) -> asyncio.Future[bool]:
        """Queue a waiter for ``next_offset`` (end of the put's record); plain def.

        The future resolves True when the CommitLog is durable up to
        ``next_offset``, False when ``timeout_ms`` passes first.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        if next_offset <= self.flushed_offset:
            future.set_result(True)
            return future
        self._waiters.append(_Waiter(next_offset, future, loop.time() + self._timeout_s))
        if self._timer is None:
            self._arm_timer()
        self._wake.set()
        return future

    def _arm_timer(self) -> None:
        while self._waiters and self._waiters[0].future.done():
            self._waiters.popleft()
        if self._waiters:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_at(self._waiters[0].deadline, self._expire_due)
        else:
            self._timer = None

    def _expire_due(self) -> None:
        # RocketMQ's FlushDiskWatcher: a put still unflushed at its deadline reports
        # FLUSH_DISK_TIMEOUT; its waiter stays queued (done) until a round pops it.
        now = asyncio.get_running_loop().time()
        for waiter in self._waiters:
            if waiter.deadline > now:
                break
            if not waiter.future.done():
                waiter.future.set_result(False)
        self._arm_timer()

    @property
    def pending(self) -> int:
        """Waiters not yet resolved."""
        return len(self._waiters)

    async def on_start(self) -> None:
        self.spawn(self._commit_loop(), name="commit")

    async def on_shutdown(self) -> None:
        # A last flush for whoever is still waiting, then nobody waits forever.
        if self._waiters:
            await self._flush_round()
        while self._waiters:
            waiter = self._waiters.popleft()
            _resolve(waiter, False)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    async def _commit_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._waiters:
                try:
                    await self._flush_round()
                except Exception:
                    # A failing disk must not kill the service: waiters time out as
                    # FLUSH_DISK_TIMEOUT, and the next put tries again.
                    log.exception("group commit flush failed pending=%s", len(self._waiters))
                    break

    async def _flush_round(self) -> None:
        # Flush up to the newest waiter queued so far; RocketMQ tries twice, since
        # a request may straddle two files and one flush advances one file.
        target = self._waiters[-1].next_offset
        for _ in range(2):
            self.flushed_offset = max(self.flushed_offset, await self._flush(0))
            if self.flushed_offset >= target:
                break
        self.flush_rounds += 1
        # Like GroupCommitService.doCommit, every waiter of this round gets its answer
        # now: durable, or FLUSH_DISK_TIMEOUT if two flushes did not get past it.
        # Offsets grow in queue order, so this round's waiters are those up to target.
        while self._waiters and self._waiters[0].next_offset <= target:
            waiter = self._waiters.popleft()
            _resolve(waiter, waiter.next_offset <= self.flushed_offset)


def _resolve(waiter: _Waiter, ok: bool) -> None:
    if not waiter.future.done():
        waiter.future.set_result(ok)


class FlushRealTimeService(Service):
    """ASYNC_FLUSH: flush on an interval, with a periodic full flush.

    Args:
        flush: the store's flush coroutine function.
        interval_ms: ``flushIntervalCommitLog`` (500).
        least_pages: ``flushCommitLogLeastPages`` (4 pages of 4 KiB).
        thorough_interval_ms: ``flushCommitLogThoroughInterval`` (10,000).
        on_flushed: called with the durable offset after every flush that moved it.
    """

    def __init__(
        self,
        flush: FlushFn,
        *,
        interval_ms: int = 500,
        least_pages: int = 4,
        thorough_interval_ms: int = 10_000,
        on_flushed: Callable[[int], None] | None = None,
    ) -> None:
        super().__init__("flush-realtime")
        self._flush = flush
        self._interval_s = interval_ms / 1000
        self._least_pages = least_pages
        self._thorough_s = thorough_interval_ms / 1000
        self._last_thorough = time.monotonic()
        self._on_flushed = on_flushed
        self.flushed_offset = 0

    async def on_start(self) -> None:
        self.periodic(self._interval_s, self._tick, name="flush")

    async def _tick(self) -> None:
        now = time.monotonic()
        least = self._least_pages
        if now - self._last_thorough >= self._thorough_s:
            self._last_thorough = now
            least = 0
        await self._flush_with(least)

    async def _flush_with(self, least_pages: int) -> None:
        flushed = await self._flush(least_pages)
        if flushed > self.flushed_offset:
            self.flushed_offset = flushed
            if self._on_flushed is not None:
                self._on_flushed(flushed)

    async def on_shutdown(self) -> None:
        # RocketMQ retries the final full flush up to 10 times; each call flushes at
        # most one file, so a shutdown right after a roll needs more than one.
        for _ in range(10):
            before = self.flushed_offset
            await self._flush_with(0)
            if self.flushed_offset == before:
                break
        log.info("commitlog flushed at shutdown offset=%s", self.flushed_offset)
