"""InFlightSlots: the in-flight bound, cheap when free, fair and leak-free when full.

What these tests pin: free slots are taken without awaiting; freed slots go to waiters
in arrival order, and a newcomer does not jump a waiter; a waiter whose time runs out
gets RemotingTooMuchRequestError and owes nothing; a waiter cancelled in the iteration
its slot arrived passes the slot on; after any mix of these every slot comes back.
Real loop; waits are bounded and awaited, never slept.
"""

from __future__ import annotations

import asyncio

import pytest

from aiorocketmq.remoting.errors import RemotingTooMuchRequestError
from aiorocketmq.remoting.in_flight import InFlightSlots
from tests.support.wait import wait_until


async def test_free_slots_are_taken_at_once_and_come_back() -> None:
    slots = InFlightSlots(2)
    assert slots.take_now() and slots.take_now()
    assert not slots.take_now() and slots.free == 0
    slots.give()
    slots.give()
    assert slots.free == 2
    await slots.take(1.0, "peer")  # free: no wait
    assert slots.free == 1
    with pytest.raises(ValueError):
        InFlightSlots(0)


async def test_waiters_get_freed_slots_in_order_and_newcomers_queue_behind() -> None:
    slots = InFlightSlots(1)
    assert slots.take_now()
    order: list[str] = []

    async def waiter(name: str) -> None:
        await slots.take(5.0, "peer")
        order.append(name)

    first = asyncio.create_task(waiter("first"))
    second = asyncio.create_task(waiter("second"))
    await wait_until(lambda: slots.waiting == 2, timeout=5, what="two waiters")
    slots.give()  # owed to "first": a newcomer may not take it meanwhile
    assert not slots.take_now()
    await first
    slots.give()
    await second
    assert order == ["first", "second"]
    slots.give()
    assert slots.free == 1


async def test_a_waiter_out_of_time_is_refused_and_owes_nothing() -> None:
    slots = InFlightSlots(1)
    assert slots.take_now()
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(RemotingTooMuchRequestError) as info:
        await slots.take(0.05, "10.0.0.1:10911")
    assert loop.time() - started >= 0.04
    assert info.value.retriable and "10.0.0.1:10911" in str(info.value)
    slots.give()
    assert slots.free == 1 and slots.take_now()


async def test_a_waiter_cancelled_as_its_slot_arrives_passes_it_on() -> None:
    slots = InFlightSlots(1)
    assert slots.take_now()
    cancelled = asyncio.create_task(slots.take(5.0, "peer"))
    later = asyncio.create_task(slots.take(5.0, "peer"))
    await wait_until(lambda: slots.waiting == 2, timeout=5, what="two waiters")
    slots.give()  # handed to the first waiter...
    cancelled.cancel()  # ...which is cancelled in the same iteration
    await asyncio.gather(cancelled, return_exceptions=True)
    if cancelled.cancelled():
        await later  # the slot went on to the next waiter
    else:
        later.cancel()  # 3.11's wait_for kept the slot for the first: it holds it
        await asyncio.gather(later, return_exceptions=True)
    slots.give()
    assert slots.free == 1 and slots.waiting == 0


async def test_every_slot_comes_back_after_a_mix_of_outcomes() -> None:
    slots = InFlightSlots(3)

    async def request(hold: asyncio.Event, timeout_s: float) -> None:
        await slots.take(timeout_s, "peer")
        try:
            await hold.wait()
        finally:
            slots.give()

    hold = asyncio.Event()
    tasks = [asyncio.create_task(request(hold, 5.0 if i % 3 else 0.02)) for i in range(12)]
    await wait_until(lambda: slots.free == 0, timeout=5, what="all slots taken")
    for task in tasks[5:8]:
        task.cancel()
    short = [tasks[3], tasks[9]]  # waiting with 20 ms to spare: refused while the bound is full
    await wait_until(lambda: all(t.done() for t in short), timeout=5, what="refusals")
    hold.set()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    refused = [r for r in results if isinstance(r, RemotingTooMuchRequestError)]
    assert all(r is None or isinstance(r, BaseException) for r in results)
    assert len(refused) == 2 and all(isinstance(t.exception(), type(refused[0])) for t in short)
    assert slots.free == 3 and slots.waiting == 0
