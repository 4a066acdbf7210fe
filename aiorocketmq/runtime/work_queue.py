"""WorkQueue: an unbounded FIFO from which worker tasks take work, lighter than asyncio's.

Owns: ``put_nowait`` and ``get`` with ``asyncio.Queue``'s semantics for an unbounded
queue: items come out in order, a waiting getter is woken per item, and a getter
cancelled after it was woken hands the wakeup on, so no item waits while a getter
sleeps. A push consumer puts every message it hands to its listener through one
(one item per listener call); ``asyncio.Queue`` spent five Python calls per item on
bounds, ``join`` accounting and put waiters nobody uses here.

Must not: bound the queue, or be shared across event loops.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Generic, TypeVar

__all__ = ["WorkQueue", "wake_first"]

T = TypeVar("T")


class WorkQueue(Generic[T]):
    """An unbounded FIFO of work items for tasks of one event loop."""

    __slots__ = ("_getters", "_items")

    def __init__(self) -> None:
        self._items: deque[T] = deque()
        self._getters: deque[asyncio.Future[None]] = deque()

    def __len__(self) -> int:
        return len(self._items)

    def put_nowait(self, item: T) -> None:
        """Add ``item`` and wake one waiting getter."""
        self._items.append(item)
        wake_first(self._getters)

    async def get(self) -> T:
        """The oldest item, waiting for one when there is none."""
        items = self._items
        while not items:
            getter = asyncio.get_running_loop().create_future()
            self._getters.append(getter)
            try:
                await getter
            except BaseException:
                getter.cancel()  # a no-op when it was woken already
                try:
                    self._getters.remove(getter)
                except ValueError:
                    pass
                if items and not getter.cancelled():
                    wake_first(self._getters)  # woken, then cancelled: the item is another's
                raise
        return items.popleft()


def wake_first(waiters: deque[asyncio.Future[None]]) -> bool:
    """Wake the longest waiter still waiting (cancelled ones are dropped); False when
    none is."""
    while waiters:
        waiter = waiters.popleft()
        if not waiter.done():
            waiter.set_result(None)
            return True
    return False
