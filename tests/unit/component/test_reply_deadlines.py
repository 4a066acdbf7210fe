"""ReplyDeadlines: a connection's request timeouts on one timer, never late, never wrong.

What these tests pin: an unanswered request expires once its time is up (within the
loop clock's millisecond) and an answered one never does; a shorter timeout behind a
longer one gets its own timer and expires first; answered requests leave the queue
as they finish, so a stream of sends keeps it short; closing stops every expiry.
Real loop, real timers; timeouts of tens of ms, waited on with deadlines, no sleeps.
"""

from __future__ import annotations

import asyncio

from aiorocketmq.remoting.reply_deadlines import ReplyDeadlines
from tests.support.wait import wait_until


class World:
    """A pending table like a connection's, and the expiries it saw with their times."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.pending: dict[int, asyncio.Future[None]] = {}
        self.expired: list[tuple[int, float, float]] = []  # opaque, timeout, loop time
        self.deadlines = ReplyDeadlines(self.loop, self.pending, self._expire)
        self.sent: dict[int, float] = {}

    def _expire(self, opaque: int, timeout_s: float) -> None:
        self.pending.pop(opaque)
        self.expired.append((opaque, timeout_s, self.loop.time()))

    def send(self, opaque: int, timeout_s: float) -> asyncio.TimerHandle | None:
        future = self.loop.create_future()
        self.pending[opaque] = future
        self.sent[opaque] = self.loop.time()
        return self.deadlines.add(opaque, future, timeout_s)

    def answer(self, opaque: int) -> None:
        del self.pending[opaque]
        self.deadlines.done()


async def test_unanswered_requests_expire_answered_ones_never() -> None:
    w = World()
    for opaque in range(1, 6):
        assert w.send(opaque, 0.03) is None  # one timeout: all in the queue
    w.answer(1)
    w.answer(3)  # out of order: stays queued until its deadline passes, harmlessly
    await wait_until(lambda: len(w.expired) == 3, timeout=5, what="three expiries")
    assert [e[0] for e in w.expired] == [2, 4, 5]
    for opaque, timeout_s, at in w.expired:
        assert at >= w.sent[opaque] + timeout_s - 0.001  # never before its time
    assert not w.pending and len(w.deadlines) == 0


async def test_a_shorter_timeout_gets_its_own_timer_and_expires_first() -> None:
    w = World()
    assert w.send(1, 5.0) is None
    own = w.send(2, 0.02)
    assert own is not None  # would break the queue's order
    await wait_until(lambda: w.expired, timeout=5, what="the short one's expiry")
    assert [e[0] for e in w.expired] == [2]
    assert list(w.pending) == [1]
    w.deadlines.close()


async def test_a_short_timeout_after_the_queue_emptied_is_not_late() -> None:
    """The timer armed for a long deadline is re-armed for an earlier one."""
    w = World()
    w.send(1, 5.0)
    w.answer(1)  # queue empty, timer still armed 5 s out
    assert w.send(2, 0.02) is None
    await wait_until(lambda: w.expired, timeout=2, what="the short one's expiry")
    assert [e[0] for e in w.expired] == [2]
    w.deadlines.close()


async def test_a_stream_of_answered_requests_keeps_the_queue_short() -> None:
    w = World()
    for opaque in range(1, 2001):
        w.send(opaque, 3.0)
        w.answer(opaque)
        assert len(w.deadlines) == 0
    # Pipelined: answered in order, the queue holds only what is in flight.
    for opaque in range(3000, 3010):
        w.send(opaque, 3.0)
    for opaque in range(3000, 3005):
        w.answer(opaque)
    assert len(w.deadlines) == 5
    w.deadlines.close()
    assert not w.expired


async def test_close_stops_every_expiry() -> None:
    w = World()
    w.send(1, 0.01)
    w.deadlines.close()
    later = asyncio.Event()
    w.loop.call_later(0.05, later.set)  # a clock past the closed deadline
    await wait_until(later.is_set, timeout=5, what="the later timer")
    assert not w.expired and list(w.pending) == [1]
