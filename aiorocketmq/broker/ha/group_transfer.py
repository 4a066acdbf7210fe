"""GroupTransfer: SYNC_MASTER puts waiting for a slave's acknowledged offset.

Owns: the store's ``ReplicaWaiter`` for a SYNC_MASTER (``HAService.isSlaveOK``,
``submitReplicaRequest`` and ``GroupTransferService``; specs/store.md §11.4):

* ``push2slave_max_offset``: the highest offset any slave ever acknowledged,
  monotonic (it is not lowered when a slave goes away, as in Java);
* ``wait(next_offset)``: SLAVE_NOT_AVAILABLE at once when no slave is connected or
  the best one is ``haSlaveFallbehindMax`` or more behind; PUT_OK once some slave
  acked ``>= next_offset``; FLUSH_SLAVE_TIMEOUT after ``slaveTimeout`` ms.

Waits resolve in batches: pending puts sit in a heap keyed by offset, and one
acknowledgement pops every put up to it (one wakeup per ack, whatever the number
of puts). Deadlines sit in a deque in arrival order; as every wait has the same
timeout, that is deadline order too, so a single timer handle serves them all
instead of one per put.

Must not: poll, sleep, or hold a timer per put.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections import deque
from collections.abc import Callable
from typing import Final

from aiorocketmq.store.results import PutMessageStatus

__all__ = ["GroupTransfer"]

_OK: Final = PutMessageStatus.PUT_OK
_TIMEOUT: Final = PutMessageStatus.FLUSH_SLAVE_TIMEOUT
_NOT_AVAILABLE: Final = PutMessageStatus.SLAVE_NOT_AVAILABLE


class GroupTransfer:
    """Pending SYNC_MASTER puts and the slaves' acknowledged offset.

    Args:
        timeout_ms: how long a put waits (``slaveTimeout`` in 4.9.3+).
        fallbehind_max: ``haSlaveFallbehindMax``: a slave this many bytes behind
            the put does not count as available.
        connection_count: how many slaves are connected now.
        on_wait: called when a put starts waiting (wakes the transfer writers,
            Java's ``wakeupAll``).
    """

    def __init__(
        self,
        *,
        timeout_ms: int,
        fallbehind_max: int,
        connection_count: Callable[[], int],
        on_wait: Callable[[], None] | None = None,
    ) -> None:
        self._timeout_s = timeout_ms / 1000
        self._fallbehind_max = fallbehind_max
        self._connection_count = connection_count
        self._on_wait = on_wait
        self._by_offset: list[tuple[int, int, asyncio.Future[bool]]] = []
        self._by_deadline: deque[tuple[float, asyncio.Future[bool]]] = deque()
        self._seq = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        self.push2slave_max_offset = 0

    @property
    def pending(self) -> int:
        """Puts still waiting (done ones awaiting cleanup are not counted)."""
        return sum(1 for _, fut in self._by_deadline if not fut.done())

    def is_slave_ok(self, master_put_where: int) -> bool:
        """Java's ``isSlaveOK``: a slave is connected and close enough."""
        if self._connection_count() <= 0:
            return False
        return master_put_where - self.push2slave_max_offset < self._fallbehind_max

    def notify_transfer_some(self, offset: int) -> None:
        """A slave acknowledged ``offset``: resolve every put up to it."""
        if offset <= self.push2slave_max_offset:
            return
        self.push2slave_max_offset = offset
        heap = self._by_offset
        while heap and heap[0][0] <= offset:
            fut = heapq.heappop(heap)[2]
            if not fut.done():
                fut.set_result(True)
        # Acks resolve in offset order, so the resolved puts are the deque's head.
        queue = self._by_deadline
        while queue and queue[0][1].done():
            queue.popleft()
        if not queue and self._timer is not None:
            self._timer.cancel()
            self._timer = None

    async def wait(self, next_offset: int) -> PutMessageStatus:
        """The ``ReplicaWaiter``: wait until a slave has ``next_offset``.

        Args:
            next_offset: the put's end offset (``wroteOffset + wroteBytes``).
        """
        if not self.is_slave_ok(next_offset):
            return _NOT_AVAILABLE
        if self.push2slave_max_offset >= next_offset:
            return _OK
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[bool] = loop.create_future()
        heapq.heappush(self._by_offset, (next_offset, next(self._seq), fut))
        deadline = loop.time() + self._timeout_s
        self._by_deadline.append((deadline, fut))
        if self._timer is None:
            self._arm(loop, deadline)
        if self._on_wait is not None:
            self._on_wait()
        return _OK if await fut else _TIMEOUT

    def _arm(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        self._timer = loop.call_at(when, self._expire)

    def _expire(self) -> None:
        """Timer: time out every put whose deadline passed, re-arm for the next."""
        self._timer = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        queue = self._by_deadline
        while queue and (queue[0][1].done() or queue[0][0] <= now):
            fut = queue.popleft()[1]
            if not fut.done():
                fut.set_result(False)
        if queue:
            self._arm(loop, queue[0][0])
        else:
            # Everything is resolved: what is left in the heap is done futures.
            self._by_offset.clear()

    def close(self) -> None:
        """Fail every pending put with FLUSH_SLAVE_TIMEOUT (shutdown) and stop the timer."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for _, fut in self._by_deadline:
            if not fut.done():
                fut.set_result(False)
        self._by_deadline.clear()
        self._by_offset.clear()
