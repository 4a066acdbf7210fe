"""The clock seam: every component that expires or schedules takes a ``Clock``.

Owns: the ``Clock`` protocol, ``SystemClock`` for production and ``ManualClock``
for tests (time moves only when a test says so).

Must not: sleep, or read the clock anywhere else in the project's pure code.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """A source of time in milliseconds."""

    def now_ms(self) -> int:
        """Wall-clock time in ms since the epoch (what RocketMQ stores in records)."""
        ...

    def monotonic_ms(self) -> int:
        """A monotonic time in ms, for intervals and expiry."""
        ...


class SystemClock:
    """The real clock."""

    __slots__ = ()

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000


class ManualClock:
    """A clock that only moves when ``advance`` is called; for deterministic tests."""

    __slots__ = ("_mono_ms", "_wall_ms")

    def __init__(self, wall_ms: int = 1_700_000_000_000, mono_ms: int = 1_000_000) -> None:
        self._wall_ms = wall_ms
        self._mono_ms = mono_ms

    def now_ms(self) -> int:
        return self._wall_ms

    def monotonic_ms(self) -> int:
        return self._mono_ms

    def advance(self, delta_ms: int) -> None:
        """Move both clocks forward by ``delta_ms`` (never backwards)."""
        if delta_ms < 0:
            raise ValueError("a clock never goes backwards")
        self._wall_ms += delta_ms
        self._mono_ms += delta_ms
