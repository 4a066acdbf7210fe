"""ReplyDeadlines: the timeouts of a connection's requests on one timer.

Owns: when each request awaiting a reply times out. A timer per request (uvloop's
``call_later`` plus ``cancel``) cost ~1.7 µs of a ~50 µs single send; requests of
one connection mostly share one timeout, so their deadlines arrive in order and one
queue with one timer serves them all.

Must not: expire a request late (beyond the loop clock's resolution), or expire
one that has been answered. Deadlines are kept non-decreasing in the queue; a
request whose deadline would come before the queue's last one (a shorter timeout)
gets a timer of its own. The timer stays
armed while requests come and go, and when it fires on a deadline whose request
was answered it re-arms for the queue's head: in a steady stream of sends it is
re-armed about once per timeout, not once per request.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Any

__all__ = ["ReplyDeadlines"]

_NEVER = float("inf")

#: The loop clock's resolution (uvloop's is a millisecond, cached per iteration):
#: a timer may fire this much before its time, and what falls due within it expires
#: then rather than costing another wake-up; a deadline this much before the queue's
#: last joins the queue as due with it.
_RESOLUTION_S = 0.001


class ReplyDeadlines:
    """The deadlines of one connection's requests.

    Args:
        loop: the connection's loop (its clock and timers).
        pending: the connection's opaque -> future table of requests awaiting replies;
            an entry counts as answered once its future is no longer there.
        expire: called as ``expire(opaque, timeout_s)`` when a request's time is up
            and it is still pending.
    """

    __slots__ = ("_armed_at", "_expire", "_handle", "_loop", "_pending", "_queue")

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        pending: dict[int, Any],
        expire: Callable[[int, float], None],
    ) -> None:
        self._loop = loop
        self._pending = pending
        self._expire = expire
        #: (deadline, opaque, future, timeout_s), deadlines non-decreasing.
        self._queue: deque[tuple[float, int, object, float]] = deque()
        self._handle: asyncio.TimerHandle | None = None
        self._armed_at = _NEVER

    def __len__(self) -> int:
        """Deadlines queued (answered requests behind an unanswered head included)."""
        return len(self._queue)

    def add(self, opaque: int, future: object, timeout_s: float) -> asyncio.TimerHandle | None:
        """Time out ``opaque`` (pending as ``future``) after ``timeout_s``.

        Returns:
            The request's own timer when its deadline could not join the queue in
            order; the caller cancels it once the request is done. Otherwise None.
        """
        deadline = self._loop.time() + timeout_s
        queue = self._queue
        if queue and deadline < queue[-1][0]:
            if deadline < queue[-1][0] - _RESOLUTION_S:
                return self._loop.call_at(deadline, self._expire, opaque, timeout_s)
            # Within the clock's resolution (a caller's "time left" shrinks between
            # two requests of one millisecond): due with the last one.
            deadline = queue[-1][0]
        queue.append((deadline, opaque, future, timeout_s))
        if deadline < self._armed_at:
            self._arm(deadline)
        return None

    def done(self) -> None:
        """Drop answered requests from the head (call after a request left ``pending``)."""
        queue, pending = self._queue, self._pending
        while queue and pending.get(queue[0][1]) is not queue[0][2]:
            queue.popleft()

    def close(self) -> None:
        """Stop the timer and forget every deadline (the connection closed)."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._armed_at = _NEVER
        self._queue.clear()

    def _arm(self, when: float) -> None:
        if self._handle is not None:
            self._handle.cancel()
        self._handle = self._loop.call_at(when, self._fire)
        self._armed_at = when

    def _fire(self) -> None:
        self._handle = None
        self._armed_at = _NEVER
        now = self._loop.time() + _RESOLUTION_S
        queue, pending = self._queue, self._pending
        while queue and queue[0][0] <= now:
            _, opaque, future, timeout_s = queue.popleft()
            if pending.get(opaque) is future:
                self._expire(opaque, timeout_s)
        self.done()
        if queue:
            self._arm(queue[0][0])
