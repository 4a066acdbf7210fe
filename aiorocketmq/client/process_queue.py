"""ProcessQueue: the messages a push consumer pulled from one queue and not yet committed.

Owns (Java 4.9.8 ``ProcessQueue``): the pulled messages ordered by queue offset,
their count and body size (the pull loop's flow control reads them), the span
between the smallest and largest offset held (``consumeConcurrentlyMaxSpan``), the
``dropped`` flag a rebalance sets when the queue goes to another consumer, the
broker-lock state of orderly consumption (``locked``, ``last_lock_timestamp``), the
orderly "consuming" set (``take_messages`` / ``commit`` /
``make_message_to_consume_again``) and the per-queue ``consume_lock`` that keeps one
orderly consume at a time.

The committed offset of a queue is always the smallest offset still held (or one
past the largest ever held once it is empty), so a message is never skipped.

Must not: do I/O, call listeners, or decide offsets in stores (the consumer does).
"""

from __future__ import annotations

import asyncio
import heapq
import time
from collections.abc import Iterable
from typing import Final

from aiorocketmq.common.message import MessageExt
from aiorocketmq.common.running_info import ProcessQueueInfo

__all__ = [
    "PULL_MAX_IDLE_TIME_MS",
    "REBALANCE_LOCK_INTERVAL_MS",
    "REBALANCE_LOCK_MAX_LIVE_TIME_MS",
    "ProcessQueue",
]

REBALANCE_LOCK_MAX_LIVE_TIME_MS: Final = 30_000
"""A broker lock older than this is lost (``rocketmq.client.rebalance.lockMaxLiveTime``)."""

REBALANCE_LOCK_INTERVAL_MS: Final = 20_000
"""Orderly consumers renew their locks this often (``rocketmq.client.rebalance.lockInterval``)."""

PULL_MAX_IDLE_TIME_MS: Final = 120_000
"""An idle queue is dropped and recreated (``rocketmq.client.pull.pullMaxIdleTime``)."""


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


