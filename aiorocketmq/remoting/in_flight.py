"""The in-flight bounds of remoting endpoints (RocketMQ's async and oneway semaphores).

Owns: ``InFlightSlots``, a counting bound that takes a free slot without awaiting (a
request's usual case: ``asyncio.Semaphore.acquire`` is a coroutine and cost ~0.6 µs
of every send with its ``release``), hands freed slots to waiters in arrival order,
and refuses a waiter whose time ran out with ``RemotingTooMuchRequestError``.

Must not: lose a slot. A slot handed to a waiter that is cancelled or times out in
the same loop iteration goes back; a waiter never takes a slot another waiter is
owed (arrivals queue behind waiters even while a slot is free).
"""

from __future__ import annotations

import asyncio
from collections import deque

from aiorocketmq.remoting.errors import RemotingTooMuchRequestError
from aiorocketmq.runtime.work_queue import wake_first

__all__ = ["InFlightSlots"]


class InFlightSlots:
    """At most ``limit`` requests at once; see the module docstring.

    Args:
        limit: the number of slots (RocketMQ's ``clientAsyncSemaphoreValue`` and kin).
    """

    __slots__ = ("_free", "_waiters")

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"an in-flight bound needs at least one slot, not {limit}")
        self._free = limit
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def free(self) -> int:
        """Slots nobody holds or is owed."""
        return self._free

    @property
    def waiting(self) -> int:
        """Requests queued for a slot."""
        return len(self._waiters)

    def take_now(self) -> bool:
        """Take a free slot if one is free and nobody waits for it; never blocks."""
        if self._free > 0 and not self._waiters:
            self._free -= 1
            return True
        return False

    async def take(self, timeout_s: float, address: str) -> None:
        """Take a slot, waiting at most ``timeout_s`` behind earlier waiters.

        Raises:
            RemotingTooMuchRequestError: no slot came in time.
        """
        if self.take_now():
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await asyncio.wait_for(waiter, timeout_s)
        except TimeoutError:
            raise RemotingTooMuchRequestError(
                f"too many requests in flight, waited {timeout_s * 1000:.0f} ms", address=address
            ) from None
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self.give()  # handed a slot just as we were cancelled: pass it on
            raise
        finally:
            if not waiter.done() or waiter.cancelled():
                try:
                    self._waiters.remove(waiter)
                except ValueError:
                    pass

    def give(self) -> None:
        """Return a slot: to the longest waiter still waiting, else to the free count."""
        if not wake_first(self._waiters):
            self._free += 1
