"""LoopLagProbe: how late the event loop runs a timer, as a histogram.

Owns: one timer that re-arms itself every ``interval_s`` and records, in
milliseconds, how much later than due it ran. A callback that holds the loop
for 5 ms shows up as a 5 ms observation (or as several smaller ones); an idle
loop records about 0. This is the figure behind "no callback holds the loop
longer than 2 ms": the broker exports it on ``/metrics`` and the client
benchmark reads its p99 per phase.

Precision: lateness is measured on ``time.perf_counter`` against the previous
run plus the interval. uvloop arms timers in whole milliseconds, so a run may
come up to 1 ms early (counted as 0) or, rarely, up to 1 ms late on an idle
loop: figures err on the high side, never hide a stall.

Must not: allocate per run beyond a list index, or run more often than every
millisecond (its own cost must stay far below what it measures).
"""

from __future__ import annotations

import asyncio
from bisect import bisect_left
from time import perf_counter
from typing import Final

__all__ = ["LOOP_LAG_BUCKETS_MS", "LoopLagProbe", "percentile_from_buckets"]

#: Upper bounds (ms) of the lag buckets; +Inf is implied after the last.
LOOP_LAG_BUCKETS_MS: Final = (0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 20.0, 50.0, 100.0, 1000.0)


class LoopLagProbe:
    """A self re-arming timer recording its own lateness (module docstring).

    Args:
        interval_s: Time between runs; at least 1 ms.
        bounds: Bucket upper bounds in ms, increasing.

    Attributes:
        counts: Per bucket (``bounds`` then +Inf), not cumulative.
        total_ms: Sum of all observations.
        max_ms: The largest observation so far.
    """

    def __init__(self, interval_s: float = 0.01, bounds: tuple[float, ...] = LOOP_LAG_BUCKETS_MS):
        if interval_s < 0.001:
            raise ValueError(f"interval_s must be >= 0.001, got {interval_s}")
        self._interval = interval_s
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total_ms = 0.0
        self.max_ms = 0.0
        self._handle: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._last = 0.0

    @property
    def running(self) -> bool:
        """Whether the timer is armed."""
        return self._handle is not None

    def start(self) -> None:
        """Arm the timer on the running loop (idempotent)."""
        if self._handle is None:
            self._last = perf_counter()
            # Kept: CPython 3.11's get_running_loop is a getpid() syscall per call.
            self._loop = asyncio.get_running_loop()
            self._handle = self._loop.call_later(self._interval, self._run)

    def stop(self) -> None:
        """Disarm the timer (idempotent); the counts stay."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _run(self) -> None:
        now = perf_counter()
        lag_ms = max(0.0, (now - self._last - self._interval) * 1000.0)
        self.counts[bisect_left(self.bounds, lag_ms)] += 1
        self.total_ms += lag_ms
        self.max_ms = max(self.max_ms, lag_ms)
        self._last = now
        assert self._loop is not None  # armed by start()
        self._handle = self._loop.call_later(self._interval, self._run)


def percentile_from_buckets(bounds: tuple[float, ...], counts: list[int], p: float) -> float:
    """The bucket bound at or below which ``p`` percent of the observations fall.

    Args:
        bounds: Finite upper bounds, increasing.
        counts: Per bucket, not cumulative, +Inf last (``len(bounds) + 1`` entries).
        p: The percentile, 0-100.

    Returns:
        The upper bound of the bucket holding the ``p``-th observation; ``inf`` when it
        lies beyond the last bound; 0.0 with no observations.
    """
    total = sum(counts)
    if total == 0:
        return 0.0
    rank = p / 100.0 * total
    running = 0
    for bound, count in zip((*bounds, float("inf")), counts, strict=True):
        running += count
        if running >= rank:
            return bound
    return float("inf")
