"""GroupTransfer alone: isSlaveOK, batch release by one ack, one timer for timeouts.

No sockets: the connection count is a variable, acks are calls.
"""

from __future__ import annotations

import asyncio

from aiorocketmq.broker.ha.group_transfer import GroupTransfer
from aiorocketmq.store.results import PutMessageStatus
from tests.support.wait import wait_until

S = PutMessageStatus


class Slaves:
    """A settable connection count and a count of writer wakeups."""

    def __init__(self, count: int = 1) -> None:
        self.count = count
        self.wakeups = 0

    def wake(self) -> None:
        self.wakeups += 1


def transfer(
    slaves: Slaves, *, timeout_ms: int = 60_000, fallbehind: int = 1 << 20
) -> GroupTransfer:
    return GroupTransfer(
        timeout_ms=timeout_ms,
        fallbehind_max=fallbehind,
        connection_count=lambda: slaves.count,
        on_wait=slaves.wake,
    )


async def test_is_slave_ok_follows_java() -> None:
    slaves = Slaves(0)
    gt = transfer(slaves, fallbehind=100)
    assert not gt.is_slave_ok(1)
    assert await gt.wait(1) is S.SLAVE_NOT_AVAILABLE
    slaves.count = 1
    assert gt.is_slave_ok(99) and not gt.is_slave_ok(100)  # strictly less than the max
    gt.notify_transfer_some(50)
    assert gt.is_slave_ok(149) and not gt.is_slave_ok(150)


async def test_one_ack_releases_every_put_up_to_it() -> None:
    slaves = Slaves()
    gt = transfer(slaves)
    waits = [asyncio.create_task(gt.wait(offset)) for offset in (30, 10, 20, 40, 50)]
    await wait_until(lambda: gt.pending == 5)
    assert slaves.wakeups == 5  # every waiting put wakes the writers
    gt.notify_transfer_some(35)
    await wait_until(lambda: sum(t.done() for t in waits) == 3)
    assert [t.done() for t in waits] == [True, True, True, False, False]
    assert {t.result() for t in waits[:3]} == {S.PUT_OK}
    gt.notify_transfer_some(20)  # older ack: ignored, the max is monotonic
    assert gt.push2slave_max_offset == 35
    gt.notify_transfer_some(50)
    assert await asyncio.gather(*waits[3:]) == [S.PUT_OK, S.PUT_OK]
    assert gt.pending == 0


async def test_already_acked_offset_returns_at_once() -> None:
    slaves = Slaves()
    gt = transfer(slaves)
    gt.notify_transfer_some(100)
    assert await gt.wait(100) is S.PUT_OK
    assert slaves.wakeups == 0 and gt.pending == 0


async def test_timeouts_fire_in_arrival_order_from_one_timer() -> None:
    slaves = Slaves()
    gt = transfer(slaves, timeout_ms=50)
    loop = asyncio.get_running_loop()
    started = loop.time()
    first = [asyncio.create_task(gt.wait(offset)) for offset in (10, 20)]
    await wait_until(lambda: gt.pending == 2)
    assert await asyncio.gather(*first) == [S.FLUSH_SLAVE_TIMEOUT] * 2
    # uvloop's clock has millisecond resolution: compare whole milliseconds.
    assert round((loop.time() - started) * 1000) >= 50
    # The timer re-arms for later waits, and an ack still wins before its deadline.
    later = asyncio.create_task(gt.wait(30))
    await wait_until(lambda: gt.pending == 1)
    gt.notify_transfer_some(30)
    assert await later is S.PUT_OK
    assert gt.pending == 0


async def test_cancelled_wait_is_skipped() -> None:
    slaves = Slaves()
    gt = transfer(slaves)
    gone = asyncio.create_task(gt.wait(10))
    kept = asyncio.create_task(gt.wait(20))
    await wait_until(lambda: gt.pending == 2)
    gone.cancel()
    await asyncio.gather(gone, return_exceptions=True)
    gt.notify_transfer_some(20)
    assert await kept is S.PUT_OK


async def test_close_answers_every_waiter_with_timeout() -> None:
    gt = transfer(Slaves())
    waits = [asyncio.create_task(gt.wait(offset)) for offset in (5, 6)]
    await wait_until(lambda: gt.pending == 2)
    gt.close()
    assert await asyncio.gather(*waits) == [S.FLUSH_SLAVE_TIMEOUT] * 2
