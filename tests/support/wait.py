"""Wait for a condition with a deadline, and fail saying what was last seen.

Owns: ``wait_until`` (async; polls a sync or async predicate, or awaits an
``asyncio.Event``) and ``wait_until_sync`` (its twin for process-level checks
outside a loop). This is nats-server's ``checkFor``: tests never sleep and hope.

Must not: swallow the predicate's exceptions (a predicate that raises is a bug
in the test or the code, not "not yet"), or wait without a timeout.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable
from typing import Any, NoReturn

__all__ = ["wait_until", "wait_until_sync"]


def _fail(
    what: str, timeout: float, last: object, describe: Callable[[], object] | None
) -> NoReturn:
    message = f"timed out after {timeout:g}s waiting for {what}; last observed: {last!r}"
    if describe is not None:
        message += f"; state: {describe()!r}"
    raise AssertionError(message)


async def wait_until(
    predicate: Callable[[], Any] | asyncio.Event,
    *,
    timeout: float = 5.0,
    what: str = "condition",
    interval: float = 0.005,
    describe: Callable[[], object] | None = None,
) -> Any:
    """Wait until ``predicate()`` is truthy (or the event is set) and return it.

    Args:
        predicate: A sync or async callable polled every ``interval`` seconds,
            or an ``asyncio.Event`` awaited directly (no polling).
        timeout: Seconds before giving up.
        what: Human description for the failure message, e.g. "3 flushes".
        interval: Seconds between polls.
        describe: Optional callable whose result is added to the failure
            message (e.g. ``lambda: svc.state``).

    Returns:
        The first truthy value the predicate returned (True for an event).

    Raises:
        AssertionError: On timeout, naming ``what`` and the last observed value.
    """
    if isinstance(predicate, asyncio.Event):
        try:
            async with asyncio.timeout(timeout):
                await predicate.wait()
        except TimeoutError:
            _fail(what, timeout, "event not set", describe)
        return True
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if loop.time() >= deadline:
            _fail(what, timeout, value, describe)
        await asyncio.sleep(interval)


def wait_until_sync(
    predicate: Callable[[], Any],
    *,
    timeout: float = 5.0,
    what: str = "condition",
    interval: float = 0.005,
    describe: Callable[[], object] | None = None,
) -> Any:
    """Blocking twin of ``wait_until`` for checks outside an event loop.

    Args:
        predicate: A sync callable polled every ``interval`` seconds.
        timeout: Seconds before giving up.
        what: Human description for the failure message.
        interval: Seconds between polls.
        describe: Optional callable whose result is added to the failure message.

    Returns:
        The first truthy value the predicate returned.

    Raises:
        AssertionError: On timeout, naming ``what`` and the last observed value.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            _fail(what, timeout, value, describe)
        time.sleep(interval)