class ProcessQueue:
    """One queue's pulled, unconsumed messages (see the module docstring)."""

    def __init__(self) -> None:
        self._msgs: dict[int, MessageExt] = {}
        # Lazy-deletion min-heap of the offsets in ``_msgs``: offsets removed from the
        # dict stay in the heap until they reach its top.
        self._heap: list[int] = []
        self._consuming: dict[int, MessageExt] = {}
        self.msg_count = 0
        self.msg_size = 0
        self.queue_offset_max = 0
        # Set whenever messages leave (or the queue is dropped): a pull loop held back
        # by flow control waits on it instead of polling every 50 ms as Java does.
        self._room = asyncio.Event()
        self._dropped = False
        self.locked = False
        self.last_lock_timestamp = _now_ms()
        self.last_pull_timestamp = _now_ms()
        self.last_consume_timestamp = _now_ms()
        self.consuming = False
        self.try_unlock_times = 0
        self.consume_lock = asyncio.Lock()

    @property
    def dropped(self) -> bool:
        """The queue went to another consumer (or was reset): its pulls stop."""
        return self._dropped

    @dropped.setter
    def dropped(self, value: bool) -> None:
        self._dropped = value
        if value:
            self._room.set()

    async def wait_for_room(self, timeout_s: float) -> None:
        """Wait until messages leave or the queue is dropped, at most ``timeout_s``.

        Flow control's wait: the caller checks its limits again afterwards. There is
        no await between that check and this call, so no wake-up can be missed.
        """
        self._room.clear()
        try:
            async with asyncio.timeout(timeout_s):
                await self._room.wait()
        except TimeoutError:
            pass

    def info(self, commit_offset: int) -> ProcessQueueInfo:
        """Java's ``fillProcessQueueInfo`` (timestamps turned into wall-clock ms)."""
        wall_minus_mono = int(time.time() * 1000) - _now_ms()
        msgs, consuming = self._msgs, self._consuming
        return ProcessQueueInfo(
            commit_offset=commit_offset,
            cached_msg_min_offset=min(msgs) if msgs else 0,
            cached_msg_max_offset=max(msgs) if msgs else 0,
            cached_msg_count=len(msgs),
            cached_msg_size_in_mib=self.msg_size // (1024 * 1024),
            transaction_msg_min_offset=min(consuming) if consuming else 0,
            transaction_msg_max_offset=max(consuming) if consuming else 0,
            transaction_msg_count=len(consuming),
            locked=self.locked,
            try_unlock_times=self.try_unlock_times,
            last_lock_timestamp=self.last_lock_timestamp + wall_minus_mono,
            droped=self.dropped,
            last_pull_timestamp=self.last_pull_timestamp + wall_minus_mono,
            last_consume_timestamp=self.last_consume_timestamp + wall_minus_mono,
        )

    # -- state --------------------------------------------------------------------------

    def is_lock_expired(self) -> bool:
        """True when the broker lock was last renewed over 30 s ago."""
        return _now_ms() - self.last_lock_timestamp > REBALANCE_LOCK_MAX_LIVE_TIME_MS

    def is_pull_expired(self) -> bool:
        """True when nothing was pulled for ``PULL_MAX_IDLE_TIME_MS``."""
        return _now_ms() - self.last_pull_timestamp > PULL_MAX_IDLE_TIME_MS

    def has_temp_message(self) -> bool:
        """Whether any message is held (not counting the orderly consuming set)."""
        return bool(self._msgs)

    def _min_offset(self) -> int | None:
        heap = self._heap
        while heap and heap[0] not in self._msgs:
            heapq.heappop(heap)
        return heap[0] if heap else None

    def max_span(self) -> int:
        """Largest minus smallest held offset (0 when empty)."""
        first = self._min_offset()
        if first is None:
            return 0
        return max(self._msgs) - first if len(self._msgs) > 1 else 0

    def held_offsets(self) -> list[int]:
        """The held offsets in order (for tests and diagnostics)."""
        return sorted(self._msgs)

    # -- concurrent and orderly ---------------------------------------------------------

    def put_messages(self, msgs: Iterable[MessageExt]) -> bool:
        """Add pulled messages (an offset already held is ignored).

        Returns:
            True when an orderly consume should be started now (messages are held
            and none is running), as Java's ``dispatchToConsume``.
        """
        added = 0
        for msg in msgs:
            offset = msg.queue_offset
            if offset in self._msgs:
                continue
            self._msgs[offset] = msg
            heapq.heappush(self._heap, offset)
            added += 1
            self.msg_size += len(msg.body)
            self.queue_offset_max = max(self.queue_offset_max, offset)
        self.msg_count += added
        if len(self._heap) > 2 * len(self._msgs) + 64:
            self._heap = list(self._msgs)
            heapq.heapify(self._heap)
        dispatch = bool(self._msgs) and not self.consuming
        if dispatch:
            self.consuming = True
        return dispatch

    def remove_messages(self, msgs: Iterable[MessageExt]) -> int:
        """Forget consumed messages; the offset to commit, or -1 if none was held.

        The offset is the smallest offset still held, or ``queue_offset_max + 1``
        when nothing is left (Java's ``removeMessage``).
        """
        if not self._msgs:
            return -1
        self.last_consume_timestamp = _now_ms()
        for msg in msgs:
            gone = self._msgs.pop(msg.queue_offset, None)
            if gone is not None:
                self.msg_count -= 1
                self.msg_size -= len(gone.body)
        self._room.set()
        first = self._min_offset()
        return self.queue_offset_max + 1 if first is None else first

    def take_messages(self, batch_size: int) -> list[MessageExt]:
        """Orderly: move up to ``batch_size`` smallest-offset messages to the consuming set.

        When nothing is left, the queue is marked not consuming (the next pull
        that brings messages dispatches a new consume).
        """
        self.last_consume_timestamp = _now_ms()
        taken: list[MessageExt] = []
        while len(taken) < batch_size:
            first = self._min_offset()
            if first is None:
                break
            heapq.heappop(self._heap)
            msg = self._msgs.pop(first)
            self._consuming[first] = msg
            taken.append(msg)
        if not taken:
            self.consuming = False
        return taken

    def commit(self) -> int:
        """Orderly: the consuming set was consumed; the offset to commit (-1 if none)."""
        if not self._consuming:
            return -1
        offset = max(self._consuming) + 1
        self.msg_count -= len(self._consuming)
        self.msg_size -= sum(len(m.body) for m in self._consuming.values())
        self._consuming.clear()
        self._room.set()
        return offset

    def make_message_to_consume_again(self, msgs: Iterable[MessageExt]) -> None:
        """Orderly: put messages of the consuming set back to be consumed again."""
        for msg in msgs:
            offset = msg.queue_offset
            if self._consuming.pop(offset, None) is not None:
                self._msgs[offset] = msg
                heapq.heappush(self._heap, offset)

    def clear(self) -> None:
        """Drop everything held (the queue's offset was reset)."""
        self._msgs.clear()
        self._heap.clear()
        self._consuming.clear()
        self.msg_count = self.msg_size = self.queue_offset_max = 0
        self._room.set()
