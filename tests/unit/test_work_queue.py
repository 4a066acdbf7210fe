"""WorkQueue: asyncio.Queue's unbounded put_nowait/get semantics, on a real loop."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiorocketmq.runtime.work_queue import WorkQueue


async def test_items_come_out_in_order_without_waiting_when_there_are_some() -> None:
    queue: WorkQueue[int] = WorkQueue()
    for i in range(5):
        queue.put_nowait(i)
    assert len(queue) == 5
    assert [await queue.get() for _ in range(5)] == [0, 1, 2, 3, 4]
    assert len(queue) == 0


async def test_a_waiting_getter_is_woken_by_a_put() -> None:
    queue: WorkQueue[str] = WorkQueue()
    getter = asyncio.create_task(queue.get())
    await asyncio.sleep(0)  # let it start waiting
    assert not getter.done()
    queue.put_nowait("x")
    assert await asyncio.wait_for(getter, 5) == "x"


async def test_one_item_wakes_one_getter_and_each_gets_its_own() -> None:
    queue: WorkQueue[int] = WorkQueue()
    getters = [asyncio.create_task(queue.get()) for _ in range(4)]
    await asyncio.sleep(0)
    queue.put_nowait(1)
    done, pending = await asyncio.wait(getters, timeout=5, return_when=asyncio.FIRST_COMPLETED)
    assert len(done) == 1 and len(pending) == 3
    for i in range(2, 5):
        queue.put_nowait(i)
    results = await asyncio.wait_for(asyncio.gather(*getters), 5)
    assert sorted(results) == [1, 2, 3, 4]


async def test_a_getter_cancelled_after_its_wakeup_hands_the_item_on() -> None:
    queue: WorkQueue[int] = WorkQueue()
    first = asyncio.create_task(queue.get())
    second = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    queue.put_nowait(7)  # wakes ``first``, which has not run yet
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    assert await asyncio.wait_for(second, 5) == 7


async def test_a_cancelled_waiting_getter_leaves_no_trace() -> None:
    queue: WorkQueue[int] = WorkQueue()
    gone = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    gone.cancel()
    with pytest.raises(asyncio.CancelledError):
        await gone
    queue.put_nowait(3)
    assert await asyncio.wait_for(queue.get(), 5) == 3


@settings(max_examples=50, deadline=None)
@given(st.lists(st.sampled_from(["put", "get"]), max_size=40))
def test_as_asyncio_queue_for_any_order_of_puts_and_gets(steps: list[str]) -> None:
    """Both queues driven by the same puts and getter tasks hand out the same items
    to the same getters."""

    async def run(make: type) -> list[object]:
        queue = make()
        getters, n = [], 0
        for step in steps:
            if step == "put":
                queue.put_nowait(n)
                n += 1
            else:
                getters.append(asyncio.create_task(queue.get()))
            await asyncio.sleep(0)
        for _ in range(len(getters)):
            queue.put_nowait(n)
            n += 1
        return list(await asyncio.wait_for(asyncio.gather(*getters), 5))

    async def both() -> None:
        assert await run(WorkQueue) == await run(asyncio.Queue)

    asyncio.run(both())
