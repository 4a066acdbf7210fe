"""The in-flight bounds of remoting endpoints (RocketMQ's async and oneway semaphores).

Owns: taking a slot with a time limit and the typed error when none frees up.
"""

from __future__ import annotations

import asyncio

from aiorocketmq.remoting.errors import RemotingTooMuchRequestError

__all__ = ["acquire_slot"]


async def acquire_slot(slots: asyncio.Semaphore, timeout_s: float, address: str) -> None:
    """Take one in-flight slot, waiting at most ``timeout_s`` when all are taken.

    Raises:
        RemotingTooMuchRequestError: no slot freed up in time.
    """
    if not slots.locked():
        await slots.acquire()
        return
    try:
        await asyncio.wait_for(slots.acquire(), timeout_s)
    except TimeoutError:
        raise RemotingTooMuchRequestError(
            f"too many requests in flight, waited {timeout_s * 1000:.0f} ms", address=address
        ) from None
